"""The modules moved into feature packages stay importable from their old paths, for one
release, with a DeprecationWarning, as the very same module objects."""

import importlib
import warnings

import pytest

import pymc_dp

from pymc_dp._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_gives_the_new_module(old):
    new = importlib.import_module(MOVED[old])
    import sys

    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is new
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message)
               for w in caught)


def test_top_level_lipschitz_warns():
    with pytest.warns(DeprecationWarning, match="posterior_sampling.lipschitz"):
        module = pymc_dp.__getattr__("lipschitz")
    assert module is importlib.import_module("pymc_dp.posterior_sampling.lipschitz")


def test_the_package_does_not_import_testing_tools():
    import subprocess
    import sys

    code = ("import sys, pymc_dp; "
            "print([m for m in sys.modules if m.startswith('pymc_dp.testing')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_warning_points_at_the_users_import_and_the_module_keeps_its_spec():
    import sys

    sys.modules.pop("pymc_dp.sampling", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pymc_dp.sampling  # noqa: F401
    assert any(w.filename == __file__ for w in caught)  # (shown by Python's default filters)
    assert importlib.import_module("pymc_dp.results").__spec__.name == "pymc_dp.results"


def test_moved_names_reach_their_new_homes_with_a_warning():
    from pymc_dp.results.sharing import n_individuals

    with pytest.warns(DeprecationWarning, match="pymc_dp.results.sharing"):
        assert pymc_dp.results.__getattr__("n_individuals") is n_individuals
    with pytest.warns(DeprecationWarning, match="pymc_dp.accounting.rdp"):
        from pymc_dp.accounting.subsampling import wbk_subsampled_rdp
    from pymc_dp.accounting.rdp import wbk_subsampled_rdp as moved

    assert wbk_subsampled_rdp is moved
