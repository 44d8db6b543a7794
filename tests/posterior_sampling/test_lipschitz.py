"""Lipschitz constants of the posterior sampling mechanism against brute-force maxima.

The quantity that makes one exact posterior draw 2L-DP is half the oscillation over θ of a
datum's log-likelihood ratio ``r(θ) = ℓ(x, θ) − ℓ(y, θ)`` (see :mod:`pymc_dp.posterior_sampling.lipschitz`).
Every formula is checked against ``max_{x, y} (max_θ r − min_θ r) / 2`` on a grid of data
and parameters that contains the extremes, with the *full* log-likelihoods of scipy or of
the PyMC model (θ-free terms included): the formula must bound it and be attained.
"""

import itertools
import json
import math

import numpy as np
import pymc as pm
import pytest
import scipy.stats as st

from scipy.special import logit

from pymc_dp.posterior_sampling import lipschitz as lip
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.posterior_sampling.lipschitz import (
    bernoulli,
    binomial,
    categorical,
    check_data_within_bounds,
    discrete_bayesian_network,
    exponential,
    laplace,
    lipschitz_bound,
    normal_mean,
    normal_variance,
    temperature_for,
    trimmed_dirichlet,
)
from pymc_dp.model import PrivateModel


def half_oscillation(loglik: np.ndarray, per_unit: np.ndarray | None = None) -> float:
    """``max_{x,y} (max_θ r − min_θ r) / 2`` from ``loglik[x, θ]`` (optionally per |x − y|)."""
    r = loglik[:, None, :] - loglik[None, :, :]
    osc = r.max(axis=-1) - r.min(axis=-1)
    if per_unit is not None:
        d = np.abs(per_unit[:, None] - per_unit[None, :])
        osc = np.where(d > 0, osc / np.where(d > 0, d, 1.0), 0.0)
    return float(osc.max()) / 2


def assert_tight(brute: float, L: float, rel: float = 0.02):
    assert brute <= L * (1 + 1e-9), f"brute force {brute} exceeds the bound {L}"
    assert brute >= L * (1 - rel), f"bound {L} is loose: brute force {brute}"


# ---------------------------------------------------------------------- pure formulas
def test_normal_mean_against_brute_force():
    lo, hi, m1, m2, sigma = -1.0, 2.0, -3.0, 1.0, 1.5
    x = np.linspace(lo, hi, 31)
    mu = np.linspace(m1, m2, 41)
    ll = st.norm(mu[None, :], sigma).logpdf(x[:, None])
    assert_tight(half_oscillation(ll), normal_mean((lo, hi), (m1, m2), sigma).L, rel=1e-9)
    assert_tight(
        half_oscillation(ll, per_unit=x),
        normal_mean((lo, hi), (m1, m2), sigma, metric="l1").L,
        rel=1e-9,
    )
    # e elements per datum: each may change, the oscillations add up.
    assert normal_mean((lo, hi), (m1, m2), sigma, elements=3).L == pytest.approx(
        3 * normal_mean((lo, hi), (m1, m2), sigma).L
    )


def test_normal_mean_is_never_looser_than_lemma_23():
    lo, hi, m1, m2, sigma = -1.0, 2.0, -3.0, 1.0, 1.5
    M = max(abs(m1), abs(m2))
    max_sq_diff = max(abs(a * a - b * b) for a in (lo, hi, 0.0) for b in (lo, hi, 0.0))
    lemma23 = 0.5 / sigma**2 * max(1.0, M) * (max_sq_diff + 2 * (hi - lo))
    assert normal_mean((lo, hi), (m1, m2), sigma).L <= lemma23


@pytest.mark.parametrize("a, b", [(0.1, 0.9), (0.3, 0.95), (0.02, 0.4)])
def test_bernoulli_against_brute_force(a, b):
    x = np.array([0, 1])
    p = np.linspace(a, b, 201)
    ll = st.bernoulli(p[None, :]).logpmf(x[:, None])
    assert_tight(half_oscillation(ll), bernoulli((a, b)).L, rel=1e-9)
    # Never looser than Lemma 24's ln(1/ε) with ε = the smallest probability of an outcome.
    assert bernoulli((a, b)).L <= math.log(1 / min(a, 1 - b))


