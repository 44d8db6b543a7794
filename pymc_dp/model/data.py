"""What in a PyMC model holds people's data: observed values, ``pm.Data`` containers and
other shared variables, and the declaration that a container is public.
"""

from __future__ import annotations

import weakref

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pymc.model import Model, modelcontext
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.type import RandomType


__all__ = [
    "DatumInput",
    "numeric_value",
    "data_containers",
    "container_label",
    "data_variables",
    "private_data_variables",
    "reads_any",
    "public_data",
    "is_public",
    "data_dependent_deterministics",
    "read_unshaped_lengths",
    "unshaped_lengths",
]


@dataclass(frozen=True)
class DatumInput:
    """A graph variable holding per-datum values (leading axis = datum) and its value."""

    variable: Variable
    value: np.ndarray
    label: str


def numeric_value(var: Variable) -> np.ndarray:
    if isinstance(var, Constant):
        return np.asarray(var.data)
    if isinstance(var, SharedVariable):
        return np.asarray(var.get_value(borrow=True))
    return np.asarray(var.eval())


def data_containers(model: Model) -> list[Variable]:
    """``pm.Data`` containers, and any other shared variable the model reads.

    A ``pytensor.shared`` array that was never registered with ``pm.Data`` holds data just
    the same; only random generators are not data. The model's log-density terms are
    searched too: a ``pm.CustomDist``'s ``logp=`` builds its graph only when the model's
    log-density is, so what it reads is not among the variables' ancestors.
    """
    graphs = model.basic_RVs + model.potentials + model.deterministics + _logp_terms(model)
    not_data = set(model.data_vars) | set(model.dim_lengths.values())  # dims' lengths
    others = [
        a
        for a in ancestors(graphs)
        if isinstance(a, SharedVariable)
        and not isinstance(a.type, RandomType)
        and a not in not_data
    ]
    return list(model.data_vars) + list(dict.fromkeys(others))


def _logp_terms(model: Model) -> list[Variable]:
    """The model's log-density terms, or none where PyMC cannot build them (a model without
    a density, as ``pm.Simulator``'s: nothing here evaluates one). Built once per model and
    set of variables (building them costs a tenth of a second, and a step asks six times)."""
    variables = tuple(map(id, model.basic_RVs + model.potentials + model.deterministics))
    cached = _LOGP_TERMS.get(model)
    if cached is not None and cached[0] == variables:
        return cached[1]
    try:
        terms = list(model.logp(sum=False))
    except (NotImplementedError, TypeError, ValueError):
        terms = []
    _LOGP_TERMS[model] = (variables, terms)
    return terms


_LOGP_TERMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def container_label(var: Variable) -> str:
    return f"pm.Data {var.name!r}" if var.name else "an unnamed shared variable"


def data_variables(model: Model) -> list[Variable]:
    """Every graph variable that holds data: observed values and data containers."""
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    return observed_values + [d for d in data_containers(model) if d not in observed_values]


def private_data_variables(model: Model) -> list[Variable]:
    """The data variables that hold people's data: observed values, containers not declared
    public, containers an observed value is computed from (declaring those public cannot
    make the observations public), and containers declared public that share memory with
    one of these (a clone of a private ``pm.Data`` carries the declaration, not its data)."""
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    private, public = [], []
    for d in data_variables(model):
        private_here = d in observed_values or not is_public(d) or reads_any(observed_values, [d])
        (private if private_here else public).append(d)
    held = [_storage(d) for d in private]
    private += [
        d for d in public
        if any(np.may_share_memory(_storage(d), h) for h in held if h is not None)
    ]
    return private


def _storage(var: Variable) -> np.ndarray | None:
    """The array a constant or shared variable holds (without copying), else None."""
    if isinstance(var, Constant | SharedVariable):
        return numeric_value(var)
    return None


def reads_any(
    graph_outputs: Sequence[Variable], data_vars: Sequence[Variable], blockers=None
) -> bool:
    wanted = set(data_vars)
    return any(a in wanted for a in ancestors(list(graph_outputs), blockers=blockers))


