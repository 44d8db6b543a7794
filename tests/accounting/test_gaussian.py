"""Tests of the exact Gaussian accountant (pymc_dp.accounting.gaussian)."""

import math

import numpy as np
import pytest

from scipy.special import erfc, ndtr

from pymc_dp.accounting import (
    check_delta,
    check_epsilon,
    check_releases,
    gaussian_delta,
    gaussian_epsilon,
    max_gaussian_mu,
    max_iterations,
    noise_multiplier_for,
    zcdp_epsilon,
)

N = 1e5
DELTA = 1e-6
EPSILONS = [1, 2, 3, 4, 5, 6]


def thesis_algorithm_2(eps, delta, mu_of_k):
    """The thesis' Algorithm 2, literally: bisection over (real) k with its erfc formula."""

    def adp(k):
        mu = mu_of_k(k)
        root = 2 * math.sqrt(mu)
        return 0.5 * (erfc((eps - mu) / root) - math.exp(eps) * erfc((eps + mu) / root))

    # zCDP start (thesis Thm 5): any k with mu_of_k(k) <= rho is within budget.
    rho = (math.sqrt(eps - math.log(delta)) - math.sqrt(-math.log(delta))) ** 2
    low = 0.0
    while mu_of_k(low + 1) <= rho:
        low += 1
    high = max(low, 1.0)
    while adp(high) < delta:
        high *= 2
    while math.floor(high) - math.floor(low) > 1:
        new = (high + low) / 2
        if adp(new) > delta:
            high = new
        else:
            low = new
    return math.floor(high) if adp(math.floor(high)) < delta else math.floor(low)


# ---------------------------------------------------------------- thesis iteration counts
@pytest.mark.parametrize(
    "eps, expected", zip(EPSILONS, [56, 201, 419, 702, 1041, 1431], strict=True)
)
def test_dp_penalty_iterations_match_thesis(eps, expected):
    tau = 0.1
    mu_per_iteration = 1 / (2 * tau**2 * N)  # z = τ √n, μ = 1/(2 z²)
    assert max_iterations(eps, DELTA, mu_per_iteration) == expected
    assert thesis_algorithm_2(eps, DELTA, lambda k: k * mu_per_iteration) == expected


HMC_TAU_L, HMC_TAU_G, HMC_L = 0.1, 0.4, 10
Z_L = HMC_TAU_L * math.sqrt(N)
Z_G = HMC_TAU_G * math.sqrt(N)


@pytest.mark.parametrize(
    "eps, expected", zip(EPSILONS, [33, 119, 248, 416, 616, 848], strict=True)
)
def test_dp_hmc_iterations_with_l_plus_one_gradients_per_iteration(eps, expected):
    # The convention of the brief: L + 1 gradient releases and one ratio per iteration.
    mu_per_iteration = (HMC_L + 1) / (2 * Z_G**2) + 1 / (2 * Z_L**2)
    assert max_iterations(eps, DELTA, mu_per_iteration) == expected


@pytest.mark.parametrize(
    "eps, expected", zip(EPSILONS, [34, 123, 258, 431, 640, 880], strict=True)
)
def test_dp_hmc_iterations_theorem_12(eps, expected):
    # Thesis Theorem 12 (and docs/algorithms.md, "DP HMC"): one gradient before the first
    # iteration, then L gradients and one ratio per iteration:
    # μ(k) = (kL + 1)/(2 z_g²) + k/(2 z_l²).
    per = HMC_L / (2 * Z_G**2) + 1 / (2 * Z_L**2)
    initial = 1 / (2 * Z_G**2)
    assert max_iterations(eps, DELTA, per, mu_initial=initial) == expected
    assert thesis_algorithm_2(eps, DELTA, lambda k: initial + k * per) == expected


def test_max_iterations_composition_is_within_budget_and_tight():
    for eps in (0.5, 2.0, 8.0):
        per = 1e-3
        k = max_iterations(eps, 1e-5, per)
        assert gaussian_delta(eps, k * per) <= 1e-5
        assert gaussian_delta(eps, (k + 1) * per) > 1e-5


def test_max_iterations_bad_inputs():
    with pytest.raises(ValueError, match="mu_initial"):
        max_iterations(1.0, 1e-6, 1e-3, mu_initial=10.0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="mu_per_iteration"):
            max_iterations(1.0, 1e-6, bad)