@pytest.mark.parametrize("a, b", [(0.1, 0.9), (0.3, 0.95)])
def test_bernoulli_indexed_by_data_against_brute_force(a, b):
    # Two CPT rows p0, p1; the changed datum's parent picks which one it uses.
    grid = np.linspace(a, b, 41)
    thetas = np.array(list(itertools.product(grid, grid)))  # (p0, p1)
    records = [(par, x) for par in (0, 1) for x in (0, 1)]
    ll = np.array([st.bernoulli(thetas[:, par]).logpmf(x) for par, x in records])
    L = bernoulli((a, b), data_indexed=True).L
    assert_tight(half_oscillation(ll), L, rel=1e-9)
    assert L <= math.log(1 / min(a, 1 - b))  # Lemma 24
    # A data-chosen p needs more than the same-θ bound when the trimming is asymmetric.
    if not math.isclose(a, 1 - b):
        assert half_oscillation(ll) > bernoulli((a, b)).L


@pytest.mark.parametrize("metric", ["replace_one", "l1"])
def test_binomial_against_brute_force(metric):
    a, b, m = 0.15, 0.8, 6
    k = np.arange(m + 1)
    p = np.linspace(a, b, 201)
    ll = st.binom(m, p[None, :]).logpmf(k[:, None])
    brute = half_oscillation(ll, per_unit=k if metric == "l1" else None)
    assert_tight(brute, binomial((a, b), m, metric=metric).L, rel=1e-9)
    # Lemma 21 (Assumption 1 form, θ-free coefficient dropped): max|logit| per trial.
    if metric == "l1":
        assert binomial((a, b), m, metric="l1").L <= max(abs(logit(a)), abs(logit(b)))


def test_binomial_with_narrower_data_bounds_and_indexed_p():
    a, b, m = 0.2, 0.7, 5
    k = np.arange(1, 4)
    p = np.linspace(a, b, 101)
    ll = st.binom(m, p[None, :]).logpmf(k[:, None])
    assert_tight(half_oscillation(ll), binomial((a, b), m, data_bounds=(1, 3)).L, rel=1e-9)
    grid = np.linspace(a, b, 21)
    thetas = np.array(list(itertools.product(grid, grid)))
    recs = [(par, x) for par in (0, 1) for x in range(m + 1)]
    # θ-free terms may be dropped: the bound is on ℓ̃ = x ln p + (m − x) ln(1 − p).
    ll = np.array([st.binom(m, thetas[:, par]).logpmf(x) for par, x in recs])
    brute = half_oscillation(ll)
    L = binomial((a, b), m, data_indexed=True).L
    assert brute <= L * (1 + 1e-9)


@pytest.mark.parametrize("metric", ["replace_one", "l1"])
def test_exponential_against_brute_force(metric):
    c1, c2, lo, hi = 0.5, 2.0, 0.0, 10.0
    x = np.linspace(lo, hi, 51)
    lam = np.linspace(c1, c2, 61)
    ll = st.expon(scale=1 / lam[None, :]).logpdf(x[:, None])
    brute = half_oscillation(ll, per_unit=x if metric == "l1" else None)
    assert_tight(brute, exponential((c1, c2), (lo, hi), metric=metric).L, rel=1e-9)
    if metric == "l1":  # Lemma 19: θ|x − y| ≤ c₂|x − y|
        assert exponential((c1, c2), (lo, hi), metric="l1").L <= c2


def _trimmed_simplex_points(k, eps, steps=6):
    """Points of the simplex with every entry ≥ eps, vertices of the trimmed simplex included."""
    grid = np.linspace(0, 1, steps)
    pts = [np.array(w) for w in itertools.product(grid, repeat=k) if abs(sum(w) - 1) < 1e-9]
    return np.array([eps + (1 - k * eps) * w for w in pts])



