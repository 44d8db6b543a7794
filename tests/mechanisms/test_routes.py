"""Inference routes on small conjugate cases, against independent computations.

Case L: θ ~ N(0, 1), ten records x_i ~ N(θ, 1) clamped to [−4, 4], their sum released with
Laplace noise of scale 2 (sensitivity 8, ε = 4). The exact posterior is computed on a grid
by importance sampling over the latent data (common random numbers across θ), with no
PyMC involved. Data augmentation, the normal approximation and SMC-ABC must match it
within Monte Carlo error; a route using a noise scale off by 2 would not (exact sd 0.39
against 0.54). The naive plug-in must not.

Case G: the same records without clamping and a Gaussian mechanism: closed-form posterior.
"""

import functools

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from scipy import stats

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    data_augmentation_model,
    gaussian_release,
    infection_curve_release,
    laplace_release,
    linear_regression_records,
    naive_plugin_model,
    normal_approximation_model,
    record_moments,
    smc_abc_model,
)

# pm.Simulator runs its NumPy simulator in Numba's object mode; PyMC warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:Numba will use object mode:UserWarning")

N, BOUND, EPS = 10, 4.0, 4.0
SCALE = 2 * BOUND / EPS  # Laplace scale b = Δ/ε = 2


def params():
    pm.Normal("theta", 0.0, 1.0)


def records(params, n):
    x = pm.Normal("x", params["theta"], 1.0, shape=n)
    return {"s": pt.clip(x, -BOUND, BOUND)}


@functools.cache
def case_l():
    data = np.random.default_rng(7).normal(1.0, 1.0, size=N)
    rel = laplace_release(np.clip(data, -BOUND, BOUND).sum(), sensitivity=2 * BOUND,
                          epsilon=EPS, rng=8, name="s")
    spec = PrivatizedDataModel(params=params, records=records, releases={"s": rel}, n=N)
    return spec, rel


@functools.cache
def exact_l():
    """Posterior mean and sd by importance sampling over the latent records on a θ grid."""
    _, rel = case_l()
    grid = np.linspace(-4.0, 5.0, 901)
    z = np.random.default_rng(11).standard_normal((20_000, N))
    lik = np.array([
        stats.laplace.pdf(rel.value, loc=np.clip(t + z, -BOUND, BOUND).sum(1), scale=SCALE).mean()
        for t in grid
    ])
    post = lik * stats.norm.pdf(grid)
    post /= np.trapezoid(post, grid)
    mean = np.trapezoid(grid * post, grid)
    sd = np.sqrt(np.trapezoid((grid - mean) ** 2 * post, grid))
    return mean, sd


def _nuts(model, seed, draws=1000):
    with model:
        return pm.sample(draws, tune=draws, chains=2, cores=1, random_seed=seed, progressbar=False)


def _check_nuts(idata, mean, sd, k=4.0):
    s = az.summary(idata, var_names=["theta"], kind="all")
    assert float(s["r_hat"].iloc[0]) < 1.02
    got_mean, got_sd = float(s["mean"].iloc[0]), float(s["sd"].iloc[0])
    assert abs(got_mean - mean) < k * float(s["mcse_mean"].iloc[0]) + 0.01 * sd
    assert abs(got_sd - sd) < k * float(s["mcse_sd"].iloc[0]) + 0.01 * sd


def test_exact_reference_is_sensitive_to_the_noise_scale():
    """Sanity of the case: the mechanism matters, so a wrong scale would be caught."""
    mean, sd = exact_l()
    assert 0.3 < sd < 0.45
    naive_sd = 1 / np.sqrt(1 + N)  # noise ignored
    doubled_sd = 1 / np.sqrt(1 + N**2 / (N + 2 * (2 * SCALE) ** 2))  # CLT, scale 2b
    assert sd - naive_sd > 0.08 and doubled_sd - sd > 0.1


