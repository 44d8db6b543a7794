"""Empirical audits of the Lemma 20 (Laplace) and Lemma 22 (Normal, unknown σ) bounds.

Neighbouring datasets D = (0, 0, 0, 0) and D' = (0, 0, 0, 1), data bounds [0, 1], a known
location 0 and an unknown scale. The precision-like parameter τ (1/s for the Laplace, 1/σ²
for the Normal) is ``τ₁ + (τ₂ − τ₁) u`` with ``u ~ Beta(0.05, 0.05)``: a prior with mass
near both ends, so that one draw's privacy loss comes close to its bound. The library's T
(from ``PosteriorSampling``) must give an audit lower bound below ε, and a T twice as large
(a factor-2 error in L or in the accounting) one above it. The draws are exact: rejection
from the prior with the tempered likelihood, whose maximum over τ is known in closed form.
"""

import numpy as np
import pymc as pm
import pytest

from pymc_dp.posterior_sampling import PosteriorSampling
from pymc_dp.posterior_sampling.lipschitz import laplace, normal_variance
from pymc_dp.testing.auditing import epsilon_lower_bound

TAU = (0.5, 3.0)
ALPHA = 0.05
D, D_PRIME = np.zeros(4), np.array([0.0, 0.0, 0.0, 1.0])


def _model(family: str, data: np.ndarray) -> pm.Model:
    with pm.Model() as m:
        u = pm.Beta("u", ALPHA, ALPHA)
        tau = TAU[0] + (TAU[1] - TAU[0]) * u
        if family == "laplace":
            pm.Laplace("y", 0.0, 1.0 / tau, observed=data)
        else:
            pm.Normal("y", 0.0, 1.0 / pm.math.sqrt(tau), observed=data)
    return m


def _loglik_terms(family: str, data: np.ndarray) -> tuple[float, float]:
    """(a, b) with the θ-dependent log-likelihood ``a ln τ − b τ``."""
    if family == "laplace":
        return float(data.size), float(np.abs(data).sum())
    return data.size / 2, float((data**2).sum()) / 2


def _exact_tempered_draws(rng, family, data, T, size):
    a, b = _loglik_terms(family, data)
    a, b = T * a, T * b
    t_max = np.clip(a / b if b > 0 else np.inf, *TAU)
    f_max = a * np.log(t_max) - b * t_max
    out = np.empty(0)
    while out.size < size:
        u = rng.beta(ALPHA, ALPHA, size=4 * size)
        tau = TAU[0] + (TAU[1] - TAU[0]) * u
        keep = np.log(rng.uniform(size=u.size)) < a * np.log(tau) - b * tau - f_max
        out = np.concatenate([out, tau[keep]])
    return out[:size]


@pytest.mark.parametrize("family", ["laplace", "normal_variance"])
def test_empirical_audit_of_a_one_draw_release(family):
    eps = 1.0
    temps = []
    for data in (D, D_PRIME):
        with _model(family, data):
            mech = PosteriorSampling(eps=eps, draws=1, data_bounds=(0.0, 1.0))
            temps.append(mech.temperature)
    T = temps[0]
    assert temps[1] == T
    expected_L = (
        laplace((0, 1), (1 / TAU[1], 1 / TAU[0]), (0, 0)).L
        if family == "laplace"
        else normal_variance((0, 1), (0, 0), (TAU[1] ** -0.5, TAU[0] ** -0.5)).L
    )
    assert mech.lipschitz.L == pytest.approx(expected_L, rel=1e-9)
    assert T == pytest.approx(eps / (2 * expected_L))

    rng = np.random.default_rng(2026)
    size = 1_000_000

    def audit(temperature):
        x = _exact_tempered_draws(rng, family, D, temperature, size)
        y = _exact_tempered_draws(rng, family, D_PRIME, temperature, size)
        return epsilon_lower_bound(x, y, delta=0.0, n_thresholds=100)

    assert audit(T) <= eps
    assert audit(2 * T) > eps


def test_a_laplace_release_end_to_end():
    y = np.clip(np.random.default_rng(3).laplace(0.4, 0.3, size=300), 0.0, 1.0)
    with pm.Model():
        mu = pm.Uniform("mu", -1.0, 2.0)
        b = pm.Uniform("b", 0.1, 1.0)
        pm.Laplace("y", mu, b, observed=y)
        mech = PosteriorSampling(eps=2.0, draws=4, data_bounds=(0.0, 1.0))
        idata = mech.sample(chains=2, tune=500, random_seed=1, progressbar=False)
    assert idata.posterior["b"].shape == (1, 4)
    assert idata.attrs["dp_epsilon"] <= 2.0 and idata.attrs["dp_delta"] == 0.0
    assert mech.lipschitz.terms[0].family == "laplace"
    assert "Lemma 20" in str(idata.attrs["dp_report"])
