"""Per-datum gradients ``∇_θ ℓ_j(θ)`` of a per-datum log-likelihood graph, for all n data at once.

A private gradient step needs every datum's gradient on its own (to clip it), not only their
sum, and it needs them for n = 10⁵–10⁶ data in one vectorised pass. Two graph
constructions, both without a loop or scan over data and without (n, n) intermediates:

*Forward mode* (:func:`forward_columns`, always available): one Jacobian-vector product
per coordinate k of θ gives the column ``(∂ℓ_j/∂θ_k)_j``. It costs d passes over the
per-datum part of the graph; when θ meets the data through ``X @ β`` the product ``X @ e_k``
is rewritten to the column ``X[:, k]``, so a regression costs about one pass, but a model in
which each datum is an m-vector compared with an m-vector of parameters costs O(n·m·d).

*Reverse mode through per-row copies* (:func:`reverse_columns`, where it is proven to
apply): find the *frontier*, the tensors φ computed from θ alone that meet the data (e.g.
the mean vector of a likelihood). Where every such φ meets the data in an elementwise
operation broadcast along the datum axis, give each row its own copy ``φ + Z_j`` (with Z = 0,
so every value is unchanged). One reverse pass then yields ``∂ℓ_j/∂φ`` for every row j at
once (the gradient with respect to row j of Z), and ``∂ℓ_j/∂θ_k = Σ_a ∂ℓ_j/∂φ_a · ∂φ_a/∂θ_k``
with the small Jacobian ∂φ/∂θ computed from θ alone, keeping only its entries that are not
zero at a few public points. On the flat banana (d = 10, n = 10⁵) that is 2.2 ms per clipped
gradient against 3.3 ms in forward mode (``benchmarks/per_datum_gradients.py``).

Why reverse mode is safe where it is used:

* *Privacy.* Row j of the reverse result is ``Σ_i ∂ℓ_i/∂Z_j``, which is datum j's alone only
  if nothing after the copies mixes rows. Numbers cannot show that (a term that cancels in
  value can still carry another row's gradient), so :func:`reverse_columns` proves it from
  the structure of the final column graph with :mod:`pymc_dp.row_locality`, and returns
  ``None`` (use forward mode) when the proof fails. With row j a function of datum j alone,
  clipping each row to norm ≤ b (:func:`clipped_row_sum`) bounds the sum's sensitivity by 2b.
* *Correctness.* Every θ-dependent float tensor that enters a per-datum operation is
  replaced by a copy, so no θ-path bypasses them. An entry of ∂φ/∂θ that was zero at the
  public points but is not at the current θ (``max(θ, 1)``, a switch) would be dropped: the
  compiled function also returns the largest such entry (:attr:`ReverseColumns.dropped`),
  and the caller recomputes in forward mode when it is not zero.

The choice between the two never reads data: it depends on the graph's structure and on
∂φ/∂θ at public points, a function of θ alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from pytensor import function
from pytensor.gradient import jacobian, pushforward
from pytensor.gradient import grad as pt_grad
from pytensor.graph.basic import Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.tensor.elemwise import Elemwise

from pymc_dp.row_locality import is_row_local

__all__ = [
    "ReverseColumns", "clipped_row_sum", "clipped_scalar_sum", "forward_columns", "reverse_columns"
]

_FLOATS = ("float16", "float32", "float64")


def forward_columns(
    per_datum: Variable, q: Variable, dim: int, basis: Variable | None = None
) -> list[Variable]:
    """The d columns ``(∂ℓ_j/∂θ_k)_j``, k = 1…d, by one forward-mode product each.

    With ``basis`` (a d×d matrix B), the columns of the rows ``Bᵀ∇ℓ_j`` instead: the
    product along B's column k is ``∇ℓ_j · B[:, k]``, so the rows come out in B's
    coordinates without an (n, d) matrix being formed and multiplied.
    """
    eye = np.eye(dim, dtype=q.dtype)
    return [
        pushforward(
            per_datum, q, pt.as_tensor(eye[k]) if basis is None else basis[:, k],
            disconnected_outputs="ignore",
        )
        for k in range(dim)
    ]


@dataclass(frozen=True)
class ReverseColumns:
    """Reverse-mode per-datum gradient columns and the check of the dropped Jacobian entries.

    Attributes
    ----------
    columns : list of Variable
        The d columns ``(∂ℓ_j/∂θ_k)_j``, each of shape (n,).
    dropped : Variable
        Scalar: the largest ``|∂φ_a/∂θ_k|`` over the entries left out (0 if none; NaN if
        one is not finite). A function of θ alone. The columns are exact when it is 0.
    n_terms : int
        How many Jacobian entries enter the columns.
    """

    columns: list[Variable]
    dropped: Variable
    n_terms: int


def reverse_columns(
    per_datum: Variable,
    q: Variable,
    data: list[Variable],
    n: int,
    points: list[np.ndarray],
    max_terms: int,
) -> ReverseColumns | None:
    """The d columns ``(∂ℓ_j/∂θ_k)_j`` by one reverse pass through per-row copies.

    Parameters
    ----------
    per_datum : Variable
        The (n,) per-datum log-likelihood, a graph of ``q`` and the per-datum arrays.
    q : Variable
        The raveled parameter vector (d,).
    data : list of Variable
        The per-datum arrays (leading axis = datum) the graph reads.
    n : int
        The number of rows (constants of leading length n count as per-datum arrays).
    points : list of arrays
        Public values of ``q`` at which ∂φ/∂θ is evaluated to find the entries to keep (an
        entry is kept if it is nonzero, or not finite, at any of them).
    max_terms : int
        Use reverse mode only if at most this many Jacobian entries are kept (each is one
        term per column in the compiled graph; a dense Jacobian is better in forward mode).

    Returns
    -------
    ReverseColumns or None
        ``None`` when reverse mode does not apply: some tensor computed from θ alone meets
        the data other than elementwise along the leading axis (a matrix product, an
        index), the row-locality proof of the columns fails, or too many terms.
    """
    nodes = io_toposort(list(graph_inputs([per_datum])), [per_datum])
    reads_data, reads_q = set(data), {q}
    for node in nodes:
        if any(i in reads_data for i in node.inputs):
            reads_data.update(node.outputs)
        if any(i in reads_q for i in node.inputs):
            reads_q.update(node.outputs)
    copies: dict[Variable, tuple[Variable, Variable]] = {}  # φ -> (Z, φ + Z)
    memo: dict[Variable, Variable] = {}
    for node in nodes:
        meets_data = any(o in reads_data for o in node.outputs)
        new_inputs = []
        for x in node.inputs:
            if meets_data and x in reads_q and x not in reads_data and x.dtype in _FLOATS:
                # φ = x is computed from θ alone and meets the data here. (Integer and
                # boolean tensors, e.g. PyMC's parameter checks, carry no gradient.)
                if not (isinstance(node.op, Elemwise) and x.ndim > 0 and x.type.broadcastable[0]):
                    return None
                if x not in copies:
                    z = pt.tensor(dtype=x.dtype, shape=(None, *x.type.shape[1:]), name="row_copy")
                    copies[x] = (z, x + z)
                new_inputs.append(copies[x][1])
            else:
                new_inputs.append(memo.get(x, x))
        if all(a is b for a, b in zip(new_inputs, node.inputs)):
            continue
        try:
            memo.update(zip(node.outputs, node.op.make_node(*new_inputs).outputs))
        except Exception:  # the copies do not fit (e.g. the datum axis is not in front)
            return None
    if not copies:
        return None
    frontier, pairs = zip(*copies.items())
    zs = [z for z, _ in pairs]
    row_inputs = {**{x: 0 for x in data}, **{z: 0 for z in zs}}
    copied = memo.get(per_datum, per_datum)
    # Prove the copied log-likelihood row-local before evaluating anything: then no φ reads
    # a per-individual NumPy constant (it would be per-datum, and φ is broadcast over rows),
    # so the Jacobian evaluated below reads θ and public constants only.
    if not is_row_local([copied], row_inputs, n):
        return None
    rows = data[0].shape[0]
    # Σ_i ∂ℓ_i/∂Z, seeded with a vector of ones rather than as the gradient of Σ_i ℓ_i, whose
    # seed ``ones_like(Σ_i ℓ_i)`` would make every row depend on the sum in the graph.
    row_grads = pt_grad(
        None,
        zs,
        known_grads={copied: pt.ones((rows,), dtype=copied.dtype)},
        disconnected_inputs="ignore",
    )
    partials = [r.reshape((rows, -1)) for r in row_grads]  # (n, p_φ): ∂ℓ_j/∂φ per row
    # ∂φ/∂θ, (p_φ, d), from θ alone: φ has one row (its leading axis is broadcast).
    jacobians = [
        jacobian(phi.reshape((-1,)), q, vectorize=True, disconnected_inputs="ignore")
        for phi in frontier
    ]
    kept = None  # NaN != 0, so a non-finite entry is kept
    try:
        evaluate = function([q], jacobians, on_unused_input="ignore")
        with np.errstate(all="ignore"):
            for point in points:
                at = [np.asarray(v) != 0 for v in evaluate(np.asarray(point, dtype=q.dtype))]
                kept = at if kept is None else [a | b for a, b in zip(kept, at)]
    except Exception:  # e.g. a check on θ fails at the public points: use forward mode
        return None
    n_terms = int(sum(k.sum() for k in kept))
    if n_terms > max_terms:
        return None
    columns = []
    for k in range(len(points[0])):
        terms = [
            partial[:, a] * jac[a, k]
            for partial, jac, keep in zip(partials, jacobians, kept)
            for a in np.flatnonzero(keep[:, k])
        ]
        columns.append(sum(terms[1:], terms[0]) if terms else pt.zeros((rows,), dtype=q.dtype))
    # The proof that matters is about the graph that will run (with Z as per-datum inputs;
    # Z = 0 after): the gradient operations are checked too, not assumed.
    if not is_row_local(columns, row_inputs, n):
        return None
    zeros = {
        z: pt.zeros((rows, *(phi.shape[k] for k in range(1, phi.ndim))), dtype=phi.dtype)
        for z, phi in zip(zs, frontier)
    }
    columns = graph_replace(columns, zeros, strict=False)
    dropped_entries = [jac[~keep] for jac, keep in zip(jacobians, kept) if (~keep).any()]
    dropped = (
        pt.max(pt.abs(pt.concatenate(dropped_entries)))
        if dropped_entries
        else pt.constant(0.0, dtype=q.dtype)
    )
    return ReverseColumns(list(columns), dropped, n_terms)


def clipped_row_sum(columns: list[Variable], bound: Variable) -> Variable:
    """``Σ_j clip_b(g_j)``, g_j the row j of the given d columns, clipped in ℓ2 norm.

    ``clip_b(g) = g · b / max(‖g‖, b)``, safe at g = 0; a row that is not finite (or whose
    squared norm overflows) contributes zero. Either way every row contributes a vector of
    norm ≤ b, so replacing one datum moves the sum by at most 2b (reference:
    :func:`pymc_dp.kernels.clipping.clipped_vector_sum`). PyTensor fuses the norm, the
    clipping and the d sums into loops over the data without forming the (n, d) matrix.
    """
    squared = columns[0] ** 2
    for column in columns[1:]:
        squared = squared + column**2
    finite = pt.isfinite(squared)
    scale = pt.switch(finite, bound / pt.maximum(pt.sqrt(squared), bound), 0.0)
    return pt.stack([pt.sum(pt.switch(finite, c * scale, 0.0)) for c in columns])


def clipped_scalar_sum(values: Variable, bound: Variable) -> Variable:
    """``Σ_j clip_b(v_j)`` for a vector of per-datum scalars, each clamped to ``[-b, b]``.

    The rule of :func:`pymc_dp.kernels.clipping.clipped_sum` (its reference): ``±inf`` to
    ``±b``, NaN to 0, so replacing one datum moves the sum by at most 2b whatever the model
    returns. PyTensor fuses the difference, the clamp and the sum into one loop over the
    data (:meth:`pymc_dp.model.PrivateModel.clipped_ratio`).
    """
    clamped = pt.clip(values, -bound, bound)
    return pt.sum(pt.switch(pt.isnan(clamped), 0.0, clamped))