def test_data_augmentation_matches_importance_sampling():
    spec, _ = case_l()
    model = data_augmentation_model(spec)
    assert {v.name for v in model.free_RVs} == {"theta", "x"}
    _check_nuts(_nuts(model, 1), *exact_l())


def test_normal_approximation_matches_importance_sampling():
    spec, _ = case_l()
    for parameterization in ("centered", "noncentered"):
        model = normal_approximation_model(spec, moment_draws=512,
                                           parameterization=parameterization)
        _check_nuts(_nuts(model, 2, draws=600), *exact_l())


def test_smc_abc_with_mechanism_kernel_matches_importance_sampling():
    spec, _ = case_l()
    mean, sd = exact_l()
    with smc_abc_model(spec, simulations=30):
        idata = pm.sample_smc(600, chains=4, cores=1, random_seed=3, progressbar=False)
    theta = idata.posterior["theta"].values  # (chain, draw)
    # Monte Carlo error from the spread of independent SMC runs.
    se_mean = theta.mean(1).std(ddof=1) / 2
    se_sd = theta.std(1).std(ddof=1) / 2
    assert abs(theta.mean() - mean) < 4 * se_mean + 0.02 * sd
    assert abs(theta.std() - sd) < 4 * se_sd + 0.03 * sd


def test_naive_plugin_is_the_noise_free_posterior_and_is_wrong():
    spec, rel = case_l()
    idata = _nuts(naive_plugin_model(spec, moment_draws=512), 4, draws=600)
    # Its own closed form: N(θ; 0, 1) N(s_dp; nθ, n) (clamping is negligible here).
    _check_nuts(idata, float(rel.value) / (1 + N), 1 / np.sqrt(1 + N))
    mean, sd = exact_l()
    assert idata.posterior["theta"].std() < 0.85 * sd


def test_routes_agree_on_a_gaussian_mechanism_in_closed_form():
    """Normal approximation (marginalised) and the paper's SMC-ABC with a Gaussian kernel,
    here fed by a NumPy simulator, against the closed form."""
    sigma, tau = 3.0, 2.0
    rel = gaussian_release(12.0, sensitivity=1.0, sigma=sigma, rng=0, name="s")

    def prior():
        pm.Normal("theta", 0.0, tau)

    def rows(params, n):
        return {"s": pm.Normal("x", params["theta"], 1.0, shape=n)}

    def simulate(rng, values, size):
        return {"s": rng.normal(N * values["theta"], np.sqrt(N), size=size)}

    def closed_form(noise_var):
        precision = 1 / tau**2 + N**2 / (N + noise_var)
        return N * float(rel.value) / (N + noise_var) / precision, precision**-0.5

    spec = PrivatizedDataModel(params=prior, records=rows, releases={"s": rel}, n=N)
    model = normal_approximation_model(spec, moment_draws=256)
    assert [v.name for v in model.free_RVs] == ["theta"]  # the sum is integrated out
    _check_nuts(_nuts(model, 5, draws=600), *closed_form(sigma**2))

    bandwidth = 1.5  # Gaussian kernel: the target is the posterior with noise σ² + h²
    spec = PrivatizedDataModel(params=prior, simulator=simulate, releases={"s": rel}, n=N)
    with smc_abc_model(spec, simulations=20, kernel="gaussian", bandwidth=bandwidth):
        idata = pm.sample_smc(600, chains=4, cores=1, random_seed=6, progressbar=False)
    theta = idata.posterior["theta"].values
    mean, sd = closed_form(sigma**2 + bandwidth**2)
    assert abs(theta.mean() - mean) < 4 * theta.mean(1).std(ddof=1) / 2 + 0.02 * sd
    assert abs(theta.std() - sd) < 4 * theta.std(1).std(ddof=1) / 2 + 0.03 * sd


def test_smc_abc_is_reproducible_with_a_seed():
    spec, _ = case_l()
    runs = []
    for _ in range(2):
        with smc_abc_model(spec, simulations=5):
            idata = pm.sample_smc(100, chains=1, cores=1, random_seed=9, progressbar=False)
        runs.append(idata.posterior["theta"].values)
    assert np.array_equal(runs[0], runs[1])


