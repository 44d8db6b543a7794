"""PrivateModel.loglik_rows: per-datum log-likelihoods of a batch of rows, in O(batch)."""

import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_dp.model import PrivateModel

N = 60
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 2))
Y = X @ [1.0, -2.0] + RNG.normal(size=N)
Z = RNG.normal(size=(N, 2))


def _regression_pm_data():
    Xd = pm.Data("X", X)
    beta = pm.Normal("beta", 0, 10, shape=2)
    sigma = pm.HalfNormal("sigma", 1)
    pm.Normal("y", Xd @ beta, sigma, observed=Y)


def _shape_from_observed():
    mu = pm.Normal("mu")
    pm.Normal("y", mu, 1, observed=Y, shape=Y.shape)


def _dims():
    mu = pm.Normal("mu")
    pm.Normal("y", mu, 1, observed=Y, dims="obs")


def _mvnormal_observed():
    m = pm.Normal("m", shape=2)
    pm.MvNormal("z", mu=m, cov=np.eye(2), observed=Z)


def _specify_shape_on_observed():
    mu = pm.Normal("mu")
    pm.Normal("y", mu, 1, observed=pt.specify_shape(pt.as_tensor(Y), (N,)))


def _specify_shape_on_pm_data():
    Xd = pm.Data("X", X)
    beta = pm.Normal("beta", 0, 10, shape=2)
    pm.Normal("y", pt.specify_shape(Xd, (N, None)) @ beta, 1, observed=Y)


def _matrix_observed_and_size():
    mu = pm.Normal("mu", shape=2)
    pm.StudentT("z", nu=4, mu=mu, sigma=1, observed=Z, size=(N, 2))


def _logistic_regression():
    Xd = pm.Data("X", X)
    beta = pm.Normal("beta", 0, 1, shape=2)
    pm.Bernoulli("y", logit_p=Xd @ beta, observed=(Y > 0).astype(int))


def _censored_and_mixture():
    mu = pm.Normal("mu")
    pm.Censored("c", pm.Normal.dist(mu, 1), lower=-1, upper=1, observed=np.clip(Y, -1, 1))
    w = pm.Dirichlet("w", np.ones(2))
    mus = pm.Normal("mus", [-1, 1], 1)
    pm.NormalMixture("mix", w, mus, 1, observed=Z[:, 0])


def _observed_depends_on_observed():
    mu = pm.Normal("mu")
    y1 = pm.Normal("y1", mu, 1, observed=Y)
    pm.Normal("y2", y1, 1, observed=Y + 1)


def _ordered_logistic():
    # PyMC's OrderedLogistic leaves a ViewOp (an identity) in the graph of a batch
    cut = pm.Normal("cut", [-1, 1], 5, transform=pm.distributions.transforms.ordered)
    eta = pm.Data("X", X) @ pm.Normal("b", shape=2)
    pm.OrderedLogistic("y", eta=eta, cutpoints=cut, observed=np.digitize(Y, [-1, 1]))


def _censored_numpy_per_row_bounds():
    # the symbolic distribution pins its bound to n with a SpecifyShape
    upper = np.where(Y > 1.0, 1.0, np.inf)
    pm.Censored("c", pm.Normal.dist(pm.Normal("mu"), 1), upper=upper, observed=np.minimum(Y, 1))


MODELS = [
    _ordered_logistic,
    _censored_numpy_per_row_bounds,
    _regression_pm_data,
    _shape_from_observed,
    _dims,
    _mvnormal_observed,
    _specify_shape_on_observed,
    _specify_shape_on_pm_data,
    _matrix_observed_and_size,
    _logistic_regression,
    _censored_and_mixture,
    _observed_depends_on_observed,
]


