"""The simulator adapter: from a PyMC model with a ``pm.Simulator`` to ABCDP's public parts.

ABCDP (``docs/algorithms.md``, "ABCDP") needs, from a model

    with pm.Model():
        theta = pm.Dirichlet("theta", a=np.ones(5))
        pm.Simulator("y", simulate, theta, observed=y_private)

four things: prior draws of the free variables (on PyMC's value space, raveled in the step's
layout), the parameters the simulator is called with at each draw, the user's simulator
function itself, and — last, and only through :meth:`SimulatorModel.observed` — the private
observations. Everything but the observations is public: prior draws and simulations are
computed without the data, so ABCDP can run them ahead, in batches, anywhere.

Validation happens at construction, before any observation value is read: exactly one observed
variable and it is a ``pm.Simulator``; no ``pm.Potential`` (prior draws would ignore it); the
priors and the simulator's parameters do not read observed values or ``pm.Data``; every free
variable is sampled by the step; one validation simulation (with a throwaway generator) has the
observed shape. Only the observed *shape* is used for this (the number of rows N is public
under replace-one neighbours). The simulator function is inspected too: it must be Python code
(or a method of ``numpy.random.Generator``), and the arrays it can reach are collected.

Then, still before any budget is reserved, :meth:`SimulatorModel.check_data` reads the
observations once: they must be numeric, finite and within the distance's range, and none of
the collected arrays may hold them (share memory with them, equal them, or have them as a
column). ``docs/abcdp.md``, "The simulator must not read the data", states exactly what this
covers and what it cannot.

PyMC's ``Simulator`` settings ``distance``, ``sum_stat`` and ``epsilon`` belong to SMC-ABC
(``pm.sample_smc``); ABCDP does not use them (it uses its own distance of known sensitivity).
"""

from __future__ import annotations

import array
import functools
import numbers
import sys
import types
import warnings
import weakref

from collections import deque
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from pymc.blocking import DictToArrayBijection
from pymc.distributions.simulator import SimulatorRV, gaussian, identity
from pymc.model import Model, modelcontext
from pymc.pytensorf import compile as pm_compile
from pymc.pytensorf import replace_rng_nodes
from pymc.util import get_value_vars_from_user_vars
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors

from pymc_dp.errors import UnsupportedModelError, warn
from pymc_dp.model.constants import array_constants, constant_uses, has_rows
from pymc_dp.model.data import data_variables, read_unshaped_lengths

__all__ = ["SimulatorModel", "find_held_observations", "simulate_summaries"]


