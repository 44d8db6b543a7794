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
the mean vector of a likelihood). Where φ meets the data in an elementwise operation
broadcast along the datum axis, give each row its own copy ``φ + Z_j`` (with Z = 0, so every
value is unchanged). One reverse pass then yields ``∂ℓ_j/∂φ`` for every row j at once (the
gradient with respect to row j of Z), and ``∂ℓ_j/∂θ_k = Σ_a ∂ℓ_j/∂φ_a · ∂φ_a/∂θ_k`` with the
small Jacobian ∂φ/∂θ computed from θ alone, keeping only its entries that are not zero at a
few public points. On the flat banana (d = 10, n = 10⁵) that is 2.2 ms per clipped gradient
against 3.3 ms in forward mode (``benchmarks/per_datum_gradients.py``).

Where φ meets the data in an operation that is *linear in φ* with coefficients read from the
data alone — ``X @ β`` with a design matrix X, ``a[g]`` with a group index g — the copy is
put on that operation's output η instead (one value per row: ``η_j + Z_j``), the reverse pass
gives ``∂ℓ_j/∂η_j``, and the Jacobian of η_j is the same operation applied to φ's tangents:
``X_j (∂β/∂θ)``, ``(∂a/∂θ)[g_j]`` (one matrix product or one gather for all rows and all
coordinates). Which operations are linear in which input is said by small rules registered
per operation type (:func:`linear_rule`); an operation without a rule leaves the model to
forward mode. These copies are made only when reverse mode is asked for
(``PrivateModel.compile_gradients("reverse")``): they are faster than forward mode on some
models and slower on others (``benchmarks/per_datum_gradients.py``).

Why reverse mode is safe where it is used:

