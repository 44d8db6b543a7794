"""Outcomes simulated row by row (pymc_dp.model.replicates): which models have them, that
replicate j reads person j's record only, and that their gradients have mean zero."""

import warnings

import numpy as np
import pymc as pm
import pytest

from pymc_dp.model import PrivateModel
from pymc_dp.model.replicates import _as_outcomes


def _regression(x, y, likelihood="normal"):
    with pm.Model() as model:
        xd = pm.Data("x", x)
        a = pm.Normal("a", 0.0, 5.0)
        b = pm.Normal("b", 0.0, 5.0)
        if likelihood == "normal":
            pm.Normal("y", a + b * xd, pm.HalfNormal("s", 2.0), observed=y)
        elif likelihood == "gamma":
            shape = pm.Gamma("k", 2.0, 1.0)
            pm.Gamma("y", alpha=shape, beta=shape / pm.math.exp(a + b * xd), observed=y)
        elif likelihood == "censored":
            pm.Censored("y", pm.Normal.dist(a + b * xd, pm.HalfNormal("s", 2.0)),
                        lower=None, upper=1.5, observed=np.minimum(y, 1.5))
        elif likelihood == "numpy":  # covariates as a NumPy array in the graph
            pm.Normal("y", a + b * x, pm.HalfNormal("s", 2.0), observed=y)
        elif likelihood == "poisson":
            pm.Poisson("y", pm.math.exp(a + b * xd), observed=np.round(np.abs(y)))
        elif likelihood == "binomial":  # trials per person, from their covariate
            trials = 5 + np.round(np.abs(x) * 3)
            pm.Binomial("y", n=trials, logit_p=a + b * xd,
                        observed=np.minimum(np.round(np.abs(y)), trials))
    return model


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, 1.0 + 0.5 * x + rng.normal(0.0, 0.8, n)


@pytest.mark.parametrize("likelihood", ["normal", "gamma", "censored", "numpy", "poisson", "binomial"])
def test_replicate_j_reads_person_js_record_only(likelihood):
    x, y = _data()
    y = np.abs(y) + 0.1 if likelihood == "gamma" else y
    pmodel = PrivateModel(_regression(x, y, likelihood))
    assert pmodel.can_replicate()
    q = np.full(pmodel.dim, 0.3)
    base = pmodel.replicate_gradient_rows(q, np.random.default_rng(5), 4)
    x2, y2 = x.copy(), y.copy()
    x2[17], y2[17] = 40.0, y[17] * 3.0 + 1.0  # person 17 replaced
    moved = PrivateModel(_regression(x2, y2, likelihood)).replicate_gradient_rows(
        q, np.random.default_rng(5), 4)
    for a, b in zip(base, moved):
        assert np.flatnonzero(np.any(a != b, axis=1)).tolist() == [17]


