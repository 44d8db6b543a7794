"""The posterior sampling mechanism (Dimitrakakis et al.): one draw from a tempered posterior
is pure ε-DP when the log-likelihood is Lipschitz in the data.

:mod:`~pymc_dp.posterior_sampling.mechanism` runs it (:class:`PosteriorSampling`);
:mod:`~pymc_dp.posterior_sampling.lipschitz` proves the Lipschitz bound it needs from the
model's graph, or refuses.
"""

from pymc_dp.posterior_sampling import lipschitz
from pymc_dp.posterior_sampling.lipschitz import lipschitz_bound, trimmed_dirichlet
from pymc_dp.posterior_sampling.mechanism import (
    SAMPLE_KWARGS,
    TEMPERED_POTENTIAL,
    NotConvergedError,
    PosteriorSampling,
    tempered_model,
)

__all__ = [
    "NotConvergedError",
    "PosteriorSampling",
    "SAMPLE_KWARGS",
    "TEMPERED_POTENTIAL",
    "lipschitz",
    "lipschitz_bound",
    "tempered_model",
    "trimmed_dirichlet",
]
