"""The model adapter: from a PyMC model to per-datum log-likelihoods on the value space.

Every private step reads the data through one :class:`PrivateModel`. It

* validates, before any data enters a release, that the model is one a private step can
  handle (observed data with one row per individual along a shared leading axis, finite
  data, priors and potentials that do not read data, continuous free variables where the
  step needs them, all free variables covered by the step);
* compiles, once, a vectorised PyTensor function of the raveled value-space point θ that
  returns the vector of per-datum log-likelihoods ``ℓ_j(θ) = Σ_{observed elements on row j}
  log p(x_j | θ)``, and the public prior term (log density of the free variables on the value
  space, Jacobians included, which never touches data).

The per-datum arrays (observed values, and ``pm.Data`` and NumPy arrays in the likelihood
with the datum axis in front) are inputs of the compiled function, not constants baked into
it, so a step can evaluate the same graph on a subset of rows.
"""

from __future__ import annotations

import warnings

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.initial_point import make_initial_point_fn
from pymc.model import Model, modelcontext
from pymc.pytensorf import compile as pm_compile
from pymc.pytensorf import join_nonshared_inputs
from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import continuous_types
from pymc.distributions.shape_utils import change_dist_size  # batches of rows
from pymc.logprob.abstract import _logprob
from pymc.logprob.basic import logp as _rv_logp  # batches of rows
from pymc.logprob.utils import replace_rvs_by_values  # batches of rows
from pytensor.compile.rebuild import UnusedInputError
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.gradient import NullTypeGradError
from pytensor.gradient import grad as pt_grad
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors
from pytensor.graph.traversal import graph_inputs, io_toposort  # batches of rows
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.random.type import RandomType
from pytensor.scalar.basic import ScalarOp, Second
from pytensor.tensor.basic import Alloc, AllocEmpty, Split
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
)

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.index_bounds import check_index_bounds
from pymc_dp.per_datum_gradients import (
    clipped_row_sum,
    clipped_scalar_sum,
    forward_columns,
    reverse_columns,
)
from pymc_dp.row_locality import NotRowLocal, datum_axes, is_row_local, prove_rows_first

__all__ = ["PrivateModel", "data_dependent_deterministics"]


@dataclass(frozen=True)
class _DatumInput:
    """A graph variable holding per-datum values (leading axis = datum) and its value."""

    variable: Variable
    value: np.ndarray
    label: str


def _numeric_value(var: Variable) -> np.ndarray:
    if isinstance(var, Constant):
        return np.asarray(var.data)
    if isinstance(var, SharedVariable):
        return np.asarray(var.get_value(borrow=True))
    return np.asarray(var.eval())


def _data_containers(model: Model) -> list[Variable]:
    """``pm.Data`` containers, and any other shared variable the model reads.

    A ``pytensor.shared`` array that was never registered with ``pm.Data`` holds data just
    the same; only random generators are not data.
    """
    graphs = model.basic_RVs + model.potentials + model.deterministics
    not_data = set(model.data_vars) | set(model.dim_lengths.values())  # dims' lengths
    others = [
        a
        for a in ancestors(graphs)
        if isinstance(a, SharedVariable)
        and not isinstance(a.type, RandomType)
        and a not in not_data
    ]
    return list(model.data_vars) + list(dict.fromkeys(others))


def _container_label(var: Variable) -> str:
    return f"pm.Data {var.name!r}" if var.name else "an unnamed shared variable"


def _data_variables(model: Model) -> list[Variable]:
    """Every graph variable that holds data: observed values and data containers."""
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    return observed_values + [d for d in _data_containers(model) if d not in observed_values]


def _private_data_variables(model: Model) -> list[Variable]:
    """The data variables that hold people's data: observed values, containers not declared
    public, and containers an observed value is computed from (declaring those public
    cannot make the observations public)."""
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    return [
        d
        for d in _data_variables(model)
        if d in observed_values or not _is_public(d) or _reads(observed_values, [d])
    ]


