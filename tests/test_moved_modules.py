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
