"""Solves with one matrix for every row, rewritten as products with its inverse (issue 14).

The rewrite must change nothing but time: the same per-datum log-likelihoods and gradients
as the solve it replaces, and only where every row is solved with the same matrix.
"""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.stats

from pytensor.graph.traversal import ancestors
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.linalg import SolveBase

from pymc_dp.model import PrivateModel
from pymc_dp.model import adapter, batches
from pymc_dp.model.shared_solves import with_shared_solves_as_products

RNG = np.random.default_rng(11)
K, N = 3, 50
LOWER = np.tril(RNG.normal(size=(K, K))) + 3.0 * np.eye(K)
SPD = LOWER @ LOWER.T
B = RNG.normal(size=(N, K))
FAST = {"mode": "FAST_COMPILE"}  # (the rewrite is the same whatever the backend)


def _row_solves(graph):
    """The solves left in ``graph`` whose right-hand side has one row per datum."""
    return [
        v.owner for v in ancestors([graph])
        if v.owner and isinstance(v.owner.op, Blockwise)
        and isinstance(v.owner.op.core_op, SolveBase) and v.owner.op.core_op.b_ndim == 1
    ]


SOLVES = {
    "lower": lambda a, b: pt.linalg.solve_triangular(a, b, lower=True, b_ndim=1),
    "upper": lambda a, b: pt.linalg.solve_triangular(a.mT, b, lower=False, b_ndim=1),
    "unit diagonal": lambda a, b: pt.linalg.solve_triangular(
        a, b, lower=True, unit_diagonal=True, b_ndim=1),
    "general": lambda a, b: pt.linalg.solve(a @ a.mT + a, b, b_ndim=1),
    "positive definite": lambda a, b: pt.linalg.solve(a @ a.mT, b, assume_a="pos", b_ndim=1),
}


@pytest.mark.parametrize("name", SOLVES)
@pytest.mark.parametrize("batched_matrix", [False, True], ids=["k x k", "1 x k x k"])
def test_a_solve_with_one_matrix_becomes_a_product_with_the_same_values_and_gradients(
    name, batched_matrix
):
    theta = pt.vector("theta")
    x = pt.matrix("x", shape=(None, K))
    a = pt.set_subtensor(pt.zeros((K, K))[np.tril_indices(K)], theta)
    a = a[None] if batched_matrix else a
    per_datum = (SOLVES[name](a, x - theta[:K]) ** 2).sum(axis=1)
    rewritten = with_shared_solves_as_products(per_datum)
    assert _row_solves(per_datum) and not _row_solves(rewritten)
    t = LOWER[np.tril_indices(K)]
    for out in (lambda g: g, lambda g: pytensor.gradient.jacobian(g, theta)):
        before, after = (
            pytensor.function([theta, x], out(g))(t, B) for g in (per_datum, rewritten)
        )
        np.testing.assert_allclose(after, before, rtol=1e-10, atol=1e-12)


def test_a_matrix_per_row_or_a_matrix_right_hand_side_is_left_alone():
    x = pt.matrix("x", shape=(None, K))
    per_row = pt.tensor3("a", shape=(None, K, K))
    shared = pt.matrix("a", shape=(K, K))
    stacked = pt.tensor4("a", shape=(1, 1, K, K))  # (its output has an axis more than x)
    for graph in (
        pt.linalg.solve_triangular(per_row, x, lower=True, b_ndim=1).sum(axis=1),
        pt.linalg.solve_triangular(stacked, x, lower=True, b_ndim=1).sum(axis=-1),
        pt.linalg.solve(shared, x.T, b_ndim=2).sum(axis=0),  # (k, n): one k x n solve already
    ):
        assert with_shared_solves_as_products(graph) is graph


def _mvnormal(parametrisation):
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 5, shape=K)
        if parametrisation == "chol":
            chol, *_ = pm.LKJCholeskyCov("c", n=K, eta=2, sd_dist=pm.Exponential.dist(1))
            cov = chol @ chol.T
            pm.MvNormal("y", mu, chol=chol, observed=B)
        else:
            cov = pt.diag(pm.HalfNormal("sd", 2, shape=K) ** 2) + 0.3
            pm.MvNormal("y", mu, cov=cov, observed=B)
    return m, m.compile_fn(m.replace_rvs_by_values([mu, cov]), inputs=m.value_vars, point_fn=True)


@pytest.mark.parametrize("parametrisation", ["chol", "cov"])
def test_an_mvnormal_model_runs_without_a_solve_per_row_and_gives_the_same_rows(
    parametrisation, monkeypatch
):
    model, mean_and_cov = _mvnormal(parametrisation)
    rewritten = PrivateModel(model, compile_kwargs=FAST)
    assert not _row_solves(rewritten._per_datum_graph)
    with monkeypatch.context() as patch:  # the same model built with the solves as they were
        for module in (adapter, batches):
            patch.setattr(module, "with_shared_solves_as_products", lambda g: g)
        plain = PrivateModel(_mvnormal(parametrisation)[0], compile_kwargs=FAST)
    assert _row_solves(plain._per_datum_graph)
    q = rewritten.ravel(rewritten._initial_point) + 0.1 * RNG.normal(size=rewritten.dim)
    mean, cov = mean_and_cov(rewritten.unravel(q))
    reference = scipy.stats.multivariate_normal(mean, cov).logpdf(B)
    np.testing.assert_allclose(rewritten.loglik(q), reference, rtol=1e-10)
    rows = np.array([3, 0, 7])
    np.testing.assert_allclose(rewritten.loglik_rows(q, rows), reference[rows], rtol=1e-10)
    # every row's gradient as before (compiled without rewrites of PyTensor's own)
    before, after = (
        pytensor.function(
            [p._q, *p._placeholders], pytensor.gradient.jacobian(p._per_datum_graph, p._q),
            on_unused_input="ignore", **FAST,
        )(q, *p._data_values)
        for p in (plain, rewritten)
    )
    np.testing.assert_allclose(after, before, rtol=1e-8, atol=1e-10)
