"""Mechanism likelihoods: log densities match scipy and the release's sampling distribution."""

import numpy as np
import pymc as pm
import pytest

from scipy import stats

from pymc_dp.mechanisms import (
    GaussianMechanism,
    InfectionCurveMechanism,
    LaplaceMechanism,
    gaussian_release,
    infection_curve_release,
    laplace_release,
    mechanism_from_release,
)


def _logp(rv, value):
    return pm.logp(rv, value).eval()


def test_laplace_log_density_matches_scipy():
    mu, value = np.array([0.3, -2.0, 5.0]), np.array([0.1, 1.0, 5.5])
    rv = LaplaceMechanism.dist(mu, sensitivity=0.6, epsilon=0.4)
    assert np.allclose(_logp(rv, value), stats.laplace.logpdf(value, loc=mu, scale=1.5))


def test_gaussian_log_density_matches_scipy():
    mu, value = np.array([0.3, -2.0]), np.array([0.1, 1.0])
    rv = GaussianMechanism.dist(mu, sensitivity=0.5, noise_multiplier=3.0)
    assert np.allclose(_logp(rv, value), stats.norm.logpdf(value, loc=mu, scale=1.5))
    rv = GaussianMechanism.dist(mu, sigma=2.0)
    assert np.allclose(_logp(rv, value), stats.norm.logpdf(value, loc=mu, scale=2.0))


def test_infection_curve_log_probability_matches_scipy():
    infected = np.array([0.0, 37.5, 900.0])
    value = np.array([40, 80, 700])
    rv = InfectionCurveMechanism.dist(infected, population=1000, n_trials=1000, m=200)
    p = (infected + 200) / 1400
    assert np.allclose(_logp(rv, value), stats.binom.logpmf(value, 1000, p))
    # m derived from ε with L = 3 time points: m = n_s L / ε.
    rv = InfectionCurveMechanism.dist(infected, population=1000, n_trials=1000, epsilon=15.0,
                                      n_points=3)
    assert np.allclose(_logp(rv, value), stats.binom.logpmf(value, 1000, (infected + 200) / 1400))


def test_laplace_likelihood_is_the_distribution_of_the_release():
    """Releases of a fixed statistic are distributed as the likelihood built from them says."""
    stat = 2.5
    values = np.array([
        laplace_release(stat, sensitivity=1.0, epsilon=0.8, rng=s).value for s in range(4000)
    ])
    rel = laplace_release(stat, sensitivity=1.0, epsilon=0.8, rng=0)
    with pm.Model():
        rv = LaplaceMechanism.from_release("s", mu=stat, release=rel)
    cdf = pm.logcdf(rv, np.sort(values)).eval()
    assert stats.kstest(np.sort(values), lambda v: np.exp(pm.logcdf(rv, v).eval())).pvalue > 1e-3
    assert np.all(np.isfinite(cdf))
    # The same test rejects a likelihood whose scale is off by 2.
    wrong = LaplaceMechanism.dist(stat, sensitivity=2.0, epsilon=0.8)
    assert stats.kstest(values, lambda v: np.exp(pm.logcdf(wrong, v).eval())).pvalue < 1e-6


def test_gaussian_likelihood_is_the_distribution_of_the_release():
    stat = np.array([1.0, -1.0])
    draws = np.array([
        gaussian_release(stat, sensitivity=1.0, sigma=0.7, rng=s).value for s in range(3000)
    ])
    rel = gaussian_release(stat, sensitivity=1.0, sigma=0.7, rng=0)
    with pm.Model():
        rv = GaussianMechanism.from_release("s", mu=stat, release=rel)
    for j in range(2):
        def cdf(v, j=j):
            return np.exp(pm.logcdf(rv, np.column_stack([v, v])).eval()[:, j])

        assert stats.kstest(draws[:, j], cdf).pvalue > 1e-3
        assert stats.kstest(draws[:, j], stats.norm(stat[j], 1.4).cdf).pvalue < 1e-6


