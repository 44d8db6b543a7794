"""The structural row-locality proof (pymc_dp.model.row_locality)."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pytensor.graph.basic import Constant
from pytensor.raise_op import assert_op
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import Elemwise

from pymc_dp.model.row_locality import NotRowLocal, datum_axes, is_row_local

N, M = 7, 3
x = pt.matrix("x")  # (N, M) per-datum values, datum axis 0
g = pt.lvector("g")  # (N,) per-datum group indices
theta = pt.vector("theta")  # (M,) row-free parameters
L = pt.matrix("L")  # (M, M) row-free matrix
COVARIATE = np.arange(1.0, N + 1)  # a NumPy array of per-individual values in the graph


def _values(rng):
    return {
        x: rng.normal(size=(N, M)),
        g: rng.integers(0, 3, N),
        theta: rng.normal(size=M),
        L: np.tril(rng.normal(size=(M, M))) + 3 * np.eye(M),
    }


ROW_LOCAL = {
    "elementwise and a sum over columns": ((x - theta) ** 2).sum(axis=1),
    "a row-free vector broadcast over rows": (x * theta[None, :]).max(axis=1),
    "transpose and back": (x.T * 2.0).T.sum(axis=1),
    "reshape keeping the leading length": x.reshape((x.shape[0], -1)).sum(axis=1),
    "reshape to an int64 cast of the length": x.reshape((pt.cast(x.shape[0], "int64"), -1))[
        :, ::-1
    ].sum(axis=1),
    "a matrix product with a row-free factor": pt.dot(x, L).sum(axis=1),
    "a matmul with a row-free factor": (x @ L).sum(axis=1),
    "a batched triangular solve": pt.linalg.solve_triangular(L, x, lower=True, b_ndim=1).sum(
        axis=1
    ),
    "a row-free table indexed by group": pt.as_tensor(np.array([1.0, 2.0, 3.0]))[g] * x[:, 0],
    "a column, and set_subtensor of a column": pt.set_subtensor(x[:, 0], theta[0]).sum(axis=1)
    + x[:, 1],
    "a join along the columns": pt.concatenate([x, pt.ones((x.shape[0], 1))], axis=1).sum(axis=1),
    "a per-individual NumPy covariate, aligned": pt.as_tensor(COVARIATE) * x[:, 0],
    "a check on the parameters": assert_op(x[:, 0], pt.all(theta > -100)),
    "a check that reads every row (it only decides whether to raise)": assert_op(
        x[:, 0] * 2, pt.all(x > -100)
    ),
    "a row-free matrix times the transpose": pt.dot(L, x.T).sum(axis=0),
    # (issue 12: what mixtures, softmax links and Categorical compile to)
    "logsumexp over the columns": pt.logsumexp(x, axis=1),
    "softmax over the columns": pt.special.softmax(x, axis=1)[:, 0],
    "per-datum values indexed by the identity": x[
        pt.arange(x.shape[0]).reshape((-1, 1)), pt.clip(g, 0, M - 1)[:, None]
    ][:, 0],
    "a row-free table indexed by group and column": L[g % M, :].sum(axis=1) * x[:, 0],
    "zeros_like of per-datum values reads only their shape": (pt.zeros_like(x) + theta).sum()
    * x[:, 0],
    "the shape of an elementwise result and of a reshape": x[:, 0]
    * pt.ones_like(pt.exp(x)).reshape((x.shape[0], -1)).shape[1]
    + (x * theta).shape[0],
}

NOT_ROW_LOCAL = {
    "centred by the column means": (x - x.mean(axis=0)).sum(axis=1),
    "a total broadcast back": x[:, 0] - x.sum(),
    "a slice of the rows": pt.concatenate([x[1:, 0], x[:1, 0]]),
    "rows reversed": x[::-1, 0],
    "rows rolled": pt.roll(x[:, 0], 1),
    "a cumulative sum down the rows": pt.cumsum(x[:, 0]),
    "one row broadcast to all": x[:, 0] - x[0, 0],
    "the Gram matrix": pt.dot(x, x.T).sum(axis=1),
    "the Gram matrix by matmul": (x @ x.T).sum(axis=1),
    "a matmul that contracts the datum axis": (x.T @ pt.ones((x.shape[0], 1)))[0, 0] * x[:, 0],
    "the datum axis contracted": x[:, 0] * pt.dot(x.T, pt.ones((x.shape[0],))).sum(),
    "flattened": x.reshape((-1,))[:N],
    "sorted down the rows": pt.sort(x[:, 0]),
    "group sums": pt.inc_subtensor(pt.zeros(3)[g], x[:, 0])[g],
    # (issue 12: the reproducer x[g], and near misses of the identity index)
    "per-datum values indexed by a per-row array": x[g, 0],
    "per-datum values indexed by a reversed arange": x[pt.arange(x.shape[0])[::-1], 0],
    "per-datum values indexed by an arange from 1": x[pt.arange(1, x.shape[0] + 1) % N, 0],
    "logsumexp over the rows": x[:, 0] - pt.logsumexp(x[:, 0]),
    "a NumPy covariate reversed": pt.as_tensor(COVARIATE)[::-1] * x[:, 0],
    # found by a review: bool(n) == 1, so this reshape is (1, n·M), and the flip reverses rows
    "a reshape to a cast of the length": x.reshape((pt.cast(x.shape[0], "bool"), -1))[
        :, ::-1
    ].reshape(x.shape)[:, 0],
}


# (review 2: a shape computed from data values is a count of the data, read by every row)
_FLAGGED = pt.gt(x[:, 0], 100.0)
DATA_SHAPES = {
    "the length of nonzero": x[:, 0] + _FLAGGED.nonzero()[0].shape[0],
    "the length of unique": x[:, 0] + pt.unique(pt.switch(_FLAGGED, g, 0)).shape[0],
    "the length of a boolean mask": x[:, 0] + x[_FLAGGED, 0].shape[0],
    "ones_like of nonzero, summed": x[:, 0] + pt.ones_like(_FLAGGED.nonzero()[0]).sum(),
    "a shape through an inferred shape": x[:, 0] + (2.0 * _FLAGGED.nonzero()[0]).shape[0],
}


@pytest.mark.parametrize("name", DATA_SHAPES)
def test_shapes_computed_from_data_values_are_not_public(name):
    out = DATA_SHAPES[name]
    assert not is_row_local([out], {x: 0, g: 0}, n=N)
    # and they do mix rows: flagging row 0 moves every row
    fn = pytensor.function([x, g], out, on_unused_input="ignore")
    values = _values(np.random.default_rng(4))
    flagged = values[x].copy()
    flagged[0, 0] = 1000.0
    moved = fn(flagged, values[g]) != fn(values[x], values[g])
    assert moved[1:].all()


def _rows_move_alone(out, rng):
    """Numerically: changing row k of x (and g) leaves every other output row unchanged."""
    fn = pytensor.function([x, g, theta, L], out, on_unused_input="ignore")
    values = _values(rng)
    base = fn(*values.values())
    for k in (0, N // 2, N - 1):
        changed = dict(values)
        changed[x] = values[x].copy()
        changed[x][k] += 1.5
        changed[g] = values[g].copy()
        changed[g][k] = (values[g][k] + 1) % 3
        out_k = fn(*changed.values())
        others = np.arange(N) != k
        if not np.allclose(out_k[others], base[others]):
            return False
    return True


@pytest.mark.parametrize("name", ROW_LOCAL)
def test_row_local_graphs_are_proven(name):
    out = ROW_LOCAL[name]
    assert is_row_local([out], {x: 0, g: 0}, n=N)
    # and the proof is right: no other row moves when one does
    assert _rows_move_alone(out, np.random.default_rng(0))


@pytest.mark.parametrize("name", NOT_ROW_LOCAL)
def test_graphs_that_mix_rows_are_not_proven(name):
    out = NOT_ROW_LOCAL[name]
    assert not is_row_local([out], {x: 0, g: 0}, n=N)


def test_the_cases_that_mix_rows_do_mix_them():
    # The refusals above are not merely conservative: each of these moves other rows. (The
    # reversed covariate does not move with x; it would move with the covariate.)
    rng = np.random.default_rng(1)
    mixing = [k for k in NOT_ROW_LOCAL if "covariate" not in k]
    assert all(not _rows_move_alone(NOT_ROW_LOCAL[k], rng) for k in mixing)


def test_misaligned_datum_axes_are_refused():
    # x.T + x is square-shaped but pairs row i with column i of the transpose.
    y = pt.matrix("y")
    with pytest.raises(NotRowLocal, match="different datum axes"):
        datum_axes([(y.T + y).sum(axis=1)], {y: 0})


def test_an_unknown_op_fails_the_proof():
    from pytensor.scan import scan

    out, _ = scan(lambda row: row.sum() * 2, sequences=[x])
    assert not is_row_local([out], {x: 0})


def test_an_op_without_a_rule_fails_even_on_row_free_values_and_is_named_by_type():
    # Its Python code may compute anything, e.g. from data it holds in a closure.
    from pytensor.compile.ops import as_op

    @as_op(itypes=[pt.dvector], otypes=[pt.dvector])
    def doubled(v):
        return 2 * v

    with pytest.raises(NotRowLocal) as err:
        datum_axes([doubled(theta).sum() * x[:, 0]], {x: 0})
    assert err.value.op == "FromFunctionOp" and not err.value.mixes
    assert str(err.value).startswith("FromFunctionOp: ")


def test_row_free_outputs_qualify_and_constants_of_length_n_count_as_data():
    assert is_row_local([theta * 2], {x: 0})
    c = pt.as_tensor(COVARIATE)
    assert is_row_local([c.sum() * x[:, 0]], {x: 0})  # without n, the constant is row-free
    assert not is_row_local([c.sum() * x[:, 0]], {x: 0}, n=N)  # with n, it is per-datum
    assert isinstance(c, Constant)


def test_cached_shape_patterns_give_what_the_walk_gives():
    # The per-datum gradient of an MvNormal model with an LKJ prior repeats Blockwise and
    # elementwise nodes many times; their shape reads come from a rule (elementwise) or a
    # pattern cached per Op and input types (Blockwise). Every node's answer must contain
    # the walk's own answer for that node (it may say more: that only refuses more).
    import pymc as pm

    from pymc_dp.model import PrivateModel
    from pymc_dp.model.row_locality import _node_shape_reads, _node_shape_reads_walk, shape_reads

    x = np.random.default_rng(0).normal(size=(30, 2))
    with pm.Model() as m:
        mu = pm.Normal("m", shape=2)
        chol, *_ = pm.LKJCholeskyCov("c", n=2, eta=2, sd_dist=pm.Exponential.dist(1))
        pm.MvNormal("z", mu=mu, chol=chol, observed=x)
    pmodel = PrivateModel(m)
    _, outputs, _ = pmodel._clipped_gradient_graph("forward", per_row=True)
    nodes = pytensor.graph.traversal.io_toposort(
        list(pytensor.graph.traversal.graph_inputs(outputs)), outputs
    )
    cached = 0
    for node in nodes:
        for i in node.inputs:
            shape_reads(i)
        walked = _node_shape_reads_walk(node)[0]
        assert all(w <= r for w, r in zip(walked, _node_shape_reads(node)))
        cached += isinstance(node.op, Blockwise | Elemwise)
    assert cached > 50  # the cache was exercised
