"""Reverse mode's rules one by one, and a pin of where it applies (issue 15, item 3).

:func:`pymc_dp.model.per_datum_gradients.reverse_columns` walks the per-datum graph and, where a
tensor φ computed from θ alone meets the data, asks the copy rule of that operation's type:
copies of φ per row (elementwise, φ broadcast along the rows) or of the output (an operation
with a linear rule: ``X @ β``, ``a[g]``). An operation without a rule leaves the model to
forward mode. ``PINNED`` holds where reverse mode applied when these became registries,
and its columns must equal forward mode's.
"""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pytensor.gradient import jacobian
from pytensor.graph.replace import graph_replace
from pytensor.raise_op import assert_op
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.math import Dot

from pymc_dp import per_datum_gradients as pdg
from pymc_dp.model import PrivateModel, public_data
from pymc_dp.model.per_datum_gradients import forward_columns, reverse_columns

RNG = np.random.default_rng(3)
N = 40
Y = RNG.normal(size=N)
X = RNG.normal(size=(N, 2))
GROUP = np.arange(N) % 3


def _normal():
    pm.Normal("y", pm.Normal("mu"), pm.HalfNormal("sigma"), observed=Y)


def _regression():
    pm.Normal("y", pm.Data("X", X) @ pm.Normal("beta", shape=2), 1, observed=Y)


def _wide_regression():  # 13 coordinates: copies of X @ β cost more than forward mode
    pm.Normal("y", pm.Data("X", RNG.normal(size=(N, 13))) @ pm.Normal("b", shape=13), 1,
              observed=Y)


def _index():
    pm.Normal("y", pm.Normal("a", shape=3)[pm.Data("g", GROUP)], 1, observed=Y)


def _two_indices():  # A[g, h]: the gather rule covers one index array only
    A = pm.Normal("A", shape=(3, 2))
    pm.Normal("y", A[pm.Data("g", GROUP), pm.Data("h", GROUP % 2)], 1, observed=Y)


def _row_free_product():  # ones((1, p)) @ W has no datum axis: no copy per row fits it
    W = pm.Normal("W", shape=(2, 3))
    Xd = pm.Data("X", X)
    pm.Normal("y", pt.dot(pt.ones((1, Xd.shape[1])), W), 1, observed=RNG.normal(size=(N, 3)))


def _elementwise_logit():
    b = pm.Normal("b", shape=2)
    pm.Bernoulli("y", logit_p=(pm.Data("X", X) * b).sum(axis=1), observed=GROUP % 2)


def _transposed():  # φ meets the data along the transpose of the datum axis
    def logp(value, mu):
        return (-0.5 * (value.T - mu[0][None, :]) ** 2).sum(axis=0)

    pm.CustomDist("y", pm.Normal("mu", shape=N), logp=logp, observed=RNG.normal(size=(N, N)))


def _dropped_entry():  # ∂φ/∂b is zero at the public points
    a, b = pm.Normal("a"), pm.Normal("b")
    pm.Normal("y", a * pt.maximum(b, 5.0) / 5.0, 1, observed=Y)


def _dense():  # d² terms column by column: forward mode
    t = pm.Normal("t", shape=6)
    A = pm.Data("A", RNG.normal(size=(6, 6)))
    public_data(A)
    pm.Normal("y", pt.dot(A, t), 1, observed=RNG.normal(size=(N, 6)))


def _many_coordinates():  # 8 coordinates, φ broadcast: an (n, d) matrix of rows
    pm.Normal("y", pm.Normal("m", shape=8).sum(), 1, observed=Y)


def _mvnormal_lkj():  # φ (L⁻¹) meets x − μ, which reads θ, in a product: no copy rule
    chol, *_ = pm.LKJCholeskyCov("c", n=2, eta=2, sd_dist=pm.Exponential.dist(1))
    pm.MvNormal("z", mu=pm.Normal("mu", shape=2), chol=chol, observed=X)


MODELS = {
    "normal": _normal,
    "regression": _regression,
    "wide regression": _wide_regression,
    "index": _index,
    "two indices": _two_indices,
    "row-free product": _row_free_product,
    "elementwise logit": _elementwise_logit,
    "transposed": _transposed,
    "dropped entry": _dropped_entry,
    "dense": _dense,
    "many coordinates": _many_coordinates,
    "MvNormal with LKJ": _mvnormal_lkj,
}

# name: what reverse_columns returns with linear_outputs True and False: None (forward
# mode), or the form of its rows ("columns" or "matrix") and the number of Jacobian terms
PINNED = {
    "normal": [("columns", 3), ("columns", 3)],
    "regression": [("matrix", 0), None],
    "wide regression": [None, None],
    "index": [("matrix", 0), None],
    "two indices": [None, None],
    "row-free product": [None, None],
    "elementwise logit": [("columns", 2), ("columns", 2)],
    "transposed": [None, None],
    "dropped entry": [("columns", 1), ("columns", 1)],
    "dense": [None, None],
    "many coordinates": [("matrix", 8), ("matrix", 8)],
    "MvNormal with LKJ": [None, None],
}


def _private_model(build):
    with pm.Model() as m:
        build()
    return PrivateModel(m)


def _reverse(pmodel, linear_outputs):
    return reverse_columns(
        pmodel._per_datum_graph, pmodel._q, pmodel._placeholders, pmodel.n_data,
        pmodel._public_points(3, 0.3), max_terms=max(16, 4 * pmodel.dim),
        linear_outputs=linear_outputs,
    )


