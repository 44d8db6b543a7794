"""Compiling and rebuilding the adapter's graphs: a compiled function reused for an equal
graph, errors that withhold values, a backend that keeps float64, graphs rebuilt with
per-datum inputs of any length, data checks taken out.
"""

from __future__ import annotations

import threading

from collections.abc import Sequence

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc.pytensorf import compile as pm_compile
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable, equal_computations
from pytensor.graph.traversal import graph_inputs, io_toposort  # batches of rows
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.random.type import RandomType
from pytensor.tensor.shape import SpecifyShape

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.data import reads_any

__all__ = [
    "compile_function",
    "withholding_details",
    "as_list",
    "check_backend_keeps_float64",
    "require_float64",
    "without_checks_on",
    "rebuild_graph",
]


#: Compiled functions kept for reuse, most recently used last: (key, inputs, outputs,
#: function) with a function that is never called itself (each caller gets a copy).
_COMPILED: list[tuple[tuple, list, list, object]] = []
_COMPILED_SIZE = 64
_COMPILED_LOCK = threading.Lock()

#: Keyword arguments of a call that may be reused, and the types their values may have.
_REUSABLE_KWARGS = {"on_unused_input": str, "mode": str}


def compile_function(inputs: list[Variable], outputs, **kwargs):
    """``pymc.pytensorf.compile(inputs, outputs, **kwargs)``, reusing an earlier compilation
    of an equal graph.

    Data are inputs of the adapter's graphs (compiled on shapes, not values), so a second
    step of a model, or a step of another model of the same form, compiles the same graphs
    again: most of a step's set-up. A compiled function is reused only when PyTensor's
    ``equal_computations`` finds that the graph computes the same thing from its inputs
    (equal ops and constants, the same shared variables), the inputs are fresh variables
    (no computed ones) that the graph reads in the same places as the earlier one's, and
    the input and output types, the keyword arguments and the configuration of the
    compilation are equal. Anything else is compiled afresh: graphs with random variables
    or a negative zero among their constants (``equal_computations`` finds ``-0.0`` equal
    to ``0.0``), and calls with keyword arguments other than a string ``mode`` or
    ``on_unused_input``. The caller gets a copy of its own (its own storage; the compiled
    code is shared).
    """
    outs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    key = _cache_key(inputs, outs, isinstance(outputs, list | tuple), kwargs)
    if key is None:
        return pm_compile(inputs, outputs, **kwargs)
    inputs = list(inputs)
    with _COMPILED_LOCK:
        for at, (old_key, old_inputs, old_outputs, fn) in enumerate(_COMPILED):
            if old_key == key and _same_graph(inputs, outs, old_inputs, old_outputs):
                _COMPILED.append(_COMPILED.pop(at))
                return fn.copy(share_memory=False)
    fn = pm_compile(inputs, outputs, **kwargs)
    with _COMPILED_LOCK:
        _COMPILED.append((key, inputs, outs, fn.copy(share_memory=False)))
        del _COMPILED[:-_COMPILED_SIZE]
    return fn


def _same_graph(inputs, outputs, old_inputs, old_outputs) -> bool:
    # equal_computations pairs the inputs, but takes a variable met in both graphs as equal
    # to itself wherever it sits: an input of both calls must sit at the same place.
    shared = set(inputs) & set(old_inputs)
    if any((a in shared or b in shared) and a is not b for a, b in zip(inputs, old_inputs)):
        return False
    return equal_computations(outputs, old_outputs, in_xs=inputs, in_ys=old_inputs)


def _cache_key(inputs, outputs, as_list: bool, kwargs) -> tuple | None:
    """What must be equal for a compiled function to be reused, before the graphs are
    compared node by node; ``None`` if the call is not to be reused."""
    if not all(isinstance(kwargs[k], _REUSABLE_KWARGS.get(k, ())) for k in kwargs):
        return None
    if not all(isinstance(v, Variable) for v in [*inputs, *outputs]):
        return None
    # Inputs must be fresh variables (a computed one would be compared by how it is
    # computed, not taken as given), and everything else the graph reads public leaves.
    if any(i.owner is not None or isinstance(i, Constant) for i in inputs):
        return None
    for leaf in graph_inputs(outputs):
        if leaf in inputs:
            continue
        if isinstance(leaf, Constant):
            if _has_negative_zero(leaf.data):
                return None
        elif not isinstance(leaf, SharedVariable) or isinstance(leaf.type, RandomType):
            return None  # (a missing input, or a generator pymc's compile would reseed)
    try:  # (pymc's compile drops parameter checks in a model with check_bounds=False)
        from pymc.model import modelcontext

        check_bounds = modelcontext(None).check_bounds
    except TypeError:
        check_bounds = True
    config = pytensor.config
    return (
        tuple(i.type for i in inputs),
        tuple(o.type for o in outputs),
        as_list,
        tuple(sorted(kwargs.items())),
        check_bounds,
        (str(config.mode), config.linker, config.optimizer, config.floatX),
    )


def _has_negative_zero(value) -> bool:
    value = np.asarray(value)
    return value.dtype.kind in "fc" and bool(np.any((value == 0) & np.signbit(value.real)))