def public_data(*data_vars: Variable) -> None:
    """Declare ``pm.Data`` containers public: constants of the analysis, not people's data.

    A private step refuses a model whose likelihood reads ``pm.Data`` that is not on the
    datum axis (leading length n), since it cannot know whether one person's record lives
    there (a per-person table indexed by observations, say), and treats ``pm.Data`` of
    leading length n as per-person rows. Declaring it public says it holds no one's data,
    and the step then reads it as a constant, without noise; a ``pm.Deterministic`` of
    parameters and public containers is released with the draws, so the container's values
    can be read from them. Declare public only what may be published. Never declare
    observed values public: they are always data.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> with pm.Model():
    ...     scale = pm.Data("scale", 2.0)
    ...     pymc_dp.public_data(scale)
    """
    for var in data_vars:
        if not isinstance(var, SharedVariable):
            raise TypeError(f"public_data takes pm.Data containers, got {var!r}")
        var.tag.dp_public = True


def is_public(var: Variable) -> bool:
    return bool(getattr(var.tag, "dp_public", False))


def data_dependent_deterministics(model: Model | None = None) -> list[str]:
    """Names of ``pm.Deterministic`` variables whose value may depend on people's data.

    PyMC records deterministics in the posterior; one that reads data (``mu = X @ beta``)
    would put the data, without noise, into the trace. :func:`pymc_dp.sample` leaves them
    out and :func:`pymc_dp.release` strips them. One counts if it reads a private data
    variable (:func:`private_data_variables`: containers declared public with
    :func:`public_data` are not), an array constant anywhere in its graph, inner graphs
    included (NumPy arrays written into the model may be data, also as indices or shapes:
    an LKJ's ``_corr`` and ``_stds`` scatter a triangle's indices and are left out too),
    if it is as large as the data as written (n numbers can be
    written in any arrangement: :func:`~pymc_dp.model.constants.numbers_written`), reads
    the length of a dimension no variable has (:func:`read_unshaped_lengths`: it may be a
    count of data), or runs code of its own (``as_op``: its closure may hold data).
    """
    from pymc_dp.model.constants import constant_uses, numbers_held, numbers_written
    from pymc_dp.model.row_locality import foreign_ops

    model = modelcontext(model)
    data_vars = private_data_variables(model) + unshaped_lengths(model)
    # (rows: the observations' leading length; n scalars written one by one are n numbers)
    rows = [np.shape(numeric_value(model.rvs_to_values[rv]))[:1] for rv in model.observed_RVs]
    n = min((r[0] for r in rows if r), default=np.inf)
    names = []
    for d in model.deterministics:
        graph = model.replace_rvs_by_values([d])
        # (any array: a part of the data, as values, as indices read back as values or
        # as positions written, as a shape read back; not only n of them)
        if (reads_any(graph, data_vars) or foreign_ops(graph)
                or any(np.size(c.data) > 1 if isinstance(c.data, np.ndarray)
                       else numbers_held(c.data) > 1 for c, _, _ in constant_uses(graph))
                or numbers_written([d], blockers=model.free_RVs) >= n):
            names.append(d.name)
    return names


def unshaped_lengths(model: Model) -> list[Variable]:
    """The lengths of the dimensions no variable of the model has (shared variables)."""
    shaped = {d for dims in model.named_vars_to_dims.values() for d in dims if d}
    return [
        v for d, v in model.dim_lengths.items() if d not in shaped and isinstance(v, SharedVariable)
    ]


def read_unshaped_lengths(model: Model, rvs) -> list[str]:
    """Names of the variables among ``rvs`` whose parameters read, as a value, the length of
    a dimension that no variable of the model has.

    The length of a dimension some variable has is public: it is a shape of what is
    released (or n). A length only read as a number (``pm.Normal("mu",
    m.dim_lengths["k"], 1)``) may be a count of the data, and is refused where a value must
    be public. Reads structure only; other variables' sizes (shapes) are not followed.
    """
    lengths = unshaped_lengths(model)
    if not lengths:
        return []
    free = set(model.free_RVs)
    return [
        rv.name for rv in rvs
        if reads_any(list(rv.owner.op.dist_params(rv.owner)), lengths, blockers=list(free - {rv}))
    ]
