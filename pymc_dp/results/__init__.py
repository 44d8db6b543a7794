"""Results: what a run produces and what may be shared of it.

:func:`sample` (:mod:`~pymc_dp.results.sampling`) runs ``pm.sample`` with a private step,
:func:`release` (:mod:`~pymc_dp.results.sharing`) keeps only what is safe to share, and
:func:`privacy_report` (:mod:`~pymc_dp.results.report`) says what it cost,
:func:`epsilon_by_draw` (:mod:`~pymc_dp.results.spending`) what each chain had spent by
each draw, and :func:`privacy_utility` (:mod:`~pymc_dp.results.utility`) the
privacy–utility table of runs at several ε (drawn by :mod:`pymc_dp.plots`), and
:func:`clipped_fractions` (:mod:`~pymc_dp.results.diagnostics`) the clip diagnostics' table.
"""

from pymc_dp.results.diagnostics import clipped_fractions
from pymc_dp.results.sharing import NotReleasableWarning, declared_stats, release
from pymc_dp.results.report import PrivacyReport, privacy_report
from pymc_dp.results.sampling import StuckChainWarning, TemperedTargetWarning, sample
from pymc_dp.results.spending import epsilon_by_draw
from pymc_dp.results.utility import privacy_utility

__all__ = [
    "NotReleasableWarning",
    "PrivacyReport",
    "StuckChainWarning",
    "TemperedTargetWarning",
    "clipped_fractions",
    "declared_stats",
    "epsilon_by_draw",
    "privacy_report",
    "privacy_utility",
    "release",
    "sample",
]


def __getattr__(name):
    # (``from pymc_dp.sampling import n_individuals`` and the like: the old module held
    # these; for one release they are found in its parts, with a warning)
    import importlib
    import warnings

    for part in ("sharing", "report", "sampling"):
        module = importlib.import_module(f"{__name__}.{part}")
        if name in vars(module):
            warnings.warn(f"import {name} from {module.__name__}; this path goes in the next "
                          "release.", DeprecationWarning, stacklevel=2)
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
