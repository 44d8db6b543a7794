"""The likelihood's own parameters φ(θ) (pymc_dp.model.likelihood_parameters): what the per-datum
log-likelihood reads of θ, found from the graph alone, and never a graph that reads data."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.model.likelihood_parameters import LikelihoodParameters, likelihood_frontier
from pymc_dp.model import PrivateModel


def hierarchical(n=300, groups=4, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    x = rng.normal(size=n)
    y = 1.0 + 0.5 * rng.normal(size=groups)[g] + 0.3 * x + rng.normal(size=n)
    with pm.Model() as model:
        idx = pm.Data("g", g)
        xd = pm.Data("x", x)
        mu_a = pm.Normal("mu_a", 0, 5)
        sigma_a = pm.HalfNormal("sigma_a", 2)
        z = pm.Normal("z", 0, 1, shape=groups)
        b = pm.Normal("b", 0, 2)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", mu_a + sigma_a * z[idx] + b * xd, sigma, observed=y)
    return model


def test_a_non_centred_hierarchical_model_reads_its_group_intercepts():
    # Written as users do, per row: mu_a + sigma_a * z[idx] + b * x. The indexing moves
    # after the arithmetic on z, so the likelihood reads the 4 intercepts μ + σ·z, b and
    # log σ: 6 numbers, where θ has 8 (μ, log σ_a, z, b, log σ).
    pmodel = PrivateModel(hierarchical())
    params = pmodel.likelihood_parameters()
    q = pmodel.ravel(pmodel._initial_point) + 0.1
    assert pmodel.dim == 8
    assert params(q).size == 6
    assert np.linalg.matrix_rank(params.jacobian(q)) == 6
    point = pmodel.unravel(q)
    intercepts = point["mu_a"] + np.exp(point["sigma_a_log__"]) * point["z"]
    assert any(np.allclose(params(q)[k:k + 4], intercepts) for k in range(3))


@pytest.mark.parametrize("style", ["a[g]", "mu + sigma * z[g]", "centred"])
def test_every_way_of_writing_group_intercepts_gives_fewer_parameters_than_theta(style):
    rng = np.random.default_rng(3)
    g = rng.integers(0, 5, 200)
    with pm.Model() as model:
        idx = pm.Data("g", g)
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfNormal("tau", 1)
        if style == "centred":
            a = pm.Normal("a", mu, tau, shape=5)
            mean = a[idx]
        else:
            z = pm.Normal("z", 0, 1, shape=5)
            mean = (mu + tau * z)[idx] if style == "a[g]" else mu + tau * z[idx]
        pm.Normal("y", mean, 1.0, observed=rng.normal(size=200))
    pmodel = PrivateModel(model)
    params = pmodel.likelihood_parameters()
    q = pmodel.ravel(pmodel._initial_point) + 0.2
    assert np.linalg.matrix_rank(params.jacobian(q)) == 5 < pmodel.dim


@pytest.mark.parametrize("style", ["a[g]", "mu + sigma * z[g]", "centred", "also whole"])
def test_group_parameters_are_marked_as_read_through_the_row_index(style):
    # A row reads one group's intercept: its gradient on the other groups' is zero, which
    # the warm-up's release coordinates use. The slope and the residual scale are read by
    # every row.
    rng = np.random.default_rng(3)
    g = rng.integers(0, 5, 200)
    x = rng.normal(size=200)
    with pm.Model() as model:
        idx, xd = pm.Data("g", g), pm.Data("x", x)
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfNormal("tau", 1)
        b = pm.Normal("b", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        if style == "centred":
            a = pm.Normal("a", mu, tau, shape=5)
            mean = a[idx]
        else:
            z = pm.Normal("z", 0, 1, shape=5)
            a = mu + tau * z
            mean = a[idx] if style in ("a[g]", "also whole") else mu + tau * z[idx]
            if style == "also whole":
                mean = mean + a.mean() * xd
        pm.Normal("y", mean + b * xd, sigma, observed=rng.normal(size=200))
    pmodel = PrivateModel(model)
    params = pmodel.likelihood_parameters()
    q = pmodel.ravel(pmodel._initial_point) + 0.2
    groups = params.row_groups(q)
    sparse = groups > 0
    assert groups.shape == params(q).shape and set(groups) == {0, 1}
    if style == "also whole":
        # φ holds the intercepts and their mean apart: the intercepts are read by index,
        # but the mean depends on them, and the warm-up keeps to one clip bound
        from pymc_dp.kernels.warmup import _Chart

        assert sparse.sum() == 5 and sparse.size == 8
        assert _Chart(params, q).groups is None
        return
    assert sparse.sum() == 5 and sparse.size == 7  # (five intercepts; b and log σ)
    # the marked components are the intercepts: moving one group's moves only them
    point = pmodel.unravel(q)
    intercepts = point["a"] if style == "centred" else (
        point["mu"] + np.exp(point["tau_log__"]) * point["z"])
    np.testing.assert_allclose(np.sort(params(q)[sparse]), np.sort(intercepts))


def test_a_regression_reads_its_coefficients_and_log_scale():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", pm.Data("X", X) @ beta, sigma, observed=rng.normal(size=200))
    pmodel = PrivateModel(model)
    params = pmodel.likelihood_parameters()
    q = np.array([0.1, -0.2, 0.3, 0.4])
    # σ = exp(log σ) is peeled back to log σ, a coordinate of θ: φ is θ rearranged.
    jac = params.jacobian(q)
    assert jac.shape == (4, 4)
    np.testing.assert_allclose(np.sort(np.abs(jac), axis=None)[-4:], 1.0)
    np.testing.assert_allclose(np.sort(params(q)), np.sort(q))


def test_jacobian_and_curvature_match_differences():
    pmodel = PrivateModel(hierarchical())
    params = pmodel.likelihood_parameters()
    rng = np.random.default_rng(2)
    q = rng.normal(size=pmodel.dim) * 0.3
    jac = params.jacobian(q)
    eps = 1e-6
    numeric = np.stack(
        [(params(q + eps * e) - params(q - eps * e)) / (2 * eps) for e in np.eye(pmodel.dim)], 1
    )
    np.testing.assert_allclose(jac, numeric, atol=1e-6)
    w = rng.normal(size=jac.shape[0])
    hess = params.curvature(q, w)
    fd = np.stack(
        [(jac_at(params, q + eps * e) - jac_at(params, q - eps * e)).T @ w / (2 * eps)
         for e in np.eye(pmodel.dim)], 1
    )
    np.testing.assert_allclose(hess, fd, atol=1e-4)


def jac_at(params, q):
    return params.jacobian(q)


def test_parameters_that_read_a_private_variable_are_refused():
    # Built by hand: a parameter shifted by a secret before meeting the rows. A surrogate
    # built on it would carry the secret without noise.
    theta = pt.vector("theta")
    rows = pt.vector("rows")
    secret = pytensor.shared(np.float64(3.0), name="secret")
    per_datum = -0.5 * (rows - (theta[0] * secret + theta[1])) ** 2
    frontier = likelihood_frontier(per_datum, theta, [rows])
    assert len(frontier) == 1  # (θ₀·s + θ₁: two inputs move with θ, nothing to peel)
    with pytest.raises(ValueError, match="read"):
        LikelihoodParameters(per_datum, theta, [rows], private=[secret])
    # A public shared constant is fine.
    LikelihoodParameters(per_datum, theta, [rows], private=[])


def test_a_model_whose_likelihood_reads_no_parameter_has_none():
    with pm.Model() as model:
        pm.Normal("mu", 0, 1)
        pm.Normal("y", 0.0, 1.0, observed=np.arange(5.0))
    assert PrivateModel(model).likelihood_parameters() is None


def test_parameters_holding_a_per_row_array_inside_an_inner_graph_are_refused():
    # From a privacy review: a NumPy covariate inside an OpFromGraph stayed a constant of
    # φ's graph (the outer walk does not enter inner graphs), so φ had one entry per person
    # and the warm-up's release coordinates were chosen by people's covariates.
    from pytensor.compile.builders import OpFromGraph

    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    with pm.Model() as model:
        a1, a2, b = (pm.Normal(k, 0, 2) for k in ("a1", "a2", "b"))
        s = pm.HalfNormal("s", 2)
        c_in, b_in = pt.dscalar(), pt.dscalar()
        f = OpFromGraph([c_in, b_in], [c_in + b_in * pt.as_tensor(x)])
        pm.Normal("y", f(a1 + a2, b), s, observed=1 + 0.5 * x + rng.normal(size=n))
    assert PrivateModel(model).likelihood_parameters() is None


def test_parameters_with_one_entry_per_person_are_refused_even_from_public_data():
    import pymc_dp

    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        pymc_dp.public_data(xd)
        a = pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        pm.Normal("y", a + b * xd, 1.0, observed=rng.normal(size=300))
    assert PrivateModel(model).likelihood_parameters() is None


@pytest.mark.parametrize("style", ["same index", "two indices", "one table"])
def test_tables_read_through_one_index_are_paired(style):
    # a[g] + b[g]·x: a row reads entry g of both tables, which the warm-up whitens together
    # (a group's intercept and slope); tables read through different indices (crossed
    # effects a[g] + c[h]) are not paired, nor is a lone table.
    rng = np.random.default_rng(4)
    g, h, x = rng.integers(0, 4, 200), rng.integers(0, 4, 200), rng.normal(size=200)
    with pm.Model() as model:
        g_data, h_data, x_data = pm.Data("g", g), pm.Data("h", h), pm.Data("x", x)
        a = pm.Normal("a", 0, 1, shape=4)
        b = pm.Normal("b", 0, 1, shape=4)
        mean = {"same index": a[g_data] + b[g_data] * x_data,
                "two indices": a[g_data] + b[h_data],
                "one table": a[g_data] + b.sum() * x_data}[style]
        pm.Normal("y", mean, 1.0, observed=rng.normal(size=200))
    pmodel = PrivateModel(model)
    params = pmodel.likelihood_parameters()
    groups = params.row_groups(pmodel.ravel(pmodel._initial_point))
    if style == "same index":
        (pair,) = params.paired_tables
        assert sorted(pair) == sorted(set(groups[groups > 0]))
    else:
        assert params.paired_tables == ()




def test_the_likelihoods_parameters_never_depend_on_the_values_of_numpy_data():
    sizes = []
    for x in (np.zeros(20), np.r_[np.zeros(19), 1.0]):  # (nobody, or one person, exposed)
        with pm.Model() as model:
            a, b = pm.Normal("a"), pm.Normal("b")
            pm.Normal("y", a + b * x, 1.0, observed=np.zeros(20))
        pmodel = PrivateModel(model)
        params = pmodel.likelihood_parameters()
        sizes.append(params(pmodel.ravel(pmodel._initial_point)).size)
    assert sizes[0] == sizes[1]