def test_data_augmentation_model_is_prior_times_records_times_mechanism():
    """The DA log density, written out by hand, for 'mean' aggregation of two releases."""
    rel_a = laplace_release([0.4], sensitivity=0.8, epsilon=1.0, rng=0, name="a")
    rel_b = gaussian_release(2.0, sensitivity=1.0, sigma=0.5, rng=1, name="b")

    def rows(params, n):
        x = pm.Normal("x", params["theta"], 1.0, shape=n)
        return {"a": pt.clip(x, -4, 4)[:, None], "b": x**2}

    spec = PrivatizedDataModel(params=params, records=rows, releases={"a": rel_a, "b": rel_b},
                               n=5, aggregate={"a": "mean", "b": "sum"})
    model = data_augmentation_model(spec)
    x = np.array([0.3, -1.0, 5.0, 0.2, 1.1])
    point = {"theta": 0.7, "x": x}
    expected = (
        stats.norm.logpdf(0.7) + stats.norm.logpdf(x, 0.7).sum()
        + stats.laplace.logpdf(rel_a.value[0], np.clip(x, -4, 4).mean(), 0.8)
        + stats.norm.logpdf(rel_b.value, (x**2).sum(), 0.5)
    )
    assert model.compile_logp()(point) == pytest.approx(expected)


def test_record_moments_match_monte_carlo_for_clamped_regression_records():
    """The RQMC moments of the regression statistics (clamping included) against plain MC."""
    mean_x, beta = np.array([0.9, -1.17]), np.array([-1.79, -2.89, -0.66])

    def prior():
        pm.Normal("beta", 0.0, 1.0, shape=3)

    def rows(params, n):
        b = params["beta"]
        x = pm.Normal("x", mean_x, 1.0, shape=(n, 2))
        y = pm.Normal("y", b[0] + x @ b[1:], np.sqrt(2.0), shape=n)
        return {"s": linear_regression_records(x, y, x_bounds=(-3, 3), y_bounds=(-5, 5))}

    rel = laplace_release(np.zeros(9), sensitivity=0.13, epsilon=1.0, rng=0, name="s")
    spec = PrivatizedDataModel(params=prior, records=rows, releases={"s": rel}, n=100)
    with pm.Model():
        b = pm.Normal("beta", 0.0, 1.0, shape=3)
        mean, cov = record_moments(spec, {"beta": b}, draws=2048)
        got_mean, got_cov = pytensor.function([b], [mean, cov], mode="FAST_COMPILE")(beta)
    g = np.random.default_rng(0)
    x = g.normal(mean_x, 1.0, size=(100_000, 2))
    y = beta[0] + x @ beta[1:] + g.normal(0.0, np.sqrt(2.0), size=100_000)
    t = linear_regression_records(x, y, x_bounds=(-3, 3), y_bounds=(-5, 5))
    se = t.std(0) / np.sqrt(len(t))
    assert np.all(np.abs(got_mean - t.mean(0)) < 5 * se + 1e-4)
    assert np.allclose(got_cov, np.cov(t.T, bias=True), atol=3e-3, rtol=0.03)


