"""Results: what a run produces and what may be shared of it.

:func:`sample` (:mod:`~pymc_dp.results.sampling`) runs ``pm.sample`` with a private step,
:func:`release` (:mod:`~pymc_dp.results.sharing`) keeps only what is safe to share, and
:func:`privacy_report` (:mod:`~pymc_dp.results.report`) says what it cost.
"""

from pymc_dp.results.sharing import NotReleasableWarning, declared_stats, release
from pymc_dp.results.report import PrivacyReport, privacy_report
from pymc_dp.results.sampling import StuckChainWarning, TemperedTargetWarning, sample

__all__ = [
    "NotReleasableWarning",
    "PrivacyReport",
    "StuckChainWarning",
    "TemperedTargetWarning",
    "declared_stats",
    "privacy_report",
    "release",
    "sample",
]