# Lemma 20: Laplace with a bounded-below scale, any location.
@pytest.mark.parametrize("metric", ["replace_one", "l1"])
def test_laplace_against_brute_force(metric):
    lo, hi, s1, s2 = -1.0, 2.0, 0.4, 3.0
    x = np.linspace(lo, hi, 61)
    # The location ranges beyond the data on both sides (an untrimmed location is allowed).
    mu, s = np.meshgrid(np.linspace(lo - 2, hi + 2, 81), np.geomspace(s1, s2, 15))
    ll = st.laplace(mu.ravel()[None, :], s.ravel()[None, :]).logpdf(x[:, None])
    brute = half_oscillation(ll, per_unit=x if metric == "l1" else None)
    assert_tight(brute, laplace((lo, hi), (s1, s2), metric=metric).L, rel=1e-9)
    # Lemma 20's Assumption 1 constant: c₂ = 1/s₁ per unit |x − y|.
    assert laplace((lo, hi), (s1, s2), metric="l1").L <= 1 / s1
    assert laplace((lo, hi), (s1, s2), elements=3).L == pytest.approx(
        3 * laplace((lo, hi), (s1, s2)).L
    )


@pytest.mark.parametrize(
    "location",
    [(1.0, 3.0), (1.5, 1.5), (-2.0, 1.0), (5.0, 6.0), (-np.inf, 0.5)],
)
@pytest.mark.parametrize("metric", ["replace_one", "l1"])
def test_laplace_with_a_bounded_or_known_location_against_brute_force(location, metric):
    lo, hi, s1, s2 = 0.0, 4.0, 0.5, 2.0
    x = np.linspace(lo, hi, 161)
    m1, m2 = max(location[0], lo - 3), location[1]
    mu, s = np.meshgrid(np.linspace(m1, m2, 81), np.geomspace(s1, s2, 15))
    ll = st.laplace(mu.ravel()[None, :], s.ravel()[None, :]).logpdf(x[:, None])
    brute = half_oscillation(ll, per_unit=x if metric == "l1" else None)
    L = laplace((lo, hi), (s1, s2), location, metric=metric).L
    assert_tight(brute, L, rel=1e-9 if metric == "replace_one" else 0.01)
    assert L <= laplace((lo, hi), (s1, s2), metric=metric).L  # never above Lemma 20's


def test_laplace_with_a_known_location_closed_form():
    lo, hi, s1, s2, mu = 0.0, 4.0, 0.5, 2.0, 1.0
    L = laplace((lo, hi), (s1, s2), (mu, mu)).L
    assert L == pytest.approx((1 / s1 - 1 / s2) * max(abs(lo - mu), abs(hi - mu)) / 2)


# Lemma 22: Normal with an unknown variance (and a known or bounded mean).
@pytest.mark.parametrize(
    "data, mean, sigma",
    [
        ((-1.0, 2.0), (0.5, 0.5), (0.5, 2.0)),  # Lemma 22: known mean inside the data range
        ((0.0, 1.0), (-2.0, -2.0), (0.3, 1.0)),  # known mean outside it
        ((-1.0, 2.0), (-3.0, 1.0), (0.7, 1.5)),  # bounded mean, unknown sigma
        ((-1.0, 1.0), (0.0, 0.0), (1.0, np.inf)),  # sigma not bounded above: τ₁ = 0
    ],
)
@pytest.mark.parametrize("metric", ["replace_one", "l1"])
def test_normal_variance_against_brute_force(data, mean, sigma, metric):
    lo, hi = data
    x = np.linspace(lo, hi, 241 if metric == "l1" else 61)
    s_hi = sigma[1] if np.isfinite(sigma[1]) else 1e6
    mu, s = np.meshgrid(np.linspace(*mean, 21), np.concatenate([np.geomspace(sigma[0], s_hi, 14)]))
    ll = st.norm(mu.ravel()[None, :], s.ravel()[None, :]).logpdf(x[:, None])
    brute = half_oscillation(ll, per_unit=x if metric == "l1" else None)
    L = normal_variance(data, mean, sigma, metric=metric).L
    # The l1 supremum is a limit y → x: a grid reaches it up to its spacing.
    assert_tight(brute, L, rel=1e-6 if metric == "replace_one" else 0.02)


