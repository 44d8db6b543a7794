"""Kinks in every row's log-likelihood (pymc_dp.model.kinks), found from the graph alone."""

import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pytensor.compile.builders import OpFromGraph

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model import PrivateModel
from pymc_dp.model.kinks import kinks_of

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


@pytest.mark.parametrize("largest", [1.0, 6.0])
def test_the_decision_never_depends_on_the_values_of_numpy_data(largest):
    # (an independent review: PyMC folds expressions of NumPy arrays by value when it builds
    # the log-likelihood, so a switch on a covariate that no row takes lost its branch, and
    # with it the abs: the kink, which changes the releases the warm-up plans, showed
    # whether some covariate exceeded 5)
    x = np.r_[RNG.uniform(0.0, 1.0, N - 1), largest]

    def build():
        a = pm.Normal("a")
        pm.Normal("y", pt.switch(x > 5.0, pt.abs(a - x), a * x), 1.0, observed=Y)

    assert _kinks(build) == ("Abs",)


def test_a_kink_inside_an_inner_graph_that_reads_theta_and_the_row_apart_is_found():
    a, b = pt.scalar("a"), pt.scalar("b")
    bent = OpFromGraph([a, b], [pt.abs(a - b)])
    theta, x = pt.vector("theta"), pt.vector("x")
    assert kinks_of(bent(theta[0], x[0]), [theta], [x]) == ("Abs",)
    assert kinks_of(bent(theta[0], theta[1]), [theta], [x]) == ()


def test_nested_inner_graphs_are_searched_once_each():
    # (each level calls the one below twice: searched naively, 2^depth inner graphs)
    a, b = pt.scalar("a"), pt.scalar("b")
    inner = OpFromGraph([a, b], [pt.abs(a - b)])
    for _ in range(22):
        a2, b2 = pt.scalar(), pt.scalar()
        inner = OpFromGraph([a2, b2], [inner(a2, b2) + inner(a2 + 1.0, b2)])
    theta, x = pt.vector("theta"), pt.vector("x")
    start = time.process_time()
    assert kinks_of(inner(theta[0] * x[0], x[0]), [theta], [x]) == ("Abs",)
    assert time.process_time() - start < 5.0


@pytest.mark.parametrize("largest", [1.0, 6.0])
def test_a_per_row_array_inside_a_distributions_own_graph_never_decides(largest):
    # (a second review: an array captured by CustomDist(dist=...) is folded by value when
    # PyMC builds the density: such a model is refused, whatever x)
    x = np.r_[RNG.uniform(0.0, 1.0, N - 1), largest]

    def build():
        def dist(a, size):
            return pt.switch(x > 5.0, pm.Laplace.dist(a, 1.0, size=size),
                             pm.Normal.dist(a, 1.0, size=size))

        pm.CustomDist("y", pm.Normal("a"), dist=dist, observed=Y)

    with pytest.raises(UnsupportedModelError, match="Pass the array as a parameter"):
        _kinks(build)