def _reads(
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
    and the step then reads it as a constant, without noise. Never declare observed values
    public: they are always data.

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


def _is_public(var: Variable) -> bool:
    return bool(getattr(var.tag, "dp_public", False))


def _array_constants(graph_outputs: Sequence[Variable], inner: bool = False) -> list[Variable]:
    """Non-scalar constants in a graph: data written into the model as NumPy arrays.

    With ``inner``, also those inside the inner graphs of its Ops (``OpFromGraph``, the core
    Op of a ``Blockwise``, symbolic distributions).
    """
    found = (
        (c for c, _, _ in _constant_uses(graph_outputs))
        if inner
        else ancestors(list(graph_outputs))
    )
    return list(
        dict.fromkeys(
            a
            for a in found
            if isinstance(a, Constant) and getattr(a, "ndim", 0) > 0 and np.size(a.data) > 1
        )
    )


def _inner_graph_outputs(op) -> list[Variable]:
    """Outputs of the inner graph of ``op`` (or of its core Op), if it has one."""
    inner = getattr(op, "core_op", op)
    if isinstance(inner, ScalarOp):
        return []  # (a Composite's scalar graph holds scalars only)
    fgraph = getattr(inner, "fgraph", None)
    if fgraph is not None and hasattr(fgraph, "outputs"):
        return list(fgraph.outputs)
    return list(getattr(inner, "inner_outputs", []))


def _constant_uses(outputs: Sequence[Variable], blockers=()):
    """``(constant, node, position)`` for every tensor constant the graph computes with.

    Enters inner graphs (:func:`_inner_graph_outputs`); a constant that is itself an output
    comes with ``node=None``. Stops at ``blockers`` (free random variables: priors).
    """
    graphs, seen = [list(outputs)], set()
    while graphs:
        outs = graphs.pop()
        for out in outs:
            if isinstance(out, Constant):
                yield out, None, None
        # (graph_inputs leaves the blockers out: they are inputs of the walk all the same)
        for node in io_toposort([*graph_inputs(outs, blockers=blockers), *blockers], outs):
            inner = _inner_graph_outputs(node.op)
            if inner and id(node.op) not in seen:
                seen.add(id(node.op))
                graphs.append(inner)
            for k, i in enumerate(node.inputs):
                if isinstance(i, Constant) and getattr(i, "ndim", 0) > 0:
                    yield i, node, k


def _structural_inputs(node) -> range:
    """Input positions of ``node`` whose values are shapes, sizes or indices, or whose shape
    alone is read: where PyMC and PyTensor put their own array constants."""
    for cls in type(node.op).__mro__:
        found = _STRUCTURAL_INPUTS.get(cls)
        if found is not None:
            return found(node)
    return range(0)


_STRUCTURAL_INPUTS = {
    Reshape: lambda node: range(1, 2),
    Split: lambda node: range(1, 3),
    Alloc: lambda node: range(1, len(node.inputs)),
    AllocEmpty: lambda node: range(len(node.inputs)),
    SpecifyShape: lambda node: range(1, len(node.inputs)),
    Subtensor: lambda node: range(1, len(node.inputs)),
    AdvancedSubtensor: lambda node: range(1, len(node.inputs)),
    IncSubtensor: lambda node: range(2, len(node.inputs)),
    AdvancedIncSubtensor: lambda node: range(2, len(node.inputs)),
    Shape: lambda node: range(1),
    Shape_i: lambda node: range(1),
    # fill(x, v) (zeros_like, ones_like) reads the shape of x
    Elemwise: lambda node: range(1 if isinstance(node.op.scalar_op, Second) else 0),
    # a random variable's generator and size (its parameters are values)
    RandomVariable: lambda node: range(len(node.inputs) - len(node.op.dist_params(node))),
}


def _may_hold_people(const: Constant, node, position) -> bool:
    """Whether a use of an array constant (not on the datum axis) may spread people's values.

    Shapes, sizes and index arrays do not (PyMC's and PyTensor's own constants are of
    these kinds, and an entry of a constant shape vector), nor an array that holds no more
    than a scalar does (:func:`_one_number`); any other use does: a table
    indexed by per-row integers (one entry read by many rows), or values broadcast to every
    row. Only a table can hold people's values in one entry, so other single values pass.
    """
    if node is None:
        return np.size(const.data) > 1
    if position in _structural_inputs(node):
        return False
    if (
        isinstance(node.op, Subtensor)
        and position == 0
        and const.dtype.startswith(("int", "uint"))
        and all(isinstance(i, Constant) for i in node.inputs[1:])
    ):
        return False  # an entry of a constant shape vector
    if _one_number(np.asarray(const.data)):
        return False  # no more than a scalar constant (np.ones(p), np.full(p, c), np.eye(d))
    table = isinstance(node.op, AdvancedSubtensor | AdvancedIncSubtensor) and position < 2
    return table or np.size(const.data) > 1


def _one_number(a: np.ndarray) -> bool:
    """Whether ``a`` is determined by its shape and one number: all entries equal, or c·I."""
    if a.size == 0 or np.all(a == a.flat[0]):
        return True
    a = a.reshape([s for s in a.shape if s != 1])  # (broadcast axes)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        return False
    diagonal = np.diagonal(a)
    return bool(np.all(diagonal == diagonal[0]) and np.count_nonzero(a - np.diag(diagonal)) == 0)


def _has_rows(arrays, n: int) -> bool:
    """Whether some array (or constant) has n entries along an axis and holds more than one
    number: per-individual values."""
    for a in arrays:
        value = np.asarray(a.data if isinstance(a, Constant) else a)
        if value.dtype != object and n in value.shape and not _one_number(value):
            return True
    return False


#: How much a start moved by :meth:`PrivateModel.plausible_start` must raise the prior's
#: log density (nats): a move that only trades one tail for another is not made.
PLAUSIBLE_GAIN = 2.0

_PRIOR_READS_DATA = (
    "The prior of {!r} depends on data. The prior term is added without noise, so it must "
    "not read observed values, pm.Data or shared variables (declare public constants with "
    "pymc_dp.public_data(...)), nor NumPy arrays with one entry per individual (an "
    "errors-in-variables prior x_true ~ Normal(x_obs, ...) releases x_obs): model such "
    "values as observed variables (x_obs ~ Normal(x_true, ...), observed)."
)


def data_dependent_deterministics(model: Model | None = None) -> list[str]:
    """Names of ``pm.Deterministic`` variables whose value depends on data.

    PyMC records deterministics in the posterior; one that reads data (``mu = X @ beta``)
    would put the data, without noise, into the trace. :func:`pymc_dp.sample` leaves them
    out and :func:`pymc_dp.release` strips them.
    """
    model = modelcontext(model)
    data_vars = _data_variables(model)
    return [
        d.name
        for d in model.deterministics
        if _reads(model.replace_rvs_by_values([d]), data_vars)
    ]


def _withholding_details(what: str, fn, *args):
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


def _cross_row_constant_expression(outputs, nodes, blockers, n: int) -> bool:
    """Whether a constant-only expression in ``nodes`` computes across an axis of length n."""
    constant = {
        v for v in graph_inputs(outputs, blockers=blockers) if isinstance(v, Constant)
    } - set(blockers)
    for node in nodes:
        if node.inputs and all(i in constant for i in node.inputs):
            constant.update(node.outputs)
    # the results of constant-only expressions, where the rest of the graph reads them
    results = [
        i
        for node in nodes
        if not all(i in constant for i in node.inputs)
        for i in node.inputs
        if i in constant and i.owner is not None
    ] + [o for o in outputs if o in constant and o.owner is not None]
    # every array with n entries along some axis is per-datum along the first such axis
    rows = {}
    for c in constant:
        if isinstance(c, Constant) and n in np.shape(c.data):
            rows[c] = np.shape(c.data).index(n)
    if not results or not rows:
        return False
    try:
        datum_axes(results, rows, n)
    except NotRowLocal:
        return True
    return False


def _extremes(values: np.ndarray):
    """An integer array's (min, max), which its moved rows stay within; else None."""
    if values.dtype != bool and np.issubdtype(values.dtype, np.integer) and values.size:
        return values.min(), values.max()
    return None


def _bump_row(values: np.ndarray, k: int, extremes):
    """Row k moved a little (a bool flipped, an integer to one end of the array's range)."""
    if values.dtype == bool:
        return ~values[k]
    if extremes is not None:
        return _other_extreme(values, k, extremes[1], extremes[0])
    return values[k] + 1


def _far_row(values: np.ndarray, k: int, extremes):
    """Row k moved far away: reaches thresholds (``max(x) > c``) that small changes miss."""
    if values.dtype == bool:
        return ~values[k]
    if extremes is not None:
        return _other_extreme(values, k, extremes[0], extremes[1])
    return values[k] * 1e6 + 1e6


def _other_extreme(values: np.ndarray, k: int, first, second):
    """An integer row moved within the array's own range (index arrays, checked to be in
    their tables' range, stay in it: an index outside a table reads memory outside it)."""
    return np.where(np.all(values[k] == first), second, first)


def _copy_next_row(values: np.ndarray, k: int, extremes):
    return values[(k + 1) % len(values)]



def _as_list(columns: list[Variable] | Variable) -> list[Variable]:
    """Per-datum gradient columns, or an (n, d) matrix of rows, as a list of outputs."""
    return columns if isinstance(columns, list) else [columns]


_FLOAT32_BACKEND = (
    "The compile_kwargs' backend computes float64 values in float32 (JAX does unless "
    "jax_enable_x64 is on: PyTensor turns it on only when it first loads JAX with floatX = "
    "float64). Clipped sums rounded to float32 can move by more than the clip bound their noise "
    "is scaled for. Call jax.config.update('jax_enable_x64', True) before building the step, "
    "or use the default backend."
)


def _check_backend_keeps_float64(compile_kwargs: dict) -> None:
    """Refuse a backend that silently computes float64 in float32, before any data is read.

    The clamps and sums of every release are float64 graphs (:meth:`PrivateModel.clipped_ratio`);
    a backend that runs them in float32 rounds the bound and the sum (a found case: JAX
    without x64). Checked on a public number.
    """
    x = pt.scalar("x", dtype="float64")
    value = pm_compile([x], x * 1.0, **compile_kwargs)(np.float64(0.1))
    if np.asarray(value).dtype != np.float64 or float(value) != 0.1:
        raise UnsupportedModelError(_FLOAT32_BACKEND)


def _float64(value, what: str):
    """``value`` if it is float64; else refused (a second line behind the backend check)."""
    if np.asarray(value).dtype != np.float64:
        raise RuntimeError(f"{what} came back in {np.asarray(value).dtype}: " + _FLOAT32_BACKEND)
    return value


def _same_values(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 16) -> bool:
    """``np.array_equal(a, b, equal_nan=True)`` for arrays of one shape, a block of rows at
    a time: its temporaries stay small whatever n is (this runs before every sampling call)."""
    if a.ndim == 0:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    equal_nan = a.dtype.kind in "fc"
    return all(
        np.array_equal(a[i:i + chunk], b[i:i + chunk], equal_nan=equal_nan)
        for i in range(0, len(a), chunk)
    )


class PrivateModel:
    """Compiled per-datum log-likelihood and public prior of a PyMC model.

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: from context).
    vars : list, optional
        The free variables the step samples; must be all of them (default: all). The order
        fixes the layout of the raveled point θ, as in PyMC's ``DictToArrayBijection``.
    continuous : bool
        Refuse discrete free variables (gradient and random-walk steps need continuous ones).
    initial_point : dict, optional
        A public point of the model (default: the model's initial point): it fixes the
        layout of θ and is where the row-independence probe evaluates the likelihood.
    compile_kwargs : dict, optional
        Passed to PyTensor compilation.

    Attributes
    ----------
    n_data : int
        Number of individuals (rows along the shared leading axis).
    dim : int
        Size of the raveled value-space point.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.model import PrivateModel
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 1.0]))
    >>> pmodel = PrivateModel(m)
    >>> pmodel.n_data, pmodel.dim
    (3, 1)
    >>> np.round(pmodel.loglik(np.array([0.0])), 3)
    array([-1.044, -0.939, -1.419])
    """

    def __init__(
        self,
        model: Model | None = None,
        vars: Sequence[Variable] | None = None,
        *,
        continuous: bool = True,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
    ):
        model = modelcontext(model)
        self.model = model
        if initial_point is None:
            initial_point = model.initial_point()
        self._initial_point = initial_point
        given = (
            list(model.value_vars)
            if vars is None
            else get_value_vars_from_user_vars(vars, model)
        )
        self._check_covers_all(given)
        # PyMC ravels the whole point in the model's order (the step covers every variable),
        # so θ is laid out in that order whatever order ``vars`` came in.
        value_vars = list(model.value_vars)
        self.value_vars = value_vars
        if continuous:
            self._check_continuous(value_vars)

        self.datum_inputs = self._find_datum_inputs()
        self.n_data = int(self.datum_inputs[0].value.shape[0])
        self._check_priors_and_potentials()
        # Every other container (public ones set priors, potentials or tables the
        # likelihood indexes) is frozen too: the checks above read its current value.
        datum_vars = {d.variable for d in self.datum_inputs}
        self._frozen_containers = [
            (c, np.array(_numeric_value(c), copy=True))
            for c in _data_containers(model)
            if c not in datum_vars
        ]
        self.deterministics_reading_data = data_dependent_deterministics(model)

        raveled = DictToArrayBijection.map({v.name: initial_point[v.name] for v in value_vars})
        self.point_map_info = raveled.point_map_info
        self.dim = int(raveled.data.size)

        _check_backend_keeps_float64(compile_kwargs or {})
        self._compile(compile_kwargs or {})

    # ------------------------------------------------------------------ validation
    def _check_covers_all(self, value_vars):
        missing = [v.name for v in self.model.value_vars if v not in value_vars]
        if missing:
            raise UnsupportedModelError(
                f"A private step must cover every free variable, but {missing} are left out. "
                "PyMC would assign them a non-private step (NUTS) that reads the data without "
                "noise. Pass vars=None (all variables) or sample them with another private step."
            )

    def _check_continuous(self, value_vars):
        discrete = [v.name for v in value_vars if v.dtype not in continuous_types]
        if discrete:
            raise UnsupportedModelError(
                f"Free variables {discrete} are discrete; this private step needs continuous "
                "variables. Marginalise them out, or use a step that supports discrete ones."
            )

    def _find_datum_inputs(self) -> list[_DatumInput]:
        model = self.model
        if not model.observed_RVs:
            raise UnsupportedModelError(
                "The model has no observed variables: there is no data to protect and nothing "
                "for a private step to do. Use pm.sample for prior-only models."
            )
        observed_names = {rv.name for rv in model.observed_RVs}
        imputed = [
            rv.name.removesuffix("_unobserved")
            for rv in model.free_RVs
            if rv.name.endswith("_unobserved")
            and rv.name.removesuffix("_unobserved") + "_observed" in observed_names
        ]
        if imputed:
            # PyMC turns NaN in observed data into free variables to impute; their number and
            # places are private. Say where, never what.
            raise ValueError(
                f"The observed data of {imputed} contains non-finite values (NaN), which PyMC "
                "would impute as free variables. Private steps need finite data; remove or "
                "impute those rows before sampling."
            )
        inputs: list[_DatumInput] = []
        containers = _data_containers(model)
        for rv in model.observed_RVs:
            value_var = model.rvs_to_values[rv]
            value = _numeric_value(value_var)
            if value.ndim == 0:
                raise UnsupportedModelError(
                    f"Observed variable {rv.name!r} is a scalar. A private step needs one row "
                    "per individual along the leading axis of every observed variable."
                )
            if not isinstance(value_var, Constant | SharedVariable):
                if not _reads([value_var], containers):
                    raise UnsupportedModelError(
                        f"The observed value of {rv.name!r} is an expression of constants; "
                        "pass the data as a NumPy array or pm.Data."
                    )
                _check_observed_expression(rv.name, value_var, containers)
            if value.shape[0] == 0:
                raise UnsupportedModelError(
                    f"Observed variable {rv.name!r} has no rows. A private step needs at least "
                    "one individual: pass data with one row per individual."
                )
            inputs.append(_DatumInput(value_var, value, f"observed variable {rv.name!r}"))
        lengths = {d.label: d.value.shape[0] for d in inputs}
        if len(set(lengths.values())) > 1:
            # (Lengths only of arrays passed in. An observed value computed from pm.Data is
            # proven row-local above, so its length is that of an array passed in, but it
            # is left out all the same.)
            given = {
                label: length
                for (label, length), d in zip(lengths.items(), inputs)
                if isinstance(d.variable, Constant | SharedVariable)
            }
            raise UnsupportedModelError(
                "Observed variables must share the leading (individual) axis; their leading "
                f"lengths differ (of the arrays passed in: {given})."
            )
        n = inputs[0].value.shape[0]
        # An observed value computed from pm.Data (``observed=f(x)``) is not an input: the
        # pm.Data it reads is, so that the row-locality probe sees what f does across rows.
        observed_exprs = [d.variable for d in inputs]
        inputs = [d for d in inputs if isinstance(d.variable, Constant | SharedVariable)]
        observed_vars = {d.variable for d in inputs}
        private = set(_private_data_variables(model))
        for data_var in containers:
            if data_var in observed_vars:
                continue
            if data_var not in private:
                continue  # declared public: a constant, even if its length happens to be n
            value = _numeric_value(data_var)
            if value.ndim >= 1 and value.shape[0] == n:
                inputs.append(_DatumInput(data_var, value, _container_label(data_var)))
        datum_vars = {d.variable for d in inputs}
        self._check_constant_expressions(n)
        # Built once and compiled as is (_compile): PyMC folds NumPy-only subexpressions into
        # new constants on every call, and the constants found here must be the compiled ones.
        likelihood = model.logp(vars=model.observed_RVs, sum=False)
        self._likelihood_terms = likelihood
        # A NumPy array with n rows written into the likelihood holds per-individual values
        # (covariates): it is data like pm.Data, whose rows the row-locality proof follows.
        for k, const in enumerate(_array_constants(likelihood)):
            if const not in datum_vars and np.shape(const.data)[0] == n:
                value = np.asarray(const.data)
                where = ", ".join(
                    repr(rv.name)
                    for term, rv in zip(likelihood, model.observed_RVs)
                    if _reads([term], [const])
                )
                label = (
                    f"a NumPy array with one row per individual (#{k}, in the "
                    f"log-likelihood of {where})"
                )
                inputs.append(_DatumInput(const, value, label))
                datum_vars.add(const)
        self._check_array_constants(likelihood, n)
        for term, rv in zip(likelihood, model.observed_RVs):
            if term.ndim == 0:
                raise UnsupportedModelError(
                    f"The log-density of observed variable {rv.name!r} has no datum axis (a "
                    "multivariate distribution over the whole leading axis?). A private step "
                    "needs one log-density value per individual along the leading axis."
                )
        hidden = [
            _container_label(d)
            for d in containers
            if d not in datum_vars
            and d in private  # (public ones too, if observed values are computed from them)
            and _reads(likelihood, [d])
        ]
        if hidden:
            raise UnsupportedModelError(
                f"The likelihood reads {hidden}, which is not on the datum axis (its "
                "leading length is not the number of rows). If it holds people's records (a "
                "per-person table indexed by observations), one person would move several rows "
                "and the privacy guarantee would not hold: put one row per person on the "
                "leading axis. If it is a public constant, declare it with "
                "pymc_dp.public_data(...)."
            )
        if not inputs:
            raise UnsupportedModelError(
                "No data array with one row per individual was found on the leading axis."
            )
        for d in inputs:
            if not np.issubdtype(d.value.dtype, np.number) and d.value.dtype != bool:
                raise UnsupportedModelError(f"The data of {d.label} is not numeric.")
            # Observed values must be finite; covariates may hold ±inf (a per-person censoring
            # bound of pm.Censored, say) but not NaN. Say where, never what.
            observed = _reads(observed_exprs, [d.variable])
            if not np.all(np.isfinite(d.value) if observed else ~np.isnan(d.value)):
                raise ValueError(
                    f"The data of {d.label} contains non-finite values "
                    f"({'NaN or inf' if observed else 'NaN'}). Private steps need "
                    f"{'finite data' if observed else 'data without NaN'}; remove or impute "
                    "those rows before sampling."
                )
        return inputs

    def _check_constant_expressions(self, n: int) -> None:
        """Refuse computations across the rows of a NumPy array written inside the model.

        PyMC folds expressions of constants alone (``x - x.mean()`` with ``x`` a NumPy array
        of n rows, a threshold on ``max(y)``) into new constants when it builds the
        log-densities, so the row-locality proof only sees their results. They are found here,
        on the model's own graphs of the parameters of every observed and free variable
        (and inside the inner graphs of ``pm.CustomDist(dist=...)`` and other symbolic
        distributions), by the structural row-locality proof (:mod:`pymc_dp.row_locality`)
        with every array that has n entries along some axis as per-datum input along it.
        Reads shapes and structure only.
        """
        model = self.model

        def inner_graph(op):  # a symbolic distribution: its graph is folded too
            inner = getattr(op, "fgraph", None)
            return [] if inner is None else [(list(inner.outputs), set(inner.inputs))]

        graphs = []
        for rv in model.observed_RVs + model.free_RVs:
            graphs += [(list(rv.owner.inputs), set(model.free_RVs))] + inner_graph(rv.owner.op)
        while graphs:
            outputs, blockers = graphs.pop()
            nodes = io_toposort(list(graph_inputs(outputs, blockers=blockers)), outputs)
            for node in nodes:
                graphs += inner_graph(node.op)
            if _cross_row_constant_expression(outputs, nodes, blockers, n):
                raise UnsupportedModelError(
                    "The model computes across the rows of a NumPy array with n entries "
                    "(e.g. x - x.mean(), max(x), a sort or a cumulative sum). PyMC evaluates "
                    "such expressions when it builds the model, before a private step can "
                    "check them, and one person's value would then move every row's "
                    "log-likelihood. Compute them from public values, or pass the array as "
                    "pm.Data (the step then checks what the model does with it; declare it "
                    "with pymc_dp.public_data(...) if it is a public table)."
                )

    def _check_array_constants(self, likelihood, n: int) -> None:
        """Refuse NumPy arrays off the datum axis that the likelihood may spread across rows.

        Like ``pm.Data`` that is not declared public, an array whose leading length is not
        n may hold people's records: a per-person table read through a per-row index
        (``x[g]``, m people in n rows) lets one person move many rows. Looked for in the
        likelihood as compiled, in the observed variables' own graphs (before PyMC folds
        NumPy-only expressions such as ``x[g]`` into a new constant of n rows), in their
        log-densities as written (``pm.CustomDist(logp=...)``), and inside inner graphs.
        Shapes, sizes and index arrays pass (:func:`_may_hold_people`). Reads shapes,
        types and structure only.
        """
        model = self.model
        free = set(model.free_RVs)
        graphs = [list(likelihood)]
        for rv in model.observed_RVs:
            graphs.append([rv])
            try:  # the log-density as the distribution writes it, before any rewrite
                with warnings.catch_warnings():  # (about clones of the free variables)
                    warnings.simplefilter("ignore")
                    raw = _logprob(rv.owner.op, [model.rvs_to_values[rv]], *rv.owner.inputs)
            except NotImplementedError:
                continue  # derived from an inner graph, which is entered
            graphs.append([raw] if isinstance(raw, Variable) else list(raw))
        sideways = spread = False
        for graph in graphs:
            for const, node, position in _constant_uses(graph, blockers=free):
                shape = np.shape(const.data)
                if shape[0] == n:
                    continue  # per-datum (an input of the compiled graph, or proven inside)
                if n in shape[1:]:
                    sideways = True
                elif _may_hold_people(const, node, position):
                    spread = True
        if sideways:
            # (No shapes or counts in the message: a constant PyMC folded from data, x[x > 0]
            # say, has a shape that depends on the values.)
            raise UnsupportedModelError(
                "The likelihood reads NumPy arrays with one entry per individual on an axis "
                "other than the first. If they hold people's values (transposed covariates), "
                "put one row per person on the leading axis; if they are public constants, "
                "wrap them in pm.Data and declare them with pymc_dp.public_data(...)."
            )
        if spread:
            raise UnsupportedModelError(
                "The likelihood reads a NumPy array that is not on the datum axis (its leading "
                "length is not the number of rows): a table indexed by per-row integers "
                "(x[g]), or values shared by every row. If it holds people's values (a "
                "per-person table of covariates), one person would move many rows and the "
                "privacy guarantee would not hold: give each row its own values (one row per "
                "person on the leading axis). If it is a public constant (a design of the "
                "analysis, a known covariance matrix), wrap it in pm.Data and "
                "declare it with pymc_dp.public_data(...)."
            )

    def _check_priors_and_potentials(self):
        """Refuse priors, potentials and initial values that hold data.

        They enter a release without noise: the prior and potential terms are added to
        every acceptance ratio as they are, and the initial point is where the chain starts
        (and what it returns while no proposal is accepted). Besides observed values and
        containers that are not declared public, a NumPy array with n entries along some
        axis is data here (an errors-in-variables prior ``x_true ~ Normal(x_obs, ...)``,
        ``initval=x_obs``), unless it holds one number (:func:`_one_number`).
        """
        model = self.model
        n = self.n_data
        # Containers declared public (pymc_dp.public_data) are constants here; observed
        # values, and what they are computed from, never are.
        data_vars = _private_data_variables(model)
        free = set(model.free_RVs)
        for rv in model.free_RVs:
            logp = model.logp(vars=[rv])
            as_written = [c for c, _, _ in _constant_uses([rv], blockers=free - {rv})]
            if _reads([logp], data_vars) or _has_rows(_array_constants([logp], True), n):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
            # Its draws too (a CustomDist's random= may read what its logp does not): the
            # warm-up's start comes from prior draws (plausible_start).
            if _reads([rv], data_vars, blockers=list(free - {rv})):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
            if _has_rows(as_written, n):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
        for pot in model.potentials:
            graph = model.replace_rvs_by_values([pot])
            if _reads(graph, data_vars) or _array_constants(graph, inner=True):
                raise UnsupportedModelError(
                    f"pm.Potential {pot.name!r} reads observed values, pm.Data, a shared "
                    "variable or an array constant. Potentials are added without noise, so "
                    "they must not hold data; express data terms as observed variables "
                    "(scalar constants are fine)."
                )
        for rv, init in model.rvs_to_initial_values.items():
            if isinstance(init, Variable):
                holds_data = _reads([init], data_vars) or _has_rows(
                    _array_constants([init], inner=True), n
                )
            else:
                holds_data = isinstance(init, np.ndarray | list | tuple) and _has_rows([init], n)
            if holds_data:
                raise UnsupportedModelError(
                    f"The initial value of {rv.name!r} is computed from data or is an array "
                    "with one entry per individual; it would be released as the chain's "
                    "first draws, without noise. Initial values must be public: use a "
                    "constant (e.g. zeros) or leave it to PyMC."
                )
        if _has_rows(list(self._initial_point.values()), n):
            raise UnsupportedModelError(
                "The initial point holds an array with one entry per individual (other than "
                "a constant array). It is where the chain starts, and would be released "
                "without noise: initial points must be public (e.g. zeros, or PyMC's "
                "default)."
            )

    # ------------------------------------------------------------------ compilation
    def _compile(self, compile_kwargs: dict):
        model = self.model
        obs_terms = self._likelihood_terms
        per_datum = None
        for term in obs_terms:
            row_sums = term if term.ndim == 1 else term.reshape((term.shape[0], -1)).sum(axis=1)
            per_datum = row_sums if per_datum is None else per_datum + row_sums
        prior_terms = model.logp(vars=model.free_RVs + model.potentials, sum=True)

        # Per-datum arrays become explicit inputs, so a step can pass a subset of rows.
        self._placeholders = [
            pt.tensor(
                dtype=d.variable.dtype,
                shape=(None, *d.variable.type.shape[1:]),
                name=f"datum_input_{i}",
            )
            for i, d in enumerate(self.datum_inputs)
        ]
        per_datum = graph_replace(
            [per_datum],
            {d.variable: p for d, p in zip(self.datum_inputs, self._placeholders)},
            strict=False,
        )[0]
        per_datum = _without_checks_on(per_datum, self._placeholders)
        (per_datum, prior), q = join_nonshared_inputs(
            self._initial_point, [per_datum, prior_terms], self.value_vars
        )
        self._q = q
        self._per_datum_graph = per_datum
        self._data_values = [np.ascontiguousarray(d.value) for d in self.datum_inputs]
        # The gate, before anything is compiled or evaluated: the proof that row j reads
        # data row j only, and the range of every index array.
        self._check_graph([per_datum], q, self._placeholders, "The per-datum log-likelihood")
        self._prior_graph = prior  # for the lazily compiled gradients
        self._compile_kwargs = dict(compile_kwargs)
        self._gradient_fn = None  # compiled on first use: see compile_gradients
        self._forward_gradient_fn = None  # reverse mode's fallback, compiled if ever needed
        self._gradient_rows_fn = None  # the warm-up's per-datum gradients (gradient_rows)
        self._prior_gradient_fn = None
        self._prior_quantiles = None  # plausible_start's, drawn on first use
        self._gradient_rows_graph = None
        self._forward_columns = None
        self.gradient_method: str | None = None  # "reverse" or "forward", once compiled
        # on_unused_input: a per-datum pm.Data the likelihood does not read, or an observed
        # array PyTensor merged with an equal constant, is simply not needed.
        self._loglik_fn = pm_compile(
            [q, *self._placeholders], per_datum, on_unused_input="ignore", **compile_kwargs
        )
        self._loglik_fn.trust_input = True
        self._ratio_fn = None  # clipped_ratio's, compiled on first use
        self._prior_fn = pm_compile([q], prior, **compile_kwargs)
        self._prior_fn.trust_input = True
        self._probe_rows_are_independent()

    def _check_graph(
        self, outputs, q, row_inputs, what: str, public=(), parameters=None
    ) -> None:
        """Refuse ``outputs`` unless proven row-local and its index arrays in range.

        ``row_inputs`` are the per-datum inputs (their values: the data, in order); the
        graph's other input is the raveled point θ, ``q``, and those of ``parameters`` (a
        dict of public inputs, such as the warm-up's basis, to a public value each). The proof
        (:mod:`pymc_dp.row_locality`) is the gate: every operation must match a rule that
        shows output row j reads data row j only, or the model is refused, naming the
        operation's type. Then every integer index array must lie in its table
        (:mod:`pymc_dp.index_bounds`). Both read shapes and structure, and the smallest
        and largest index entries, only to refuse; nothing of them is returned or printed.
        """
        try:
            prove_rows_first(outputs, {p: 0 for p in row_inputs}, self.n_data, public)
        except NotRowLocal as err:
            raise UnsupportedModelError(_not_row_local(what, err)) from None
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        parameters = dict(parameters or {})
        check_index_bounds(
            outputs,
            [q, *parameters, *row_inputs],
            [point, *parameters.values(), *self._data_values],
        )

    def _probe_rows_are_independent(self):
        """A second line behind the proof: move a few rows and watch the others.

        Change row k of every per-datum array (by one unit, by copying the next row, and
        far away) for a few rows k drawn at random (fresh entropy: which rows are moved
        cannot be predicted), at the initial point and at a public point near it, and
        check that no other ℓ_j moves. The proof (:meth:`_check_graph`) already refused
        every model it cannot show row-local; this guards the proof's rules themselves.

        The outcome is a property of the graph's structure (row-local operations leave
        other rows bit-identical), so it reveals nothing about the values; nothing of it
        is returned or printed.
        """
        n = self.n_data
        if n < 2:
            return
        q = self.ravel(self._initial_point)
        # A second, public point: at the initial point a parameter is often 0, which hides
        # any factor that multiplies it.
        shifted = q + 0.5 * np.random.default_rng(0).standard_normal(q.shape)
        # (at most n − 1 rows, so that some row is left to watch)
        rows = np.random.default_rng().choice(n, size=min(n - 1, 3), replace=False)
        work = [v.copy() for v in self._data_values]  # the probes' one working copy
        with np.errstate(all="ignore"):
            for point in (q, shifted):
                try:
                    base = _withholding_details(
                        "the per-datum log-likelihood", self._loglik_fn, point, *self._data_values
                    )
                except RuntimeError:
                    if point is q:
                        raise
                    continue  # the shifted point may be outside the model's support
                self._probe_rows(point, base, rows, work)

    def _probe_rows(self, point: np.ndarray, base: np.ndarray, rows, work) -> None:
        # The rows are moved together in ``work``, a copy of the data, set and restored in
        # place: three passes over the data per point, and the one copy, whatever n is.
        data = self._data_values
        extremes = [_extremes(v) for v in data]
        others = np.ones(len(base), dtype=bool)
        others[rows] = False
        for probe in (_bump_row, _copy_next_row, _far_row):
            try:
                for w, v, ends in zip(work, data, extremes):
                    for k in rows:
                        w[k] = probe(v, k, ends)
                changed = self._loglik_fn(point, *work)
            except Exception:  # e.g. an index out of range: try the other probes
                continue
            finally:
                for w, v in zip(work, data):
                    w[rows] = v[rows]
            same = (changed == base) | (np.isnan(changed) & np.isnan(base))
            close = np.abs(changed - base) <= 1e-12 * (1 + np.abs(base))
            if not np.all((same | close)[others]):
                raise UnsupportedModelError(_ROWS_MIX)

    def check_data_unchanged(self) -> None:
        """Refuse to sample if a data container changed since construction.

        Covers the ``pm.Data`` on the datum axis and every other container the model reads,
        public ones included (``pymc_dp.public_data``: a prior's scale, a table indexed by
        group): the step validated, bounds-checked and planned for their old values.
        """
        snapshots = [
            (d.variable, d.label, value)
            for d, value in zip(self.datum_inputs, self._data_values)
            if isinstance(d.variable, SharedVariable)
        ] + [(c, _container_label(c), value) for c, value in self._frozen_containers]
        for var, label, snapshot in snapshots:
            current = np.asarray(var.get_value(borrow=True))
            if current.shape != snapshot.shape or not _same_values(current, snapshot):
                raise ValueError(
                    f"The data of {label} changed after the step was built (pm.set_data?). "
                    "The step validated and planned for the old data: build a new step."
                )

    # ------------------------------------------------------------------ evaluation
    def loglik(self, q: np.ndarray) -> np.ndarray:
        """Per-datum log-likelihoods ``(ℓ_1(θ), …, ℓ_n(θ))`` at raveled point ``q``.

        Private: never release this without clipping and noise.
        """
        return _withholding_details(
            "the per-datum log-likelihood",
            self._loglik_fn,
            np.asarray(q, dtype=self._q.dtype),
            *self._data_values,
        )

    def clipped_ratio(
        self, q: np.ndarray, current: np.ndarray, bound: float
    ) -> tuple[np.ndarray, float]:
        """``(ℓ(θ'), Σ_j clip_b(ℓ_j(θ') − current_j))`` at ``q`` = θ', in one compiled pass.

        ``current`` is :meth:`loglik` at the chain's point θ (cached by the caller); the sum
        is the log-likelihood ratio a DP penalty or DP HMC test releases, clamped by the rule
        of :func:`~pymc_dp.kernels.clipping.clipped_sum` (sensitivity 2b under replace-one).
        The difference, the clamp and the sum run inside the compiled function, fused with
        the log-likelihood's own loop: no n-length array besides ``ℓ(θ')`` itself, which
        becomes the next cache if θ' is accepted. Both outputs are private.

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.0, 1.0, 5.0]))
        >>> pmodel = PrivateModel(m)
        >>> current = pmodel.loglik(np.array([0.0]))
        >>> new, ratio = pmodel.clipped_ratio(np.array([1.0]), current, 2.0)
        >>> round(ratio, 6)  # the three differences −0.5, 0.5, 4.5 clamped to [−2, 2]
        2.0
        """
        if not (np.isfinite(bound) and bound >= 0):
            raise ValueError(f"bound must be a finite number >= 0, got {bound!r}")
        if self._ratio_fn is None:
            per_datum = self._per_datum_graph
            cache = pt.vector("current_loglik", dtype=per_datum.dtype)
            # The clamp and the sum in float64 whatever floatX is: in float32 the bound
            # would be rounded (up, sometimes) and the sum rounded to a step that grows with
            # n, and a person could move the released sum by more than 2b.
            clip = pt.scalar("ratio_clip", dtype="float64")
            ratio = clipped_scalar_sum(
                pt.cast(per_datum, "float64") - pt.cast(cache, "float64"), clip
            )
            self._ratio_fn = pm_compile(
                [self._q, cache, clip, *self._placeholders],
                [per_datum, ratio],
                on_unused_input="ignore",
                **self._compile_kwargs,
            )
            self._ratio_fn.trust_input = True
        dtype = self._per_datum_graph.dtype
        current = np.asarray(current, dtype=dtype)
        if current.shape != (self.n_data,):
            raise ValueError(f"current must have shape ({self.n_data},), got {current.shape}")
        loglik, ratio = _withholding_details(
            "the clipped log-likelihood ratio",
            self._ratio_fn,
            np.asarray(q, dtype=self._q.dtype),
            current,
            np.asarray(bound, dtype="float64"),
            *self._data_values,
        )
        return loglik, float(_float64(ratio, "The clipped log-likelihood ratio"))

    def logprior(self, q: np.ndarray) -> float:
        """Public log prior density of ``q`` on the value space (Jacobians included)."""
        return float(self._prior_fn(np.asarray(q, dtype=self._q.dtype)))

    def ravel(self, point: dict) -> np.ndarray:
        """The raveled value-space vector of ``point`` in this adapter's layout."""
        return DictToArrayBijection.map({v.name: point[v.name] for v in self.value_vars}).data

    def unravel(self, q: np.ndarray) -> dict:
        """Inverse of :meth:`ravel`."""
        return DictToArrayBijection.rmap(RaveledVars(q, self.point_map_info))

    # ------------------------------------------------------------------ gradients
    def compile_gradients(self, method: str = "auto") -> None:
        """Compile :meth:`clipped_gradient` now (it is otherwise compiled on first use).

        Steps that need gradients call this at construction, so that a model they cannot
        differentiate is refused before any data is read; steps that do not (DP penalty)
        never pay for it.

        Parameters
        ----------
        method : {"auto", "reverse", "forward"}
            How per-datum gradients are computed (:mod:`pymc_dp.per_datum_gradients`).
            ``"auto"`` (default) uses reverse mode through per-row copies of the parameter
            tensors broadcast along the rows where the structure of the model's graph
            proves it keeps rows apart (and, with up to 6 coordinates, it needs few terms),
            else forward mode (one pass per coordinate of θ). ``"reverse"`` also copies the
            outputs of ``X @ β`` and ``a[g]`` per row (up to 12 coordinates): from half of
            forward mode's time to several times it, depending on the model and on the
            memory allocator (``benchmarks/per_datum_gradients.py``), which is why "auto"
            does not.
            The choice reads no data. Stored in :attr:`gradient_method`.

        Raises
        ------
        UnsupportedModelError
            If the log-likelihood or the prior has an operation without a gradient.
        ValueError
            If ``method="reverse"`` is asked for a model where it does not apply.
        """
        if method not in ("auto", "reverse", "forward"):
            raise ValueError(f"method must be 'auto', 'reverse' or 'forward', got {method!r}")
        if self._gradient_fn is not None and method in ("auto", self.gradient_method):
            return
        fn, chosen, may_fall_back = self._compiled_gradient_fn(method)
        if method == "reverse" and chosen != "reverse":
            raise ValueError(
                "Reverse-mode per-datum gradients do not apply to this model: a parameter "
                "tensor meets the data other than elementwise along the datum axis or "
                "through X @ β or a[g] (with at most 12 coordinates), the graph's structure "
                "does not prove that rows stay apart, or the parameters' Jacobian is too "
                "dense. Use method='forward' (or 'auto')."
            )
        if may_fall_back and self._forward_gradient_fn is None:
            # Compiled now, not in the middle of a chain (see clipped_gradient), and before
            # the reverse function is installed: if it is refused, nothing is.
            self._forward_gradient_fn, _, _ = self._compiled_gradient_fn("forward")
        self._gradient_fn, self.gradient_method = fn, chosen

    def _compiled_gradient_fn(self, method: str):
        """The compiled :meth:`_clipped_gradient_graph`, the method it uses, and whether it
        may need forward mode at some θ (reverse mode left Jacobian entries out)."""
        inputs, outputs, chosen = self._clipped_gradient_graph(method)
        # on_unused_input: as for the log-likelihood (a per-datum pm.Data it does not read)
        fn = pm_compile(inputs, outputs, on_unused_input="ignore", **self._compile_kwargs)
        fn.trust_input = True
        return fn, chosen, not isinstance(outputs[2], Constant)

    def _clipped_gradient_graph(
        self, method: str = "forward", per_row: bool = False
    ) -> tuple[list[Variable], list[Variable], str]:
        """Inputs ``[θ, b, *data]``, outputs ``[Σ_j clip_b(∇ℓ_j), ∇ log prior, dropped]``.

        ``method="forward"``: one Jacobian-vector product per coordinate of θ with the
        constant tangent e_k gives the column ``(∂ℓ_j/∂θ_k)_j`` (d passes over the data;
        always available; a ``pm.Data`` design matrix entering through ``X @ β`` costs about
        one pass, as ``X @ e_k`` is rewritten to ``X[:, k]``). ``"reverse"`` or ``"auto"``:
        one reverse pass through per-row copies of the parameter tensors that meet the data
        (``"reverse"`` also of the outputs of linear operations, ``X @ β``, ``a[g]``) where
        :func:`~pymc_dp.per_datum_gradients.reverse_columns` proves it applies, else
        forward mode. Neither has an (n, n) intermediate or a loop or scan over data.
        ``dropped`` (a function of θ alone) is 0 unless a Jacobian entry that reverse mode
        left out is not zero at θ; :meth:`clipped_gradient` then uses forward mode.
        Clipping: :func:`~pymc_dp.per_datum_gradients.clipped_row_sum`. Also returns the
        method used.
        """
        q = self._q
        bound = pt.scalar("grad_clip", dtype="float64")
        try:
            reverse = None
            basis = pt.matrix("basis", dtype=q.dtype)
            if method != "forward" and not per_row:
                try:
                    reverse = reverse_columns(
                        self._per_datum_graph,
                        q,
                        self._placeholders,
                        self.n_data,
                        self._public_points(3, 0.3),
                        max_terms=max(16, 4 * self.dim),
                        basis=basis,  # the columns of the rows Bᵀ∇ℓ_j
                        # Through X @ β or a[g] only when asked: from 0.5 to several times
                        # forward mode's time, and nothing public tells which in advance.
                        linear_outputs=method == "reverse",
                    )
                except Exception:
                    reverse = None  # forward mode says whether the model has gradients at all
            rows = {p: 0 for p in self._placeholders}
            if reverse is not None and not is_row_local(
                _as_list(reverse.columns), rows, self.n_data
            ):
                reverse = None  # the graph that would run (copies set to zero) is not proven
            if reverse is None and per_row:
                if self._forward_columns is None:  # built once: its proof is memoised too
                    self._forward_columns = forward_columns(self._per_datum_graph, q, self.dim)
                columns, dropped = self._forward_columns, None
            elif reverse is None:  # (along B's columns: the rows come out in B's coordinates)
                columns = forward_columns(self._per_datum_graph, q, self.dim, basis)
                dropped = None
            else:
                columns, dropped = reverse.columns, reverse.dropped
            prior_grad = pt_grad(self._prior_graph, q, disconnected_inputs="ignore")
        except (NotImplementedError, NullTypeGradError) as err:
            raise UnsupportedModelError(
                "The model is not differentiable: an operation in its log-likelihood or prior "
                f"has no gradient ({type(err).__name__}: {err}). Gradient-based private steps "
                "(DPHMC) need a differentiable model; use DPPenalty, which needs none."
            ) from None
        if dropped is None:
            dropped = pt.constant(0.0, dtype=q.dtype)
        # The gradient graph that will run is proven too, not assumed from the likelihood's.
        # (Constants it adds, e.g. forward mode's tangents, are public whatever their length;
        # the likelihood's data constants are inputs by now.)
        likelihood = set(graph_inputs([self._per_datum_graph]))
        added = [
            c for c in graph_inputs(_as_list(columns))
            if isinstance(c, Constant) and c not in likelihood
        ]
        if per_row:
            # The warm-up's (n, d) matrix of per-datum gradients (private: released only
            # through the clipped, noised statistics of pymc_dp.kernels.warmup).
            self._check_graph(columns, q, self._placeholders, "The per-datum gradient", added)
            rows = pt.stack(columns, axis=1)
            return [q, *self._placeholders], [rows, prior_grad], "forward"
        # In the coordinates u of θ = θ_0 + B u (B public, the identity unless a warm-up
        # chose a metric) a datum's gradient is Bᵀ∇ℓ_j: clipping it bounds the sensitivity
        # in that metric just the same.
        self._check_graph(
            _as_list(columns), q, self._placeholders, "The per-datum gradient", added,
            parameters={basis: np.eye(self.dim, dtype=q.dtype)},
        )
        # (the clip and the sums in float64 whatever floatX is: see clipped_ratio)
        clipped = clipped_row_sum(
            [pt.cast(c, "float64") for c in columns] if isinstance(columns, list)
            else pt.cast(columns, "float64"),  # the (n, d) rows
            bound,
        )
        chosen = "forward" if reverse is None else "reverse"
        outputs = [clipped, pt.dot(prior_grad, basis), dropped]
        return [q, bound, basis, *self._placeholders], outputs, chosen

    def _public_points(self, count: int, spread: float, seed: int = 7) -> list[np.ndarray]:
        """The initial point and ``count − 1`` points around it (fixed seed: public)."""
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        rng = np.random.default_rng(seed)
        return [point] + [
            point + spread * rng.standard_normal(point.shape) for _ in range(count - 1)
        ]

    def clipped_gradient(
        self, q: np.ndarray, bound: float, basis: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(Σ_j clip_b(Bᵀ∇_θ ℓ_j(θ)), Bᵀ∇_θ log prior(θ))`` at raveled point ``q``.

        The first array is private (sensitivity 2b under replace-one): never release it
        without noise. The second is the public prior gradient (Jacobians included). Both
        have shape ``(dim,)``. ``basis`` B (public, default the identity) gives the
        gradients in the coordinates u of ``θ = θ_0 + B u``, so the clip bounds the norm in
        that metric. Compiled on first use (:meth:`compile_gradients`).

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 3.0]))
        >>> clipped, prior = PrivateModel(m).clipped_gradient(np.array([0.0]), 1.0)
        >>> clipped, prior  # per-datum y_j − μ = 0.5, −0.2, 3 → clipped to 0.5, −0.2, 1
        (array([1.3]), array([-0.]))
        """
        if not bound > 0:
            raise ValueError(f"bound must be > 0, got {bound!r}")
        self.compile_gradients()
        dtype = self._q.dtype
        basis = np.eye(self.dim, dtype=dtype) if basis is None else basis
        basis = np.ascontiguousarray(basis, dtype=dtype)
        if basis.shape != (self.dim, self.dim) or not np.all(np.isfinite(basis)):
            raise ValueError(f"basis must be a finite ({self.dim}, {self.dim}) matrix")
        args = (np.ascontiguousarray(q, dtype=dtype), np.asarray(bound, dtype="float64"), basis)
        what = "the clipped per-datum gradients"
        clipped, prior_grad, dropped = _withholding_details(
            what, self._gradient_fn, *args, *self._data_values
        )
        if dropped != 0:
            # Reverse mode left out a Jacobian entry (zero at the public points it was
            # chosen at) that is not zero at this θ: recompute in forward mode (compiled
            # with the reverse function). Whether this happens depends on θ alone.
            clipped, prior_grad, _ = _withholding_details(
                what, self._forward_gradient_fn, *args, *self._data_values
            )
        return _float64(clipped, "The clipped gradient sum"), prior_grad

    def check_gradient_rows(self) -> None:
        """Build (not compile) the graph of :meth:`gradient_rows` and prove it row-local:
        a model without gradients is refused before any data is read
        (:class:`~pymc_dp.errors.UnsupportedModelError`). Compiling waits for first use."""
        if self._gradient_rows_graph is None:
            inputs, outputs, _ = self._clipped_gradient_graph("forward", per_row=True)
            self._gradient_rows_graph = (inputs, outputs)

    def compile_gradient_rows(self) -> None:
        """Compile :meth:`gradient_rows` (done on first use)."""
        if self._gradient_rows_fn is None:
            self.check_gradient_rows()
            inputs, outputs = self._gradient_rows_graph
            fn = pm_compile(inputs, outputs, on_unused_input="ignore", **self._compile_kwargs)
            fn.trust_input = True
            prior = pm_compile([self._q], outputs[1], **self._compile_kwargs)
            prior.trust_input = True
            self._gradient_rows_fn, self._prior_gradient_fn = fn, prior

    def gradient_rows(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(G, ∇ log prior, −∇² log prior)`` at ``q``: G's row j is ``∇_θ ℓ_j(θ)``.

        G (shape ``(n, dim)``) is private: the warm-up (:mod:`pymc_dp.kernels.warmup`)
        releases only clipped, noised statistics of it. The prior's gradient and negative
        Hessian (Jacobians included) are public. Forward mode, compiled on first use.

        Raises
        ------
        UnsupportedModelError
            If the log-likelihood or the prior has an operation without a gradient.
        """
        self.compile_gradient_rows()
        q = np.ascontiguousarray(q, dtype=self._q.dtype)
        rows, prior_grad = _withholding_details(
            "the per-datum gradients", self._gradient_rows_fn, q, *self._data_values
        )
        return rows, prior_grad, self._prior_negative_hessian(q)

    def likelihood_parameters(self):
        """The likelihood's own parameters φ(θ) (:class:`~pymc_dp.likelihood_parameters.
        LikelihoodParameters`), compiled on first use; ``None`` if the graph has none that
        a surrogate likelihood can use (reading the graph only, never data)."""
        if "_likelihood_parameters" not in self.__dict__:
            from pymc_dp.likelihood_parameters import LikelihoodParameters

            try:
                found = LikelihoodParameters(
                    self._per_datum_graph, self._q, self._placeholders,
                    private=[*_private_data_variables(self.model),
                             *(d.variable for d in self.datum_inputs)],
                    compile_kwargs=self._compile_kwargs,
                )
                if not self._is_public_parameter_graph(found.graph):
                    found = None
            except ValueError:
                found = None
            self._likelihood_parameters = found
        return self._likelihood_parameters

    def prior_gradient(self, q: np.ndarray) -> np.ndarray:
        """``∇ log prior(q)`` on the value space (public; compiled on first use)."""
        self.compile_gradient_rows()
        return np.asarray(self._prior_gradient_fn(np.ascontiguousarray(q, dtype=self._q.dtype)))

    def _is_public_parameter_graph(self, graph: Variable) -> bool:
        """Whether φ's graph provably reads θ and public constants only (fail closed).

        Refused: a graph that reads data (:meth:`reads_data`); any Op with an inner graph
        (an ``OpFromGraph`` or ``Scan`` can hold a per-row array as an inner constant, which
        the walk over the outer graph does not see); any constant or shared variable with
        one entry per individual (per-person values, even declared public: the release
        coordinates and the surrogate must not be indexed by people).
        """
        if self.reads_data(graph):
            return False
        nodes = io_toposort(graph_inputs([graph]), [graph])
        if any(_inner_graph_outputs(node.op) for node in nodes):
            return False
        constants = [c for c, _, _ in _constant_uses([graph])]
        shared = [
            _numeric_value(v) for v in graph_inputs([graph]) if isinstance(v, SharedVariable)
        ]
        return not _has_rows([*constants, *shared], self.n_data)

    def reads_data(self, graph: Variable) -> bool:
        """Whether ``graph`` reads an observed value, a private container or a per-datum
        array of this model (structure only)."""
        data = [*_private_data_variables(self.model), *(d.variable for d in self.datum_inputs),
                *self._placeholders]
        return _reads([graph], data)

    def prior_graph(self):
        """``(θ, log prior(θ))``: the public prior's graph (Jacobians and potentials
        included) and its input, for samplers of public targets."""
        return self._q, self._prior_graph

    def plausible_start(self, q: np.ndarray) -> np.ndarray:
        """``q`` with the default coordinates of a variable moved to the prior's median when
        the prior finds them implausible. Public: it reads the prior, never the data.

        A variable's coordinates move when they equal PyMC's default initial point, lie
        outside the central 90 % of their prior (value space), and the move raises the
        prior's log density by at least :data:`PLAUSIBLE_GAIN` nats. PyMC's defaults ignore
        some distributions' parameters: an ``LKJCholeskyCov`` starts at the identity
        whatever its ``sd_dist``, so the covariance of blood pressures (sds 10–15) starts
        with sds of 1, hundreds of posterior sds from the mode, where a private warm-up's
        Newton steps crawl. The density condition keeps a vague skewed prior's start: PyMC
        starts ``Gamma(0.01, 0.01)`` at its mean 1, in its upper tail, but its median is
        10⁻²⁸ and its density there no higher. Starts a user gave (``initval=``,
        ``pm.sample(initvals=…)``) are kept. The quantiles come from 1001 prior draws with
        fixed seeds: the same start every run.
        """
        if self._prior_quantiles is None:
            self._prior_quantiles = self._prior_value_quantiles()
        start = np.array(q, dtype=float)
        lo, median, hi = self._prior_quantiles
        default = self.ravel(self._initial_point)
        for mask in self._value_masks():
            moved = mask & (start == default) & ((start < lo) | (start > hi))
            if moved.any():
                trial = np.where(moved, median, start)
                if self.logprior(trial) >= self.logprior(start) + PLAUSIBLE_GAIN:
                    start = trial
        return start

    def _value_masks(self) -> list[np.ndarray]:
        """One boolean mask of raveled coordinates per value variable."""
        sizes = [int(np.prod(info[1], dtype=int)) for info in self.point_map_info]
        edges = np.cumsum([0, *sizes])
        masks = []
        for a, b in zip(edges[:-1], edges[1:]):
            mask = np.zeros(edges[-1], dtype=bool)
            mask[a:b] = True
            masks.append(mask)
        return masks

    def _prior_value_quantiles(self):
        """The prior's 5 %, 50 % and 95 % quantiles per value-space coordinate (±∞ and NaN
        for a variable PyMC cannot draw, a ``Flat`` say: its start is left as it is)."""
        try:
            return self._prior_draw_quantiles({})
        except Exception:  # noqa: BLE001 - a start, not a release: find who cannot be drawn
            pass
        size = self.ravel(self._initial_point).size
        lo, median, hi = (np.full(size, v) for v in (-np.inf, np.nan, np.inf))
        for rv, mask in zip(self._free_rvs_in_order(), self._value_masks()):
            others = {o: "support_point" for o in self.model.free_RVs if o is not rv}
            try:
                found = self._prior_draw_quantiles(others)
            except Exception:  # noqa: BLE001 - this variable keeps PyMC's start
                continue
            lo[mask], median[mask], hi[mask] = found[0][mask], found[1][mask], found[2][mask]
        return lo, median, hi

    def _free_rvs_in_order(self) -> list:
        """The free variables in the order of :attr:`point_map_info`."""
        by_value = {self.model.rvs_to_values[rv].name: rv for rv in self.model.free_RVs}
        return [by_value[info[0]] for info in self.point_map_info]

    def _prior_draw_quantiles(self, overrides: dict) -> np.ndarray:
        draw = make_initial_point_fn(
            model=self.model, overrides=overrides, jitter_rvs=set(),
            default_strategy="prior", return_transformed=True,
        )
        draws = np.stack([self.ravel(draw(seed)) for seed in range(1001)])
        return np.quantile(draws, [0.05, 0.5, 0.95], axis=0)

    def _prior_negative_hessian(self, q: np.ndarray) -> np.ndarray:
        """``−∇² log prior`` by central differences of the compiled prior gradient.

        The prior is public, so its curvature may be computed any way; differences avoid
        compiling a symbolic Hessian, which is slow for structured priors (LKJ). Symmetrised.
        """
        dim = q.size
        steps = 1e-5 * np.maximum(1.0, np.abs(q))
        hessian = np.empty((dim, dim))
        for k in range(dim):
            e = np.zeros(dim, dtype=q.dtype)
            e[k] = steps[k]
            with np.errstate(all="ignore"):
                up, down = self._prior_gradient_fn(q + e), self._prior_gradient_fn(q - e)
            hessian[:, k] = (up - down) / (2 * steps[k])
        hessian = np.where(np.isfinite(hessian), hessian, 0.0)
        return -0.5 * (hessian + hessian.T)

    # ------------------------------------------------------------------ batches of rows
    def loglik_rows(self, q: np.ndarray, rows) -> np.ndarray:
        """Per-datum log-likelihoods ``(ℓ_j(θ))_{j ∈ rows}`` at raveled point ``q``.

        Reads only the given rows of every per-datum array (observed values and ``pm.Data``
        with the datum axis in front) and evaluates a function compiled for batches of any
        length (:meth:`compile_rows`), so one call costs O(len(rows)), not O(n). On
        ``rows = arange(n)`` it equals :meth:`loglik`. Private: never release this without
        clipping and noise.

        Parameters
        ----------
        q : array
            Raveled value-space point.
        rows : 1-d integer array
            Row indices (a batch drawn by the step, e.g. without replacement).

        Raises
        ------
        UnsupportedModelError
            If the model's log-likelihood cannot follow a subset of rows (see
            :meth:`compile_rows`). The message names the error type only: PyTensor messages
            may print input values, which are private.

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 1.0]))
        >>> np.round(PrivateModel(m).loglik_rows(np.array([0.0]), np.array([2, 0])), 3)
        array([-1.419, -1.044])
        """
        self.compile_rows()
        rows = np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError("rows must be a 1-d array of integer row indices")
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_data):
            raise ValueError("row indices must lie in [0, n), n the number of rows")
        batch = [np.take(v, rows, axis=0) for v in self._data_values]
        try:
            out = self._rows_fn(np.asarray(q, dtype=self._q.dtype), *batch)
        except Exception as err:  # sanitise: PyTensor may print private input values
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
        if out.shape != rows.shape:
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format("wrong output length"))
        return out

    def compile_rows(self) -> None:
        """Compile :meth:`loglik_rows` now and check it on synthetic batches.

        The per-datum log-likelihood is rebuilt from the observed random variables with
        every per-datum array replaced by an input of unknown length: each observed
        variable's size is re-derived from its batch of values (``change_dist_size``), free
        variables are replaced by their value-space points, other observed variables by
        their (batched) values, and a ``SpecifyShape`` that pins the leading length to n is
        relaxed. Graphs that fix the number of rows in the model itself therefore follow the
        batch: ``shape=y.shape``, ``dims``, ``pm.MvNormal`` observations of shape (n, d), a
        ``pm.Data`` design matrix entering through ``X @ β``.

        The compiled function is then run on synthetic all-zero batches of two lengths (not
        the data) to check that it returns one value per row. Minibatch steps call this at
        construction, so a model that cannot be batched is refused before any data is read.

        Raises
        ------
        UnsupportedModelError
            If the graph cannot be rebuilt for batches or returns the wrong length, e.g. a
            NumPy expression of per-individual covariates that PyMC folds into a new
            constant (``b * pt.log(x)``; wrap ``x`` in ``pm.Data``), or an observed variable
            without a batch axis.
        """
        if getattr(self, "_rows_fn", None) is not None:
            return
        try:
            inputs, output = self._rows_graph()
            what = "The log-likelihood of a batch of rows"
            self._check_graph([output], inputs[0], inputs[1:], what)
            fn = pm_compile(inputs, output, **getattr(self, "_compile_kwargs", {}))
        except UnsupportedModelError:
            raise
        except UnusedInputError:
            used = set(ancestors([output]))
            folded = [d.label for d, p in zip(self.datum_inputs, inputs[1:]) if p not in used]
            raise UnsupportedModelError(_ROWS_FOLDED.format(", ".join(folded))) from None
        except Exception as err:
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
        fn.trust_input = True
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        for k in [k for k in (2, 3, 5) if k != self.n_data][:2]:
            fake = [np.zeros((k, *v.shape[1:]), dtype=v.dtype) for v in self._data_values]
            try:
                out = np.asarray(fn(point, *fake))
            except Exception as err:
                raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
            if out.shape != (k,):
                raise UnsupportedModelError(_ROWS_UNSUPPORTED.format("wrong output length"))
        self._rows_fn = fn

    def _rows_graph(self) -> tuple[list[Variable], Variable]:
        """Inputs ``[θ, *per-datum batches]`` and the per-datum log-likelihood of the batch."""
        model = self.model
        placeholders = [
            pt.tensor(
                dtype=d.variable.dtype,
                shape=(None, *d.variable.type.shape[1:]),
                name=f"datum_rows_{i}",
            )
            for i, d in enumerate(self.datum_inputs)
        ]
        data_map = {d.variable: p for d, p in zip(self.datum_inputs, placeholders)}
        rvs_to_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs + model.observed_RVs}
        per_datum = None
        for rv in model.observed_RVs:
            # (rebuilt: an integer pm.Data observed by a discrete likelihood is Cast(x))
            (rows_value,) = _rebuild([model.rvs_to_values[rv]], data_map)
            others = {r: v for r, v in rvs_to_values.items() if r is not rv}
            (rv_values,) = replace_rvs_by_values(
                [rv], rvs_to_values=others, rvs_to_transforms=model.rvs_to_transforms
            )
            # A NumPy covariate is one constant in the log-likelihood (PyMC merges equal
            # constants) but may be several equal ones in this graph: map each to its batch.
            data_map.update(self._equal_constants(rv_values, data_map))
            (rv_rows,) = _rebuild([rv_values], data_map)
            batch_ndim = rv_rows.owner.op.batch_ndim(rv_rows.owner)
            if batch_ndim < 1:
                raise UnsupportedModelError(
                    f"Observed variable {rv.name!r} has no batch axis: its leading axis is part "
                    "of one multivariate observation, not one row per individual."
                )
            size = (rows_value.shape[0], *(rv_rows.shape[i] for i in range(1, batch_ndim)))
            rv_rows = change_dist_size(rv_rows, size)
            term = _rv_logp(rv_rows, rows_value, warn_rvs=False)
            row_sums = term if term.ndim == 1 else term.reshape((term.shape[0], -1)).sum(axis=1)
            per_datum = row_sums if per_datum is None else per_datum + row_sums
        (per_datum,) = _rebuild([per_datum], data_map)
        per_datum = _without_checks_on(per_datum, placeholders)
        (per_datum,), q = join_nonshared_inputs(self._initial_point, [per_datum], self.value_vars)
        return [q, *placeholders], per_datum

    def _equal_constants(self, graph: Variable, data_map: dict) -> dict:
        """Constants of ``graph`` equal to a per-datum NumPy array, mapped to its batch."""
        found = {}
        for const in _array_constants([graph]):
            if const in data_map:
                continue
            for d in self.datum_inputs:
                if (
                    isinstance(d.variable, Constant)
                    and const.dtype == d.variable.dtype
                    and np.shape(const.data) == d.value.shape
                    and np.array_equal(const.data, d.value)
                ):
                    found[const] = data_map[d.variable]
                    break
        return found