class SimulatorModel:
    """The public prior/simulator side and the private observations of a simulator model.

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: from context). Its only observed variable must be a
        ``pm.Simulator``.
    vars : list, optional
        The free variables the step samples; must be all of them (default).
    compile_kwargs : dict, optional
        Passed to the compilation of the prior sampler.

    Attributes
    ----------
    value_vars : list
        Value variables in the order of the raveled point.
    simulator_fn : callable
        The user's function ``fn(rng, *params, size)``.
    observed_shape : tuple
        Shape of the observations; ``n_rows = observed_shape[0]`` individuals.
    observed_dtype : numpy.dtype
        Their dtype (that of the model's variable).
    """

    def __init__(
        self,
        model: Model | None = None,
        vars: Sequence[Variable] | None = None,
        *,
        compile_kwargs: dict | None = None,
    ):
        model = modelcontext(model)
        self.model = model
        sim_rv = self._find_simulator(model)
        self.simulator_name = sim_rv.name
        if any(isinstance(rv.owner.op, SimulatorRV) for rv in model.free_RVs):
            # PyMC imputes missing observations as a free variable, which a run releases.
            raise UnsupportedModelError(
                f"The observations of {sim_rv.name!r} contain missing values (NaN or masked "
                "entries). PyMC imputes them as a free variable, which ABCDP would release, and "
                "its shape would tell how many values are missing. Remove or impute those rows "
                "before building the model."
            )
        op = sim_rv.owner.op
        # The class attribute, not the (bound) instance attribute: the user's plain function.
        self.simulator_fn: Callable = type(op).fn
        if not _inspectable(self.simulator_fn):
            raise UnsupportedModelError(
                f"The simulator of {sim_rv.name!r} is a {type(self.simulator_fn).__name__} whose "
                "code Python cannot inspect, so ABCDP cannot check that it does not hold the "
                "observed data. Wrap it in a Python function, e.g. "
                "`def simulate(rng, *params, size): return fn(rng, *params, size=size)`; the "
                "wrapper and what it refers to are inspected (docs/abcdp.md)."
            )
        self._warn_smc_settings(type(op))

        value_vars = (
            list(model.value_vars) if vars is None else get_value_vars_from_user_vars(vars, model)
        )
        missing = [v.name for v in model.value_vars if v not in value_vars]
        if missing:
            raise UnsupportedModelError(
                f"ABCDP must sample every free variable, but {missing} are left out. PyMC would "
                "give them a non-private step that reads the data without noise."
            )
        self.value_vars = value_vars
        if model.potentials:
            raise UnsupportedModelError(
                f"ABCDP draws from the prior, which ignores pm.Potential terms "
                f"{[p.name for p in model.potentials]}; remove them or move them into the prior."
            )

        params = list(op.dist_params(sim_rv.owner))
        # (pm.Data and any other shared array: pymc_dp.model.data's one rule for what holds data)
        data_vars = data_variables(model)
        for rv in model.free_RVs:
            if any(a in set(data_vars) for a in ancestors(rv.owner.inputs)):
                raise UnsupportedModelError(
                    f"The prior of {rv.name!r} reads observed values, pm.Data or a shared "
                    "variable. ABCDP's prior draws are public and must not depend on data."
                )
        if params and any(a in set(data_vars) for a in ancestors(params)):
            raise UnsupportedModelError(
                f"The parameters of simulator {sim_rv.name!r} read observed values, pm.Data or a "
                "shared variable. ABCDP's simulations are public; pass public constants as "
                "NumPy arrays."
            )

        obs_var = model.rvs_to_values[sim_rv]
        self._observed_var = obs_var
        self.observed_shape = self._observed_shape(obs_var, sim_rv.name)
        self.observed_dtype = np.dtype(obs_var.type.dtype)
        self.n_rows = int(self.observed_shape[0])
        self._check_prior_holds_no_data(model, sim_rv, params)
        # Constants the prior draws and simulations are computed from (public inputs) are
        # checked against the data by check_data, like the arrays the simulator can reach.
        self._constants = [
            v for v in ancestors(params + [i for rv in model.free_RVs for i in rv.owner.inputs])
            if isinstance(v, Constant)
        ]
        self._snapshot: np.ndarray | None = None

        self._compile_prior(params, compile_kwargs or {})
        self._check_simulation_shape()

    # ------------------------------------------------------------------ validation
    def _check_prior_holds_no_data(self, model: Model, sim_rv, params) -> None:
        """Refuse priors written with arrays of one entry per row, and values of a dimension
        length read where a number is expected.

        The prior draws are released as they are. Besides containers (checked above), a
        prior can hold data as a NumPy array written into it (a location ``x.mean()`` of a
        sorted or shifted copy of the observations, also inside a ``pm.CustomDist``): the
        rule of :mod:`pymc_dp.model` for priors (:func:`~pymc_dp.model.constants.has_rows`)
        refuses it. A dimension's length is public as the shape of a variable (it is released
        with the draws), but the length of a dimension no variable has, read as a value
        (``pm.Normal("mu", m.dim_lengths["k"], 1)``), may be a count of the data.
        """
        free = set(model.free_RVs)
        n = self.n_rows
        for rv in model.free_RVs:
            as_written = [c for c, _, _ in constant_uses([rv], blockers=free - {rv})]
            graph = model.logp(vars=[rv])
            if has_rows(as_written, n) or has_rows(array_constants([graph], inner=True), n):
                raise UnsupportedModelError(
                    f"The prior of {rv.name!r} holds an array with one entry per row of the "
                    "observations. ABCDP's prior draws are public and must not depend on "
                    "data; if the array is a public constant of the analysis, compute the "
                    "prior's parameters from it before building the model."
                )
        reads_length = read_unshaped_lengths(model, [*model.free_RVs, sim_rv])
        if reads_length:
            raise UnsupportedModelError(
                f"The parameters of {reads_length} read, as a value, the length of a dimension "
                "no variable has. ABCDP's prior draws and simulations are public, and such a "
                "length may be a count of the data: use a constant."
            )

    @staticmethod
    def _find_simulator(model: Model):
        observed = list(model.observed_RVs)
        sims = [rv for rv in observed if isinstance(rv.owner.op, SimulatorRV)]
        if not sims:
            raise UnsupportedModelError(
                "ABCDP needs a model whose observations are a pm.Simulator "
                "(pm.Simulator('y', fn, *params, observed=y)); this model has "
                + (
                    f"observed variables {[rv.name for rv in observed]} but no simulator."
                    if observed
                    else "no observed variable."
                )
            )
        if len(observed) > 1:
            raise UnsupportedModelError(
                f"ABCDP handles one observed pm.Simulator; this model has observed variables "
                f"{[rv.name for rv in observed]}. Put all private observations into one simulator."
            )
        return sims[0]

    @staticmethod
    def _warn_smc_settings(op_cls) -> None:
        ignored = []
        if getattr(op_cls, "_distance", gaussian) is not gaussian:
            ignored.append("distance")
        if getattr(op_cls, "_sum_stat", identity) is not identity:
            ignored.append("sum_stat")
        eps = getattr(op_cls, "epsilon", None)
        if eps is not None:
            try:
                value = np.asarray(eps.data if isinstance(eps, Constant) else eps.eval())
            except Exception:  # pragma: no cover - symbolic epsilon
                value = None
            if value is None or not np.all(value == 1):
                ignored.append("epsilon")
        if ignored:
            warn(
                f"pm.Simulator settings {ignored} belong to SMC-ABC (pm.sample_smc) and are not "
                "used by ABCDP, which compares raw simulated and observed rows with its own "
                "distance of known sensitivity (distance=...).",
                UserWarning,
            )

    @staticmethod
    def _observed_shape(obs_var: Variable, name: str) -> tuple[int, ...]:
        static = obs_var.type.shape
        if all(s is not None for s in static):
            shape = tuple(int(s) for s in static)
        elif isinstance(obs_var, SharedVariable):
            shape = tuple(obs_var.get_value(borrow=True).shape)
        else:
            shape = tuple(int(s) for s in obs_var.shape.eval())
        if len(shape) == 0 or shape[0] < 1:
            raise UnsupportedModelError(
                f"The observations of {name!r} must have at least one row (leading axis = "
                f"individuals); got shape {shape}."
            )
        return shape

    # ------------------------------------------------------------------ prior sampler
    def _compile_prior(self, params: list[Variable], compile_kwargs: dict) -> None:
        model = self.model
        rvs_by_value = {model.rvs_to_values[rv]: rv for rv in model.free_RVs}
        outputs = []
        for value_var in self.value_vars:
            rv = rvs_by_value[value_var]
            transform = model.rvs_to_transforms.get(rv)
            outputs.append(transform.forward(rv, *rv.owner.inputs) if transform else rv)
        self._n_value_outputs = len(outputs)
        outputs = outputs + params
        # Fresh RNG variables: the model's own generators are never touched.
        outputs = replace_rng_nodes(outputs)
        # A small graph called once per prior draw: fast compilation beats faster calls.
        compile_kwargs = {"mode": "FAST_COMPILE", **compile_kwargs}
        fn, updates = pm_compile(
            [], outputs, random_seed=False, return_updates=True, **compile_kwargs
        )
        fn.trust_input = True
        self._prior_fn = fn
        self._prior_rngs = list(updates)
        point = model.initial_point()
        raveled = DictToArrayBijection.map({v.name: point[v.name] for v in self.value_vars})
        self.point_map_info = raveled.point_map_info
        self.dim = int(raveled.data.size)
        self._dtype = raveled.data.dtype

    def seed_prior(self, seed: np.random.SeedSequence) -> None:
        """Reset the prior sampler's generators from ``seed`` (one child per RNG)."""
        for rng_var, child in zip(self._prior_rngs, seed.spawn(len(self._prior_rngs))):
            rng_var.set_value(np.random.Generator(np.random.PCG64(child)), borrow=True)

    def draw_prior(self, n: int) -> tuple[np.ndarray, list[tuple]]:
        """``n`` prior draws: raveled value-space points ``(n, dim)`` and simulator parameters.

        Uses the generators set by :meth:`seed_prior`; the stream continues across calls, so
        the sequence of draws does not depend on how it is cut into batches.
        """
        q = np.empty((n, self.dim), dtype=self._dtype)
        params: list[tuple] = []
        k = self._n_value_outputs
        for i in range(n):
            out = self._prior_fn()
            q[i] = np.concatenate([np.ravel(v) for v in out[:k]]) if k else ()
            params.append(tuple(np.asarray(p) for p in out[k:]))
        return q, params

    def _check_simulation_shape(self) -> None:
        # One validation draw with throwaway generators; nothing of it is used by a run.
        self.seed_prior(np.random.SeedSequence(0))
        _, params = self.draw_prior(1)
        sim = simulate_one(
            self.simulator_fn, params[0], np.random.SeedSequence(1), self.observed_shape
        )
        del sim

    # ------------------------------------------------------------------ private data
    def _model_observed(self):
        """The observations as the model holds them (no copy)."""
        var = self._observed_var
        if isinstance(var, Constant):
            return var.data
        if isinstance(var, SharedVariable):
            return var.get_value(borrow=True)
        return var.eval()

    def check_data(self, max_abs: float) -> None:
        """Validate the observations once, before any budget is reserved.

        They must be numeric and finite with ``|value| <= max_abs`` (the range the distance
        computes without overflow), and the simulator must not hold them (see
        :func:`find_held_observations`). Keeps a read-only copy, which is what
        :meth:`observed` returns. Messages say what is wrong, never a value or a count.
        """
        raw = self._model_observed()
        value = np.asarray(raw)
        name = self.simulator_name
        if not (np.issubdtype(value.dtype, np.number) or value.dtype == bool):
            raise UnsupportedModelError(f"The observations of {name!r} are not numeric.")
        if np.iscomplexobj(value):
            raise UnsupportedModelError(f"The observations of {name!r} are complex numbers.")
        if not np.all(np.isfinite(value)):
            raise ValueError(
                f"The observations of {name!r} contain non-finite values (NaN or inf); remove "
                "or impute those rows before building the model."
            )
        if value.size and np.max(np.abs(value.astype(np.float64))) > max_abs:
            raise ValueError(
                f"The observations of {name!r} contain values of magnitude above {max_abs:.0e}, "
                "more than the distance can compute with in floating point. Rescale the data "
                "(and the simulator with it)."
            )
        self._refuse_held_observations(value, raw)
        snapshot = np.array(value, copy=True)
        snapshot.setflags(write=False)
        self._snapshot = snapshot

    def check_data_unchanged(self) -> None:
        """Refuse a chain if the data or what the simulator holds changed since check_data.

        Called by :meth:`~pymc_dp.steps.base.PrivateStep.setup_chain` before the reservation.
        """
        if self._snapshot is None:
            raise RuntimeError("internal: check_data was not called")
        raw = self._model_observed()
        current = np.asarray(raw)
        if current.shape != self._snapshot.shape or not np.array_equal(current, self._snapshot):
            raise ValueError(
                f"The observations of {self.simulator_name!r} changed after the step was built "
                "(pm.set_data?). The step validated the old data: build a new step."
            )
        # The simulator's closure or globals may have changed since (it is cheap to look again).
        self._refuse_held_observations(self._snapshot, raw)

    def _refuse_held_observations(self, value: np.ndarray, raw) -> None:
        where = find_held_observations(
            self.simulator_fn,
            value,
            model_arrays=[raw],
            extra=[("a constant of the priors or the simulator's parameters", c.data)
                   for c in self._constants],
        )
        if where is not None:
            raise UnsupportedModelError(
                f"The simulator of {self.simulator_name!r} can reach the observed data, or "
                f"an array that may hold them (through {where}: an array with one entry per "
                "row of the observations, or as many entries or more, whatever its values). "
                "ABCDP's simulations are public and must not read the private observations: "
                "pass small public values as the simulator's parameters and compute larger "
                "ones inside the function (docs/abcdp.md, 'The simulator must not read the "
                "data')."
            )

    def observed(self) -> np.ndarray:
        """The private observations (validated by :meth:`check_data`).

        Only a distance's ``bind`` should call this.
        """
        if self._snapshot is None:
            raise RuntimeError("internal: check_data must validate the observations first")
        return self._snapshot

    def missing_point(self) -> np.ndarray:
        """The raveled point of a draw that was never made.

        NaN for floating variables, the smallest integer for integer ones (which have no NaN):
        exactly what PyMC stores and hands back for such a point.
        """
        point = {
            name: np.full(shape, _missing_value(np.dtype(dtype)), dtype=dtype)
            for name, shape, _, dtype in self.point_map_info
        }
        return DictToArrayBijection.map(point).data


