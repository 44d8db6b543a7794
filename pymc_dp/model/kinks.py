"""Kinks: where a per-datum log-likelihood is not smooth in the parameters, row by row.

A quantile regression (``pm.AsymmetricLaplace``), a Laplace likelihood or a mean with
``pt.maximum(…, 0)`` has, in every row, a kink at a point that moves with the row: ``|y_j −
μ|`` bends at ``μ = y_j``. Each row's log-likelihood is then piecewise linear near the
posterior, its Hessian zero but at its own kink, while the sum over rows is smooth (the
kinks are spread over the data). A curvature read from per-datum Hessians sees almost
nothing there; the warm-up reads it instead from differences of clipped gradients over a
posterior sd (:func:`pymc_dp.kernels.warmup.laplace_warmup`).

:func:`row_kinks` finds such kinks from the graph's structure alone, never data: a node
whose scalar operation is registered here (:func:`register_kinked`, with the inputs whose
crossing of a point makes the kink) and whose such input depends on both θ and the row.
A ``Switch`` or a ``Clip`` is not registered: PyMC's numerically stable formulas (a normal
log-CDF, a censored or hurdle likelihood) switch between two expressions of one smooth
function, its categorical likelihoods clip probabilities as a guard, and the graph cannot
tell those from a kink. Inner graphs (``OpFromGraph``, a ``Composite``) are searched,
but for Ops registered smooth (:func:`register_smooth`: the stable log-sum-exp's ``max``
cancels out). Finding a kink changes how the warm-up reads the curvature, not what is
private, so a miss or a false find costs accuracy, never privacy.
"""

from __future__ import annotations

from pytensor.graph.basic import Variable
from pytensor.graph.traversal import io_toposort
from pytensor.scalar import basic as ps
from pytensor.tensor.special import LogSoftmax, LogSumExp, Softmax

from pymc_dp.model.likelihood_parameters import _depends_on
from pymc_dp.model.row_locality import inner_graph_outputs

__all__ = ["register_kinked", "register_smooth", "row_kinks"]

#: scalar operation type → which of its inputs bend the output where they cross a point
#: (None: any input; ``max(a, b)`` bends where a = b)
_KINKED: dict[type, tuple[int, ...] | None] = {}


def register_kinked(op_type: type, inputs: tuple[int, ...] | None = None) -> type:
    """Register a scalar operation whose derivative jumps where ``inputs`` cross a point."""
    _KINKED[op_type] = inputs
    return op_type


for _op in (ps.Abs, ps.Sign, ps.Floor, ps.Ceil, ps.RoundHalfToEven,
            ps.RoundHalfAwayFromZero, ps.Trunc):
    register_kinked(_op, (0,))
register_kinked(ps.Maximum)
register_kinked(ps.Minimum)
# (not ``Clip``: PyMC clips probabilities that cannot leave [0, 1] but by rounding, as
# OrderedLogistic's, and a guard is not a kink)

#: Ops with an inner graph that are smooth whatever their inner graph's operations (the
#: stable log-sum-exp's ``max`` cancels out): not searched.
_SMOOTH: set[type] = set()


def register_smooth(op_type: type) -> type:
    """Register an Op whose inner graph uses kinked operations for a smooth function."""
    _SMOOTH.add(op_type)
    return op_type


for _op in (LogSumExp, LogSoftmax, Softmax):
    register_smooth(_op)


def _scalar_op(op):
    """The scalar operation an Elemwise or a reduction applies (or ``op`` itself, inside a
    ``Composite``), if any."""
    if isinstance(op, ps.ScalarOp):
        return op
    return getattr(getattr(op, "core_op", op), "scalar_op", None)


def _kinked_in(outputs, on_both) -> list[str]:
    """Names of the registered scalar operations in ``outputs``' graph whose bending inputs
    ``on_both(var)`` says depend on θ and a row (inner graphs: any such operation)."""
    found = []
    for node in io_toposort([], outputs):
        scalar = _scalar_op(node.op)
        if scalar is not None and type(scalar) in _KINKED:
            which = _KINKED[type(scalar)]
            inputs = node.inputs if which is None else [node.inputs[k] for k in which]
            if any(on_both(v) for v in inputs):
                found.append(type(scalar).__name__)
        inner = [] if type(node.op) in _SMOOTH else inner_graph_outputs(node.op)
        if scalar is not None and hasattr(scalar, "fgraph"):  # (a Composite)
            inner = list(scalar.fgraph.outputs)
        if inner and any(on_both(v) for v in node.inputs):
            found += _kinked_in(inner, lambda _: True)
    return found


def row_kinks(per_datum: Variable, theta: Variable, rows) -> tuple[str, ...]:
    """The kinked scalar operations (sorted names, no repeats) of the per-datum
    log-likelihood ``per_datum`` on a quantity that moves with both ``theta`` and a row of
    ``rows``: empty for a likelihood that is smooth in θ row by row. Reads the graph only."""
    on_theta = _depends_on([per_datum], {theta})
    on_rows = _depends_on([per_datum], set(rows))
    return tuple(sorted(set(_kinked_in(
        [per_datum], lambda v: bool(on_theta.get(v)) and bool(on_rows.get(v))
    ))))