def test_normal_variance_reduces_to_the_known_sigma_formula_and_beats_lemma_22():
    for metric in ("replace_one", "l1"):
        assert normal_variance((-1, 2), (-3, 1), (1.5, 1.5), metric=metric).L == pytest.approx(
            normal_mean((-1, 2), (-3, 1), 1.5, metric=metric).L
        )
    # Lemma 22 (known mean μ, 1/σ² ≤ c₂): L₂₂ = ½ c₂ max(|μ|, 1) per unit of
    # ρ = |x² − y²| + 2|x − y|; for replace-one neighbours in [lo, hi], sup ρ bounds ρ.
    lo, hi, mu, s1, s2 = -1.0, 2.0, 0.5, 0.5, 2.0
    c2 = 1 / s1**2
    rho_max = max(
        abs(a * a - b * b) + 2 * abs(a - b)
        for a in np.linspace(lo, hi, 301) for b in (lo, hi)
    )
    assert normal_variance((lo, hi), (mu, mu), (s1, s2)).L <= 0.5 * c2 * max(abs(mu), 1) * rho_max

    eps, k = 0.05, 3
    rows = _trimmed_simplex_points(k, eps)
    # CPT with two rows (parent 0/1), each any trimmed point: θ = (row0, row1).
    thetas = list(itertools.product(range(len(rows)), repeat=2))
    recs = [(par, x) for par in (0, 1) for x in range(k)]
    ll = np.array([[math.log(rows[t[par]][x]) for t in thetas] for par, x in recs])
    L = categorical((eps, 1 - (k - 1) * eps)).L
    assert_tight(half_oscillation(ll), L, rel=1e-9)


def test_discrete_bayesian_network_against_brute_force():
    # x1 (2 states) → x2 (3 states) → x3 (2 states); every conditional probability ≥ ε.
    eps = 0.1
    p1 = [np.array([eps, 1 - eps]), np.array([1 - eps, eps]), np.array([0.5, 0.5])]
    rows3 = list(_trimmed_simplex_points(3, eps, steps=3))
    rows2 = [np.array([eps, 1 - eps]), np.array([1 - eps, eps])]
    rng = np.random.default_rng(0)
    thetas = [
        (p1[rng.integers(3)], [rows3[i] for i in rng.integers(len(rows3), size=2)],
         [rows2[i] for i in rng.integers(2, size=3)])
        for _ in range(400)
    ]
    # Extreme configurations are in: all "left" and all "right" vertices.
    for s in (0, 1):
        thetas.append((p1[s], [rows3[0], rows3[-1]][:: 1 - 2 * s], [rows2[s]] * 3))
    records = list(itertools.product(range(2), range(3), range(2)))

    def logp(rec, th):
        a, b, c = rec
        t1, t2, t3 = th
        return math.log(t1[a]) + math.log(t2[a][b]) + math.log(t3[b][c])

    ll = np.array([[logp(rec, th) for th in thetas] for rec in records])
    L = discrete_bayesian_network(eps, [2, 3, 2]).L
    brute = half_oscillation(ll)
    assert brute <= L * (1 + 1e-9)
    assert brute >= 0.9 * L
    # Lemma 24: ln(1/ε) per unit of ρ = vᵀδ; a whole changed record has ρ = Σ_k (1 + outdeg k).
    v = np.array([1 + 1, 1 + 1, 1 + 0])
    assert L <= math.log(1 / eps) * v.sum()


def test_temperature_never_overspends_in_floating_point():
    rng = np.random.default_rng(1)
    for _ in range(2000):
        eps = float(rng.uniform(1e-3, 10))
        n = int(rng.integers(1, 10_000))
        L = float(np.exp(rng.uniform(-5, 8)))
        T = temperature_for(eps, n, L)
        assert 0 < T <= 1
        assert n * (2.0 * T * L) <= eps
        assert T == pytest.approx(min(1.0, eps / (2 * n * L)), rel=1e-12)