# ---------------------------------------------------------------- gaussian_delta
def _mp_delta(eps, mu):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(80):
        e, m = mp.mpf(eps), mp.mpf(mu)
        s = mp.sqrt(2 * m)
        return mp.ncdf(-e / s + s / 2) - mp.exp(e) * mp.ncdf(-e / s - s / 2)


@pytest.mark.parametrize("mu", [1e-4, 0.05, 0.5, 2.0, 20.0, 100.0, 1e3])
def test_gaussian_delta_matches_high_precision(mu):
    for eps in (0.0, 1e-3, 0.1, 1.0, 3.0, 10.0, 50.0, 200.0):
        ref = _mp_delta(eps, mu)
        got = gaussian_delta(eps, mu)
        if ref < 1e-300:  # below float range: must not come out as garbage
            assert 0.0 <= got < 1e-290
        else:
            assert got == pytest.approx(float(ref), rel=1e-10, abs=0)


def test_gaussian_delta_is_finite_and_monotone_for_large_epsilon():
    eps = np.linspace(40.0, 250.0, 400)
    for mu in (15.0, 20.0, 50.0, 200.0):
        d = gaussian_delta(eps, mu)
        assert np.all(np.isfinite(d)) and np.all(d >= 0)
        positive = d[d > 0]
        assert np.all(np.diff(positive) < 0)
    # at ε = 50 and 200: exact, and ordered in μ
    for e in (50.0, 200.0):
        mus = np.array([20.0, 50.0, 100.0, 400.0])
        d = gaussian_delta(e, mus)
        assert np.all(d > 0) and np.all(np.diff(d) > 0)
        for m, got in zip(mus, d, strict=True):
            assert got == pytest.approx(float(_mp_delta(e, m)), rel=1e-9)
    # beyond ε ≈ 709, e^ε overflows and the naive formula gives NaN; ours does not
    e, mus = 800.0, np.array([500.0, 1000.0])
    s = np.sqrt(2 * mus)
    with np.errstate(all="ignore"):
        naive = ndtr(-e / s + s / 2) - np.exp(e) * ndtr(-e / s - s / 2)
    assert np.all(np.isnan(naive))
    d = gaussian_delta(e, mus)
    for m, got in zip(mus, d, strict=True):
        assert got == pytest.approx(float(_mp_delta(e, m)), rel=1e-9)


def test_gaussian_delta_edge_values_and_vectorisation():
    assert gaussian_delta(1.0, 0.0) == 0.0
    assert gaussian_delta(0.0, 0.0) == 0.0
    assert gaussian_delta(math.inf, 1.0) == 0.0
    assert gaussian_delta(1.0, math.inf) == 1.0
    assert isinstance(gaussian_delta(1.0, 0.5), float)
    eps = np.array([[0.5], [1.0], [2.0]])
    mu = np.array([0.1, 1.0])
    grid = gaussian_delta(eps, mu)
    assert grid.shape == (3, 2)
    for i in range(3):
        for j in range(2):
            assert grid[i, j] == gaussian_delta(float(eps[i, 0]), float(mu[j]))


@pytest.mark.parametrize("eps, mu", [(math.nan, 1.0), (-0.1, 1.0), (1.0, math.nan), (1.0, -1.0)])
def test_gaussian_delta_rejects_bad_inputs(eps, mu):
    with pytest.raises(ValueError):
        gaussian_delta(eps, mu)
    with pytest.raises(ValueError):
        gaussian_delta(np.array([1.0, eps]), mu)


# ---------------------------------------------------------------- inverses
GRID = [(mu, d) for mu in (1e-3, 0.05, 0.5, 3.0, 50.0) for d in (1e-10, 1e-6, 1e-3, 0.2)]


@pytest.mark.parametrize("mu, delta", GRID)
def test_gaussian_epsilon_round_trip_is_on_the_safe_side_and_tight(mu, delta):
    eps = gaussian_epsilon(mu, delta)
    if eps == 0.0:
        assert gaussian_delta(0.0, mu) <= delta
        return
    assert gaussian_delta(eps, mu) <= delta
    assert gaussian_delta(eps * (1 - 1e-8), mu) > delta  # smallest such ε, to 1e-8


