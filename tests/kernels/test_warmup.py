"""Private warm-up releases (pymc_dp.kernels.warmup): answers, noise scales, audits."""

import numpy as np
import pytest

from pymc_dp.auditing import epsilon_lower_bound
from pymc_dp.kernels.warmup import (
    DEFAULT_GRID,
    curvature,
    laplace_warmup,
    noisy_histogram,
    noisy_moments,
    noisy_quantile,
)


def test_the_quantile_is_the_first_grid_edge_above_the_true_quantile():
    rng = np.random.default_rng(0)
    for scale in (1e-4, 1.0, 3e3):  # scale-free over the grid's range
        values = scale * np.abs(rng.normal(size=50_000))
        true = np.quantile(values, 0.9)
        got = noisy_quantile(rng, values, quantile=0.9, noise_multiplier=5.0)
        assert got == DEFAULT_GRID[np.searchsorted(DEFAULT_GRID, true)]


def test_non_finite_values_count_as_large():
    values = np.r_[np.full(50, np.nan), np.full(50, 0.5)]
    got = noisy_quantile(np.random.default_rng(0), values, quantile=0.9, noise_multiplier=1e-3)
    assert got == DEFAULT_GRID[-1]


def test_the_histogram_noise_has_sd_sqrt2_z_and_passes_an_audit():
    # Neighbours: one row moves from bin 0 to the top bin. The top count is the released
    # coordinate that moves (by 1); its noise sd must be √2·z (a halved scale is caught by
    # the sd check, and the audit stays below the claimed ε).
    z = 1.0
    d = np.full(20, 1e-9)
    d_prime = d.copy()
    d_prime[0] = 1e9
    top_d = np.array([noisy_histogram(np.random.default_rng(s), d, noise_multiplier=z)[-1]
                      for s in range(20_000)])
    top_dp = np.array([noisy_histogram(np.random.default_rng(s), d_prime, noise_multiplier=z)[-1]
                       for s in range(20_000, 40_000)])
    assert abs(np.std(top_d) / (np.sqrt(2.0) * z) - 1) < 0.03
    assert abs(np.mean(top_dp) - np.mean(top_d) - 1.0) < 0.05
    # the whole histogram is one Gaussian release with μ = 1/(2z²) = 1/2: ε(1e-3) ≈ 2.7
    assert epsilon_lower_bound(top_d, top_dp, delta=1e-3) < 2.7


def _moment_outputs(grads, rng_seeds, z, clip=1.0):
    g, o = [], []
    for s in rng_seeds:
        m = noisy_moments(
            np.random.default_rng(s), grads, clip=clip, grad_noise_multiplier=z,
            outer_noise_multiplier=z,
        )
        g.append(m.grad_sum[0])
        o.append(m.outer_sum[0, 0])
    return np.array(g), np.array(o)


def test_moment_releases_have_the_stated_noise_and_pass_an_audit():
    # Neighbours differ in one row: (+C, 0) against (−C, 0). The gradient sum moves by 2C
    # (its Δ), the outer product's (0, 0) entry does not move; with z = 1 each release is
    # μ = 1/2, ε(δ = 1e-3) ≈ 3.3 for the two together.
    base = np.zeros((20, 2))
    d, d_prime = base.copy(), base.copy()
    d[0] = [1.0, 0.0]
    d_prime[0] = [-1.0, 0.0]
    seeds = range(20_000)
    g_d, _ = _moment_outputs(d, seeds, 1.0)
    g_dp, _ = _moment_outputs(d_prime, seeds, 1.0)
    assert abs(np.std(g_d) - 2.0) < 0.05  # σ = 2 C z
    eps_lb = epsilon_lower_bound(g_d, g_dp, delta=1e-3)
    # a single Gaussian release with μ = 1/2 is (ε ≈ 2.7, 1e-3)-DP: the audit stays below
    assert eps_lb < 2.7


def test_outer_product_noise_is_symmetric_with_sd_sqrt2_c2_z():
    grads = np.zeros((10, 3))
    entries = []
    for s in range(3000):
        m = noisy_moments(
            np.random.default_rng(s), grads, clip=2.0, grad_noise_multiplier=1.0,
            outer_noise_multiplier=0.5,
        )
        np.testing.assert_array_equal(m.outer_sum, m.outer_sum.T)
        entries.append(m.outer_sum[0, 1])
    assert abs(np.std(entries) / (0.5 * np.sqrt(2.0) * 4.0) - 1) < 0.05


def test_rows_are_clipped_and_non_finite_rows_dropped():
    grads = np.array([[3.0, 4.0], [np.nan, 1.0], [0.3, 0.4]])
    m = noisy_moments(
        np.random.default_rng(0), grads, clip=1.0, grad_noise_multiplier=1e-12,
        outer_noise_multiplier=1e-12,
    )
    np.testing.assert_allclose(m.grad_sum, [0.9, 1.2], atol=1e-9)