# ---------------------------------------------------------------------- from PyMC models
def _model_brute_force(model, thetas_value_space: np.ndarray) -> float:
    """Half the largest oscillation of r, with the model's own per-datum log-likelihood.

    The model's observed rows are the candidate data values (every one a possible datum).
    """
    pmodel = PrivateModel(model)
    ll = np.array([pmodel.loglik(q) for q in thetas_value_space]).T  # (data, θ)
    return half_oscillation(ll)


def _grid(dim: int, width: float = 14.0, steps: int = 9) -> np.ndarray:
    axis = np.concatenate([[-40.0, 40.0], np.linspace(-width, width, steps)])
    return np.array(list(itertools.product(axis, repeat=dim)))


def test_model_normal_mean():
    x = np.linspace(-1, 2, 16)
    with pm.Model() as m:
        mu = pm.Uniform("mu", -3, 1)
        pm.Normal("y", mu, 1.5, observed=x)
    bound = lipschitz_bound(m, data_bounds=(-1, 2))
    assert bound.L == pytest.approx(normal_mean((-1, 2), (-3, 1), 1.5).L)
    assert_tight(_model_brute_force(m, _grid(1)), bound.L, rel=1e-6)
    assert bound.terms[0].variable == "y" and "Lemma 23" in bound.terms[0].formula


def test_model_normal_rows_with_several_elements():
    vals = np.array([-1.0, 2.0])
    rows = np.array(list(itertools.product(vals, repeat=2)))  # every corner of a 2-element row
    with pm.Model() as m:
        mu = pm.Uniform("mu", -3, 1)
        pm.Normal("y", mu, 1.5, observed=rows)
    bound = lipschitz_bound(m, data_bounds={"y": (-1, 2)})
    assert bound.L == pytest.approx(2 * normal_mean((-1, 2), (-3, 1), 1.5).L)
    assert_tight(_model_brute_force(m, _grid(1)), bound.L, rel=1e-6)


@pytest.mark.parametrize("prior", ["uniform", "truncated_beta", "logit_uniform"])
def test_model_bernoulli(prior):
    with pm.Model() as m:
        if prior == "uniform":
            p = pm.Uniform("p", 0.1, 0.8)
        elif prior == "truncated_beta":
            p = pm.Truncated("p", pm.Beta.dist(2, 5), lower=0.1, upper=0.8)
        else:
            eta = pm.Uniform("eta", logit(0.1), logit(0.8))
            p = pm.math.sigmoid(eta)
        pm.Bernoulli("y", p, observed=np.array([0, 1]))
    bound = lipschitz_bound(m)
    assert bound.L == pytest.approx(bernoulli((0.1, 0.8)).L, rel=1e-9)
    assert_tight(_model_brute_force(m, _grid(1)), bound.L, rel=1e-6)


def test_model_binomial_and_its_l1_metric():
    with pm.Model() as m:
        p = pm.Uniform("p", 0.15, 0.8)
        pm.Binomial("y", 6, p, observed=np.arange(7))
    bound = lipschitz_bound(m)
    assert bound.L == pytest.approx(binomial((0.15, 0.8), 6).L)
    assert_tight(_model_brute_force(m, _grid(1)), bound.L, rel=1e-6)
    assert lipschitz_bound(m, metric="l1").L == pytest.approx(bound.L / 6)


def test_model_exponential_with_a_truncated_prior_and_scale_parametrisation():
    with pm.Model() as m:
        lam = pm.Truncated("lam", pm.Gamma.dist(2.0, 1.0), lower=0.5, upper=2.0)
        pm.Exponential("y", scale=1 / lam, observed=np.linspace(0, 10, 11))
    bound = lipschitz_bound(m, data_bounds=(0, 10))
    assert bound.L == pytest.approx(exponential((0.5, 2.0), (0, 10)).L)
    assert_tight(_model_brute_force(m, _grid(1)), bound.L, rel=1e-6)



