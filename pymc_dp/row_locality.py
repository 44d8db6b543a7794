"""A structural proof that a graph is row-local: output row j reads data row j only.

Clipping per-datum terms bounds a sum's sensitivity by 2b only if term j depends on datum j
alone. A probe (change a row, watch the others) can catch the ordinary ways a model breaks
this but cannot prove it. This module proves it from the graph's structure, without reading
any value: every variable gets a *datum axis*, the axis along which position i holds
something computed from row i of the per-datum inputs only (and from variables that read no
per-datum input at all, *row-free* ones, which may be anything). An operation with a
per-datum input is accepted only when a rule below shows its output has a datum axis again:

* elementwise operations whose per-datum inputs share the datum axis, none broadcast along
  it (broadcasting would copy one row into all);
* dimension shuffles that keep the axis, reductions over other axes, reshapes that keep the
  leading length n, basic indexing with a full slice ``:`` on the axis (and row-free
  indices), ``set_subtensor``/``inc_subtensor`` likewise, joins along other axes;
* ``Blockwise`` operations (solves, Cholesky, batched subtensors, …) whose datum axis is a
  batch axis of every per-datum input: the core operation runs on each batch entry alone;
* matrix products with a row-free factor that keep the datum axis, and indexing of a
  row-free table by per-datum indices (``a[g]``);
* shape queries (the shapes are public), shape assertions and value checks, which pass
  their first input through (a check's condition decides only whether evaluation stops
  with an error, so it is not part of the proof).

Anything else with a per-datum input (a reduction over the datum axis, a slice or shift of
it, advanced indexing of per-datum values, a scan, an op this module does not know) fails
the proof. Failing is safe: callers then use a construction that does not need it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar.basic import Cast
from pytensor.tensor.basic import Alloc, Join, MakeVector, ScalarFromTensor, TensorFromScalar
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import AdvancedSubtensor, IncSubtensor, Subtensor

__all__ = ["NotRowLocal", "datum_axes", "is_row_local"]


class NotRowLocal(Exception):
    """The structure of a graph does not show that its rows are independent.

    Attributes
    ----------
    mixes : bool
        True when the failing operation is one that moves values between rows (a reduction
        over the datum axis, a slice or shift of it, misaligned datum axes, a per-datum
        value broadcast to every row, a product that contracts the datum axis); False when
        the proof merely does not cover it (an op without a rule, a reshape or a core axis
        it cannot follow).
    """

    def __init__(self, message: str, mixes: bool = True):
        super().__init__(message)
        self.mixes = mixes


def is_row_local(
    outputs: Sequence[Variable], row_inputs: Mapping[Variable, int], n: int | None = None
) -> bool:
    """Whether every output provably has its datum axis first (row j reads row j only).

    An output that reads no per-datum input at all (row-free) qualifies trivially.

    Parameters
    ----------
    outputs : list of Variable
        Graph outputs, each expected to have the datum axis as axis 0.
    row_inputs : dict
        The per-datum inputs and their datum axis (usually 0).
    n : int, optional
        Number of rows, if known: constants of leading length n then count as per-datum
        inputs too (NumPy arrays of per-individual covariates written into the model).

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> x, theta = pt.matrix("x"), pt.vector("theta")
    >>> is_row_local([((x - theta) ** 2).sum(axis=1)], {x: 0})
    True
    >>> is_row_local([x - x.mean(axis=0)], {x: 0})  # every row reads the column means
    False
    """
    try:
        axes = datum_axes(outputs, row_inputs, n)
    except NotRowLocal:
        return False
    return all(axes.get(o, 0) == 0 for o in outputs)


def datum_axes(
    outputs: Sequence[Variable], row_inputs: Mapping[Variable, int], n: int | None = None
) -> dict[Variable, int]:
    """The datum axis of every per-datum variable of the graph (row-free ones are absent).

    Raises
    ------
    NotRowLocal
        At the first operation whose output cannot be shown to have a datum axis.
    """
    axes: dict[Variable, int] = dict(row_inputs)
    if n is not None:
        for var in graph_inputs(list(outputs)):
            if (
                isinstance(var, Constant)
                and var not in axes
                and getattr(var, "ndim", 0) > 0
                and np.shape(var.data)[0] == n
            ):
                axes[var] = 0
    nodes = io_toposort(list(graph_inputs(list(outputs))), list(outputs))
    carries_values = _value_ancestors(outputs, nodes)
    for node in nodes:
        if not any(i in axes for i in node.inputs):
            continue  # row-free
        if not any(o in carries_values for o in node.outputs):
            continue  # only decides whether a check raises (see _value_ancestors)
        for out, axis in zip(node.outputs, _output_axes(node, axes, n)):
            if axis is not None:
                axes[out] = axis
    return axes


def _value_ancestors(outputs: Sequence[Variable], nodes) -> set[Variable]:
    """Variables the outputs' values are computed from.

    The conditions of a check (``CheckAndRaise``: PyMC's parameter checks, asserts) are left
    out: they decide whether evaluation stops with an error, never what a value is. (A
    check over every row, say that all probabilities are in [0, 1], is common in PyMC's
    log-densities; the error it may raise is withheld by the model adapter.)
    """
    needed = set(outputs)
    for node in reversed(nodes):
        if not any(o in needed for o in node.outputs):
            continue
        inputs = node.inputs[:1] if isinstance(node.op, CheckAndRaise) else node.inputs
        needed.update(inputs)
    return needed


def _fail(node, why: str, mixes: bool = True):
    raise NotRowLocal(f"{node.op}: {why}", mixes)


def _output_axes(node, axes: Mapping[Variable, int], n) -> list[int | None]:
    """Datum axes of ``node``'s outputs (None: row-free), given its inputs'."""
    op = node.op
    ins = node.inputs
    rowed = [i for i in ins if i in axes]

    if isinstance(op, Shape | Shape_i):
        return [None]  # shapes of per-datum tensors are public (n and the column counts)
    if isinstance(op, SpecifyShape | CheckAndRaise):
        # The value is the first input's; the others only decide whether to raise.
        if ins[0] not in axes:
            return [None] * len(node.outputs)
        return [axes[ins[0]]]

    if isinstance(op, Elemwise):
        return [_aligned(node, rowed, axes)] * len(node.outputs)

    if isinstance(op, DimShuffle):
        a = axes[ins[0]]
        if a not in op.new_order:
            _fail(node, "drops the datum axis")
        return [list(op.new_order).index(a)]

    if isinstance(op, CAReduce):
        a = axes[ins[0]]
        ndim = ins[0].ndim
        reduced = tuple(range(ndim)) if op.axis is None else tuple(r % ndim for r in op.axis)
        if a in reduced:
            _fail(node, "reduces over the datum axis")
        return [a - sum(r < a for r in reduced)]

    if isinstance(op, Subtensor):
        x, *index = ins
        if any(i in axes for i in index):
            _fail(node, "indices read per-datum values")
        return [_axis_after_basic_index(node, op.idx_list, axes[x])]

    if isinstance(op, IncSubtensor):
        x, y, *index = ins
        if any(i in axes for i in index):
            _fail(node, "indices read per-datum values")
        # y lands in x[index]; find the axis of x that y's datum axis would be written to.
        targets = []
        if x in axes:
            sub = _axis_after_basic_index(node, op.idx_list, axes[x])
            targets.append((axes[x], sub))
        if y in axes:
            sub_ndim = x.ndim - sum(isinstance(e, int) for e in op.idx_list)
            sub = axes[y] + (sub_ndim - y.ndim)
            if y.type.broadcastable[axes[y]]:
                _fail(node, "broadcasts a per-datum value along the datum axis")
            x_axis = _axis_before_basic_index(node, op.idx_list, sub)
            targets.append((x_axis, sub))
        if len({t for t, _ in targets}) != 1:
            _fail(node, "the datum axes of x and y differ")
        return [targets[0][0]]

    if isinstance(op, AdvancedSubtensor):
        table, *index = ins
        if table in axes or len(index) != 1 or tuple(op.idx_list) != (0,):
            # (p[arange(n), y], a Categorical's log-density, is row-local but not covered)
            why = "advanced indexing other than a row-free table by one index"
            _fail(node, why, mixes=False)
        if index[0].dtype == "bool":
            _fail(node, "a boolean mask (its shape would depend on the data)")
        return [axes[index[0]]]  # table[g]: position i reads g_i only

    if isinstance(op, Reshape):
        x, shape = ins
        if shape in axes or axes[x] != 0 or node.outputs[0].ndim < 1:
            _fail(node, "reshape that may move the datum axis", mixes=False)
        if not _first_entry_is_rows(shape, axes, n):
            _fail(node, "reshape whose leading length is not shown to be n", mixes=False)
        return [0]

    if isinstance(op, Alloc):
        value, *shape = ins
        if any(s in axes for s in shape):
            _fail(node, "shape read from per-datum values")
        a = axes[value]
        if value.type.broadcastable[a]:
            _fail(node, "broadcasts a per-datum value along the datum axis")
        return [a + node.outputs[0].ndim - value.ndim]

    if isinstance(op, Join):
        a = _aligned(node, rowed, axes)
        if op.axis == a:
            _fail(node, "joins along the datum axis")
        return [a]

    if isinstance(op, Blockwise):
        batch_ndim = node.outputs[0].ndim - len(op.outputs_sig[0])
        a = _aligned(node, rowed, axes)
        if a < batch_ndim:
            return [a] * len(node.outputs)
        if isinstance(op.core_op, Dot) and rowed == [ins[0]] and a == batch_ndim:
            return [a]  # matmul, rows of the left factor: (X @ W)[i] = X[i] @ W
        _fail(node, "the datum axis is a core axis", mixes=False)

    if isinstance(op, Dot):
        x, y = ins
        if x in axes and y in axes:
            _fail(node, "a product of two per-datum factors")
        if x in axes and axes[x] == 0 and x.ndim == 2:
            return [0]  # (X @ W)[i] = X[i] @ W
        if y in axes and axes[y] == 1 and y.ndim == 2 and x.ndim == 2:
            return [1]  # (W @ Y)[:, i] = W @ Y[:, i]
        _fail(node, "a product that contracts the datum axis")

    if isinstance(op, TensorFromScalar | ScalarFromTensor):
        _fail(node, "a scalar read from per-datum values")
    _fail(node, "an operation the row-locality proof does not cover", mixes=False)


def _aligned(node, rowed: Sequence[Variable], axes: Mapping[Variable, int]) -> int:
    """The shared datum axis of broadcasting inputs, none broadcast along it."""
    found = {axes[i] for i in rowed}
    if len(found) != 1:
        _fail(node, f"per-datum inputs with different datum axes {sorted(found)}")
    (a,) = found
    if any(i.type.broadcastable[axes[i]] for i in rowed):
        _fail(node, "broadcasts a per-datum value along the datum axis")
    return a


def _axis_after_basic_index(node, idx_list, a: int) -> int:
    """Where axis ``a`` of x lands in ``x[idx]``; it must be indexed by a full slice."""
    if a < len(idx_list):
        entry = idx_list[a]
        if not (isinstance(entry, slice) and entry == slice(None, None, None)):
            _fail(node, "indexes the datum axis (only a full slice ':' keeps rows aligned)")
    return a - sum(isinstance(e, int) for e in idx_list[:a])


def _axis_before_basic_index(node, idx_list, sub: int) -> int:
    """The axis of x that lands at axis ``sub`` of ``x[idx]`` (it must be a full slice)."""
    kept = [k for k, e in enumerate(idx_list) if not isinstance(e, int)]
    n_indexed = len(idx_list)
    if sub < len(kept):
        a = kept[sub]
    else:
        a = n_indexed + (sub - len(kept))
    _axis_after_basic_index(node, idx_list, a)
    return a


def _widens_int(node) -> bool:
    """A cast that keeps every value of a length: integer to int64 only.

    (Any other cast can change it: ``int8(260) == 4``, ``bool(260) == 1``; a reshape to
    such a leading length would move rows while looking as if it kept them.)
    """
    if not (isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Cast)):
        return False
    source, target = node.inputs[0].dtype, node.outputs[0].dtype
    return target == "int64" and source in _INT_TO_INT64


_INT_TO_INT64 = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _first_entry_is_rows(shape: Variable, axes: Mapping[Variable, int], n) -> bool:
    """Whether ``shape[0]`` is n: a constant n, or the datum-axis length of a per-datum var."""
    if isinstance(shape, Constant):
        return n is not None and np.ndim(shape.data) == 1 and int(shape.data[0]) == n
    owner = shape.owner
    if owner is not None and isinstance(owner.op, Shape):  # reshape(g, v.shape)
        v = owner.inputs[0]
        return axes.get(v) == 0
    if owner is None or not isinstance(owner.op, MakeVector):
        return False
    return _is_rows(owner.inputs[0], axes, n)


def _is_rows(s: Variable, axes: Mapping[Variable, int], n) -> bool:
    """Whether scalar ``s`` is the number of rows (constant n or a datum-axis length)."""
    while s.owner is not None and (
        isinstance(s.owner.op, TensorFromScalar | ScalarFromTensor) or _widens_int(s.owner)
    ):
        s = s.owner.inputs[0]
    if isinstance(s, Constant):
        return n is not None and np.ndim(s.data) == 0 and int(s.data) == n
    owner = s.owner
    if owner is None:
        return False
    if isinstance(owner.op, Shape_i):
        v = owner.inputs[0]
        return v in axes and owner.op.i == axes[v]
    if isinstance(owner.op, Subtensor) and len(owner.op.idx_list) == 1:
        shape_var, index = owner.inputs
        if not (
            shape_var.owner is not None
            and isinstance(shape_var.owner.op, Shape)
            and isinstance(index, Constant)
        ):
            return False
        v = shape_var.owner.inputs[0]
        return v in axes and int(index.data) == axes[v]
    return False