def test_route_inputs_are_checked():
    spec, rel = case_l()
    with pytest.raises(ValueError, match="n must be an integer"):
        PrivatizedDataModel(params=params, records=records, releases={"s": rel}, n=0)
    with pytest.raises(ValueError, match="non-empty mapping"):
        PrivatizedDataModel(params=params, records=records, releases={}, n=3)
    with pytest.raises(ValueError, match="aggregate"):
        PrivatizedDataModel(params=params, records=records, releases={"s": rel}, n=3,
                            aggregate="median")
    with pytest.raises(ValueError, match="or a simulator"):
        PrivatizedDataModel(params=params, releases={"s": rel}, n=3)
    bad = PrivatizedDataModel(params=params, records=lambda p, n: {"t": p["theta"] * pt.ones(n)},
                              releases={"s": rel}, n=3)
    with pytest.raises(ValueError, match="one entry per release"):
        data_augmentation_model(bad)
    bad = PrivatizedDataModel(params=params, records=lambda p, n: {"s": pt.ones((n, 2))},
                              releases={"s": rel}, n=3)
    with pytest.raises(ValueError, match=r"must have shape \(n\)"):
        data_augmentation_model(bad)
    two = laplace_release([1.0, 2.0], sensitivity=1.0, epsilon=1.0, rng=0)
    bad = PrivatizedDataModel(params=params, records=lambda p, n: {"s": pt.ones((n, 3))},
                              releases={"s": two}, n=3)
    with pytest.raises(ValueError, match="per-record shape"):
        data_augmentation_model(bad)
    with pytest.raises(ValueError, match="bandwidth"):
        smc_abc_model(spec, kernel="gaussian")
    with pytest.raises(ValueError, match="kernel"):
        smc_abc_model(spec, kernel="uniform")
    with pytest.raises(ValueError, match="parameterization"):
        normal_approximation_model(spec, parameterization="sideways")

    def counts(params, n):
        return {"s": pm.Poisson("k", pt.exp(params["theta"]), shape=n)}

    discrete = PrivatizedDataModel(params=params, records=counts, releases={"s": rel}, n=3)
    with pytest.raises(NotImplementedError, match="moments="):
        normal_approximation_model(discrete)
    simulated_only = PrivatizedDataModel(params=params, simulator=lambda *a: None,
                                         releases={"s": rel}, n=3)
    with pytest.raises(ValueError, match="needs records"):
        data_augmentation_model(simulated_only)


def test_normal_approximation_with_given_moments_and_mean_aggregation():
    """User-supplied per-record moments; a released mean of n records; Gaussian noise
    integrated out: s_dp ~ N(m(θ), C(θ)/n + σ²), written out by hand."""
    rel = gaussian_release(0.8, sensitivity=0.1, sigma=0.3, rng=0, name="m")

    def moments(params):
        t = params["theta"]
        return pt.stack([t]), pt.reshape(1.0 + t**2, (1, 1))

    spec = PrivatizedDataModel(params=params, moments=moments, simulator=lambda *a: None,
                               releases={"m": rel}, n=20, aggregate="mean")
    model = normal_approximation_model(spec)
    expected = stats.norm.logpdf(0.5) + stats.norm.logpdf(
        float(rel.value), 0.5, np.sqrt((1 + 0.25) / 20 + 0.09))
    assert model.compile_logp()({"theta": 0.5}) == pytest.approx(expected, rel=1e-6)


def test_smc_abc_mechanism_kernel_is_the_mechanism_log_density():
    """With a simulator that always returns the same statistic, the ABC log-likelihood is
    exactly the mechanism's log density: Laplace and infection-curve releases together."""
    curve = np.array([5.0, 120.0, 400.0])
    lap = laplace_release([2.0], sensitivity=1.0, epsilon=2.0, rng=0, name="a")
    sir = infection_curve_release(curve, population=1000, n_trials=500, m=150, rng=1, name="c")

    def simulate(rng, values, size):
        t = values["theta"]
        return {"a": np.full((size, 1), t), "c": np.tile(curve * (1 + t), (size, 1))}

    spec = PrivatizedDataModel(params=params, simulator=simulate,
                               releases={"a": lap, "c": sir}, n=1)
    model = smc_abc_model(spec, simulations=3)
    theta = 0.3
    p = (curve * (1 + theta) + 150) / (1000 + 300)
    expected = (stats.laplace.logpdf(lap.value[0], theta, 0.5)
                + stats.binom.logpmf(sir.value, 500, p).sum())
    got = model.compile_logp(vars=model.observed_RVs)({"theta": theta})
    assert got == pytest.approx(expected, rel=1e-9)
