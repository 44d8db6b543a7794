"""The simulator adapter: from a PyMC model with a ``pm.Simulator`` to ABCDP's public parts.

ABCDP (``ALGORITHMS.md``, "ABCDP") needs, from a model

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
under replace-one neighbours).

PyMC's ``Simulator`` settings ``distance``, ``sum_stat`` and ``epsilon`` belong to SMC-ABC
(``pm.sample_smc``); ABCDP does not use them (it uses its own distance of known sensitivity).
"""

from __future__ import annotations

import warnings

from collections.abc import Callable, Sequence

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

from pymc_dp.errors import UnsupportedModelError

__all__ = ["SimulatorModel", "simulate_summaries"]


def _data_variables(model: Model) -> list[Variable]:
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    return observed_values + [d for d in model.data_vars if d not in observed_values]


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
        op = sim_rv.owner.op
        # The class attribute, not the (bound) instance attribute: the user's plain function.
        self.simulator_fn: Callable = type(op).fn
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
        data_vars = _data_variables(model)
        for rv in model.free_RVs:
            if any(a in set(data_vars) for a in ancestors(rv.owner.inputs)):
                raise UnsupportedModelError(
                    f"The prior of {rv.name!r} reads observed values or pm.Data. ABCDP's prior "
                    "draws are public and must not depend on data."
                )
        if params and any(a in set(data_vars) for a in ancestors(params)):
            raise UnsupportedModelError(
                f"The parameters of simulator {sim_rv.name!r} read observed values or pm.Data. "
                "ABCDP's simulations are public; pass public constants as NumPy arrays."
            )

        obs_var = model.rvs_to_values[sim_rv]
        self._observed_var = obs_var
        self.observed_shape = self._observed_shape(obs_var, sim_rv.name)
        self.n_rows = int(self.observed_shape[0])

        self._compile_prior(params, compile_kwargs or {})
        self._check_simulation_shape()

    # ------------------------------------------------------------------ validation
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
            warnings.warn(
                f"pm.Simulator settings {ignored} belong to SMC-ABC (pm.sample_smc) and are not "
                "used by ABCDP, which compares raw simulated and observed rows with its own "
                "distance of known sensitivity (distance=...).",
                UserWarning,
                stacklevel=4,
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
    def observed(self) -> np.ndarray:
        """The private observations. Only a distance's ``bind`` should call this."""
        var = self._observed_var
        if isinstance(var, Constant):
            value = np.asarray(var.data)
        elif isinstance(var, SharedVariable):
            value = np.asarray(var.get_value(borrow=True))
        else:
            value = np.asarray(var.eval())
        if not np.issubdtype(value.dtype, np.number) and value.dtype != bool:
            raise UnsupportedModelError(
                f"The observations of {self.simulator_name!r} are not numeric."
            )
        if not np.all(np.isfinite(value)):
            # Say where, never what: the values are private.
            raise ValueError(
                f"The observations of {self.simulator_name!r} contain non-finite values (NaN or "
                "inf); remove or impute those rows before sampling."
            )
        return value


def simulate_one(fn: Callable, params: tuple, seed: np.random.SeedSequence, shape: tuple):
    """``fn(rng, *params, shape)`` with a generator made from ``seed``; checks the shape."""
    rng = np.random.Generator(np.random.PCG64(seed))
    sim = np.asarray(fn(rng, *params, shape))
    if sim.shape != tuple(shape):
        raise ValueError(
            f"The simulator returned shape {sim.shape} for size={tuple(shape)}; ABCDP needs "
            "simulated datasets of exactly the observed shape (equal set sizes, Lemma 4.1)."
        )
    if not np.all(np.isfinite(sim)):
        raise ValueError("The simulator returned non-finite values.")
    return sim


def simulate_summaries(fn, params_list, seeds, shape, distance) -> list:
    """Simulate each parameter set and reduce it to the distance's public summary.

    A module-level function of picklable arguments, so it can run on any
    ``concurrent.futures`` executor (process pool, dask.distributed). It never sees private
    data.
    """
    return [
        distance.summarize(simulate_one(fn, params, seed, shape))
        for params, seed in zip(params_list, seeds)
    ]