def test_model_laplace_with_an_unbounded_location():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 10)  # Lemma 20: the location needs no trimming
        b = pm.Truncated("b", pm.HalfNormal.dist(2.0), lower=0.5, upper=3.0)
        pm.Laplace("y", mu, b, observed=np.array([-1.0, 2.0]))
    bound = lipschitz_bound(m, data_bounds=(-1, 2))
    assert bound.L == pytest.approx(laplace((-1, 2), (0.5, 3.0)).L)
    assert "Lemma 20" in bound.terms[0].formula
    # Unbounded ends are reported as null: reports are strict JSON.
    assert bound.terms[0].inputs["location_bounds"] == [None, None]
    json.dumps(bound.to_dict(), allow_nan=False)
    assert_tight(_model_brute_force(m, _grid(2, steps=15)), bound.L, rel=1e-6)


def test_model_normal_with_unknown_variance():
    with pm.Model() as m:
        sigma = pm.Uniform("sigma", 0.5, 2.0)
        pm.Normal("y", 0.5, sigma, observed=np.array([-1.0, 0.5, 2.0]))
    bound = lipschitz_bound(m, data_bounds=(-1, 2))
    assert bound.terms[0].family == "normal_variance" and "Lemma 22" in bound.terms[0].formula
    assert bound.L == pytest.approx(normal_variance((-1, 2), (0.5, 0.5), (0.5, 2.0)).L)
    assert_tight(_model_brute_force(m, _grid(1, steps=15)), bound.L, rel=1e-6)
    # A bounded mean too, sigma as a truncated prior bounded only below (precision up to 4).
    with pm.Model() as m2:
        mu = pm.Uniform("mu", -3, 1)
        sigma = pm.Truncated("sigma", pm.HalfNormal.dist(1.0), lower=0.5)
        pm.Normal("y", mu, sigma, observed=np.array([-1.0, 2.0]))
    bound2 = lipschitz_bound(m2, data_bounds=(-1, 2))
    assert bound2.L == pytest.approx(normal_variance((-1, 2), (-3, 1), (0.5, np.inf)).L)
    assert_tight(_model_brute_force(m2, _grid(2, width=20, steps=11)), bound2.L, rel=1e-6)


def test_every_observed_family_has_one_registered_rule():
    from pytensor.tensor.random.basic import LaplaceRV, NormalRV

    assert lip._FAMILY_RULES[NormalRV] is lip._normal_rule
    assert lip._FAMILY_RULES[LaplaceRV] is lip._laplace_rule
    with pytest.raises(ValueError, match="already has"):
        lip._family_rule(NormalRV)(lambda *a: None)

    # x1 ~ Bernoulli(p1); x2 | x1 ~ Categorical(cpt[x1]) with a trimmed Dirichlet CPT.
    # (every record twice: a prior array of as many entries as rows, the CPT's six, would
    # be taken for one entry per person)
    records = np.tile(np.array(list(itertools.product(range(2), range(3)))), (2, 1))
    x1, x2 = records[:, 0], records[:, 1]
    eps = 0.05
    with pm.Model() as m:
        p1 = pm.Uniform("p1", eps, 1 - eps)
        cpt = trimmed_dirichlet("cpt", np.ones((2, 3)), min_prob=eps)
        parent = pm.Data("x1_parent", x1)
        pm.Bernoulli("x1", p1, observed=x1)
        pm.Categorical("x2", p=cpt[parent], observed=x2)
    bound = lipschitz_bound(m)
    assert bound.L == pytest.approx(discrete_bayesian_network(eps, [2, 3]).L)
    assert [t.family for t in bound.terms] == ["bernoulli", "categorical"]
    # Brute force over value-space points: p1 and the two Dirichlet rows (2 free coords each).
    pmodel = PrivateModel(m)
    rng = np.random.default_rng(0)
    qs = rng.uniform(-12, 12, size=(4000, pmodel.dim))
    corners = np.array(list(itertools.product([-30.0, 30.0], repeat=pmodel.dim)))
    brute = _model_brute_force(m, np.concatenate([qs, corners]))
    assert brute <= bound.L * (1 + 1e-9)
    assert brute >= 0.97 * bound.L