def test_infection_curve_likelihood_is_the_distribution_of_the_release():
    infected = np.array([10, 400])
    kwargs = dict(population=1000, n_trials=50, m=100)
    draws = np.array(
        [infection_curve_release(infected, **kwargs, rng=s).value for s in range(4000)]
    )
    rel = infection_curve_release(infected, **kwargs, rng=0)
    with pm.Model():
        rv = InfectionCurveMechanism.from_release("s", infected=infected, release=rel)
    support = np.arange(51)
    pmf = np.exp(pm.logp(rv, np.tile(support[:, None], (1, 2))).eval())  # (51, 2)
    for j in range(2):
        counts = np.bincount(draws[:, j].astype(int), minlength=51)
        expected = 4000 * pmf[:, j]
        keep = expected > 5
        chi2 = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_from_release_takes_noise_parameters_and_value_from_the_release():
    rel = laplace_release([1.0, 2.0], sensitivity=0.5, epsilon=2.0, rng=0)
    with pm.Model() as model:
        mu = pm.Normal("mu", shape=2)
        obs = mechanism_from_release("s", mu, rel)
    assert np.array_equal(model.rvs_to_values[obs].data, rel.value)
    point = {"mu": np.array([0.5, 0.5])}
    expected = stats.laplace.logpdf(rel.value, loc=0.5, scale=0.25).sum()
    assert model.compile_logp(vars=[obs])(point) == pytest.approx(expected)


def test_likelihood_refuses_bad_parameters_and_mismatched_releases():
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMechanism.dist(0.0, sensitivity=1.0, epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMechanism.dist(0.0, sensitivity=1.0, epsilon=-2.0)
    with pytest.raises(ValueError, match="sensitivity"):
        LaplaceMechanism.dist(0.0, sensitivity=0.0, epsilon=1.0)
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism.dist(0.0, sigma=-1.0)
    with pytest.raises(ValueError, match="both sensitivity and noise_multiplier"):
        GaussianMechanism.dist(0.0, sensitivity=1.0)
    rel = gaussian_release([1.0, 2.0], sensitivity=1.0, sigma=1.0, rng=0)
    with pm.Model():
        with pytest.raises(ValueError, match="models 'laplace' releases"):
            LaplaceMechanism.from_release("s", mu=0.0, release=rel)
        with pytest.raises(ValueError, match="shape"):
            GaussianMechanism.from_release("s", mu=np.zeros(3), release=rel)
        with pytest.raises(ValueError, match="needs a Release"):
            GaussianMechanism.from_release("s", mu=0.0, release=rel.value)


def test_infection_curve_likelihood_gives_the_grid_posterior():
    """Inference on an epidemic's size from the Prop 4 release (ε = 10), against a grid."""
    population, n_trials, m = 1000, 1000, 1000
    bump = np.exp(-((np.arange(1, 11) - 5.0) ** 2) / 8.0)  # known curve shape, L = 10
    rel = infection_curve_release(np.round(population * 0.3 * bump), population=population,
                                  n_trials=n_trials, m=m, rng=3)
    assert rel.epsilon == 10.0
    with pm.Model():
        size = pm.Uniform("size", 0.0, 0.6)
        InfectionCurveMechanism.from_release("s", infected=population * size * bump, release=rel)
        idata = pm.sample(600, tune=600, chains=2, cores=1, random_seed=4, progressbar=False)
    grid = np.linspace(0.0, 0.6, 6001)
    p = (population * grid[:, None] * bump + m) / (population + 2 * m)
    log_post = stats.binom.logpmf(rel.value, n_trials, p).sum(axis=1)
    post = np.exp(log_post - log_post.max())
    post /= np.trapezoid(post, grid)
    mean = np.trapezoid(grid * post, grid)
    sd = np.sqrt(np.trapezoid((grid - mean) ** 2 * post, grid))
    draws = idata.posterior["size"].values.ravel()
    assert abs(draws.mean() - mean) < 0.15 * sd  # ESS > 500: MC error about 0.04 sd
    assert abs(draws.std() / sd - 1) < 0.1