def withholding_details(what: str, fn, *args):
    """``fn(*args)``, re-raising any error by its type only, its outputs as NumPy arrays.

    PyTensor messages can print input values (an out-of-range index, a shape, a failed
    check): with the data among the inputs those are private. A backend other than the
    default one (JAX) returns its own arrays: they become NumPy arrays here, so that the
    kernels and PyMC's trace (which rejects a ``jax.Array`` in a chain's point) see NumPy.
    """
    try:
        out = fn(*args)
    except Exception as err:
        raise RuntimeError(
            f"Evaluating {what} failed ({type(err).__name__}); the message is withheld "
            "because it may show data values."
        ) from None
    if isinstance(out, list | tuple):
        return type(out)(_as_numpy(o) for o in out)
    return _as_numpy(out)


def _as_numpy(value):
    return value if isinstance(value, np.ndarray | np.generic) else np.asarray(value)


def as_list(columns: list[Variable] | Variable) -> list[Variable]:
    """Per-datum gradient columns, or an (n, d) matrix of rows, as a list of outputs."""
    return columns if isinstance(columns, list) else [columns]


_FLOAT32_BACKEND = (
    "The compile_kwargs' backend computes float64 values in float32 (JAX does unless "
    "jax_enable_x64 is on: PyTensor turns it on only when it first loads JAX with floatX = "
    "float64). Clipped sums rounded to float32 can move by more than the clip bound their noise "
    "is scaled for. Call jax.config.update('jax_enable_x64', True) before building the step, "
    "or use the default backend."
)


def check_backend_keeps_float64(compile_kwargs: dict) -> None:
    """Refuse a backend that silently computes float64 in float32, before any data is read.

    The clamps and sums of every release are float64 graphs (:meth:`PrivateModel.clipped_ratio`);
    a backend that runs them in float32 rounds the bound and the sum (a found case: JAX
    without x64). Checked on a public number.
    """
    x = pt.scalar("x", dtype="float64")
    value = compile_function([x], x * 1.0, **compile_kwargs)(np.float64(0.1))
    if np.asarray(value).dtype != np.float64 or float(value) != 0.1:
        raise UnsupportedModelError(_FLOAT32_BACKEND)


def require_float64(value, what: str):
    """``value`` if it is float64; else refused (a second line behind the backend check)."""
    if np.asarray(value).dtype != np.float64:
        raise RuntimeError(f"{what} came back in {np.asarray(value).dtype}: " + _FLOAT32_BACKEND)
    return value


def without_checks_on(graph: Variable, data: Sequence[Variable]) -> Variable:
    """``graph`` with every parameter check whose condition reads the data taken out.

    PyMC's checks (``check_parameters``: σ > 0, lower ≤ c ≤ upper, …) reduce their condition
    over all rows, and PyMC compiles them to ``switch(all(condition), logp, -inf)``: one
    person's value outside a parameter's domain (a negative exposure, a mode outside its
    bounds) would set every ℓ_j to −inf, far more than that person's clipped share. Without
    the check each row keeps its own density formula's value; a non-finite one is clipped
    like any other row's (±inf to ±bound, NaN to 0). Checks on parameters alone (the same
    for every row) are kept.
    """
    data = list(data)

    def unchecked(node, inputs):
        if isinstance(node.op, CheckAndRaise) and reads_any(node.inputs[1:], data):
            return [inputs[0]]
        return None

    (out,) = rebuild_graph([graph], {}, substitute=unchecked)
    return out


def rebuild_graph(outputs: list[Variable], replace: dict, substitute=None) -> list[Variable]:
    """``outputs`` with ``replace`` applied, re-deriving the types of every node downstream.

    Unlike ``graph_replace``, a replacement may have a less specific type (a leading length
    of ``None`` instead of n): each affected node is rebuilt with ``make_node``, so its
    output types follow the new inputs, and a ``SpecifyShape`` of an affected variable drops
    its leading length. Nodes not downstream of a replacement are kept as they are.
    ``substitute(node, new_inputs)``, where given, returns the outputs that replace a node
    (a check taken out, a solve rewritten), or None to keep it.
    """
    memo = dict(replace)
    batches = set(replace.values())
    for node in io_toposort(list(graph_inputs(outputs)), outputs):
        new_inputs = [memo.get(i, i) for i in node.inputs]
        substituted = substitute(node, new_inputs) if substitute is not None else None
        if substituted is not None:
            memo.update(zip(node.outputs, substituted))
            continue
        # (a symbolic distribution's make_node pins a batch to the length of the NumPy
        # array it replaced, pm.Censored's per-row bounds: relaxed when met again)
        pinned = isinstance(node.op, SpecifyShape) and new_inputs[0] in batches
        if all(a is b for a, b in zip(new_inputs, node.inputs)) and not pinned:
            continue
        if isinstance(node.op, SpecifyShape) and new_inputs[0].ndim > 0:
            x, *shape = new_inputs
            memo[node.outputs[0]] = pt.specify_shape(x, (None, *shape[1:]))
            continue
        memo.update(zip(node.outputs, node.op.make_node(*new_inputs).outputs))
    return [memo.get(o, o) for o in outputs]
