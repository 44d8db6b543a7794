"""Inverse CDFs of simulated outcomes (pymc_dp.model.inverse_cdfs) against SciPy's."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from scipy import stats

from pymc_dp.model.inverse_cdfs import inverse_cdf

U = np.array([1e-12, 0.001, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1 - 1e-12])


@pytest.mark.parametrize("lower, upper", [
    (0.0, None), (None, 0.0), (-1.0, 3.0), (-np.inf, np.inf),
    (25.0, None),  # (twelve sds into the upper tail: only log space keeps the digits)
    (None, -25.0), (9.0, 9.5),
])
@pytest.mark.parametrize("shape", [None, len(U)])
def test_a_truncated_normal_matches_scipy_with_infinite_bounds_read_elementwise(
    lower, upper, shape
):
    # (with shape=, as every model with observed= has, PyMC 6.4's own inverse CDF gave NaN
    # above u ≈ 0.3 for a lower bound alone: the bound is broadcast and not a constant)
    mu, sigma = 1.0, 2.0
    if lower is not None and upper is not None and np.isinf(lower) and np.isinf(upper):
        y = pm.TruncatedNormal.dist(mu, sigma, lower=lower, upper=upper, shape=shape)
    else:
        y = pm.Truncated.dist(pm.Normal.dist(mu, sigma), lower=lower, upper=upper, shape=shape)
    got = inverse_cdf(y, pt.as_tensor(U)).eval()
    a = -np.inf if lower is None else (lower - mu) / sigma
    b = np.inf if upper is None else (upper - mu) / sigma
    want = stats.truncnorm(a, b, loc=mu, scale=sigma).ppf(U)
    # (to 1e-6 of a posterior-sized scale: the outcomes only feed the gradient rows)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_bounds_that_differ_row_by_row_are_read_row_by_row():
    lower = np.array([-np.inf, 0.0, -2.0, 5.0])
    upper = np.array([np.inf, np.inf, 1.0, np.inf])
    mu = np.array([0.0, 1.0, -1.0, 0.5])
    y = pm.TruncatedNormal.dist(mu, 1.5, lower=lower, upper=upper)
    u = np.array([0.8, 0.6, 0.4, 0.95])
    got = inverse_cdf(y, pt.as_tensor(u)).eval()
    want = stats.truncnorm((lower - mu) / 1.5, (upper - mu) / 1.5, loc=mu, scale=1.5).ppf(u)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_uniforms_outside_the_unit_interval_give_nan_and_other_distributions_go_to_pymc():
    y = pm.Truncated.dist(pm.Normal.dist(0.0, 1.0), lower=0.0, shape=2)
    assert np.all(np.isnan(inverse_cdf(y, pt.as_tensor([-0.1, 1.1])).eval()))
    g = pm.Gamma.dist(2.0, 1.0, shape=3)
    np.testing.assert_allclose(
        inverse_cdf(g, pt.as_tensor([0.1, 0.5, 0.9])).eval(),
        stats.gamma(2.0).ppf([0.1, 0.5, 0.9]), rtol=1e-6,
    )


# Counts: parameters spanning the supports' scales (a Poisson mean of 10⁻⁶ to 10⁶; a
# negative binomial's n of 0.02 to 400, the gamma-like and the Poisson-like tails; a
# binomial of one to 10⁶ trials), at every uniform of U.
MEANS = np.array([1e-6, 0.03, 0.7, 3.0, 40.0, 1e3, 1e6])


def _grid(*params):
    return [np.ravel(a) for a in np.meshgrid(*params, U, indexing="ij")]


@pytest.mark.parametrize("family", ["poisson", "negative_binomial", "binomial"])
def test_a_count_matches_scipys_ppf_exactly(family):
    if family == "poisson":
        mu, u = _grid(MEANS)
        y, want = pm.Poisson.dist(mu), stats.poisson.ppf(u, mu)
    elif family == "negative_binomial":
        mu, alpha, u = _grid(MEANS[:-1], [0.02, 0.5, 3.0, 400.0])
        y = pm.NegativeBinomial.dist(mu=mu, alpha=alpha)
        want = stats.nbinom.ppf(u, alpha, alpha / (alpha + mu))
    else:
        n, p, u = _grid([1, 7, 300, 10**6], [0.001, 0.3, 0.97])
        y, want = pm.Binomial.dist(n, p), stats.binom.ppf(u, n, p)
    got = inverse_cdf(y, pt.as_tensor(u)).eval()
    # At 1 − 10⁻¹² the CDF is 1 to double precision over a range of counts, where SciPy's
    # ppf may sit a few counts higher (either is the quantile to the digits there are), and
    # the negative binomial's search may miss the bracket: NaN, the outcome left out.
    edge = u == U[-1]
    np.testing.assert_array_equal(got[~edge], want[~edge])
    found = edge & ~np.isnan(got)
    np.testing.assert_allclose(got[found], want[found], rtol=1e-5)
    assert family == "negative_binomial" or found.sum() == edge.sum()


def test_a_count_is_nan_outside_its_parameters_range_or_bracket():
    u = pt.as_tensor([0.5, 0.5])
    assert np.all(np.isnan(inverse_cdf(pm.Poisson.dist([-1.0, np.nan]), u).eval()))
    assert np.all(np.isnan(inverse_cdf(pm.Binomial.dist(5, [-0.1, 1.1]), u).eval()))
    # (a Poisson mean beyond 2³² counts of bracket: NaN, never a wrong count)
    assert np.isnan(inverse_cdf(pm.Poisson.dist(1e10), pt.as_tensor([0.5])).eval()[0])
    assert np.all(np.isnan(inverse_cdf(pm.Poisson.dist(3.0, shape=2),
                                       pt.as_tensor([-0.1, 1.1])).eval()))
