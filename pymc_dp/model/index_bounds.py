"""Bounds of the integer index arrays of a graph, checked before any data is used.

PyTensor's compiled backends may not check indices: an out-of-range group id reads memory
outside the indexed table (numba), and a huge one can kill the process in the middle of a
run, after the privacy budget was reserved. :func:`check_index_bounds` checks, once, that
every integer index array of a graph lies in ``[0, length)`` of the axis it indexes. It
follows each index back to a value it can bound:

* an array passed in (observed values, ``pm.Data``, a NumPy constant, a public container),
  possibly cast to a wider integer, given broadcast axes, reshaped or sliced (which keep
  or subset its values): its smallest and largest entries;
* ``arange(start, stop)`` and ``clip(i, lo, hi)`` whose bounds read no data values and no
  parameters (shapes and constants only): ``[start, stop − 1]`` and ``[lo, hi]``;
* any other expression of shapes, constants and data alone (``g - 1``, ``g % k``): its
  smallest and largest values on the data.

An index computed from the parameters cannot be bounded once for every evaluation and is
refused. Negative indices
are refused too (NumPy would wrap them; requiring ``0 ≤ g < length`` is simpler and catches
more mistakes). Messages name the indexed variable's role, never a value or a count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytensor
import pytensor.tensor as pt

from pytensor.compile.builders import OpFromGraph
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.scalar.basic import Cast, Clip
from pytensor.tensor.basic import ARange
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    Subtensor,
    indices_from_subtensor,
)

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.row_locality import value_ancestors

__all__ = ["check_index_bounds"]

_UNBOUNDED = (
    "The log-likelihood indexes a table with an integer array computed inside the model "
    "from the parameters, or inside an operation defined by an inner graph. Its range "
    "cannot be checked before sampling, and an index outside the table reads memory outside "
    "it. Pass the index array directly as data (pm.Data, a NumPy array, or a container "
    "declared with pymc_dp.public_data), already in the range of the table."
)

_OUT_OF_RANGE = (
    "An integer index array of the model (a group or category id, say) holds entries "
    "outside the table it indexes: every entry must lie in [0, length of the indexed axis). "
    "Negative indices are refused too (they would count from the end). An index outside the "
    "table reads memory outside it; fix the index array (the values are not shown)."
)


def check_index_bounds(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    values: Sequence[np.ndarray],
) -> None:
    """Refuse a graph with an integer index array outside ``[0, length)`` of its axis.

    Parameters
    ----------
    outputs : list of Variable
        The graph (a per-datum log-likelihood, its gradient columns, a batch of rows).
    inputs : list of Variable
        The graph's inputs: the raveled parameter vector first, then the per-datum arrays.
    values : list of arrays
        Values of ``inputs``: a public point, then the data. Only shapes, public bounds and
        the smallest and largest index entries are computed from them, and only compared.

    Raises
    ------
    UnsupportedModelError
        If an index cannot be bounded, or lies outside its table. Raised before the graph
        is compiled for sampling; the message holds no value.
    """
    known = dict(zip(inputs[1:], values[1:]))
    data = set(known) | {v for v in graph_inputs(list(outputs)) if isinstance(v, SharedVariable)}
    params = inputs[0]
    checks = []  # (lo, hi, length) as numbers or scalar expressions
    nodes = io_toposort(list(graph_inputs(list(outputs))), list(outputs))
    for node in nodes:
        if _indexes_by_its_inputs(node.op):
            raise UnsupportedModelError(_UNBOUNDED)  # inside an inner graph: not followed
        if not isinstance(node.op, AdvancedSubtensor | AdvancedIncSubtensor):
            continue
        skip = 2 if isinstance(node.op, AdvancedIncSubtensor) else 1
        x = node.inputs[0]
        entries = indices_from_subtensor(node.inputs[skip:], node.op.idx_list)
        for axis, e in enumerate(entries):
            if isinstance(e, slice) or e.dtype == "bool":
                continue  # slices are clipped by NumPy's rules; masks must match the shape
            lo, hi = _bounds(e, known, data, params)
            length = x.type.shape[axis]
            checks.append((lo, hi, x.shape[axis] if length is None else length))
    if not checks:
        return
    symbolic = [v for check in checks for v in check if isinstance(v, Variable)]
    if symbolic:
        evaluate = pytensor.function(
            list(inputs), symbolic, on_unused_input="ignore", mode="FAST_COMPILE"
        )
        try:
            with np.errstate(all="ignore"):
                numbers = iter(evaluate(*values))
        except Exception:
            raise UnsupportedModelError(_UNBOUNDED) from None
    for check in checks:
        lo, hi, length = (next(numbers) if isinstance(v, Variable) else v for v in check)
        if np.size(lo) and not (np.min(lo) >= 0 and np.max(hi) < np.min(length)):
            raise UnsupportedModelError(_OUT_OF_RANGE)


def _bounds(e: Variable, known: Mapping, data: set, params: Variable):
    """``(lo, hi)`` of index ``e`` (numbers, or expressions of shapes and constants)."""
    while e.owner is not None and _keeps_values(e.owner):
        e = e.owner.inputs[0]
    if e in known or isinstance(e, Constant | SharedVariable):
        value = known[e] if e in known else _leaf_value(e)
        if value.size == 0:
            return np.array([]), np.array([])
        return value.min(), value.max()
    op = e.owner.op if e.owner is not None else None
    if isinstance(op, ARange):
        start, stop, step = e.owner.inputs
        if isinstance(step, Constant) and np.all(step.data == 1):
            bounds = [start, stop - 1]
            if _public(bounds, data, params):
                return bounds[0], bounds[1]
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, Clip):
        _, lo, hi = e.owner.inputs
        if _public([lo, hi], data, params):
            return lo, hi
    if _public([e], data, params):
        return e, e
    if params not in value_ancestors([e]):
        # computed from data and constants alone (g - 1, g % k with g an array passed
        # in): its values on the data, once (the row-locality proof has shown that row j
        # of it reads row j of the data only, so a batch of rows reads a subset of them)
        return pt.min(e), pt.max(e)
    raise UnsupportedModelError(_UNBOUNDED)


def _indexes_by_its_inputs(op) -> bool:
    """Whether an Op with an inner graph indexes by an integer array computed from its inputs.

    (PyTensor's own inner graphs index by constants, if at all.)
    """
    inner = op.core_op if isinstance(op, Blockwise) else op
    if not isinstance(inner, OpFromGraph):
        return False
    inputs = list(inner.inner_inputs)
    for node in io_toposort(inputs, list(inner.inner_outputs)):
        if _indexes_by_its_inputs(node.op):
            return True
        if isinstance(node.op, AdvancedSubtensor | AdvancedIncSubtensor):
            skip = 2 if isinstance(node.op, AdvancedIncSubtensor) else 1
            reads = value_ancestors(node.inputs[skip:])
            if any(i in reads for i in inputs):
                return True
    return False


def _keeps_values(node) -> bool:
    """An operation whose output's values are among its first input's values."""
    op = node.op
    if isinstance(op, DimShuffle | SpecifyShape | Reshape | Subtensor):
        return True
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, Cast):
        source, target = node.inputs[0].dtype, node.outputs[0].dtype
        return source == "bool" or (
            np.issubdtype(source, np.integer)
            and np.issubdtype(target, np.integer)
            and np.can_cast(source, target, casting="safe")
        )
    return False


def _leaf_value(var: Variable) -> np.ndarray:
    if isinstance(var, Constant):
        return np.asarray(var.data)
    return np.asarray(var.get_value(borrow=True))


def _public(exprs: Sequence[Variable], data: set, params: Variable) -> bool:
    """Whether the values of ``exprs`` read neither data values nor the parameters."""
    reads = value_ancestors(list(exprs))
    return params not in reads and not (reads & data)