@pytest.mark.parametrize("mu, delta", GRID)
def test_zcdp_bound_is_never_smaller_than_exact(mu, delta):
    assert zcdp_epsilon(mu, delta) >= gaussian_epsilon(mu, delta)


def test_gaussian_epsilon_special_values():
    assert gaussian_epsilon(0.0, 1e-6) == 0.0
    assert gaussian_epsilon(1e-14, 1e-6) == 0.0  # δ(0) is already below δ
    assert gaussian_epsilon(1.0, 1e-6) > gaussian_epsilon(0.5, 1e-6)  # monotone in μ


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 20.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 0.01])
def test_max_gaussian_mu_is_on_the_safe_side_and_inverts_gaussian_epsilon(eps, delta):
    mu = max_gaussian_mu(eps, delta)
    assert gaussian_delta(eps, mu) <= delta
    assert gaussian_delta(eps, mu * (1 + 1e-7)) > delta
    back = gaussian_epsilon(mu, delta)
    assert back <= eps
    assert back == pytest.approx(eps, rel=1e-8)


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-6), (1.0, 1e-6), (6.0, 1e-8), (2.0, 0.01)])
@pytest.mark.parametrize("releases", [1, 7, 1000, 123457])
def test_noise_multiplier_spends_at_most_budget_and_is_tight(eps, delta, releases):
    z = noise_multiplier_for(eps, delta, releases)
    mu = releases / (2 * z**2)
    assert gaussian_delta(eps, mu) <= delta
    spent = gaussian_epsilon(mu, delta)
    assert spent <= eps
    assert spent >= eps * (1 - 1e-6)


def test_noise_multiplier_grows_with_releases():
    zs = [noise_multiplier_for(1.0, 1e-6, r) for r in (1, 10, 100)]
    assert zs[0] < zs[1] < zs[2]
    assert zs[1] == pytest.approx(zs[0] * math.sqrt(10))


# ---------------------------------------------------------------- validation
BAD_EPSILONS = [0, 0.0, -1.0, math.nan, math.inf, -math.inf, "1", None, True]
BAD_DELTAS = [0, 0.0, 1, 1.0, -1e-6, 1.5, math.nan, math.inf, "0.1", None, True]


@pytest.mark.parametrize("bad", BAD_EPSILONS)
def test_bad_epsilon_raises(bad):
    with pytest.raises(ValueError, match="epsilon"):
        check_epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        max_gaussian_mu(bad, 1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        noise_multiplier_for(bad, 1e-6, 10)
    with pytest.raises(ValueError, match="epsilon"):
        max_iterations(bad, 1e-6, 1e-3)


@pytest.mark.parametrize("bad", BAD_DELTAS)
def test_bad_delta_raises(bad):
    with pytest.raises(ValueError, match="delta"):
        check_delta(bad)
    with pytest.raises(ValueError, match="delta"):
        gaussian_epsilon(0.5, bad)
    with pytest.raises(ValueError, match="delta"):
        max_gaussian_mu(1.0, bad)
    with pytest.raises(ValueError, match="delta"):
        noise_multiplier_for(1.0, bad, 10)
    with pytest.raises(ValueError, match="delta"):
        zcdp_epsilon(0.5, bad)


@pytest.mark.parametrize("bad", [0, -1, 1.5, 2.0, True, None, "3"])
def test_bad_releases_raise(bad):
    with pytest.raises(ValueError, match="releases"):
        noise_multiplier_for(1.0, 1e-6, bad)
    with pytest.raises(ValueError, match="releases"):
        check_releases(bad)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, None])
def test_bad_mu_raises(bad):
    with pytest.raises(ValueError, match="mu"):
        gaussian_epsilon(bad, 1e-6)
    with pytest.raises(ValueError, match="mu"):
        zcdp_epsilon(bad, 1e-6)


def test_error_messages_name_the_value():
    with pytest.raises(ValueError, match=r"got -2\.5"):
        check_epsilon(-2.5)
    with pytest.raises(ValueError, match=r"got 1\.5"):
        check_delta(1.5)


def test_validators_return_plain_numbers():
    assert type(check_epsilon(np.float32(0.5))) is float
    assert type(check_delta(np.float64(1e-5))) is float
    assert type(check_releases(np.int64(3))) is int