def test_model_bernoulli_child_indexed_by_numpy_parent_values_counts_as_data():
    # The parent's values passed as a numpy constant are a column of the records: the
    # general (Lemma 24) bound must be used, not the same-θ one.
    records = np.array(list(itertools.product(range(2), range(2))))
    with pm.Model() as m:
        p1 = pm.Uniform("p1", 0.1, 0.9)
        cpt = pm.Uniform("cpt", 0.3, 0.8, shape=2)
        pm.Bernoulli("x1", p1, observed=records[:, 0])
        # int32: an index equal to an observed array would be merged with it by PyTensor.
        pm.Bernoulli("x2", cpt[records[:, 0].astype("int32")], observed=records[:, 1])
    bound = lipschitz_bound(m)
    assert bound.terms[1].inputs["data_indexed"] is True
    assert bound.L == pytest.approx(
        bernoulli((0.1, 0.9)).L + bernoulli((0.3, 0.8), data_indexed=True).L
    )
    brute = _model_brute_force(m, _grid(3, steps=7))
    assert_tight(brute, bound.L, rel=1e-6)
    # The same-θ bound would be too small here: the brute force exceeds it.
    assert brute > bernoulli((0.1, 0.9)).L + bernoulli((0.3, 0.8)).L + 0.1


# ---------------------------------------------------------------------- refusals
def _refuses(build, match, **kwargs):
    with pm.Model() as m:
        build()
    with pytest.raises(UnsupportedModelError, match=match):
        lipschitz_bound(m, **kwargs)


def test_refuses_an_untrimmed_probability():
    y = np.array([0, 1, 1])
    _refuses(lambda: pm.Bernoulli("y", pm.Beta("p", 2, 2), observed=y), "not trimmed")
    _refuses(lambda: pm.Bernoulli("y", pm.Uniform("p", 0, 0.5), observed=y), "not trimmed")
    _refuses(
        lambda: pm.Binomial("y", 3, pm.Uniform("p", 0.5, 1), observed=y), "not trimmed"
    )
    _refuses(
        lambda: pm.Categorical("y", pm.Dirichlet("p", np.ones(3)), observed=y), "can reach 0"
    )


def test_refuses_unbounded_data_or_mean():
    y = np.zeros(3)
    _refuses(lambda: pm.Normal("y", pm.Uniform("mu", -1, 1), 1.0, observed=y), "data_bounds")
    _refuses(
        lambda: pm.Normal("y", pm.Normal("mu", 0, 10), 1.0, observed=y),
        "not bounded by its prior",
        data_bounds=(-1, 1),
    )
    _refuses(
        lambda: pm.Normal("y", pm.Uniform("mu", -1, 1), 1.0, observed=y),
        "unbounded",
        data_bounds=(-np.inf, 1),
    )
    _refuses(
        lambda: pm.Exponential("y", pm.Gamma("lam", 2, 1), observed=y),
        "not bounded above",
        data_bounds=(0, 5),
    )
    _refuses(lambda: pm.Exponential("y", pm.Uniform("lam", 0.5, 2), observed=y), "data_bounds")