def test_laplace_warmup_recovers_a_gaussian_posterior_at_low_noise():
    # y_j ~ N(μ, 1), prior μ ~ N(0, 10²): posterior N(Σy/(n + 0.01), 1/(n + 0.01)).
    rng = np.random.default_rng(3)
    n = 5000
    y = rng.normal(2.0, 1.0, n)
    prec = np.array([[0.01]])
    post_mean = y.sum() / (n + 0.01)
    post_sd = 1 / np.sqrt(n + 0.01)
    res = laplace_warmup(
        np.random.default_rng(4), np.array([-5.0]), lambda q: (y - q)[:, None],
        lambda q: -0.01 * q, lambda q: prec, quantile=0.99,
        noise_multipliers=np.tile([1.0, 0.05, 1.0, 0.05], (10, 1)),
    )
    assert abs(res.mean[0] - post_mean) < 0.2 * post_sd
    assert abs(1 / np.sqrt(res.hessian[0, 0]) / post_sd - 1) < 0.1


def test_curvature_is_positive_definite_even_when_noise_dominates():
    from pymc_dp.kernels.warmup import Moments

    noisy = Moments(
        grad_sum=np.zeros(3), outer_sum=np.diag([-5.0, 1.0, 2.0]), clip=1.0, n=10,
        outer_noise_sd=1.0,
    )
    h = curvature(noisy, 0.01 * np.eye(3))
    assert np.all(np.linalg.eigvalsh(h) >= 2.0 * np.sqrt(3) - 1e-9)


def test_coordinate_scales_add_noise_for_d_histograms(monkeypatch):
    # d histograms released together: one row moves one count out and one in, in each, so
    # Δ₂ = √(2d). Each histogram must get noise sd √(2d)·z, i.e. noisy_histogram (whose
    # own sd √2·z' is checked above) with z' = √d·z.
    import pymc_dp.kernels.warmup as warmup

    calls = []
    real = warmup.noisy_histogram

    def recording(rng, values, *, noise_multiplier, grid=DEFAULT_GRID):
        calls.append(noise_multiplier)
        return real(rng, values, noise_multiplier=noise_multiplier, grid=grid)

    monkeypatch.setattr(warmup, "noisy_histogram", recording)
    d, z = 4, 3.0
    grads = np.random.default_rng(0).normal(size=(500, d))
    warmup.noisy_scales(np.random.default_rng(1), grads, quantile=0.9, noise_multiplier=z)
    assert calls == [pytest.approx(z * np.sqrt(d))] * d


def _logistic_problem(n, seed):
    """Logistic regression with an intercept, a binary covariate that is 1 for 20 % of rows,
    and a covariate on scale 10; its MAP and curvature under N(0, 5²) priors (by Newton)."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.ones(n), rng.binomial(1, 0.2, n), rng.normal(0.0, 10.0, n)])
    y = rng.binomial(1, 1 / (1 + np.exp(-(x @ np.array([-0.5, 0.7, 0.05])))))
    prior_prec = np.eye(3) / 25.0

    def rows(q):
        return (y - 1 / (1 + np.exp(-(x @ q))))[:, None] * x

    q = np.zeros(3)
    for _ in range(50):
        p = 1 / (1 + np.exp(-(x @ q)))
        hess = (x * (p * (1 - p))[:, None]).T @ x + prior_prec
        q = q + np.linalg.solve(hess, rows(q).sum(0) - prior_prec @ q)
    return rows, prior_prec, q, hess


@pytest.mark.parametrize("seed", range(6))
def test_laplace_warmup_finds_coordinates_whose_gradients_are_mostly_zero(seed):
    # The binary covariate's gradient is zero for 80 % of rows. A first metric from the
    # median gave that coordinate a scale of the grid's lowest edge, and the noise then
    # held the others 5-25 posterior sds from the MAP. At the noise a chain's warm-up has
    # with ε = 1 over two chains, n = 10⁴ (the Laplace mode's whole chain budget), every
    # coordinate must come within 3 posterior sds of the MAP, with its width.
    from pymc_dp.accounting.gaussian import max_gaussian_mu
    from pymc_dp.steps.warmup import DEFAULT_WARMUP

    rows, prior_prec, map_, hess = _logistic_problem(10_000, 0)
    chain_mu = max_gaussian_mu(1.0, 1e-5) / 2
    with np.errstate(over="ignore"):
        res = laplace_warmup(
            np.random.default_rng(seed), np.zeros(3), rows, lambda q: -prior_prec @ q,
            lambda q: prior_prec, quantile=0.999,
            noise_multipliers=DEFAULT_WARMUP.noise_multipliers(chain_mu / DEFAULT_WARMUP.share),
        )
    sd = np.sqrt(np.diag(np.linalg.inv(hess)))
    assert np.all(np.abs(res.mean - map_) < 3.0 * sd)
    assert np.all(np.abs(np.sqrt(np.diag(np.linalg.inv(res.hessian))) / sd - 1.0) < 0.25)
