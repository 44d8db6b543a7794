"""Kinks: where a per-datum log-likelihood is not smooth in the parameters, row by row.

A quantile regression (``pm.AsymmetricLaplace``), a Laplace likelihood or a mean with
``pt.maximum(…, 0)`` has, in every row, a kink at a point that moves with the row: ``|y_j −
μ|`` bends at ``μ = y_j``. Each row's log-likelihood is then piecewise linear near the
posterior, its Hessian zero but at its own kink, while the sum over rows is smooth (the
kinks are spread over the data). A curvature read from per-datum Hessians sees almost
nothing there; the warm-up reads it instead from differences of clipped gradients over a
posterior sd (:func:`pymc_dp.kernels.warmup.laplace_warmup`).

:func:`model_kinks` finds such kinks from the model as written, never from data: a node
whose scalar operation is registered here (:func:`register_kinked`, with the inputs whose
crossing of a point makes the kink) and whose such input depends on both θ and the row,
in the observed variables' log-densities built on symbolic stand-ins for the data. The
decision is public (it changes which releases the warm-up makes), so it must not read the
graph PyMC builds with the data in it, where expressions of NumPy arrays are folded by
value. A ``Switch`` or a ``Clip`` is not registered: PyMC's numerically stable formulas (a
normal log-CDF, a censored or hurdle likelihood) switch between two expressions of one
smooth function, its categorical likelihoods clip probabilities as a guard, and the graph
cannot tell those from a kink. Inner graphs (``OpFromGraph``, a ``Composite``) are
searched, but for Ops registered smooth (:func:`register_smooth`: the stable log-sum-exp's
``max`` cancels out). A missed or a false kink costs accuracy, never privacy.
"""

from __future__ import annotations

import numpy as np

from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors, io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar import basic as ps
from pytensor.tensor.special import LogSoftmax, LogSumExp, Softmax

from pymc_dp.model.likelihood_parameters import _depends_on
from pymc_dp.model.row_locality import inner_graph_outputs

__all__ = ["kinks_of", "model_kinks", "register_kinked", "register_smooth"]

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


def _inner_kinks(op, memo: dict) -> set[str]:
    """Every registered operation anywhere in ``op``'s inner graphs (once per Op)."""
    if op not in memo:
        scalar = _scalar_op(op)
        inner = [] if type(op) in _SMOOTH else inner_graph_outputs(op)
        if scalar is not None and hasattr(scalar, "fgraph"):  # (a Composite)
            inner = list(scalar.fgraph.outputs)
        found = set()
        for node in io_toposort([], inner):
            kinked = _scalar_op(node.op)
            if kinked is not None and type(kinked) in _KINKED:
                found.add(type(kinked).__name__)
            found |= _inner_kinks(node.op, memo)
        memo[op] = found
    return memo[op]


def kinks_of(graph: Variable, theta, rows) -> tuple[str, ...]:
    """The kinked operations (sorted names, no repeats) of ``graph`` whose bending input
    depends on a variable of ``theta`` and on one of ``rows``; inside an inner graph whose
    inputs depend on both, any such operation. Reads the graph's structure only."""
    on_theta = _depends_on([graph], set(theta))
    on_rows = _depends_on([graph], set(rows))
    found, memo = set(), {}
    for node in io_toposort([], [graph]):
        scalar = _scalar_op(node.op)
        if scalar is not None and type(scalar) in _KINKED:
            which = _KINKED[type(scalar)]
            bending = node.inputs if which is None else [node.inputs[k] for k in which]
            if any(on_theta.get(v) and on_rows.get(v) for v in bending):
                found.add(type(scalar).__name__)
        if any(on_theta.get(v) for v in node.inputs) and any(on_rows.get(v) for v in node.inputs):
            found |= _inner_kinks(node.op, memo)
    return tuple(sorted(found))


def _without_checks(graph: Variable) -> Variable:
    """``graph`` with its parameter checks (``CheckAndRaise``: PyMC's ``check_parameters``)
    replaced by the values they pass on: a condition is not part of the density (the
    categorical likelihood's check that probabilities sum to 1 takes an ``abs``)."""
    checks = {
        node.outputs[0]: node.inputs[0]
        for node in io_toposort([], [graph])
        if isinstance(node.op, CheckAndRaise)
    }
    return graph_replace([graph], checks, strict=False)[0] if checks else graph


def model_kinks(model, n: int, built=None) -> tuple[str, ...]:
    """:func:`kinks_of` the log-densities of ``model``'s observed variables, built on
    symbolic stand-ins for the data (:func:`pymc_dp.model.stand_ins.likelihood_on_stand_ins`,
    or ``built``, its result): the observed values and every NumPy array with n rows are
    rows, and so are ``pm.Data`` containers of that length. θ is the free variables.

    Not the model's own log-likelihood graph: PyMC folds expressions of NumPy arrays into
    new constants when it builds it, and which operations survive can depend on the values
    (a ``switch`` on a covariate loses the branch no row takes), so a decision read from it
    could say something about the data. A model whose densities PyMC cannot build on the
    stand-ins counts as smooth (a public default; :class:`~pymc_dp.model.PrivateModel`
    refuses it).
    """
    from pymc_dp.model.stand_ins import likelihood_on_stand_ins

    if built is None:
        try:
            built = likelihood_on_stand_ins(model, n)
        except Exception:  # noqa: BLE001 (stand-ins only: nothing here reads data)
            return ()
    containers = [
        v for v in ancestors(built.terms)
        if isinstance(v, SharedVariable) and n in np.shape(v.get_value(borrow=True))
    ]
    rows = [*built.data.values(), *containers]
    found = set()
    for term in built.terms:
        found |= set(kinks_of(_without_checks(term), built.theta.values(), rows))
    return tuple(sorted(found))