def test_refuses_unknown_variance_covariates_groups_and_other_families():
    y = np.zeros(4)
    # An unknown sigma is supported (Lemma 22) only bounded away from 0.
    _refuses(
        lambda: pm.Normal("y", pm.Uniform("mu", -1, 1), pm.HalfNormal("s", 1), observed=y),
        "not bounded away from 0",
        data_bounds=(-1, 1),
    )
    _refuses(
        lambda: pm.Laplace("y", 0.0, pm.HalfNormal("b", 1), observed=y),
        "not bounded away from 0",
        data_bounds=(-1, 1),
    )
    _refuses(
        lambda: pm.Normal("y", pm.Normal("mu", 0, 1), pm.Uniform("s", 1, 2), observed=y),
        "not bounded by its prior",
        data_bounds=(-1, 1),
    )
    _refuses(lambda: pm.Laplace("y", 0.0, pm.Uniform("b", 1, 2), observed=y), "data_bounds")

    def laplace_regression():
        X = pm.Data("X", np.ones(4))
        pm.Laplace("y", pm.Uniform("b", -1, 1) * X, 1.0, observed=y)

    _refuses(laplace_regression, "computed from data", data_bounds=(-1, 1))

    def regression():
        X = pm.Data("X", np.ones(4))
        pm.Normal("y", pm.Uniform("b", -1, 1) * X, 1.0, observed=y)

    _refuses(regression, "computed from data", data_bounds=(-1, 1))

    def groups():
        g = pm.Data("g", np.array([0, 1, 0, 1]))
        pm.Normal("y", pm.Uniform("mu", -1, 1, shape=2)[g], 1.0, observed=y)

    _refuses(groups, "indexed by data", data_bounds=(-1, 1))
    _refuses(lambda: pm.Poisson("y", pm.Uniform("lam", 1, 2), observed=y), "no Lipschitz bound")
    _refuses(
        lambda: pm.Categorical("y", trimmed_dirichlet("p", np.ones(3), min_prob=0.1), observed=y),
        "replace_one",
        metric="l1",
    )


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="metric"):
        bernoulli((0.1, 0.9), metric="hamming")
    with pytest.raises(ValueError, match="low <= high"):
        normal_mean((1, -1), (0, 1), 1.0)
    with pytest.raises(ValueError, match="sigma"):
        normal_mean((-1, 1), (0, 1), 0.0)
    with pytest.raises(UnsupportedModelError, match="min_prob"):
        discrete_bayesian_network(0.6, [2])
    with pytest.raises(ValueError, match="min_prob"):
        with pm.Model():
            trimmed_dirichlet("p", np.ones(3), min_prob=0.4)


def test_out_of_bounds_data_are_refused_without_showing_values():
    secret = 7.123456
    with pm.Model() as m:
        pm.Normal("y", pm.Uniform("mu", -1, 1), 1.0, observed=np.array([0.5, secret]))
    bound = lipschitz_bound(m, data_bounds=(-1, 1))  # structure only: does not read values
    with pytest.raises(ValueError, match="outside the declared data bounds") as info:
        check_data_within_bounds(m, bound)
    assert "7.12" not in str(info.value)
    with pm.Model() as m2:
        pm.Binomial("y", 3, pm.Uniform("p", 0.1, 0.9), observed=np.array([1, 4]))
    with pytest.raises(ValueError, match="outside the declared data bounds"):
        check_data_within_bounds(m2, lipschitz_bound(m2))
    with pytest.raises(ValueError, match="outside the declared data bounds"):
        check_data_within_bounds(m2, lipschitz_bound(m2, data_bounds=(0, 2)))


def test_module_formulas_cite_their_lemmas():
    for fn in (normal_mean, normal_variance, laplace, bernoulli, binomial, exponential,
               categorical, discrete_bayesian_network):
        assert "Lemma" in fn.__doc__
    assert "Lemma 24" in lip.discrete_bayesian_network(0.1, [2]).formula


def test_a_cast_to_an_integer_widens_the_range_it_truncates():
    # mu = int(a), a in [0.9, 1.1]: mu is 0 or 1, not within [0.9, 1.1]; read as the
    # identity, the bound was 0.2 against a true 1.0 (ε understated 5-fold; review 26).
    import pytensor.tensor as pt

    xs = np.linspace(-1, 1, 41)
    with pm.Model() as m:
        a = pm.Uniform("a", 0.9, 1.1)
        pm.Normal("y", pt.cast(a, "int64"), 1.0, observed=xs)
    bound = lipschitz_bound(m, data_bounds=(-1, 1))
    mus = np.trunc(np.linspace(0.9, 1.1, 201))
    true = max(np.ptp(-0.5 * (x - mus) ** 2 + 0.5 * (z - mus) ** 2) for x in xs for z in xs) / 2
    assert true == pytest.approx(1.0)
    assert bound.L >= true
