"""pymc_dp: differentially private Bayesian inference for PyMC.

Private step methods for ``pm.sample``, exact privacy accounting, and results that are
safe to share. See ``README.md`` and ``docs/``.
"""

from pymc_dp import _moved, accounting, mechanisms
from pymc_dp.accounting.budget import Budget
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.results import PrivacyReport, privacy_report, release, sample
from pymc_dp.abcdp.distances import MMD, ClippedDistance, RandomFeatureMMD
from pymc_dp.kernels.svt import flip_probability
from pymc_dp.mechanisms import GaussianMechanism, InfectionCurveMechanism, LaplaceMechanism
from pymc_dp.model import public_data
from pymc_dp.posterior_sampling import NotConvergedError, PosteriorSampling
from pymc_dp.steps.abcdp import ABCDP, accepted_samples
from pymc_dp.steps.dp_barker import DPBarker
from pymc_dp.steps.dp_hmc import DPHMC
from pymc_dp.steps.dp_penalty import DPPenalty
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty
from pymc_dp.accounting.plan import ClipDiagnostics, WarmupPlan
from pymc_dp.steps.warmup import (
    ClipDiagnosticsUnusedWarning,
    LaplaceApproximationWarning,
    WarmupNotConvergedWarning,
)

__version__ = "0.1.0"

_moved.install()


# ``pymc_dp.lipschitz``, ``pymc_dp.sampling``, …: the modules that moved, for one release.
__getattr__ = _moved.package_getattr("pymc_dp")


__all__ = [
    "ABCDP",
    "Budget",
    "ClipDiagnostics",
    "ClipDiagnosticsUnusedWarning",
    "ClippedDistance",
    "DPBarker",
    "DPHMC",
    "GaussianMechanism",
    "InfectionCurveMechanism",
    "LaplaceApproximationWarning",
    "WarmupNotConvergedWarning",
    "LaplaceMechanism",
    "DPPenalty",
    "MinibatchDPPenalty",
    "MMD",
    "NotConvergedError",
    "PosteriorSampling",
    "RandomFeatureMMD",
    "accepted_samples",
    "flip_probability",
    "PrivacyBudgetExceeded",
    "PrivacyReport",
    "UnsupportedModelError",
    "WarmupPlan",
    "accounting",
    "mechanisms",
    "privacy_report",
    "public_data",
    "release",
    "sample",
]
