"""Every module says what it exports (``__all__``), and every name it lists exists."""

import importlib
import pkgutil

import pymc_dp


def _modules():
    yield pymc_dp
    for info in pkgutil.walk_packages(pymc_dp.__path__, "pymc_dp."):
        yield importlib.import_module(info.name)


def test_every_module_lists_its_exports_and_each_exists():
    missing_all, missing_names = [], []
    for module in _modules():
        names = getattr(module, "__all__", None)
        if names is None:
            missing_all.append(module.__name__)
            continue
        missing_names += [f"{module.__name__}.{n}" for n in names if not hasattr(module, n)]
    assert missing_all == [] and missing_names == []