def test_the_replicates_gradients_have_mean_zero_under_the_model():
    x, y = _data(n=2000)
    pmodel = PrivateModel(_regression(x, y))
    q = np.array([0.2, 0.4, -0.3])
    sums = np.array([r.sum(0) for r in pmodel.replicate_gradient_rows(
        q, np.random.default_rng(3), 64)])
    # (antithetic pairs are the independent draws; a pair's mean is often exactly 0, so
    # the scale is that of single draws: conservative)
    scale = sums.std(0, ddof=1) / np.sqrt(len(sums) // 2)
    assert np.all(np.abs(sums.mean(0)) < 4.0 * scale)
    # and they are not the data's own gradients (whose sum is far from zero at this q)
    data = pmodel.gradient_rows(q)[0].sum(0)
    assert np.any(np.abs(data - sums.mean(0)) > 40 * scale)


def test_same_generator_same_replicates():
    x, y = _data()
    pmodel = PrivateModel(_regression(x, y))
    q = np.zeros(pmodel.dim)
    a = pmodel.replicate_gradient_rows(q, np.random.default_rng(9), 4)
    b = pmodel.replicate_gradient_rows(q, np.random.default_rng(9), 4)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_a_backend_without_an_inverse_cdf_simulates_with_the_default_one(monkeypatch):
    # (PyTensor's JAX backend has no betaincinv without tensorflow-probability: a warm-up
    # of a Student-t model on JAX failed on the simulation, not on the gradient rows)
    import pymc_dp.model.replicates as replicates

    x, y = _data()
    expected = PrivateModel(_regression(x, y)).replicate_gradient_rows(
        np.full(3, 0.3), np.random.default_rng(9), 2)
    compile_function = replicates.compile_function
    modes = []

    def without_the_op(inputs, outputs, **kwargs):
        modes.append(kwargs.get("mode"))
        if kwargs.get("mode") == "FAST_RUN":
            raise NotImplementedError("No implementation for Op betaincinv")
        return compile_function(inputs, outputs, **kwargs)

    monkeypatch.setattr(replicates, "compile_function", without_the_op)
    pmodel = PrivateModel(_regression(x, y), compile_kwargs={"mode": "FAST_RUN"})
    got = pmodel.replicate_gradient_rows(np.full(3, 0.3), np.random.default_rng(9), 2)
    assert modes == ["FAST_RUN", None]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _beta_binomial():  # (no inverse CDF, here or in PyMC)
    with pm.Model() as m:
        a = pm.Gamma("a", 2.0, 1.0)
        pm.BetaBinomial("y", a, 2.0, 5, observed=np.arange(10) % 3)
    return m


def _mvnormal():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        pm.MvNormal("y", mu, np.eye(2), observed=np.ones((10, 2)))
    return m


def _chained():  # the second outcome's distribution reads the first's observed value
    rng = np.random.default_rng(0)
    y1 = rng.normal(size=10)
    with pm.Model() as m:
        a = pm.Normal("a")
        first = pm.Normal("y1", a, 1.0, observed=y1)
        pm.Normal("y2", first, 1.0, observed=y1 + rng.normal(size=10))
    return m




@pytest.mark.parametrize("build", [_beta_binomial, _mvnormal, _chained])
def test_models_without_a_row_by_row_simulation_have_no_replicates(build):
    pmodel = PrivateModel(build())
    assert not pmodel.can_replicate()
    with pytest.raises(ValueError, match="cannot be simulated"):
        pmodel.replicate_gradient_rows(np.zeros(pmodel.dim), np.random.default_rng(0), 2)


def _dummy_twice(d, y):  # a NumPy 0/1 column in the mean and in the log sd
    with pm.Model() as m:
        a, b, c = pm.Normal("a"), pm.Normal("b"), pm.Normal("c")
        pm.Normal("y", a + b * d, pm.math.exp(c * d), observed=y)
    return m


def _equal_columns(d, y):  # two NumPy columns, equal in one data set
    with pm.Model() as m:
        a, b1, b2 = pm.Normal("a"), pm.Normal("b1"), pm.Normal("b2")
        pm.Normal("y", a + b1 * d + b2 * np.abs(y).round(), 1.0, observed=y)
    return m


@pytest.mark.parametrize("build", [_dummy_twice, _equal_columns])
def test_whether_there_are_replicates_does_not_depend_on_the_data(build):
    # PyMC keeps a NumPy covariate read twice as two constants, PyTensor merges constants
    # that are equal: which arrays the likelihood lists as per-row inputs depends on the
    # values (a column of one number, two equal columns). Whether the warm-up corrects its
    # gradient release changes what it releases, so it must be decided by structure alone:
    # here one person's record makes the columns differ.
    n, k = 200, 7
    y = np.random.default_rng(1).normal(size=n).round(1) + 0.05
    d = np.abs(y).round()  # (for _equal_columns: equal to the second column in D)
    if build is _dummy_twice:
        d = np.zeros(n)
    d_prime = d.copy()
    d_prime[k] += 1.0
    first, second = PrivateModel(build(d, y)), PrivateModel(build(d_prime, y))
    assert first.can_replicate() and second.can_replicate()
    q = np.full(first.dim, 0.3)
    a = first.replicate_gradient_rows(q, np.random.default_rng(5), 4)
    b = second.replicate_gradient_rows(q, np.random.default_rng(5), 4)
    for u, v in zip(a, b):
        others = np.delete(np.abs(u - v), k, axis=0)  # (PyTensor's fused arithmetic may
        assert others.max() < 1e-12                   # differ in the last bits)
        assert np.any(u[k] != v[k])


def _family(name, x, rng):
    """A regression on ``x`` with a ``name`` outcome (its data: any values in the support)."""
    n = len(x)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        a = pm.Normal("a", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 1.0)
        eta = a + b * xd
        s = pm.HalfNormal("s", 2.0)
        if name.startswith("truncated"):
            lower, upper = {"truncated_lower": (0.0, None), "truncated_upper": (None, 0.5),
                            "truncated_both": (-1.0, 2.0)}[name]
            y = np.clip(rng.normal(size=n), -0.9 if lower is not None else -5, 0.4)
            y = np.abs(y) if upper is None else y
            pm.Truncated("y", pm.Normal.dist(eta, s), lower=lower, upper=upper, observed=y)
        elif name == "weibull":
            pm.Weibull("y", alpha=s + 0.5, beta=pm.math.exp(eta), observed=rng.weibull(1.5, n))
        elif name == "student_t":
            pm.StudentT("y", nu=pm.Gamma("nu", 4.0, 0.5), mu=eta, sigma=s,
                        observed=rng.standard_t(5, n))
        elif name == "beta":
            pm.Beta("y", alpha=pm.math.exp(eta) + 0.5, beta=s + 0.5, observed=rng.beta(2, 3, n))
        elif name == "lognormal":
            pm.LogNormal("y", eta, s, observed=rng.lognormal(size=n))
        elif name == "bernoulli":
            pm.Bernoulli("y", logit_p=eta, observed=rng.binomial(1, 0.4, n))
        elif name == "poisson":
            pm.Poisson("y", pm.math.exp(eta + 1.0), observed=rng.poisson(3.0, n))
        elif name == "negative_binomial":
            pm.NegativeBinomial("y", mu=pm.math.exp(eta + 1.0), alpha=s + 0.5,
                                observed=rng.negative_binomial(2, 0.4, n))
        elif name == "binomial":
            pm.Binomial("y", n=12, logit_p=eta, observed=rng.binomial(12, 0.4, n))
    return model


@pytest.mark.parametrize("name", [
    "truncated_lower", "truncated_upper", "truncated_both", "weibull", "student_t", "beta",
    "lognormal", "bernoulli", "poisson", "negative_binomial", "binomial",
])
def test_each_familys_replicates_are_finite_with_gradients_of_mean_zero(name):
    # (PyMC's own inverse CDF of pm.Truncated with a lower bound alone gave NaN for most
    # uniforms: the correction then saw the lower tail only, and corrected nothing)
    rng = np.random.default_rng(11)
    x = rng.normal(size=2000)
    pmodel = PrivateModel(_family(name, x, rng))
    assert pmodel.can_replicate()
    q = np.full(pmodel.dim, 0.2)
    reps = pmodel.replicate_gradient_rows(q, np.random.default_rng(4), 64)
    assert all(np.all(np.isfinite(r)) for r in reps)
    sums = np.array([r.sum(0) for r in reps])
    scale = sums.std(0, ddof=1) / np.sqrt(len(sums) // 2)  # (as above: conservative)
    assert np.all(np.abs(sums.mean(0)) <= 4.0 * scale)  # (s does not enter a Bernoulli: 0)


def test_an_outcome_that_cannot_be_simulated_is_left_out_of_its_row_only():
    # Row 3's Poisson mean (10¹⁰) is beyond the inverse CDF's bracket: its outcome is NaN,
    # which a cast to the data's integer dtype would have made an arbitrary count (with a
    # RuntimeWarning); its replicate gradients are NaN instead, the other rows' untouched.
    exposure = np.ones(50)
    exposure[3] = 1e10
    y = np.random.default_rng(2).poisson(2.0, 50)
    y[3] = 0
    with pm.Model() as model:
        e = pm.Data("e", exposure)
        a = pm.Normal("a", 0.0, 1.0)
        pm.Poisson("y", pm.math.exp(a) * e, observed=y)
    pmodel = PrivateModel(model)
    assert pmodel.can_replicate()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        reps = pmodel.replicate_gradient_rows(np.zeros(1), np.random.default_rng(0), 4)
    for r in reps:
        assert np.all(np.isnan(r[3])) and np.all(np.isfinite(np.delete(r, 3, axis=0)))


def test_counts_beyond_an_integer_dtypes_range_are_marked_not_wrapped():
    values, bad = _as_outcomes(np.array([1.0, np.nan, 300.0, -1.0, np.inf]), np.dtype("int8"))
    assert bad.tolist() == [False, True, True, False, True]
    assert values.dtype == np.int8 and values[0] == 1 and values[3] == -1
    values, bad = _as_outcomes(np.array([[0.5, np.nan], [1.0, 2.0]]), np.dtype("float32"))
    assert values.dtype == np.float32 and not bad.any()  # (NaN floats reach the gradient)
