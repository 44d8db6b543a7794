"""Kinks in every row's log-likelihood (pymc_dp.model.kinks), found from the graph alone."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_dp.model import PrivateModel

RNG = np.random.default_rng(0)
N = 40
X = RNG.normal(size=N)
Y = RNG.normal(size=N)
COUNTS = RNG.poisson(2.0, size=N)


def _quantile_regression():
    a, b = pm.Normal("a"), pm.Normal("b")
    pm.AsymmetricLaplace("y", mu=a + b * X, b=1.0, q=0.9, observed=Y)


def _laplace():
    pm.Laplace("y", pm.Normal("m"), 1.0, observed=Y)


def _rectified_mean():
    pm.Normal("y", pt.maximum(pm.Normal("a") * X, 0.0), 1.0, observed=Y)


def _kink_inside_an_inner_graph():
    def logp(value, mu):
        return -pt.abs(value - mu)

    pm.CustomDist("y", pm.Normal("m"), logp=logp, observed=Y)


def _normal_regression():
    pm.Normal("y", pm.Normal("a") + pm.Normal("b") * X, pm.HalfNormal("s"), observed=Y)


def _abs_of_a_parameter_and_of_the_data():
    # (|a| bends where a = 0 for every row at once, |x| does not move with θ: no row's own kink)
    pm.Normal("y", pt.abs(pm.Normal("a")) * pt.abs(X), 1.0, observed=Y)


def _censored():
    pm.Censored("y", pm.Normal.dist(pm.Normal("a"), pm.HalfNormal("s")), lower=-1, upper=1,
                observed=np.clip(Y, -1, 1))


def _normal_mixture():
    w = pm.Dirichlet("w", np.ones(2))
    mu = pm.Normal("mu", [-1, 1], 1, shape=2, transform=pm.distributions.transforms.ordered)
    pm.NormalMixture("y", w, mu, 1.0, observed=Y)


def _zero_inflated():
    pm.ZeroInflatedPoisson("y", pm.Beta("p", 1, 1), pm.HalfNormal("mu"), observed=COUNTS)


def _ordered_logistic():
    cut = pm.Normal("cut", [-1, 1], 1, shape=2, transform=pm.distributions.transforms.ordered)
    pm.OrderedLogistic("y", pm.Normal("b") * X, cut, observed=COUNTS.clip(0, 2))


def _student_t():
    pm.StudentT("y", nu=pm.Gamma("nu", 2, 0.1), mu=pm.Normal("a"), sigma=pm.HalfNormal("s"),
                observed=Y)


def _kinks(build):
    with pm.Model() as model:
        build()
    return PrivateModel(model).likelihood_kinks()


@pytest.mark.parametrize("build, found", [
    (_quantile_regression, ("Sign",)),
    (_laplace, ("Abs",)),
    (_rectified_mean, ("Maximum",)),
    (_kink_inside_an_inner_graph, ("Abs",)),
])
def test_a_likelihood_that_bends_in_every_row_is_found(build, found):
    assert _kinks(build) == found


@pytest.mark.parametrize("build", [
    _normal_regression, _abs_of_a_parameter_and_of_the_data, _censored, _normal_mixture,
    _zero_inflated, _ordered_logistic, _student_t,
])
def test_smooth_likelihoods_and_numerical_guards_are_not_kinks(build):
    # Censored and zero-inflated likelihoods switch on the data, the mixture's stable
    # log-sum-exp takes a max that cancels out, OrderedLogistic clips probabilities that
    # are in [0, 1] already: none bends a row's log-likelihood in θ.
    assert _kinks(build) == ()
