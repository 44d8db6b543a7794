"""The likelihood's own parameters: what the per-datum log-likelihood reads of θ.

A model's likelihood rarely depends on every coordinate of its value-space point θ
directly. A non-centred hierarchical model's rows read the group intercepts
``a = μ + σ·z``, not ``(μ, log σ, z)``; a regression's rows read ``(β, σ)``. Call
``φ(θ)`` the vector of those quantities: the graph nodes the per-datum log-likelihood
computes from θ alone, before anything is combined with a row of data (the *frontier*
of the graph). With n rows the log-likelihood is close to quadratic in φ, while it can be
far from quadratic in θ (the hierarchical model's likelihood is constant along the curved
ridge ``μ + σ·z = a``, and a quadratic in θ replaces the curve by its tangent).

:class:`LikelihoodParameters` finds φ and compiles ``φ(θ)`` and ``J(θ)ᵀ w`` (J = ∂φ/∂θ).
It reads the graph's structure only, never data. Here φ's outer graph is checked not to
read the variables named private; the complete check, which also refuses inner graphs
(``OpFromGraph``, ``Scan``) and any constant with one entry per person, is
:meth:`pymc_dp.model.PrivateModel.likelihood_parameters`'s: build φ through it. Then
anything computed from φ and released values is post-processing
(:mod:`pymc_dp.kernels.surrogate`).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pytensor.compile.sharedvalue import SharedVariable
from pytensor.gradient import NullTypeGradError, grad
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors, graph_inputs, io_toposort
from pytensor.scalar import basic as ps
from pytensor.scalar import math as psm
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.subtensor import AdvancedSubtensor

from pymc_dp.model.graphs import compile_function

__all__ = ["LikelihoodParameters", "likelihood_frontier"]

#: Scalar operations that are one-to-one in their one input when the others are constants:
#: a frontier node made by one of them (``σ = exp(log σ)``) is replaced by its input, so
#: that the quadratic approximation is in the coordinates the sampler already uses for it
#: (``log σ``), where a likelihood is closer to Gaussian.
_ONE_TO_ONE = (
    ps.Exp, ps.Log, ps.Neg, ps.Add, ps.Sub, ps.Mul, ps.TrueDiv, ps.Log1p, ps.Expm1,
    psm.Sigmoid, psm.Softplus,
)


def _depends_on(outputs, wanted: set) -> dict:
    """For every variable of the graph, whether one of ``wanted`` is among its ancestors."""
    depends = {}
    for node in io_toposort([], outputs):
        for var in node.inputs:
            if var not in depends:
                depends[var] = var in wanted
        hit = any(depends[v] for v in node.inputs)
        for out in node.outputs:
            depends[out] = hit
    for out in outputs:
        depends.setdefault(out, out in wanted)
    return depends


def _peel(var: Variable, on_theta: dict) -> Variable:
    """``var`` with one-to-one elementwise maps and dimension shuffles of a single θ-dependent
    input taken off (``exp(log σ)`` → ``log σ``)."""
    while var.owner is not None:
        op = var.owner.op
        moving = [i for i in var.owner.inputs if on_theta.get(i, False)]
        if len(moving) != 1 or moving[0].dtype not in ("float32", "float64"):
            return var
        if isinstance(op, DimShuffle) and not op.drop:
            var = moving[0]
        elif (
            isinstance(op, Elemwise)
            and isinstance(op.scalar_op, _ONE_TO_ONE)
            and moving[0].type.broadcastable == var.type.broadcastable
        ):
            var = moving[0]
        else:
            return var
    return var


def _gather(node, on_theta, on_rows):
    """``(P, idx)`` if ``node`` indexes a θ-only array P by a per-row index vector on its
    first axis (``z[group]``), else ``None``."""
    if not isinstance(node.op, AdvancedSubtensor) or len(node.inputs) != 2:
        return None
    table, idx = node.inputs
    if not (on_theta.get(table) and not on_rows.get(table) and on_rows.get(idx)):
        return None
    if idx.ndim != 1 or not idx.dtype.startswith(("int", "uint")):
        return None
    if table.ndim != node.outputs[0].ndim:
        return None
    return table, idx


def likelihood_frontier(per_datum: Variable, theta: Variable, rows) -> list[Variable]:
    """The floating-point nodes of ``per_datum`` computed from ``theta`` alone that meet a
    node reading ``rows`` (the per-datum inputs): the likelihood's parameters, peeled
    (:func:`_peel`). Order: the graph's topological order; no repeats.

    Indexing by a per-row index is moved after elementwise arithmetic on what it indexes
    (``μ + σ·z[g] = (μ + σ·z)[g]``, also inside a longer sum or product), so that a
    hierarchical model written either way reads its group intercepts ``μ + σ·z``, not
    ``μ``, ``σ`` and ``z`` apart: fewer numbers than θ, a likelihood near-quadratic in them.
    """
    return list(_frontier(per_datum, theta, rows))


def _frontier(per_datum: Variable, theta: Variable, rows) -> dict:
    """:func:`likelihood_frontier` as a dict: each node → the per-row index variables every
    row reads it through (``a[g]``: a row reads one entry of it), or ``None`` where some
    row reads it whole."""
    on_theta = _depends_on([per_datum], {theta})
    on_rows = _depends_on([per_datum], set(rows))
    gathered = {}  # var -> (P, idx): var == P[idx], P computed from θ alone
    frontier = []

    def param(var):
        return bool(on_theta.get(var)) and not on_rows.get(var) and var.dtype.startswith("float")

    def virtual(op, inputs):
        out = op(*inputs)
        on_theta[out], on_rows[out] = True, False
        return out

    for node in io_toposort([], [per_datum]):
        if not any(on_rows[o] for o in node.outputs):
            continue
        found = _gather(node, on_theta, on_rows)
        if found is not None:
            gathered[node.outputs[0]] = found
            continue
        inputs = list(node.inputs)
        if isinstance(node.op, Elemwise) and any(v in gathered for v in inputs):
            indices = {gathered[v][1] for v in inputs if v in gathered}
            fits = [
                v in gathered or (not on_rows.get(v) and v.type.broadcastable[:1] == (True,))
                for v in inputs
            ]
            if len(indices) == 1 and len(node.outputs) == 1:
                (idx,) = indices
                mapped = [gathered.get(v, (v,))[0] for v, ok in zip(inputs, fits) if ok]
                if all(fits):
                    gathered[node.outputs[0]] = (virtual(node.op, mapped), idx)
                    continue
                if isinstance(node.op.scalar_op, ps.Add | ps.Mul):
                    # (associative and commutative: the fitting terms form one parameter)
                    part = mapped[0] if len(mapped) == 1 else virtual(node.op, mapped)
                    frontier.append((_peel(part, on_theta), idx))
                    inputs = [v for v, ok in zip(inputs, fits) if not ok]
        for var in inputs:
            if var in gathered:
                frontier.append((_peel(gathered[var][0], on_theta), gathered[var][1]))
            elif param(var):
                frontier.append((_peel(var, on_theta), None))
    indexed = {}
    for var, idx in frontier:  # (read whole anywhere: not row-sparse)
        before = indexed.get(var, frozenset())
        indexed[var] = None if before is None or idx is None else before | {idx}
    return indexed


class LikelihoodParameters:
    """``φ(θ)`` and its Jacobian for a :class:`~pymc_dp.model.PrivateModel`'s likelihood.

    Parameters
    ----------
    per_datum : Variable
        The per-datum log-likelihood graph, a function of ``theta`` and ``rows``.
    theta : Variable
        The raveled value-space point.
    rows : sequence of Variable
        The per-datum inputs (data placeholders).
    private : sequence of Variable
        Variables holding data besides ``rows`` (observed values, private containers): φ's
        graph must not read them.
    compile_kwargs : dict, optional

    Raises
    ------
    ValueError
        If the likelihood has no such parameters, φ's outer graph reads a variable of
        ``rows`` or ``private`` or an unnamed input, or φ has no gradient. (A caller then keeps to the Gaussian
        approximation on θ; nothing here is private, so falling back is safe.)
    """

    def __init__(self, per_datum, theta, rows, private=(), compile_kwargs=None):
        through = _frontier(per_datum, theta, rows)
        if not through:
            raise ValueError("the log-likelihood reads no parameter")
        indexed = {v: idx is not None for v, idx in through.items()}
        phi = pt.concatenate([pt.as_tensor(v).astype("float64").ravel() for v in indexed])
        tables = np.cumsum(list(indexed.values())) * np.array(list(indexed.values()))
        by_index = pt.concatenate(
            [pt.full_like(pt.as_tensor(v).ravel(), int(t), dtype="int32")
             for v, t in zip(indexed, tables)]
        )
        forbidden = set(rows) | set(private)
        for var in graph_inputs([phi]):
            if var is theta or isinstance(var, Constant):
                continue
            if isinstance(var, SharedVariable) and var not in forbidden:
                continue  # (a public container: frozen by the model adapter)
            raise ValueError("the likelihood's parameters read more than θ and constants")
        if any(a in forbidden for a in ancestors([phi])):
            raise ValueError("the likelihood's parameters read data")
        weights = pt.vector("w", dtype="float64")
        try:
            vjp = grad(pt.dot(weights, phi), theta, disconnected_inputs="ignore")
        except NullTypeGradError as err:
            raise ValueError("the likelihood's parameters have no gradient") from err
        kwargs = dict(compile_kwargs or {})
        #: φ's graph, a function of ``theta`` and public constants only
        self.graph, self.theta = phi, theta
        self._phi_fn = compile_function([theta], phi, **kwargs)
        self._by_index_fn = compile_function(
            [theta], by_index, on_unused_input="ignore", **kwargs
        )
        self._vjp_fn = compile_function(
            [theta, weights], vjp, on_unused_input="ignore", **kwargs
        )
        self._dtype = theta.dtype
        families = {}
        for idx, t in zip(through.values(), tables):
            if idx is not None and len(idx) == 1:
                families.setdefault(next(iter(idx)), []).append(int(t))
        #: the tables (as numbered by :meth:`row_groups`) that rows read through one and the
        #: same index variable, as in ``a[g] + b[g]·x``: a row reads entry k of each
        self.paired_tables = tuple(tuple(ts) for ts in families.values() if len(ts) > 1)

    def __call__(self, q: np.ndarray) -> np.ndarray:
        """``φ(q)``."""
        return np.asarray(self._phi_fn(np.asarray(q, dtype=self._dtype)), dtype=float)

    def row_groups(self, q: np.ndarray) -> np.ndarray:
        """For each component of φ, 0 if the rows read it whole, else t ≥ 1 if it belongs
        to the t-th table the rows read through a per-row index (``a[g]``: a row's gradient
        on such a table is zero but for its own group's entries, and alike in size across
        groups). Public (the graph's structure); it shapes the warm-up's release
        coordinates, never a bound."""
        return np.asarray(self._by_index_fn(np.asarray(q, dtype=self._dtype)), dtype=int)

    def vjp(self, q: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``J(q)ᵀ w``, the gradient of ``w · φ`` on θ."""
        return np.asarray(
            self._vjp_fn(np.asarray(q, dtype=self._dtype), np.asarray(w, dtype=float)),
            dtype=float,
        )

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """``J(q) = ∂φ/∂θ``, one row per component of φ."""
        size = self(q).size
        eye = np.eye(size)
        if not size:
            return np.zeros((0, len(q)))
        return np.stack([self.vjp(q, eye[k]) for k in range(size)])

    def curvature(self, q: np.ndarray, w: np.ndarray, *, step: float = 1e-5) -> np.ndarray:
        """``∇²_θ (w · φ)(q)`` by central differences of :meth:`vjp` (symmetrised)."""
        q = np.asarray(q, dtype=float)
        dim = q.size
        steps = step * np.maximum(1.0, np.abs(q))
        out = np.empty((dim, dim))
        for k in range(dim):
            e = np.zeros(dim)
            e[k] = steps[k]
            out[:, k] = (self.vjp(q + e, w) - self.vjp(q - e, w)) / (2.0 * steps[k])
        return 0.5 * (out + out.T)