def _missing_value(dtype: np.dtype):
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).min
    return False


def simulate_one(fn: Callable, params: tuple, seed: np.random.SeedSequence, shape: tuple):
    """``fn(rng, *params, shape)`` with a generator made from ``seed``; checks the shape."""
    rng = np.random.Generator(np.random.PCG64(seed))
    sim = np.asarray(fn(rng, *params, shape))
    if sim.shape != tuple(shape):
        # The returned shape is not shown: a simulator that reads data could make it private.
        raise ValueError(
            f"The simulator returned another shape than size={tuple(shape)}; ABCDP needs "
            "simulated datasets of exactly the observed shape (equal set sizes, Lemma 4.1)."
        )
    if not np.all(np.isfinite(sim)):
        raise ValueError("The simulator returned non-finite values.")
    return sim


def try_simulate(fn: Callable, params: tuple, seed: np.random.SeedSequence, shape: tuple):
    """:func:`simulate_one`, or None if it fails (the simulator raised, or returned non-finite
    values or another shape).

    A simulation depends on the prior draw and its seed only, so whether it fails is public:
    ABCDP rejects such a draw instead of stopping a chain whose budget is spent.
    """
    try:
        return simulate_one(fn, params, seed, shape)
    except Exception:
        return None


def simulate_summaries(fn, params_list, seeds, shape, distance) -> list:
    """Simulate each parameter set and reduce it to the distance's public summary.

    None for a draw whose simulation or summary failed (see :func:`try_simulate`). A
    module-level function of picklable arguments, so it can run on any
    ``concurrent.futures`` executor (process pool, dask.distributed). It never sees private
    data.
    """
    return [_summary_or_none(distance, try_simulate(fn, params, seed, shape))
            for params, seed in zip(params_list, seeds)]