@pytest.mark.parametrize("name", MODELS)
def test_reverse_mode_applies_where_it_did_when_pinned_with_forward_modes_values(name):
    pmodel = _private_model(MODELS[name])
    found = []
    for linear_outputs in (True, False):
        result = _reverse(pmodel, linear_outputs)
        if result is None:
            found.append(None)
            continue
        form = "columns" if isinstance(result.columns, list) else "matrix"
        found.append((form, result.n_terms))
        # the same per-datum gradients as forward mode, at a point off the public ones
        q = pmodel.ravel(pmodel._initial_point) + 0.05
        inputs = [pmodel._q, *pmodel._placeholders]
        rows = pytensor.function(inputs, result.columns, on_unused_input="ignore")(
            q, *pmodel._data_values
        )
        rows = np.stack(rows, axis=1) if form == "columns" else rows
        reference = pytensor.function(
            inputs, forward_columns(pmodel._per_datum_graph, pmodel._q, pmodel.dim),
            on_unused_input="ignore",
        )(q, *pmodel._data_values)
        np.testing.assert_allclose(rows, np.stack(reference, axis=1), rtol=1e-9, atol=1e-12)
    assert found == PINNED[name]


# ---------------------------------------------------------------------- the registries


def test_every_copy_rule_and_linear_rule_says_why_it_is_sound():
    for fn in {*pdg._COPY_RULES.values(), *pdg._LINEAR_RULES.values()}:
        assert fn.__doc__, fn.__name__
    # an operation with a linear rule has its output copied; elementwise ones their inputs
    assert all(pdg._COPY_RULES[t] is pdg._copy_linear_output for t in pdg._LINEAR_RULES)
    assert pdg._COPY_RULES[Elemwise] is pdg._copy_broadcast_inputs


def test_copy_rules_are_looked_up_by_exact_type():
    # A subclass may compute its values differently (here: the same, but nothing shows it):
    # no copy rule, so reverse mode does not apply and forward mode is used.
    class OwnElemwise(Elemwise):
        pass

    phi, data = pt.vector("phi"), pt.vector("data")
    plain = Elemwise(pytensor.scalar.add)(phi[None].sum(axis=0), data).owner
    own = OwnElemwise(pytensor.scalar.add)(phi[None].sum(axis=0), data).owner
    assert pdg._COPY_RULES.get(pdg._op_key(plain.op)) is pdg._copy_broadcast_inputs
    assert pdg._COPY_RULES.get(pdg._op_key(own.op)) is None
    matmul = (pt.matrix("X") @ pt.matrix("W")).owner  # a Blockwise: by its core Op
    assert pdg._op_key(matmul.op) is Dot and pdg._linear_rule_for(matmul.op) is not None


def _tangent_check(out, phi, i, values):
    """The linear rule's output on φ's Jacobian equals the Jacobian of ``out``."""
    q = pt.vector("q")
    phi_of_q = (q[: values[phi].size] * 1.5).reshape(values[phi].shape)
    d = values[phi].size
    tangents = jacobian(phi_of_q.reshape((-1,)), q, vectorize=True).reshape((*phi_of_q.shape, d))
    node = out.owner
    rule = pdg._linear_rule_for(node.op)
    got = rule(node, i, tangents)
    expected = jacobian(graph_replace(out, {phi: phi_of_q}).reshape((-1,)), q, vectorize=True)
    fn = pytensor.function([q, *values], [got, expected], on_unused_input="ignore")
    g, e = fn(np.arange(1.0, d + 1), *values.values())  # (φ's own value: its shape only)
    np.testing.assert_allclose(g.reshape(e.shape), e)


def test_the_matrix_product_rule_gives_the_products_jacobian():
    Xv, B = pt.matrix("X"), pt.matrix("B")
    _tangent_check(pt.dot(Xv, B), B, 1, {B: np.ones((2, 3)), Xv: X[:5]})
    _tangent_check(pt.dot(Xv, B), B, 1, {B: np.ones((2, 1)), Xv: X[:5]})  # (pt.dot(X, β))
    # not covered: φ on the left
    assert pdg._matrix_product(pt.dot(Xv, B).owner, 0, pt.tensor3()) is None


def test_the_gather_rule_gives_the_gathers_jacobian():
    a, g = pt.vector("a"), pt.lvector("g")
    _tangent_check(a[g], a, 0, {a: np.ones(3), g: GROUP[:6]})
    A = pt.matrix("A")
    _tangent_check(A[g], A, 0, {A: np.ones((3, 2)), g: GROUP[:6]})
    # not covered: two index arrays, a boolean mask, a slice before the index
    assert pdg._gather(A[g, g % 2].owner, 0, pt.tensor3()) is None
    assert pdg._gather(a[a > 0].owner, 0, pt.matrix()) is None
    assert pdg._gather(A[:, g].owner, 0, pt.tensor3()) is None


def test_a_jacobian_that_cannot_be_evaluated_at_the_public_points_leaves_forward_mode():
    # (a check on θ inside φ fails there: reverse mode does not apply, forward mode decides)
    q, y = pt.vector("q"), pt.vector("y")
    failing = (y - assert_op(q[0], pt.gt(q[0], 100.0)) * q[0]) ** 2
    assert reverse_columns(failing, q, [y], 5, [np.zeros(1)], 16) is None
    assert reverse_columns((y - q[0] * q[0]) ** 2, q, [y], 5, [np.ones(1)], 16) is not None
