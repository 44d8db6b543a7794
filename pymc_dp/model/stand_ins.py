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

An array the stand-ins cannot reach (captured by a ``pm.CustomDist`` logp or dist function)
enters the graph only while PyMC builds it, and would be folded by value there, where no
check of the model's own graphs can see what is computed with it. Every read of an array
constant's values during the build is watched (:func:`_array_values_read`): if the build
reads one that may hold one value per individual (n entries along an axis, or n entries
in all) other than the model's own arrays, which go in as copies, the model is refused.
A distribution that decides by the values of its constant inputs when it is created
(``pm.Censored`` drops a bound that is infinite in every row) is rebuilt on the
stand-ins (:func:`register_rebuild`).
"""

from __future__ import annotations

import threading
import warnings

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from pymc.distributions.censored import CensoredRV
from pymc.logprob.basic import transformed_conditional_logp
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.tensor.variable import TensorConstant

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.constants import shape_use

__all__ = ["StandInLikelihood", "likelihood_on_stand_ins", "register_rebuild"]


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
    copies : dict
        The model's other array constants → the copies the terms hold.
    """

    terms: list
    theta: dict
    data: dict
    copies: dict

    def on_model(self, model) -> list[Variable]:
        """The terms in the model's value variables (transforms applied) and with the
        original arrays back in place of their stand-ins. Nothing is rewritten: the arrays
        come back as inputs no rewrite has seen."""
        free = list(self.theta)
        values = model.replace_rvs_by_values(free) if free else []
        back = {self.theta[rv]: v for rv, v in zip(free, values)}
        back.update({stand_in: const for const, stand_in in self.data.items()})
        back.update({copy: const for const, copy in self.copies.items()})
        return list(graph_replace(self.terms, back, strict=False))


def likelihood_on_stand_ins(model, n: int) -> StandInLikelihood:
    """Build the per-datum log-likelihood of ``model`` (n rows) on stand-ins; reads shapes,
    types and structure only.

    Raises
    ------
    UnsupportedModelError
        If building it read the values of an array that may hold one value per
        individual and that the stand-ins could not reach (:func:`_array_values_read`).
    Whatever PyMC raises for a log-density it cannot build.
    """
    free = list(model.free_RVs)
    observed = list(model.observed_RVs)
    theta = {rv: rv.type() for rv in free}
    data = {c: c.type() for c in _value_arrays(observed, free, n)}
    for rv in observed:
        value = model.rvs_to_values[rv]
        if isinstance(value, Constant) and value not in data:
            data[value] = value.type()
    # The model's other arrays (shapes, public constants the checks of its own graphs
    # examine) go in as copies, and the copies' values may be read; the originals are
    # watched like any array, in case a function captured them too.
    copies = {
        c: TensorConstant(c.type, c.data, c.name)
        for c in graph_inputs(observed, blockers=free)
        if isinstance(c, TensorConstant) and c.ndim > 0 and c not in data
    }
    with _array_values_read(n, copies.values()) as read, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (about clones of the free variables)
        written = _rebuilt(graph_replace(observed, {**theta, **data, **copies}, strict=False))
        rvs_to_values = {}
        for clone, rv in zip(written, observed):
            value = model.rvs_to_values[rv]
            # (an observed value computed from pm.Data stays as it is: shared, never folded)
            rvs_to_values[clone] = data.get(value, value)
        terms = transformed_conditional_logp(
            written,
            rvs_to_values=rvs_to_values,
            rvs_to_transforms={clone: None for clone in written},
        )
    if read:
        raise UnsupportedModelError(_UNREACHED)
    return StandInLikelihood(list(terms), theta, data, copies)


