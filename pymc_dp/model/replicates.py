"""Outcomes simulated from the model, row by row: the replicates the warm-up's debiased
clipped score needs (:mod:`pymc_dp.kernels.score_correction`).

For every person j and a point θ, a replicate is an outcome drawn from the model's own
distribution of y_j given θ and the person's covariates, by the inverse CDF of a uniform
``u_j`` drawn from the chain's generator (the number of random numbers drawn does not depend
on the data, unlike a rejection sampler's). The per-datum gradient at a replicate is what
person j's gradient would be if the model were true; the warm-up subtracts the mean clipping
error of a few of them from each person's clipped gradient.

Privacy rests on one fact, proven on the graph before anything is compiled (fail closed):
replicate j reads data row j only, and the uniforms. Each person's corrected gradient then
reads their own record only, is clipped again, and the release keeps its sensitivity. A
model whose replicates cannot be proven row-local, or whose outcomes have no inverse CDF
(mixtures, a beta-binomial, multivariate rows; the counts PyMC has none for get one in
:mod:`pymc_dp.model.inverse_cdfs`), has none: its warm-up runs
without the correction.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pymc.pytensorf import join_nonshared_inputs
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import graph_inputs

from pymc_dp.model.constants import constant_uses
from pymc_dp.model.data import numeric_value, reads_any
from pymc_dp.model.inverse_cdfs import inverse_cdf
from pymc_dp.model.row_locality import NotRowLocal, foreign_ops, prove_rows_first
from pymc_dp.model.graphs import (
    compile_function, rebuild_graph, withholding_details, without_checks_on,
)

__all__ = ["Replicates"]

#: Uniforms are kept this far inside (0, 1): the inverse CDF of 0 or 1 is often infinite.
_EDGE = 1e-12


class Replicates:
    """Simulated outcomes of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

    def can_replicate(self) -> bool:
        """Whether the model's outcomes can be simulated row by row (graph only, no data).

        Holds when every observed variable is a data array or container (not an expression),
        has an inverse CDF (:func:`~pymc_dp.model.inverse_cdfs.inverse_cdf`), does not
        depend on another observed variable, and the graph of its simulation is proven to
        read data row j only for row j, every array with one entry per person counted as
        per-row data. Decided by the graph and the arrays' shapes alone, never their values:
        the answer changes what the warm-up releases.
        """
        if "_replicate_graph" not in self.__dict__:
            self._replicate_graph = self._build_replicates()
            self._replicate_fn = None
        return self._replicate_graph is not None

    def _build_replicates(self):
        model = self.model
        where = {d.variable: i for i, d in enumerate(self.datum_inputs)}
        observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
        # (each outcome's distribution on the free variables' values: PyMC's inverse CDF of
        # a derived distribution, pm.Censored's, needs them replaced first)
        dists = [
            rv.owner.clone_with_new_inputs(model.replace_rvs_by_values(rv.owner.inputs))
            .default_output()
            for rv in model.observed_RVs
        ]
        slots, uniforms, outcomes = [], [], []
        for rv, value in zip(dists, observed_values):
            if value not in where:  # (an observation computed from pm.Data)
                return None
            u = pt.tensor(dtype="float64", shape=(None, *value.type.shape[1:]),
                          name=f"uniform_{len(slots)}")
            try:
                outcome = inverse_cdf(rv, u)
            except NotImplementedError:
                return None
            slots.append(where[value])
            uniforms.append(u)
            outcomes.append(outcome)
        # An outcome whose distribution reads another observation would be simulated from
        # its conditional given the real one, not jointly: the correction's mean-zero
        # premise would fail (not its privacy). Not handled.
        if reads_any(outcomes, observed_values):
            return None
        placeholders = dict(zip((d.variable for d in self.datum_inputs), self._placeholders))
        # Every other array with one entry per person (a NumPy covariate PyMC holds as a
        # constant, a container) becomes a per-row input of its own, fed its own value,
        # whether or not it is among the likelihood's inputs, whose list can depend on
        # values (PyTensor merges equal constants). By shape alone: what is decided here
        # changes what the warm-up releases, so it must not depend on the data.
        extra = {}
        for var in graph_inputs(outcomes):
            if var in placeholders or not isinstance(var, Constant | SharedVariable):
                continue
            shape = np.shape(numeric_value(var))
            if self.n_data not in shape:
                continue
            if shape[0] != self.n_data:  # (a per-person axis that is not the first)
                return None
            extra[var] = pt.tensor(dtype=var.dtype, shape=(None, *var.type.shape[1:]),
                                   name=f"per_row_{len(extra)}")
        outcomes = rebuild_graph(outcomes, {**placeholders, **extra})
        row_inputs = [*self._placeholders, *uniforms, *extra.values()]
        outcomes = [without_checks_on(o, row_inputs) for o in outcomes]
        # (one left inside an inner graph cannot be fed row by row: none allowed)
        if any(self.n_data in np.shape(c.data) for c, _, _ in constant_uses(outcomes)):
            return None
        outcomes, q = join_nonshared_inputs(self._initial_point, outcomes, self.value_vars)
        # (structure decides whether there are replicates; an index out of range, which
        # the likelihood's own check would have refused, raises like everywhere else)
        if foreign_ops(outcomes):
            return None
        try:
            prove_rows_first(outcomes, {p: 0 for p in row_inputs}, self.n_data)
        except NotRowLocal:
            return None
        extra_values = [np.asarray(numeric_value(v)) for v in extra]
        self._check_graph(
            outcomes, q, row_inputs, "The simulated outcomes",
            row_values=[*self._data_values,
                        *(np.full((self.n_data, *self._data_values[s].shape[1:]), 0.5)
                          for s in slots), *extra_values],
        )
        self._replicate_extra = (list(extra.values()), extra_values)
        return q, uniforms, outcomes, slots

    def compile_replicates(self) -> None:
        """Compile the simulation and the gradient rows it feeds (shapes only, no data
        read); a step calls it when it is built, so that a backend that cannot compile it
        fails before anything is released. Requires :meth:`can_replicate`."""
        if not self.can_replicate():
            raise ValueError("this model's outcomes cannot be simulated row by row")
        if self._replicate_fn is None:
            q_var, uniforms, outcomes, _ = self._replicate_graph
            extra_inputs, _ = self._replicate_extra
            inputs = [q_var, *uniforms, *self._placeholders, *extra_inputs]
            try:
                fn = compile_function(inputs, outcomes, on_unused_input="ignore",
                                      **self._compile_kwargs)
            except NotImplementedError:
                # A backend without an op some inverse CDF needs (JAX has no betaincinv,
                # Student-t's, without tensorflow-probability) draws the outcomes with
                # PyTensor's default one: they only feed the gradient rows, compiled as asked.
                kwargs = {k: v for k, v in self._compile_kwargs.items() if k != "mode"}
                fn = compile_function(inputs, outcomes, on_unused_input="ignore", **kwargs)
            fn.trust_input = True
            self._replicate_fn = fn
        self.compile_gradient_rows()

    def replicate_gradient_rows(self, q: np.ndarray, rng: np.random.Generator,
                                draws: int) -> list[np.ndarray]:
        """Per-datum gradient rows at ``draws`` simulated data sets (antithetic pairs).

        Each replicate is drawn at θ = ``q`` from the model, row by row, by the inverse
        CDF of uniforms from ``rng`` (``u`` and ``1 − u`` in pairs); row j of each returned
        array is ``∇_θ ℓ_j`` at person j's covariates and simulated outcome. Private (they
        read the covariates): only :func:`pymc_dp.kernels.score_correction.debiased_rows`
        may use them. Requires :meth:`can_replicate`.
        """
        self.compile_replicates()
        slots = self._replicate_graph[3]
        q = np.ascontiguousarray(q, dtype=self._q.dtype)
        shapes = [(self.n_data, *self._data_values[s].shape[1:]) for s in slots]
        rows = []
        for k in range(draws):
            if k % 2 == 0:  # (one draw of uniforms serves a pair: u and 1 − u)
                drawn = [np.clip(rng.random(shape), _EDGE, 1.0 - _EDGE) for shape in shapes]
            us = drawn if k % 2 == 0 else [1.0 - u for u in drawn]
            simulated = withholding_details(
                "the simulated outcomes", self._replicate_fn, q, *us, *self._data_values,
                *self._replicate_extra[1],
            )
            values = list(self._data_values)
            unusable = np.zeros(self.n_data, dtype=bool)
            for s, y in zip(slots, simulated):
                values[s], missing = _as_outcomes(y, values[s].dtype)
                unusable |= missing
            grads = withholding_details(
                "the per-datum gradients", self._gradient_rows_fn, q, *values
            )[0]
            if unusable.any():
                grads = np.where(unusable[:, None], np.nan, grads)
            rows.append(grads)
        return rows


def _as_outcomes(y, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Simulated outcomes in the data's dtype, and the rows where they cannot be: a NaN
    (an inverse CDF's bracket missed) or a count beyond an integer dtype's range, which a
    cast would turn into an arbitrary number. Those rows' replicate gradients become NaN,
    which the correction leaves out of that person's estimate (row by row: row j's mask
    reads outcome j only)."""
    y = np.asarray(y)
    if not np.issubdtype(dtype, np.integer):
        return y.astype(dtype, copy=False), np.zeros(len(y), dtype=bool)
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(y) & (y >= info.min) & (y <= info.max))
    bad_rows = bad.reshape(len(y), -1).any(axis=1)
    return np.where(bad, 0, y).astype(dtype), bad_rows