* *Privacy.* Row j of the reverse result is ``Σ_i ∂ℓ_i/∂Z_j``, which is datum j's alone only
  if nothing after the copies mixes rows. Numbers cannot show that (a term that cancels in
  value can still carry another row's gradient), so :func:`reverse_columns` proves it from
  the structure of the final column graph with :mod:`pymc_dp.model.row_locality`, and returns
  ``None`` (use forward mode) when the proof fails. With row j a function of datum j alone,
  clipping each row to norm ≤ b (:func:`clipped_row_sum`) bounds the sum's sensitivity by 2b.
* *Correctness.* Every θ-dependent float tensor that enters a per-datum operation is
  replaced by a copy (or that operation's output is), so no θ-path bypasses them. A linear
  rule's claim is what makes the operation applied to φ's tangents its Jacobian: a wrong
  rule would give wrong gradients, never mixed rows (the proof above is made on the graph
  that runs, rule output included). An entry of ∂φ/∂θ that was zero at the
  public points but is not at the current θ (``max(θ, 1)``, a switch) would be dropped: the
  compiled function also returns the largest such entry (:attr:`ReverseColumns.dropped`),
  and the caller recomputes in forward mode when it is not zero.

The choice between the two never reads data: it depends on the graph's structure and on
∂φ/∂θ at public points, a function of θ alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from pytensor import function
from pytensor.gradient import jacobian, pushforward
from pytensor.gradient import grad as pt_grad
from pytensor.graph.basic import Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.subtensor import AdvancedSubtensor
from pytensor.tensor.type import integer_dtypes

from pymc_dp.model.row_locality import datum_axes, is_row_local

__all__ = [
    "ReverseColumns", "clipped_row_count", "clipped_row_sum", "clipped_scalar_count",
    "clipped_scalar_sum", "forward_columns", "linear_rule", "reverse_columns",
]

_FLOATS = ("float16", "float32", "float64")

# Above this many coordinates the rows Bᵀ∇ℓ_j of reverse mode are formed as one (n, d) matrix
# product instead of d² fused products per row (_in_basis). Measured on the flat banana,
# n = 10⁵, one thread: 1.8 against 2.0 ms at d = 7, 1.4 against 2.7 at d = 8, 1.9 against 5.4
# at d = 10; 5.1 against 1.5 ms at d = 6.
_FUSED_BASIS_DIM = 6

# Copies of a linear operation's output make every datum's gradient an (n, d) matrix written
# by a matrix product or a gather. Above this many coordinates forward mode's d passes over
# n-vectors cost less (measured at n = 10⁵ on a hierarchical model with 26 groups: 25 ms
# against 10 ms, where glibc returns the freed matrices to the OS; 4.4 ms where it keeps them).
_OUTPUT_COPIES_MAX_DIM = 12

# ------------------------------------------------------------------ copy rules
#: ``rule(walk, node, frontier) -> bool``: make the per-row copies where the tensors φ of
#: ``node.inputs`` at the positions ``frontier`` (computed from θ alone) meet the data in
#: ``node``; False when reverse mode does not apply (the caller then uses forward mode).
#: Looked up by the exact Op type (a ``Blockwise`` by its core Op's type, :func:`_op_key`):
#: an Op without a rule, a subclass included, leaves the model to forward mode.
CopyRule = Callable[["_CopyWalk", object, list[int]], bool]
_COPY_RULES: dict[type, CopyRule] = {}


def _op_key(op) -> type:
    """The type rules are registered by: a ``Blockwise``'s core Op's, else the Op's own."""
    return type(op.core_op) if isinstance(op, Blockwise) else type(op)


def copy_rule(*op_types: type):
    """Register the rule that makes per-row copies where φ meets the data in an operation
    of these types (by exact type; a ``Blockwise`` by its core Op's type)."""

    def register(fn: CopyRule) -> CopyRule:
        for op_type in op_types:
            _COPY_RULES[op_type] = fn
        return fn

    return register


@copy_rule(Elemwise)
def _copy_broadcast_inputs(walk: _CopyWalk, node, frontier: list[int]) -> bool:
    """φ broadcast along the rows in an elementwise operation: a copy ``φ + Z_j`` per row.

    With Z = 0 every value is unchanged, and ∂ℓ_j/∂Z_j is datum j's ∂ℓ_j/∂φ wherever the
    rebuilt graph is proven row-local (:func:`reverse_columns` proves it). Only where every
    φ is broadcast along the leading axis: otherwise a copy per row would not fit.
    """
    if not all(node.inputs[i].ndim > 0 and node.inputs[i].type.broadcastable[0] for i in frontier):
        return False
    return walk.rebuild(node, frontier)


def _copy_linear_output(walk: _CopyWalk, node, frontier: list[int]) -> bool:
    """An operation linear in φ (its linear rule, :func:`linear_rule`): a copy of its output.

    ``η_j + Z_j``: the reverse pass gives ∂ℓ_j/∂η_j, and the linear rule applied to φ's
    tangents gives η_j's Jacobian. Only when asked for, for at most
    ``_OUTPUT_COPIES_MAX_DIM`` coordinates, one φ and one output, no other input reading θ,
    and η's first axis proven to be the datum axis.
    """
    if (
        not walk.linear_outputs
        or walk.dim > _OUTPUT_COPIES_MAX_DIM
        or len(frontier) != 1
        or len(node.outputs) != 1
        or any(x in walk.reads_q for k, x in enumerate(node.inputs) if k != frontier[0])
    ):
        return False
    (eta,) = node.outputs
    if not _leads_with_rows(eta, walk.data, walk.n):
        return False  # η must have one row per datum, on its first axis
    z = pt.tensor(dtype=eta.dtype, shape=(None, *eta.type.shape[1:]), name="row_copy")
    walk.outputs.append((z, eta, node, frontier[0]))
    walk.memo[eta] = eta + z
    return True


# ------------------------------------------------------------------ linear rules
#: ``rule(node, i, tangents) -> Variable | None``: the output of ``node`` with its input
#: ``i`` (a tensor φ computed from θ alone) replaced by ``tangents`` (φ's shape plus a
#: trailing axis of length d), i.e. the Jacobian of the output along d directions, for an
#: operation that is linear in input i with every other input read from the data alone.
#: ``None`` when the rule does not cover this use of the operation.
LinearRule = Callable[[object, int, Variable], Variable | None]
_LINEAR_RULES: dict[type, LinearRule] = {}


def linear_rule(*op_types: type):
    """Register the rule for operations (by type; a ``Blockwise`` by its core op's type)
    that are linear in one of their inputs. Reverse mode copies such an operation's output
    per row (:func:`_copy_linear_output`) and applies the rule to φ's tangents (module
    docstring)."""

    def register(fn: LinearRule) -> LinearRule:
        for op_type in op_types:
            _LINEAR_RULES[op_type] = fn
            _COPY_RULES[op_type] = _copy_linear_output
        return fn

    return register


def _linear_rule_for(op) -> LinearRule | None:
    return _LINEAR_RULES.get(_op_key(op))


@linear_rule(Dot)
def _matrix_product(node, i, tangents):
    """``X @ φ`` (a design matrix, rows = data): the tangents' product ``X @ T``."""
    x, phi = node.inputs
    if i != 1 or x.ndim != 2 or phi.ndim not in (1, 2):
        return None  # only the data's rows on the left; no batched products
    d = tangents.shape[-1]
    flat = pt.dot(x, tangents.reshape((phi.shape[0], -1)))  # (n, [m ·] d)
    return flat.reshape((x.shape[0], *(phi.shape[k] for k in range(1, phi.ndim)), d))


@linear_rule(AdvancedSubtensor)
def _gather(node, i, tangents):
    """``φ[g]`` (an integer index read from the data, on φ's first axis): ``T[g]``."""
    if i != 0 or tuple(node.op.idx_list) != (0,) or len(node.inputs) != 2:
        return None
    if node.inputs[1].dtype not in integer_dtypes:
        return None  # a boolean mask selects rows: not one output row per datum
    return node.op.make_node(tangents, node.inputs[1]).outputs[0]


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
    columns : list of Variable, or Variable
        The d columns ``(∂ℓ_j/∂θ_k)_j``, each of shape (n,), or the (n, d) matrix of the rows
        (when a matrix product or gather forms them, or d is large).
    dropped : Variable
        Scalar: the largest ``|∂φ_a/∂θ_k|`` over the entries left out (0 if none; NaN if
        one is not finite). A function of θ alone. The columns are exact when it is 0.
    n_terms : int
        How many Jacobian entries enter the columns.
    """

    columns: list[Variable] | Variable
    dropped: Variable
    n_terms: int


def reverse_columns(
    per_datum: Variable,
    q: Variable,
    data: list[Variable],
    n: int,
    points: list[np.ndarray],
    max_terms: int,
    basis: Variable | None = None,
    linear_outputs: bool = True,
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
        Where the rows are formed column by column (d ≤ 6, no linear outputs), use reverse
        mode only if at most this many Jacobian entries are kept (each is one term per
        column in the compiled graph; a dense Jacobian is better in forward mode). An (n, d)
        matrix of rows takes one matrix product whatever the number of entries.
    basis : Variable, optional
        A (d, d) matrix B: the columns of the rows ``Bᵀ∇ℓ_j`` are returned instead.
    linear_outputs : bool
        Whether to copy the outputs of operations with a linear rule (``X @ β``, ``a[g]``);
        without, such a model gets ``None``.

    Returns
    -------
    ReverseColumns or None
        ``None`` when reverse mode does not apply: some tensor computed from θ alone meets
        the data other than elementwise along the leading axis or through an operation with
        a linear rule, the row-locality proof of the columns fails, or too many terms.
    """
    walk = _CopyWalk(per_datum, q, data, n, len(points[0]), linear_outputs)
    copied = walk.run()
    if copied is None:
        return None
    frontier_phis = list(walk.copies)
    zs, likes = walk.row_copies()
    row_inputs = {**{x: 0 for x in data}, **{z: 0 for z in zs}}
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
    kept = _kept_jacobians(frontier_phis, q, points)
    if kept is None:
        return None
    jacobians, masks = kept
    n_terms = int(sum(m.sum() for m in masks))
    if not walk.outputs and len(points[0]) <= _FUSED_BASIS_DIM and n_terms > max_terms:
        return None  # column by column, too many terms: forward mode is cheaper
    columns = _rows(walk, row_grads, jacobians, masks, q, basis, rows)
    if columns is None:
        return None
    # The proof that matters is about the graph that will run (with Z as per-datum inputs;
    # Z = 0 after): the gradient operations are checked too, not assumed.
    outs = columns if isinstance(columns, list) else [columns]
    if not is_row_local(outs, row_inputs, n):
        return None
    zeros = {
        z: pt.zeros((rows, *(like.shape[k] for k in range(1, like.ndim))), dtype=like.dtype)
        for z, like in zip(zs, likes)
    }
    outs = graph_replace(outs, zeros, strict=False)  # Z = 0: every value is unchanged
    return ReverseColumns(
        list(outs) if isinstance(columns, list) else outs[0],
        _largest_dropped(jacobians, masks, q.dtype),
        n_terms,
    )


class _CopyWalk:
    """One walk of the per-datum graph that puts per-row copies where θ meets the data.

    Every node in order: where inputs φ computed from θ alone (the *frontier*) meet the
    data, the copy rule of the node's Op type makes the copies (:func:`copy_rule`); any
    other node is rebuilt on the copies made before it.
    """

    def __init__(self, per_datum, q, data, n, dim, linear_outputs):
        self.per_datum, self.data, self.n = per_datum, data, n
        self.dim, self.linear_outputs = dim, linear_outputs
        self.nodes = io_toposort(list(graph_inputs([per_datum])), [per_datum])
        self.reads_data, self.reads_q = set(data), {q}
        for node in self.nodes:
            if any(i in self.reads_data for i in node.inputs):
                self.reads_data.update(node.outputs)
            if any(i in self.reads_q for i in node.inputs):
                self.reads_q.update(node.outputs)
        self.copies: dict[Variable, tuple[Variable, Variable]] = {}  # φ -> (Z, φ + Z)
        self.outputs: list[tuple[Variable, Variable, object, int]] = []  # (Z, η, node, i)
        self.memo: dict[Variable, Variable] = {}  # the graph rebuilt on the copies

    def run(self) -> Variable | None:
        """The per-datum log-likelihood rebuilt on the copies; None if reverse mode does not
        apply (an operation where φ meets the data has no copy rule, or its rule refuses),
        or nothing meets the data."""
        for node in self.nodes:
            frontier = self.frontier(node)
            if frontier:
                found = _COPY_RULES.get(_op_key(node.op))
                if found is None or not found(self, node, frontier):
                    return None
            elif not self.rebuild(node, []):
                return None
        if not self.copies and not self.outputs:
            return None
        return self.memo.get(self.per_datum, self.per_datum)

    def frontier(self, node) -> list[int]:
        """The positions of inputs computed from θ alone that meet the data in ``node``.

        (Integer and boolean tensors, e.g. PyMC's parameter checks, carry no gradient.)
        """
        if not any(o in self.reads_data for o in node.outputs):
            return []
        return [
            i for i, x in enumerate(node.inputs)
            if x in self.reads_q and x not in self.reads_data and x.dtype in _FLOATS
        ]

    def rebuild(self, node, frontier: list[int]) -> bool:
        """``node`` on the copies of its inputs at ``frontier`` (made here if new) and on
        the rebuilt versions of the others; False if they do not fit (e.g. the datum axis
        is not in front)."""
        new_inputs = [
            self._copy_of(x) if i in frontier else self.memo.get(x, x)
            for i, x in enumerate(node.inputs)
        ]
        if all(a is b for a, b in zip(new_inputs, node.inputs)):
            return True
        try:
            self.memo.update(zip(node.outputs, node.op.make_node(*new_inputs).outputs))
        except Exception:  # the copies do not fit (e.g. the datum axis is not in front)
            return False
        return True

    def row_copies(self) -> tuple[list[Variable], list[Variable]]:
        """Every Z (the copies of broadcast φ first, then of linear outputs) and the tensor
        each one is added to."""
        zs = [z for z, _ in self.copies.values()] + [z for z, *_ in self.outputs]
        return zs, list(self.copies) + [eta for _, eta, *_ in self.outputs]

    def _copy_of(self, x: Variable) -> Variable:
        if x not in self.copies:
            z = pt.tensor(dtype=x.dtype, shape=(None, *x.type.shape[1:]), name="row_copy")
            self.copies[x] = (z, x + z)
        return self.copies[x][1]


def _rows(walk, row_grads, jacobians, masks, q, basis, rows) -> list[Variable] | Variable | None:
    """The d columns of the rows (``Bᵀ``)``∇ℓ_j``, or their (n, d) matrix; None where a
    linear rule does not apply.

    A matrix when there are copies of linear outputs or more than ``_FUSED_BASIS_DIM``
    coordinates: matrix products and gathers write it once, and the clip reads it row by
    row (d columns sliced from it would each stride over all of it).
    """
    dim = walk.dim
    n_phis = len(walk.copies)
    partials = [r.reshape((rows, -1)) for r in row_grads[:n_phis]]  # ∂ℓ_j/∂φ
    if not walk.outputs and dim <= _FUSED_BASIS_DIM:
        columns = _columns(partials, jacobians, masks, rows, dim, q.dtype)
        return columns if basis is None else _in_basis(columns, basis)
    parts = _broadcast_part(partials, jacobians, masks, basis, fused=bool(walk.outputs))
    for (_, eta, node, i), partial in zip(walk.outputs, row_grads[n_phis:]):
        part = _output_part(eta, node, i, partial, q, basis, rows, dim)
        if part is None:
            return None
        parts.append(part)
    return sum(parts[1:], parts[0])


def _broadcast_part(partials, jacobians, masks, basis, fused: bool) -> list[Variable]:
    """The (n, d) rows through the copies of broadcast φ: ``(∂ℓ_j/∂φ) (∂φ/∂θ) B`` (none
    if there are no such copies). With ``fused`` (copies of linear outputs too) and a few
    entries, as broadcast products fused with the gathers and the clip: no (n, d) product
    is written to memory (it cost 4× forward mode on a hierarchical model, where glibc
    hands each call fresh pages)."""
    if not partials:
        return []
    jac = [pt.switch(m, j, 0.0) for j, m in zip(jacobians, masks)]  # kept entries only
    coefficients = _times(pt.concatenate(jac, axis=0), basis)  # (Σ p_φ, d)
    singles = [p[:, a] for p, m in zip(partials, masks) for a in range(m.shape[0])]
    if fused and len(singles) <= _FUSED_BASIS_DIM:
        part = singles[0][:, None] * coefficients[None, 0]
        for a in range(1, len(singles)):
            part = part + singles[a][:, None] * coefficients[None, a]
        return [part]
    return [pt.dot(pt.concatenate(partials, axis=1), coefficients)]


def _output_part(eta, node, i, partial, q, basis, rows, dim) -> Variable | None:
    """The (n, d) rows through the copy of a linear output η = node(…, φ, …):
    ``Σ_m ∂ℓ_j/∂η_jm · ∂η_jm/∂θ`` over η's entries m of row j, the Jacobian of η given by
    the operation's linear rule on φ's tangents; None where the rule does not apply."""
    phi = node.inputs[i]
    tangents = _times(
        jacobian(phi.reshape((-1,)), q, vectorize=True, disconnected_inputs="ignore"),
        basis,
    ).reshape((*phi.shape, dim))  # (∂φ/∂θ)B, from θ alone
    jac_rows = _linear_rule_for(node.op)(node, i, tangents)
    if jac_rows is None:
        return None
    if all(k == 1 for k in eta.type.shape[1:]):  # one value per row: (n,), (n, 1)
        return partial.reshape((rows, 1)) * jac_rows.reshape((rows, dim))
    return (
        partial.reshape((rows, -1))[:, :, None] * jac_rows.reshape((rows, -1, dim))
    ).sum(axis=1)


def _columns(partials, jacobians, masks, rows, dim, dtype) -> list[Variable]:
    """The d columns ``Σ_a ∂ℓ_j/∂φ_a · ∂φ_a/∂θ_k``, one term per kept Jacobian entry."""
    columns = []
    for k in range(dim):
        terms = [
            partial[:, a] * j[a, k]
            for partial, j, keep in zip(partials, jacobians, masks)
            for a in np.flatnonzero(keep[:, k])
        ]
        columns.append(sum(terms[1:], terms[0]) if terms else pt.zeros((rows,), dtype))
    return columns


def _largest_dropped(jacobians, masks, dtype) -> Variable:
    """The largest ``|∂φ_a/∂θ_k|`` over the entries left out (0 if none), from θ alone."""
    dropped_entries = [j[~m] for j, m in zip(jacobians, masks) if (~m).any()]
    if not dropped_entries:
        return pt.constant(0.0, dtype=dtype)
    return pt.max(pt.abs(pt.concatenate(dropped_entries)))


def _leads_with_rows(x: Variable, data: list[Variable], n: int) -> bool:
    """Whether the proof of row locality puts the datum axis of ``x`` first (a tensor that
    reads only the data's shape, or is broadcast along its first axis, has no datum axis)."""
    if x.type.broadcastable[0]:
        return False
    try:
        return datum_axes([x], {v: 0 for v in data}, n).get(x) == 0
    except Exception:  # not row-local: the copy cannot be made
        return False


def _times(jac: Variable, basis: Variable | None) -> Variable:
    return jac if basis is None else pt.dot(jac, basis)


def _kept_jacobians(frontier, q, points):
    """``∂φ/∂θ`` (p_φ, d) of each broadcast φ (a graph of θ alone: φ has one row), and the
    masks of its entries not zero, or not finite, at any of the public points; ``None`` if
    they cannot be evaluated there (e.g. a check on θ fails: forward mode)."""
    jacobians = [
        jacobian(phi.reshape((-1,)), q, vectorize=True, disconnected_inputs="ignore")
        for phi in frontier
    ]
    if not jacobians:
        return [], []
    kept = None  # NaN != 0, so a non-finite entry is kept
    try:
        evaluate = function([q], jacobians, on_unused_input="ignore")
        with np.errstate(all="ignore"):
            for point in points:
                at = [np.asarray(v) != 0 for v in evaluate(np.asarray(point, dtype=q.dtype))]
                kept = at if kept is None else [a | b for a, b in zip(kept, at)]
    except Exception:
        return None
    return jacobians, kept


def _in_basis(columns: list[Variable], basis: Variable) -> list[Variable]:
    """The columns of the rows ``Bᵀ ∇ℓ_j``: ``Σ_a ∂ℓ_j/∂θ_a · B[a, k]`` for each k.

    Elementwise in the rows with public scalars, so PyTensor fuses them with the norm, the
    clip and the sums of :func:`clipped_row_sum` (stacking an (n, d) matrix, multiplying it
    by B and slicing it again cost about 2.5 times more at d = 10). The norm is taken of these
    rows themselves, not computed as ``gᵀ(BBᵀ)g``: a row's contribution and its norm then come
    from the same numbers, and no cancellation can make the norm smaller than the row that is
    released. (Forward mode needs none of this: its products are taken along B's columns,
    :func:`forward_columns`.)
    """
    d = len(columns)
    if d > _FUSED_BASIS_DIM:
        transformed = pt.stack(columns, axis=1) @ basis  # (n, d): row j is Bᵀ∇ℓ_j
        return [transformed[:, k] for k in range(d)]
    out = []
    for k in range(d):
        total = columns[0] * basis[0, k]
        for a in range(1, d):
            total = total + columns[a] * basis[a, k]
        out.append(total)
    return out


def clipped_row_sum(columns: list[Variable] | Variable, bound: Variable) -> Variable:
    """``Σ_j clip_b(g_j)``, g_j the row j of the given d columns (or of an (n, d) matrix),
    clipped in ℓ2 norm.

    ``clip_b(g) = g · b / max(‖g‖, b)``, safe at g = 0; a row that is not finite (or whose
    squared norm overflows) contributes zero. Either way every row contributes a vector of
    norm ≤ b, so replacing one datum moves the sum by at most 2b (reference:
    :func:`pymc_dp.kernels.clipping.clipped_vector_sum`). Given columns, PyTensor fuses the
    norm, the clipping and the d sums into loops over the data without forming the (n, d)
    matrix; given the matrix, each row's norm is taken of that row's own entries.
    """
    if not isinstance(columns, list):
        squared = pt.sum(columns**2, axis=1)
        finite = pt.isfinite(squared)
        scale = pt.switch(finite, bound / pt.maximum(pt.sqrt(squared), bound), 0.0)
        return pt.sum(pt.switch(finite[:, None], columns * scale[:, None], 0.0), axis=0)
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



def clipped_scalar_count(values: Variable, bound: Variable) -> Variable:
    """How many of ``values`` :func:`clipped_scalar_sum` clamps: ``|v_j| > b`` or not
    finite (reference: :func:`pymc_dp.kernels.clipping.clipped_count`). Fused with the sum
    into the same loop over the data; private (the clip diagnostics add noise)."""
    return pt.sum(pt.invert(pt.le(pt.abs(values), bound)), dtype="int64")


def clipped_row_count(columns: list[Variable] | Variable, bound: Variable) -> Variable:
    """How many rows :func:`clipped_row_sum` scales down or zeroes: ``‖g_j‖ > b``, or a
    non-finite row (reference: :func:`pymc_dp.kernels.clipping.clipped_row_count`)."""
    if not isinstance(columns, list):
        squared = pt.sum(columns**2, axis=1)
    else:
        squared = columns[0] ** 2
        for column in columns[1:]:
            squared = squared + column**2
    return pt.sum(pt.invert(pt.le(pt.sqrt(squared), bound)), dtype="int64")