def _summary_or_none(distance, sim):
    if sim is None:
        return None
    try:
        return distance.summarize(sim)
    except Exception:
        return None


# ---------------------------------------------------------------------- the simulator's data
# ABCDP's simulations are public, so the simulator must not read the observations. Python lets
# us see what a function can reach without running it: its closure, its defaults, the module
# globals its code names, what a method is bound to, a partial's arguments, an object's state.
# ``find_held_observations`` walks that graph (breadth first, a few references deep) and tests
# every array it meets against the observations. Two small registries say how: what an object
# refers to (``_referents``) and which arrays it holds itself (``_held_arrays``).

#: References followed from the simulator; objects further away are not inspected.
MAX_DEPTH = 6
#: Objects inspected at most; a simulator that reaches more is refused (fail closed).
MAX_OBJECTS = 20_000
#: Packages whose code (module globals) is not searched: user data does not live there.
_LIBRARIES = frozenset(sys.stdlib_module_names) | {
    "numpy", "scipy", "pymc", "pytensor", "pymc_dp", "arviz", "xarray", "pandas", "polars",
    "numba", "jax", "jaxlib", "torch", "sklearn", "statsmodels",
}
#: Packages of table objects, whose columns are compared (their internals are not walked).
_TABLE_LIBRARIES = frozenset({"pandas", "xarray", "polars"})
_LEAVES = (type(None), bool, int, float, complex, str, bytes, np.generic, types.CodeType)