@pytest.mark.parametrize("build", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_rows_match_the_full_loglik_even_when_the_graph_pins_n(build):
    with pm.Model(coords={"obs": np.arange(N)}) as m:
        build()
    pmodel = PrivateModel(m)
    q = np.random.default_rng(1).normal(size=pmodel.dim)
    full = pmodel.loglik(q)
    # the full batch equals the full function; subsets (and a single row) are its rows
    np.testing.assert_allclose(pmodel.loglik_rows(q, np.arange(N)), full, rtol=1e-12)
    for rows in (np.array([5, 3, 41]), np.array([7]), np.random.default_rng(2).permutation(N)[:17]):
        np.testing.assert_allclose(pmodel.loglik_rows(q, rows), full[rows], rtol=1e-12)


def test_numpy_covariates_baked_into_the_model_are_data_and_follow_the_batch():
    with pm.Model() as m:
        beta = pm.Normal("beta", 0, 10, shape=2)
        pm.Normal("y", X @ beta, 1, observed=Y)  # X is a constant of length n, not pm.Data
    pmodel = PrivateModel(m)
    assert [d.label for d in pmodel.datum_inputs][1:] == ["a NumPy array with one row per individual (#0, in the log-likelihood of 'y')"]
    q = np.array([0.4, -1.2])
    full = pmodel.loglik(q)
    rows = np.array([5, 3, 41])
    np.testing.assert_allclose(pmodel.loglik_rows(q, rows), full[rows], rtol=1e-12)


def test_a_numpy_covariate_used_twice_and_an_integer_pm_data_observation_follow_the_batch():
    # Found by the third review: PyMC merges the two equal constants in the log-likelihood
    # but not in the model's graph, and stores an integer pm.Data observation as Cast(y).
    rng = np.random.default_rng(13)
    x = rng.normal(size=N)
    counts = rng.poisson(np.exp(0.3 * x))
    with pm.Model() as twice:
        b = pm.Normal("b", shape=2)
        pm.Normal("y", b[0] * x + b[1] * x, 1, observed=rng.normal(size=N))
    with pm.Model() as cast:
        b = pm.Normal("b")
        pm.Poisson("y", pm.math.exp(b * x), observed=pm.Data("counts", counts))
    for m, q in ((twice, np.array([0.3, -0.2])), (cast, np.array([0.2]))):
        pmodel = PrivateModel(m)
        rows = np.array([3, 7, 11])
        np.testing.assert_allclose(pmodel.loglik_rows(q, rows), pmodel.loglik(q)[rows], rtol=1e-12)


@pytest.mark.parametrize("mean", ["b * log(x)", "b * integer covariate", "b * x ** 2 + b * x"])
def test_numpy_expressions_of_covariates_follow_the_batch(mean):
    # PyMC would fold log(x), an integer array's conversion to float, x ** 2 into new
    # constants; the likelihood is built on stand-ins for x, so batches select x's rows.
    x = RNG.uniform(1, 2, size=N)
    smoker = RNG.integers(0, 2, size=N)
    with pm.Model() as m:
        b = pm.Normal("b")
        mu = {"b * log(x)": b * pt.log(x), "b * integer covariate": b * smoker,
              "b * x ** 2 + b * x": b * x**2 + b * x}[mean]
        pm.Normal("y", mu, 1, observed=Y)
    pmodel = PrivateModel(m)
    q, rows = np.array([0.7]), np.array([5, 0, 17])
    np.testing.assert_allclose(pmodel.loglik_rows(q, rows), pmodel.loglik(q)[rows])


def test_bad_rows_are_refused():
    with pm.Model() as m:
        _shape_from_observed()
    pmodel = PrivateModel(m)
    q = np.zeros(1)
    with pytest.raises(ValueError, match="integer"):
        pmodel.loglik_rows(q, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"\[0, n\)"):
        pmodel.loglik_rows(q, np.array([0, N]))


def test_a_batch_costs_order_b_not_order_n():
    n, b = 1_000_000, 1000
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, 2))
    y = x @ [1.0, -2.0] + rng.normal(size=n)
    with pm.Model() as m:
        Xd = pm.Data("X", x)
        beta = pm.Normal("beta", 0, 10, shape=2)
        pm.Normal("y", Xd @ beta, 1, observed=y)
    pmodel = PrivateModel(m)
    pmodel.compile_rows()
    q = np.array([1.0, -2.0])
    rows = rng.choice(n, size=b, replace=False)

    def best_time(f, repeats):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return min(times)

    full = best_time(lambda: pmodel.loglik(q), 5)
    batch = best_time(lambda: pmodel.loglik_rows(q, rows), 50)
    # ideal ratio n/b = 1000; a batch evaluation that touched all n rows would be ~1
    assert full / batch > 20, (full, batch)
