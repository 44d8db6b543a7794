"""Solves with one matrix for every row, rewritten as products with its inverse.

PyMC writes a multivariate normal's log-density with one small triangular solve per row,
``L z_j = x_j − μ`` (a ``Blockwise`` solve whose matrix L is broadcast over the rows).
PyTensor compiles the value to a single solve with a (k, n) right-hand side, but each of
the d forward-mode products that give every person's gradient
(:func:`~pymc_dp.model.per_datum_gradients.forward_columns`) solves again, through a
transposed, non-contiguous copy of the rows: at n = 10⁵ and k = 2, 50 ms per coordinate of
θ where the log-likelihood costs 8. Written as ``z = b @ (L⁻¹)ᵀ``, with the k×k inverse
computed once from θ, every n-length operation is an (n, k)·(k, k) product or elementwise,
and so is each derivative.

The rewrite is exact in real arithmetic; in floating point the two differ by rounding (the
inverse of a triangular or well-conditioned matrix is accurate to the same order as the
solve). The product is proven row-local like any other graph
(:mod:`pymc_dp.model.row_locality`: ``(X @ W)[i] = X[i] @ W`` with a row-free W), on the
rewritten graph, which is the one that runs.

Which solves are rewritten is said by small rules registered per core Op type
(:func:`inverse_rule`); a solve without a rule, a matrix that differs between rows, or a
right-hand side with more than one batch axis is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import pytensor.tensor as pt

from pytensor.graph.basic import Variable
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.linalg import Solve, SolveTriangular

from pymc_dp.model.graphs import rebuild_graph

__all__ = ["inverse_rule", "with_shared_solves_as_products"]

#: ``rule(core_op, a) -> A⁻¹`` for a k×k matrix ``a``, by the same kind of solve (its
#: triangle, unit diagonal or structure flags kept), looked up by the core Op's exact type.
InverseRule = Callable[[object, Variable], Variable]
_INVERSE_RULES: dict[type, InverseRule] = {}


def inverse_rule(*op_types: type):
    """Register how to invert the matrix of a solve of these core Op types (exact type)."""

    def register(fn: InverseRule) -> InverseRule:
        for op_type in op_types:
            _INVERSE_RULES[op_type] = fn
        return fn

    return register


@inverse_rule(SolveTriangular)
def _triangular_inverse(op, a):
    return pt.linalg.solve_triangular(
        a, pt.eye(a.shape[0], dtype=a.dtype), lower=op.lower, unit_diagonal=op.unit_diagonal
    )


@inverse_rule(Solve)
def _general_inverse(op, a):
    return pt.linalg.solve(
        a, pt.eye(a.shape[0], dtype=a.dtype), assume_a=op.assume_a, lower=op.lower
    )


def _as_product(node, inputs: list[Variable]) -> list[Variable] | None:
    """``[b @ (A⁻¹)ᵀ]`` for a row-batched solve ``A z_j = b_j`` whose A is one matrix, else
    None (the node is kept)."""
    op = node.op
    if not isinstance(op, Blockwise):
        return None
    rule = _INVERSE_RULES.get(type(op.core_op))
    if rule is None or op.core_op.b_ndim != 1:
        return None
    a, b = inputs
    # one batch axis on b (the rows), none that is not broadcast on A (the same A for all)
    (out,) = node.outputs
    if b.ndim != 2 or out.ndim != 2 or b.type.broadcastable[0]:
        return None
    if not all(a.type.broadcastable[:-2]):
        return None
    core = a[(0,) * (a.ndim - 2)] if a.ndim > 2 else a
    return [pt.dot(b, rule(op.core_op, core).T).astype(out.dtype)]


def with_shared_solves_as_products(graph: Variable) -> Variable:
    """``graph`` with every solve that applies one matrix to each row written as a product
    with that matrix's inverse (see the module docstring).

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> from pytensor.graph.traversal import ancestors
    >>> from pytensor.tensor.blockwise import Blockwise
    >>> L, x = pt.tensor3("L", shape=(1, 2, 2)), pt.matrix("x", shape=(None, 2))
    >>> z = pt.linalg.solve_triangular(L, x, lower=True, b_ndim=1)
    >>> rewritten = with_shared_solves_as_products((z ** 2).sum(axis=1))
    >>> [v.owner.op.core_op.b_ndim for v in ancestors([rewritten])  # one k×k solve left
    ...  if v.owner and isinstance(v.owner.op, Blockwise)]
    [2]
    >>> args = (np.array([[[2.0, 0.0], [1.0, 3.0]]]), np.array([[2.0, 4.0], [0.0, 3.0]]))
    >>> rewritten.eval(dict(zip((L, x), args)))
    array([2., 1.])
    """
    (out,) = rebuild_graph([graph], {}, substitute=_as_product)
    return out
