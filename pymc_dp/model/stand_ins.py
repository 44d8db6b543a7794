"""The per-datum log-likelihood built on symbolic stand-ins for the data.

PyMC folds expressions of NumPy arrays into new constants while it builds a log-density, and
which operations survive the folding can depend on the values: ``b * x`` disappears when
``x`` is all zeros, ``switch(x > 5, f, g)`` loses the branch no row takes, a censored
likelihood loses its censored branch when no row is censored. A decision read from such a
graph (which parameters the rows read, whether a row's density bends, whether the graph is
row-local) would then say something about the data, outside the accountant's count.

:func:`likelihood_on_stand_ins` builds the observed variables' log-densities with every
data array the model's graphs hold as a NumPy array (observed values, per-row covariates,
index arrays: any array with n rows put to a use other than a shape or size) replaced by a
symbolic variable of the same type, and the free variables by stand-ins too. No data value
is in the graph PyMC rewrites, so nothing is folded by value. ``pm.Data`` containers are
shared variables, which PyMC never folds. The arrays are put back afterwards
(:meth:`StandInLikelihood.on_model`), as inputs the rewrites have not seen.

An array the stand-ins cannot reach (captured by a ``pm.CustomDist(logp=...)`` function, or
held inside a distribution's own inner graph) enters the graph only while PyMC builds it,
and is folded by value as before; such a term is marked ``folded``, and every decision read
from its structure takes a public default instead.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import numpy as np

from pymc.logprob.abstract import _logprob
from pymc.logprob.basic import transformed_conditional_logp
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs, io_toposort

from pymc_dp.model.constants import constant_uses, shape_use

__all__ = ["StandInLikelihood", "likelihood_on_stand_ins"]


@dataclass(frozen=True)
class StandInLikelihood:
    """The observed variables' log-densities (one term per observed variable, in the
    model's order) on stand-ins.

    Attributes
    ----------
    terms : list of Variable
        The log-densities, reading ``theta``'s and ``data``'s stand-ins (and ``pm.Data``).
    theta : dict
        Free random variable → its stand-in (on the constrained space).
    data : dict
        NumPy array constant of the model (observed values included) → its stand-in.
    folded : tuple of bool
        Per term: whether it holds an array with n rows the stand-ins could not reach, so
        that its structure may depend on data values.
    """

    terms: list
    theta: dict
    data: dict
    folded: tuple

    def on_model(self, model) -> list[Variable]:
        """The terms in the model's value variables (transforms applied) and with the
        original arrays back in place of their stand-ins. Nothing is rewritten: the arrays
        come back as inputs no rewrite has seen."""
        free = list(self.theta)
        values = model.replace_rvs_by_values(free) if free else []
        back = {self.theta[rv]: v for rv, v in zip(free, values)}
        back.update({stand_in: const for const, stand_in in self.data.items()})
        return list(graph_replace(self.terms, back, strict=False))


def likelihood_on_stand_ins(model, n: int) -> StandInLikelihood:
    """Build the per-datum log-likelihood of ``model`` (n rows) on stand-ins; reads shapes,
    types and structure only.

    Raises what PyMC raises for a log-density it cannot build.
    """
    free = list(model.free_RVs)
    observed = list(model.observed_RVs)
    theta = {rv: rv.type() for rv in free}
    data = {
        c: c.type() for c in _value_arrays(observed, free, n)
    }
    for rv in observed:
        value = model.rvs_to_values[rv]
        if isinstance(value, Constant) and value not in data:
            data[value] = value.type()
    written = graph_replace(observed, {**theta, **data}, strict=False)
    rvs_to_values = {}
    for clone, rv in zip(written, observed):
        value = model.rvs_to_values[rv]
        # (an observed value computed from pm.Data stays as it is: shared, never folded)
        rvs_to_values[clone] = data.get(value, value)
    with warnings.catch_warnings():  # (about clones of the free variables)
        warnings.simplefilter("ignore")
        terms = transformed_conditional_logp(
            written,
            rvs_to_values=rvs_to_values,
            rvs_to_transforms={clone: None for clone in written},
        )
    return StandInLikelihood(list(terms), theta, data, tuple(_unreached(written, rvs_to_values, n)))


def _unreached(written, rvs_to_values, n: int):
    """Per observed variable (on stand-ins): whether an array with n rows is beyond the
    stand-ins' reach. Read before PyMC's rewrites, from the variable's own graph (inner
    graphs included) and its log-density as the distribution writes it: after them, a
    folded array may be gone altogether, and that would depend on its values."""
    for rv in written:
        if _holds_rows([rv], n):
            yield True
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                raw = _logprob(rv.owner.op, [rvs_to_values[rv]], *rv.owner.inputs)
        except NotImplementedError:
            yield False  # derived from its inner graph, searched above
            continue
        yield _holds_rows([raw] if isinstance(raw, Variable) else list(raw), n)


def _value_arrays(outputs, blockers, n: int) -> list[Constant]:
    """Array constants of the outer graph of ``outputs`` with n rows and a use as a value
    (not only as a shape or a size)."""
    found = {}
    nodes = io_toposort([*graph_inputs(outputs, blockers=blockers), *blockers], outputs)
    for node in nodes:
        for k, i in enumerate(node.inputs):
            if _rows(i, n) and not shape_use(node, k):
                found[i] = None
    found.update({o: None for o in outputs if _rows(o, n)})
    return list(found)


def _holds_rows(outputs, n: int) -> bool:
    """Whether an array constant with n rows is put to a use as a value anywhere in the
    graph of ``outputs``, inner graphs included."""
    return any(
        _rows(c, n) and (node is None or not shape_use(node, k))
        for c, node, k in constant_uses(outputs)
    )


def _rows(var, n: int) -> bool:
    if not isinstance(var, Constant) or getattr(var, "ndim", 0) == 0:
        return False
    shape = np.shape(var.data)
    return shape[0] == n and np.size(var.data) > 1