def _not_row_local(what: str, err: NotRowLocal) -> str:
    """The refusal of a graph the row-locality proof fails on: the Op type and the fix."""
    if err.mixes:
        why = (
            f"{what} computes with {err.op} ({err.why}), which can make one row of the "
            "data change the values of other rows."
        )
    else:
        why = (
            f"{what} computes with {err.op} ({err.why}): the row-locality proof cannot show "
            "that it keeps rows apart, and a private step accepts only models it proves to."
        )
    return f"{why} {_REWRITE}"


_REWRITE = (
    "Private steps need ℓ_j to depend on row j only. Compute per-person values elementwise "
    "and reduce only over axes other than the rows; index parameters or public tables "
    "(pymc_dp.public_data) by per-row integer arrays (a[group]), never per-person values by "
    "an index array (x[g]: give each row its own values instead); preprocess with public "
    "constants (no standardising by the data's own mean or sd, lags or cumulative sums); "
    "and keep Scan, as_op and custom Ops out of the likelihood. See 'What the model must "
    "look like' in docs/private-mcmc.md."
)


def _check_observed_expression(name: str, value: Variable, containers) -> None:
    """Refuse an observed value computed from data other than row by row.

    Its rows would mix (``x - x.mean()``) and its length could be a count of the data
    (``x[x > 0]``); proven row-local from the containers it reads, its length is theirs.
    """
    rows = {c: 0 for c in containers if c.ndim >= 1 and _reads([value], [c])}
    try:
        prove_rows_first([value], rows)
    except NotRowLocal as err:
        raise UnsupportedModelError(
            _not_row_local(f"The observed value of {name!r}", err)
            + " Observed values computed from pm.Data must be computed row by row (or pass "
            "them as arrays)."
        ) from None


