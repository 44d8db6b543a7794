"""Old module paths, kept importable for one release with a ``DeprecationWarning``.

Modules that serve one feature moved into that feature's package (issue 15). An import of an
old path (``import pymc_dp.lipschitz``, ``from pymc_dp.distances import MMD``) gets the module
at its new home, the same object, so ``isinstance`` checks and pickles keep working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install", "package_getattr", "warn_moved"]

#: Old module path → new module path.
MOVED = {
    "pymc_dp.auditing": "pymc_dp.testing.auditing",
    "pymc_dp.benchmark_models": "pymc_dp.testing.benchmark_models",
    "pymc_dp.evaluation": "pymc_dp.testing.evaluation",
    "pymc_dp.distances": "pymc_dp.abcdp.distances",
    "pymc_dp.simulator": "pymc_dp.abcdp.simulator",
    "pymc_dp.lipschitz": "pymc_dp.posterior_sampling.lipschitz",
    "pymc_dp.sampling": "pymc_dp.results",
    "pymc_dp.accounting.validation": "pymc_dp.validation",
    "pymc_dp.row_locality": "pymc_dp.model.row_locality",
    "pymc_dp.per_datum_gradients": "pymc_dp.model.per_datum_gradients",
    "pymc_dp.likelihood_parameters": "pymc_dp.model.likelihood_parameters",
    "pymc_dp.index_bounds": "pymc_dp.model.index_bounds",
}


def warn_moved(old: str, stacklevel: int = 3) -> None:
    warnings.warn(
        f"{old} moved to {MOVED[old]}; the old path goes in the next release.",
        DeprecationWarning, stacklevel=stacklevel,
    )


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        # (stacklevel: the user's import line; importlib's own frames are not counted)
        warn_moved(spec.name, stacklevel=3)
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # (importlib now gives the module this spec)
        return module

    def exec_module(self, module):
        # The module is the new one, already executed: give it back its own spec.
        module.__spec__ = module.__spec__.loader_state


def package_getattr(package: str):
    """A package's ``__getattr__`` for its submodules that moved: ``pymc_dp.sampling`` after
    ``import pymc_dp`` gives the new module, with the warning."""

    def __getattr__(name):
        old = f"{package}.{name}"
        if old not in MOVED:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warn_moved(old)
        return importlib.import_module(MOVED[old])

    return __getattr__


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
