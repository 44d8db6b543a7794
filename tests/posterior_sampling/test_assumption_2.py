"""Why posterior sampling has no (ε, δ) version from Assumption 2 (Corollary 9).

Dimitrakakis et al. (2017), Corollary 9: under Assumption 2 (the prior mass of parameters
whose Lipschitz constant ℓ(θ) exceeds L is at most ``e^{−c(L − L₀)}``), the posterior is
``(2L, 0, e^{−c(L − L₀)})``-"randomly DP", the probability being over the prior. Read as
(ε, δ)-DP with ``ε = 2Lρ`` and ``δ = e^{−c(L − L₀)}`` this is false: the bound is on the
*prior* mass of the non-smooth parameters, and data can put far more *posterior* mass there.

The counterexample is the paper's own Lemma 19 model (Exponential likelihood, rate θ with a
trimmed Exp(λ) prior on [c₁, c₂], which satisfies Assumption 2 with c = λ, L₀ = c₁ under
ρ = |x − y|): exact posteriors, computed by quadrature, on two neighbouring datasets.
"""

import numpy as np
import pymc as pm
import pytest

from scipy.special import logsumexp

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.posterior_sampling import PosteriorSampling
from pymc_dp.posterior_sampling.lipschitz import exponential

C1, C2, LAM, B = 0.1, 10.0, 5.0, 1.0  # rate in [c₁, c₂], prior rate λ, data in [0, B]
THETA = np.linspace(C1, C2, 400_001)


def _log_posterior(n: int, total: float) -> np.ndarray:
    """Exact log posterior masses on THETA for n data summing to ``total``."""
    lp = n * np.log(THETA) - THETA * (total + LAM)
    return lp - logsumexp(lp)


def exact_delta(eps: float, log_p: np.ndarray, log_q: np.ndarray) -> float:
    """The smallest δ with P(S) ≤ e^ε Q(S) + δ and Q(S) ≤ e^ε P(S) + δ for every set S."""
    p, q = np.exp(log_p), np.exp(log_q)
    return max(
        float(np.maximum(p - np.exp(eps) * q, 0).sum()),
        float(np.maximum(q - np.exp(eps) * p, 0).sum()),
    )


def corollary_9(L: float) -> tuple[float, float]:
    """Corollary 9's (ε, δ) for one draw, read as (ε, δ)-DP, replace-one data in [0, B]."""
    return 2 * L * B, float(np.exp(-LAM * (L - C1)))


@pytest.mark.parametrize("L, factor", [(1.0, 2.0), (1.48, 4.0), (2.0, 5.0)])
def test_corollary_9_read_as_epsilon_delta_fails_on_lemma_19s_model(L, factor):
    """25 data: D has one datum at 0, D' has it at B = 1, the other 24 are 0 in both."""
    eps, delta9 = corollary_9(L)
    actual = exact_delta(eps, _log_posterior(25, 0.0), _log_posterior(25, B))
    assert actual > factor * delta9, (actual, delta9)


def test_the_pure_guarantee_holds_on_the_same_model():
    """Assumption 1 (what the library uses): one exact draw is 2L-DP with δ = 0."""
    L = exponential((C1, C2), (0.0, B)).L
    for n, total in [(1, 0.0), (25, 0.0), (25, 3.0), (200, 10.0)]:
        lp, lq = _log_posterior(n, total), _log_posterior(n, total + B)
        assert exact_delta(2 * L, lp, lq) < 1e-300
        # The privacy loss ln p/q spans exactly 2L over the prior's support: L is not loose.
        assert np.max(np.abs(lp - lq)) <= 2 * L * (1 + 1e-9)
        assert np.ptp(lp - lq) == pytest.approx(2 * L, rel=1e-9)


@pytest.mark.parametrize("delta", [1e-6, 0.5])
def test_a_positive_delta_is_refused_before_the_model_is_read(delta):
    # No model in context: the refusal comes before the model (and its data) is touched.
    with pytest.raises(UnsupportedModelError, match="Corollary 9"):
        PosteriorSampling(eps=1.0, draws=1, delta=delta)
    with pytest.raises(ValueError, match="delta must be a number"):
        PosteriorSampling(eps=1.0, draws=1, delta="0")


def test_delta_zero_is_the_pure_mechanism():
    with pm.Model():
        lam = pm.Truncated("lam", pm.Exponential.dist(LAM), lower=C1, upper=C2)
        pm.Exponential("y", lam, observed=np.zeros(5))
        mech = PosteriorSampling(eps=1.0, draws=2, delta=0.0, data_bounds=(0.0, B))
    assert mech.delta == 0.0
    assert mech.lipschitz.L == pytest.approx(exponential((C1, C2), (0.0, B)).L)