_ROWS_MIX = (
    "One row of the data changes the log-likelihood of other rows (e.g. data standardised by "
    "its own mean or sd, lags, cumulative sums, or parameters estimated from the data inside "
    "the model). Private steps need ℓ_j to depend on row j only: preprocess with public "
    "constants instead."
)

_ROWS_FOLDED = (
    "The log-likelihood of a batch of rows cannot select rows of {}: PyMC folds a NumPy "
    "array with one row per individual into a new constant when the model computes with it "
    "in NumPy-only expressions (b * pt.log(x), x ** 2, an integer array converted to float "
    "for x * beta), and a minibatch step cannot follow that constant's rows. Wrap the "
    "per-individual arrays in pm.Data (pm.Data('x', x)), or compute the expression in "
    "NumPy (x.astype(float)) before building the model and pass its result."
)

_ROWS_UNSUPPORTED = (
    "The model's per-datum log-likelihood cannot be evaluated on a batch of rows ({}). A "
    "minibatch step reads a random subset of the rows of every observed variable and of every "
    "pm.Data or NumPy array whose leading axis has length n; per-individual values held "
    "elsewhere (an expression of NumPy covariates that PyMC folds into a new constant: wrap "
    "them in pm.Data) or shapes fixed to n by something other than the data cannot follow "
    "the batch."
)


def _without_checks_on(graph: Variable, data: Sequence[Variable]) -> Variable:
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

    def reads_data(node) -> bool:
        return isinstance(node.op, CheckAndRaise) and _reads(node.inputs[1:], data)

    (out,) = _rebuild([graph], {}, passthrough=reads_data)
    return out


def _rebuild(outputs: list[Variable], replace: dict, passthrough=None) -> list[Variable]:
    """``outputs`` with ``replace`` applied, re-deriving the types of every node downstream.

    Unlike ``graph_replace``, a replacement may have a less specific type (a leading length
    of ``None`` instead of n): each affected node is rebuilt with ``make_node``, so its
    output types follow the new inputs, and a ``SpecifyShape`` of an affected variable drops
    its leading length. Nodes not downstream of a replacement are kept as they are. A node
    for which ``passthrough(node)`` holds is replaced by its first input (a check taken out).
    """
    memo = dict(replace)
    batches = set(replace.values())
    for node in io_toposort(list(graph_inputs(outputs)), outputs):
        new_inputs = [memo.get(i, i) for i in node.inputs]
        if passthrough is not None and passthrough(node):
            memo[node.outputs[0]] = new_inputs[0]
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