def _package(obj) -> str:
    name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "")
    return name.partition(".")[0] if isinstance(name, str) else ""


def _is_library(obj) -> bool:
    return _package(obj) in _LIBRARIES


def _is_table(obj) -> bool:
    return _package(type(obj)) in _TABLE_LIBRARIES


# ---------------------------------------------------------------- can the simulator be inspected
@functools.singledispatch
def _inspectable(fn) -> bool:
    """Whether ``fn``'s code is Python that :func:`find_held_observations` can see into."""
    if _is_generator_method(fn):
        # Unbound methods of numpy's Generator hold no data: called as fn(rng, *params, size),
        # they read only the generator PyMC hands them and the parameters.
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 (the method, to read its code)
    return isinstance(call, types.FunctionType) and not isinstance(fn, type)


@_inspectable.register
def _(fn: types.FunctionType) -> bool:
    return True


@_inspectable.register
def _(fn: types.MethodType) -> bool:
    return _inspectable(fn.__func__)


@_inspectable.register
def _(fn: functools.partial) -> bool:
    return _inspectable(fn.func)


def _is_generator_method(fn) -> bool:
    name = getattr(fn, "__name__", None)
    return isinstance(name, str) and vars(np.random.Generator).get(name) is fn


# ---------------------------------------------------------------- what an object refers to
@functools.singledispatch
def _referents(obj) -> list[tuple[str, object]]:
    """``(how, object)`` pairs ``obj`` refers to; by default its instance state."""
    if _is_table(obj):
        return []
    if type(obj).__module__ == "itertools":
        # (an iterator whose items Python cannot see: the walk refuses what it cannot inspect)
        raise TypeError("not inspectable")
    out = []
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        out += [(f"attribute {k!r}", v) for k, v in state.items()]
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out.append((f"attribute {slot!r}", getattr(obj, slot)))
    call = getattr(type(obj), "__call__", None)  # noqa: B004 (the method, to read its code)
    if isinstance(call, types.FunctionType):
        out.append(("__call__", call))
    return out