_UNREACHED = (
    "The log-likelihood is built from an array with one row per individual that the step "
    "cannot replace by a symbolic input: one captured by a pm.CustomDist logp or dist "
    "function (or held inside another distribution's own graph). PyMC simplifies the "
    "log-likelihood by the values of such an array while it builds it, so what the step "
    "reads of its structure, and what PyMC computes across rows there, could depend on the "
    "data. Pass the array as a parameter of the distribution (pm.CustomDist('y', a, b, x, "
    "logp=lambda value, a, b, x: ..., observed=y)), or wrap it in pm.Data. (With a handful "
    "of rows, PyMC's own shape vectors have as many entries as there are rows, and are "
    "taken for such an array.)"
)


@contextmanager
def _array_values_read(n: int, exempt):
    """The ids of the array constants (others than ``exempt``) that may hold one value per
    individual (:func:`_watched`) whose values are read while inside: by a rewrite that
    folds or merges them, a distribution that decides by them, a function that computes
    with them.

    Every value an array constant holds reaches PyTensor through its ``data``; it is made
    a property for the duration, and constants made meanwhile are noted. One thread at a
    time builds inside (a lock); windows nest, each recording every read made while it is
    open, and the attributes are put back as they were when the outermost closes.
    """
    exempt = {id(c) for c in exempt}
    read = set()
    with _WATCH:
        if not _RECORDERS:
            _SAVED.append((TensorConstant.__dict__.get("data"), TensorConstant.__init__))
            TensorConstant.data = property(_read_data, _write_data)
            TensorConstant.__init__ = _made_in_window
        _RECORDERS.append((n, exempt, read, set()))
        try:
            yield read
        finally:
            _RECORDERS.pop()
            if not _RECORDERS:
                saved, init = _SAVED.pop()
                TensorConstant.__init__ = init
                if saved is None:
                    del TensorConstant.data
                else:
                    TensorConstant.data = saved


_WATCH = threading.RLock()
_RECORDERS: list = []
_SAVED: list = []


def _read_data(self):
    value = self.__dict__["data"]
    for n, exempt, read, made in _RECORDERS:
        if id(self) not in exempt and _watched(value, n, id(self) in made):
            read.add(id(self))
    return value


def _made_in_window(self, *args, **kwargs):
    _SAVED[0][1](self, *args, **kwargs)
    for _, _, _, made in _RECORDERS:
        made.add(id(self))


def _write_data(self, value):
    self.__dict__["data"] = value


def _watched(value, n: int, made: bool = False) -> bool:
    """Whether an array may hold one value per individual: n entries along an axis, or at
    least n entries in all (flattened, or laid out otherwise) for an array made before the
    build. One made during it counts by its axes only: PyMC folds the model's public
    constants (the copies) into new ones, a covariance ``eye(d)`` into a (1, d, d) array
    of d² entries, say."""
    size = np.size(value)
    return size > 1 and (n in np.shape(value) or (size >= n and not made))


#: SymbolicRandomVariable types whose constructor decides by the values of constant inputs,
#: rebuilt on their (stand-in) inputs: type → node → its new outputs
_REBUILD: dict = {}


def register_rebuild(op_type: type, rule) -> None:
    """Register how to rebuild a node of ``op_type`` from its inputs (a distribution whose
    graph was built by looking at the values of its constant inputs)."""
    _REBUILD[op_type] = rule


# pm.Censored drops a bound whose entries are all infinite (PyMC 6.4,
# pymc/distributions/censored.py: _is_unbounded): on a stand-in it keeps it.
register_rebuild(CensoredRV, lambda node: [CensoredRV.rv_op(*node.inputs)])


def _rebuilt(outputs):
    """``outputs`` with every node of a registered type rebuilt from its inputs."""
    replace = {}
    for node in io_toposort([], outputs):
        rule = _REBUILD.get(type(node.op))
        if rule is not None:
            replace.update(zip(node.outputs, rule(node)))
    return list(graph_replace(outputs, replace, strict=False)) if replace else list(outputs)


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


def _rows(var, n: int) -> bool:
    return isinstance(var, Constant) and _rows_of(var.data, n)


def _rows_of(value, n: int) -> bool:
    shape = np.shape(value)
    return len(shape) > 0 and shape[0] == n and np.size(value) > 1