@_referents.register
def _(fn: types.FunctionType):
    code = fn.__code__
    out = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            out.append((f"closure variable {name!r}", cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    defaults = fn.__defaults__ or ()
    names = code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount]
    out += [(f"default of {n!r}", v) for n, v in zip(names, defaults)]
    out += [(f"default of {n!r}", v) for n, v in (fn.__kwdefaults__ or {}).items()]
    out += [(f"attribute {k!r}", v) for k, v in vars(fn).items()]  # e.g. __wrapped__
    if not _is_library(fn):
        out += _code_globals(code, fn.__globals__)
    return out


@_referents.register
def _(fn: types.MethodType):
    return [("bound self", fn.__self__), ("function", fn.__func__)]


@_referents.register
def _(fn: types.BuiltinFunctionType):
    owner = getattr(fn, "__self__", None)
    return [] if owner is None or isinstance(owner, types.ModuleType) else [("bound self", owner)]


@_referents.register
def _(fn: functools.partial):
    return (
        [("partial function", fn.func)]
        + [(f"partial argument {i}", a) for i, a in enumerate(fn.args)]
        + [(f"partial keyword {k!r}", v) for k, v in fn.keywords.items()]
        + [(f"attribute {k!r}", v) for k, v in vars(fn).items()]
    )


@_referents.register(list)
@_referents.register(tuple)
@_referents.register(set)
@_referents.register(frozenset)
def _(items):
    return [(f"item {i}", v) for i, v in enumerate(items)]


@_referents.register
def _(items: dict):
    # (keys too: a tuple of the observations is a key like any other)
    return [(f"item {_key(k)}", v) for k, v in items.items()] + [
        (f"key {_key(k)}", k) for k in items if not isinstance(k, _LEAVES)
    ]


@_referents.register(deque)
def _(items):
    return [(f"item {i}", v) for i, v in enumerate(items)]


@_referents.register
def _(view: memoryview):
    return [("buffer", view.obj)]


@_referents.register
def _(ref: weakref.ref):
    return [("weak reference", ref())]


@_referents.register
def _(cls: type):
    # Everything the class and its bases define (what ``self.x`` and methods resolve to):
    # class attributes, methods, properties, static and class methods; library classes
    # excepted.
    return [
        (f"class attribute {_key(k)}", v)
        for klass in cls.__mro__
        if not _is_library(klass)
        for k, v in vars(klass).items()
    ]


@_referents.register
def _(prop: property):
    roles = (("getter", prop.fget), ("setter", prop.fset), ("deleter", prop.fdel))
    return [(f"property {role}", f) for role, f in roles if f is not None]


@_referents.register(staticmethod)
@_referents.register(classmethod)
def _(method):
    return [("function", method.__func__)]


def _own_class(obj) -> list[tuple[str, object]]:
    """The class of ``obj`` (its metaclass, for a class) unless a library defines it.

    An object reads its class's attributes as its own (``self.data``), whatever handler
    :func:`_referents` dispatches the object to.
    """
    cls = type(obj)
    return [] if _is_library(cls) else [(f"class {cls.__qualname__}", cls)]


@_referents.register
def _(module: types.ModuleType):
    # A module reached as a value (not named in code): all of a user module's namespace.
    if _is_library(module):
        return []
    return [
        (f"module attribute {k!r}", v) for k, v in vars(module).items() if not k.startswith("__")
    ]


@_referents.register(Constant)
@_referents.register(SharedVariable)
def _(obj):
    return []  # arrays themselves: see _held_arrays


@_referents.register
def _(a: np.ndarray):
    # (an array of objects holds references, possibly to the observations)
    return [(f"item {i}", v) for i, v in enumerate(a.ravel())] if a.dtype == object else []


@_referents.register
def _(var: Variable):
    # A symbolic variable (e.g. the model's observed tensor): the data its graph reads.
    return [
        ("graph input", a) for a in ancestors([var]) if isinstance(a, Constant | SharedVariable)
    ]


def _key(k) -> str:
    # Dict keys are shown only if they look like names: a key could be a data value.
    return repr(k) if isinstance(k, str) and k.isidentifier() and len(k) <= 40 else "(a key)"


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions, lambdas, comprehensions
            names |= _code_names(const)
    return names


def _code_globals(code: types.CodeType, namespace: dict) -> list[tuple[str, object]]:
    """The globals ``code`` names, and the attributes it names of user modules it uses."""
    names = sorted(_code_names(code))
    out, modules = [], []
    for name in names:
        if name in namespace:
            value = namespace[name]
        elif name in sys.modules:  # ``import name`` inside the function
            value = sys.modules[name]
        else:
            continue
        if isinstance(value, types.ModuleType):
            modules.append((name, value))
        else:
            out.append((f"global {name!r}", value))
    seen = set()
    while modules:  # ``mydata.y``, ``pkg.sub.y``
        path, module = modules.pop()
        if id(module) in seen or _is_library(module):
            continue
        seen.add(id(module))
        space = vars(module)
        for name in names:
            if name in space:
                value = space[name]
                if isinstance(value, types.ModuleType):
                    modules.append((f"{path}.{name}", value))
                else:
                    out.append((f"module attribute {path}.{name}", value))
    return out


# ---------------------------------------------------------------- the arrays an object holds
@functools.singledispatch
def _held_arrays(obj) -> list:
    """The arrays ``obj`` holds itself (not through references)."""
    if not _is_table(obj):
        # (an object's numeric attributes: n of them hold an array as well as a list does;
        # its lists are walked as objects of their own)
        if isinstance(obj, type | types.ModuleType):
            return []
        try:
            state = getattr(obj, "__dict__", None)
        except Exception:
            raise UnsupportedModelError(
                f"ABCDP could not read the state of a {type(obj).__name__} the simulator "
                "refers to, to check that it does not hold the observed data."
            ) from None
        return _numbers_among(state.values(), nested=False) if isinstance(state, dict) else []
    try:  # a table: its columns (DataFrame), variables (Dataset) or values
        if hasattr(obj, "columns"):
            return [np.asarray(obj[c]) for c in obj.columns]
        if hasattr(obj, "data_vars"):
            return [np.asarray(v) for v in obj.data_vars.values()]
        return [np.asarray(obj)]
    except Exception:
        raise UnsupportedModelError(
            f"ABCDP could not read the {type(obj).__name__} the simulator refers to, to check "
            "that it does not hold the observed data."
        ) from None


@_held_arrays.register
def _(a: np.ndarray):
    return [a]


@_held_arrays.register
def _(c: Constant):
    return [np.asarray(c.data)]


@_held_arrays.register
def _(s: SharedVariable):
    return [np.asarray(s.get_value(borrow=True))]


@_held_arrays.register
def _(view: memoryview):
    try:
        return [np.asarray(view)]
    except (ValueError, TypeError):  # a format NumPy does not read
        return []


@_held_arrays.register
def _(arr: array.array):
    return [np.asarray(arr)]


@_held_arrays.register(list)
@_held_arrays.register(tuple)
@_held_arrays.register(deque)
def _(items):
    # A list of numbers (y.tolist()) or of rows is an array too; so are the numbers among
    # other items (list(y) + [None]).
    if not items:
        return []
    if not all(isinstance(i, numbers.Number | list | tuple | np.ndarray) for i in items):
        return _numbers_among(items)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = np.asarray(list(items))
    except (ValueError, TypeError):  # ragged
        return _numbers_among(items)
    # (rows of numbers with one of text, [(y_i,), …, ("x",)], come out as text)
    return [value] if value.dtype.kind in "biufc" else _numbers_among(items)


@_held_arrays.register(dict)
def _(mapping):
    # (dict(enumerate(y)): the numbers among its values, and among its keys)
    return [*_numbers_among(mapping.values()), *_numbers_among(mapping.keys())]


def _numbers_among(items, nested: bool = True) -> list:
    """How many numbers there are among ``items`` and, if ``nested``, in the lists, tuples,
    sets and dicts among them (rows with an odd one out: ``[[i, y_i], …] + [None]``,
    records ``[{"id": i, "y": y_i}, …]``), as an
    array of that many entries: the test reads sizes only, so their types (a ``Decimal``,
    a 128-bit integer) do not matter. Refused past ``MAX_OBJECTS`` items (fail closed)."""
    count, stack, seen = 0, [iter(items)], 0
    while stack:
        for item in stack[-1]:
            seen += 1
            if seen > MAX_OBJECTS:
                raise UnsupportedModelError(
                    f"The simulator refers to a container of more than {MAX_OBJECTS} items, "
                    "too many to check that none holds the observed data. Give the "
                    "simulator only what it needs (public constants as arguments)."
                )
            if isinstance(item, numbers.Number) and not isinstance(item, bool):
                count += 1
            elif nested and isinstance(item, list | tuple | set | frozenset | dict):
                stack.append(iter(item.values() if isinstance(item, dict) else item))
                break
        else:
            stack.pop()
    return [np.empty(count)] if count > 1 else []


@_held_arrays.register(set)
@_held_arrays.register(frozenset)
def _(items):
    return _numbers_among(items)


# ---------------------------------------------------------------- the test
def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class _Observations:
    """Tests whether an array may hold the observations, without reading their values."""

    def __init__(self, value: np.ndarray, model_arrays: Iterable):
        self.n = value.shape[0]
        self.memory = [x for a in model_arrays if isinstance(a, np.ndarray) for x in (a, _root(a))]

    def held_by(self, a: np.ndarray) -> bool:
        """Whether ``a`` (or the array it is a view of) shares memory with the observations,
        has n entries or more in any layout (the rows, a flattened copy):
        :func:`~pymc_dp.model.constants.has_rows`. Never by comparing
        values: whether the model is refused would then depend on whether an array equals
        the data, one person's value deciding."""
        if a.dtype == object:  # (Python numbers in an array: y.astype(object), rows)
            return has_rows(_numbers_among(a.ravel().tolist()), self.n)
        if a.dtype.kind not in "biufc" or a.size == 0:
            return False
        root = _root(a)
        for cand in (a,) if root is a else (a, root):
            if any(np.may_share_memory(cand, m) for m in self.memory):
                return True
            if has_rows([cand], self.n):
                return True
        return False


def find_held_observations(
    fn: Callable,
    observed: np.ndarray,
    *,
    model_arrays: Iterable = (),
    extra: Iterable[tuple[str, object]] = (),
) -> str | None:
    """How ``fn`` can reach an array that holds ``observed``, or None if it cannot.

    Walks what ``fn`` refers to (closure cells, defaults, the globals its code names,
    recursively through nested code; bound objects, partial arguments, object state, the
    object's class and its bases (class attributes, methods, properties, static and class
    methods), items of containers; ``MAX_DEPTH`` references deep, module globals and classes of
    numpy, scipy, PyMC, PyTensor and the standard library excepted) and tests each array met
    (numpy arrays, numeric lists, PyTensor constants and shared variables, pandas/xarray/polars
    columns) and those of ``extra``: an array may hold the observations if it, or the array it
    is a view of, may share memory with them or with ``model_arrays`` (the model's own copy),
    has n entries or more in any layout, whatever its values.

    Returns a short description of the path (names from the code, never values).

    Raises
    ------
    UnsupportedModelError
        If ``fn`` reaches more than ``MAX_OBJECTS`` objects.
    """
    obs = _Observations(np.asarray(observed), model_arrays)
    for how, value in extra:
        if any(obs.held_by(a) for a in _held_arrays(value)):
            return how
    label = getattr(fn, "__qualname__", None) or type(fn).__name__
    queue = deque([(fn, label, 0)])
    seen = {id(fn)}
    alive = [fn]  # keeps temporaries alive so that their ids stay unique
    while queue:
        obj, path, depth = queue.popleft()
        if any(obs.held_by(a) for a in _held_arrays(obj)):
            return path
        try:
            referents = _referents(obj) + _own_class(obj)
        except Exception:
            raise UnsupportedModelError(
                f"ABCDP could not inspect a {type(obj).__name__} the simulator refers to (through "
                f"{path}), to check that it does not hold the observed data."
            ) from None
        if depth >= MAX_DEPTH:
            # (not refused: ordinary objects reach that far, a logger's manager, nested
            # configurations; documented as a blind spot)
            continue
        for how, child in referents:
            if isinstance(child, _LEAVES) or id(child) in seen:
                continue
            seen.add(id(child))
            alive.append(child)
            if len(seen) > MAX_OBJECTS:
                raise UnsupportedModelError(
                    f"The simulator refers to more than {MAX_OBJECTS} objects, too many to check "
                    "that none holds the observed data. Give the simulator only what it needs "
                    "(a function of its parameters, public constants as arguments)."
                )
            queue.append((child, f"{path} → {how}", depth + 1))
    return None
