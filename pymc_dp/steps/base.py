"""The shared base of every private step: budget, plan, guard, chain bookkeeping.

A subclass says what one chain releases and how to calibrate its noise; the base makes
sure that no chain touches the data before its whole spending is reserved against the
step's budget (:class:`~pymc_dp.accounting.guard.BudgetGuard`), and that no chain runs
longer than it reserved.

The budget plan
---------------
A step holds a budget (ε, δ) for its whole life and splits it into ``chains`` equal chain
allotments (``chains``: given to the step, or set by :func:`pymc_dp.sample`, else PyMC's
default chain count). In :meth:`setup_chain` PyMC tells the step the chain's length; the
step calibrates its noise so that one chain of that length costs one allotment, checks
that it fits in what is left of the budget, and the chain's first step reserves it, before
it reads any data. Any chain beyond the plan, any longer chain, any chain of a second run
of a spent step — in this process or another — finds the budget used and raises
:class:`~pymc_dp.errors.PrivacyBudgetExceeded` before reading the data.

A ``pm.sample`` run asking for more chains than the plan has left is refused before its
first chain starts (:meth:`PrivateStep._progressbar_config`), so that no chain spends its
share only for a later one to fail and the run to lose every draw.

Writing a subclass
------------------
Implement

* ``_calibrate(iterations, chains)``: set the noise so that ``chains`` chains of
  ``iterations`` iterations together cost at most (ε, δ) (skip if the user fixed it);
* ``_chain_events(iterations)``: the mechanism events one chain of that length releases;
* ``_start_chain()``: reset per-chain state (caches; the base already holds the chain's rng);
* ``_transition(q)``: one iteration from the raveled point ``q``; returns the new point and
  the stats dict (only values computed from released quantities);
* ``_iteration_privacy_stats()``: the per-draw privacy stats (e.g. ``dp_mu``).

and declare ``stats_dtypes_shapes`` (including the privacy stats) and ``_state_class``.

Its constructor lists its own arguments and, with :class:`PrivateStep`'s defaults, the ones
every step takes (``vars`` first, :data:`SHARED_ARGUMENTS`), so that ``help()`` and an IDE
show them all; it checks its own and hands the shared ones on with
``super().__init__(**shared_arguments(locals()))``. In its docstring a line
``{budget parameters}`` (ε and δ) or ``{shared parameters}`` (the tail from ``chains`` on)
stands for their "Parameters" entries (:func:`shared_parameter_docs`).
"""

from __future__ import annotations

import re
import sys
import textwrap

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.initial_point import make_initial_point_fn
from pymc.model import modelcontext
from pymc.pytensorf import make_shared_replacements
from pymc.sampling.parallel import _cpu_count
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, CompoundStep
from pymc.util import get_state_from_generator

from pymc_dp.accounting.budget import check_share
from pymc_dp.accounting.events import Event, GaussianEvent
from pymc_dp.accounting.gaussian import max_gaussian_mu
from pymc_dp.accounting.guard import BudgetGuard
from pymc_dp.accounting.plan import ClipDiagnostics, clip_diagnostics_setting
from pymc_dp.kernels.clip_diagnostics import (
    WindowedClipCounts,
    check_windows,
    diagnostic_windows,
)
from pymc_dp.validation import check_delta, check_epsilon, check_int
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError, warn
from pymc_dp.fixed_settings import FixedSettings
from pymc_dp.model import PrivateModel, data_dependent_deterministics
from pymc_dp.model.extensions import refuse_foreign_extensions

__all__ = [
    "PrivateStep",
    "RunPlan",
    "CLIP_DIAGNOSTIC_STATS",
    "SHARED_ARGUMENTS",
    "TraceCost",
    "check_runs_alone",
    "flatten_steps",
    "pymc_default_chains",
    "shared_arguments",
    "shared_parameter_docs",
]

#: The arguments every private step takes besides its own, as :class:`PrivateStep` does
#: (``vars`` first; ABCDP, pure ε-DP, takes no ``delta``).
SHARED_ARGUMENTS = (
    "vars",
    "eps",
    "delta",
    "clip_diagnostics",
    "chains",
    "ledger_dir",
    "budget",
    "model",
    "initial_point",
    "compile_kwargs",
    "blocked",
    "rng",
)


def shared_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`SHARED_ARGUMENTS` in a step constructor's ``locals()``, to hand on to
    :class:`PrivateStep` (which checks them).

    Each constructor still lists them in its signature; this only saves listing them again
    in every ``super().__init__`` call, where one left out would silently take its default.
    Call it there: it hands them on as they are bound at that point.
    """
    return {name: arguments[name] for name in SHARED_ARGUMENTS if name in arguments}


#: The numpydoc "Parameters" entries of the shared arguments, written once for every step
#: (:func:`shared_parameter_docs`).
_PARAMETER_DOCS = {
    "diagnostics": """\
clip_diagnostics : int or pymc_dp.ClipDiagnostics, optional
    Off (``None``, the default: nothing is released and the draws are as without it). An
    int k, or ``ClipDiagnostics(windows=k, share=...)``: split each chain's draws into k
    windows and release, at the end of each, the number of per-datum terms the step
    clipped in it, with Gaussian noise; it costs ``share`` (default 5 %) of the Gaussian μ
    the budget buys, and the sampler's noise is calibrated for the rest. Read it with
    :func:`pymc_dp.results.clipped_fractions` (docs/steps.md, "Clip diagnostics").""",
    "method": """\
method : {"auto", "mcmc", "laplace"}
    ``"auto"`` (default): MCMC when the budget lets chains mix (a public estimate,
    :func:`pymc_dp.steps.warmup.expected_moves`, of at least
    :data:`~pymc_dp.steps.warmup.MCMC_MIN_MOVES` independent draws per chain), else
    the whole budget goes to the warm-up and the draws come from its private Laplace
    approximation, with a :class:`pymc_dp.LaplaceApproximationWarning`. Clip bounds
    given by hand ask for MCMC: ``"auto"`` then leaves it only for a run that would
    leave its chains frozen (under one expected move). ``"mcmc"``: MCMC,
    but a run that would leave its chains frozen (under one expected move) is refused
    before reading data. ``"laplace"``: always draw from the approximation.""",
    "budget": """\
eps : float
    Privacy budget ε (> 0) of this step object, for its whole life, all chains and tuning
    included.
delta : float, optional
    Budget δ in (0, 1); default ``0.1 / n`` for n individuals.""",
    "shared": """\
chains : int, optional
    The number of chains the budget is split over. Default: what ``pm.sample`` runs by
    default on this machine; :func:`pymc_dp.sample` sets it from its ``chains``.
ledger_dir : str or Path, optional
    Where the budget ledger file lives (default: ``$PYMC_DP_LEDGER_DIR`` or the system
    temp directory). Copies of the step in other processes share it.
budget : pymc_dp.Budget, optional
    A dataset's shared budget to draw from instead of a ledger of the step's own: every
    chain's reservation must then fit both in the step's (``eps``, ``delta``), its share,
    and in what is left of ``budget`` (composed with every release against it). ``delta``
    defaults to the budget's δ.
model, initial_point, compile_kwargs, rng
    As for PyMC steps.
blocked : bool
    Must be True (the default): the step updates all variables in one block, as separate
    per-variable steps would each need their own budget.""",
}
_PARAMETER_DOCS_LINE = re.compile(
    r"^( *)\{(budget|diagnostics|method|shared) parameters\}$", re.MULTILINE
)


def shared_parameter_docs(cls):
    """Class decorator: put the shared arguments' "Parameters" entries into ``cls``'s
    docstring, at its lines ``{budget parameters}``, ``{diagnostics parameters}``,
    ``{method parameters}`` and ``{shared parameters}``.

    (So that ``help(step)`` describes every argument, with the text written once.)
    """
    if cls.__doc__:  # (None under python -OO)
        cls.__doc__ = _PARAMETER_DOCS_LINE.sub(
            lambda line: textwrap.indent(_PARAMETER_DOCS[line[2]], line[1]), cls.__doc__
        )
    return cls


def flatten_steps(step) -> list:
    """The steps of a (possibly nested) ``CompoundStep`` or list of steps, in order."""
    if isinstance(step, CompoundStep):
        return [s for m in step.methods for s in flatten_steps(m)]
    if isinstance(step, list | tuple):
        return [s for m in step for s in flatten_steps(m)]
    return [step]


def check_runs_alone(steps: list) -> None:
    """Refuse a run whose steps are not one private step alone (before anything is read).

    A private step covers every free variable: a non-private step next to it would read
    the data without noise, and another private step would move its chain and pay a budget
    of its own.

    Raises
    ------
    UnsupportedModelError
        If ``steps`` holds a non-private step, or more than one step.
    """
    others = [type(s).__name__ for s in steps if not isinstance(s, PrivateStep)]
    if others:
        raise UnsupportedModelError(
            f"Non-private steps {others} would read the data without noise. A private step "
            "must be the only step of its chains: it covers every free variable. Nothing "
            "was reserved or read."
        )
    if len(steps) != 1:
        raise UnsupportedModelError(
            f"{len(steps)} private steps in one run: a private step must be the only step of "
            "its chains (each covers every free variable). Nothing was reserved or read."
        )


def pymc_default_chains() -> int:
    """The number of chains ``pm.sample`` runs when given neither ``chains`` nor ``cores``."""
    return max(2, min(4, _cpu_count()))


@dataclass(frozen=True)
class TraceCost:
    """What a trace's own privacy stats say its chains released (all public numbers).

    Each step reads the stats it declares (:meth:`PrivateStep.cost_from_stats`): the
    schema has one owner, and :func:`pymc_dp.privacy_report` composes the events.

    Attributes
    ----------
    chains : list of list of Event
        The events of each chain, tuning included.
    per_chain : dict
        What each chain's stats say, by name (``{"mu": [...]}``), shown in reports.
    details : dict
        Anything else the report must say (e.g. that the target is tempered).
    """

    chains: list
    per_chain: dict
    details: dict


def shared_warmup_events(stats) -> list[Event]:
    """The warm-up a trace's chains share, from its ``dp_mu_shared_warmup`` stat: one warm-up
    for the run, so the largest value, counted once, as one Gaussian event of that μ (exact
    in every accountant: Gaussian curves add like μ). Empty if none."""
    if stats is None or "dp_mu_shared_warmup" not in stats.data_vars:
        return []
    mu = float(np.max(stats["dp_mu_shared_warmup"].values))
    if mu <= 0:
        return []
    return [GaussianEvent(name="warm-up for all chains", noise_multiplier=(2.0 * mu) ** -0.5)]


#: The clip diagnostics' per-draw stats (:class:`~pymc_dp.ClipDiagnostics`), recorded only by
#: a step built with ``clip_diagnostics`` on. All public: at the last draw of each window
#: its index, noisy count of clipped terms, the terms examined (public), the noisy fraction
#: and its noise sd (NaN at other draws); and the μ the chain's diagnostics spent so far.
CLIP_DIAGNOSTIC_STATS = {
    "dp_clip_window": (np.float64, []),
    "dp_clip_count": (np.float64, []),
    "dp_clip_terms": (np.float64, []),
    "dp_clip_fraction": (np.float64, []),
    "dp_clip_fraction_sd": (np.float64, []),
    "dp_clip_mu_chain": (np.float64, []),
}


def last_draw(stats, name: str) -> np.ndarray:
    """A per-draw stat's value at the last draw of every chain (its running total)."""
    return np.ravel(stats[name].isel(draw=-1).values)


@dataclass
class _ChainBudget:
    """The running chain's plan and how many iterations ran (never in sampling state).

    ``events`` are reserved against the budget by the chain's first step (``in_ledger``),
    with ``info`` stored beside them.
    """

    reserved: int
    events: list
    info: dict
    in_ledger: bool = False
    done: int = 0


@shared_parameter_docs
class PrivateStep(FixedSettings, ArrayStepShared):
    """Base class of private PyMC steps (see the module docstring).

    Parameters
    ----------
    vars : list, optional
        Must be every free variable of the model (the default).
    {budget parameters}
    {shared parameters}
    """

    default_blocked = True
    #: pm.sample(tune=None) tunes this long: private chains are short (every iteration costs)
    default_tune_steps = 100
    #: whether the step needs continuous free variables
    needs_continuous = True
    #: pure ε-DP steps (no δ): their budget and reports have δ = 0
    pure_dp = False
    #: Stats a step records only when an option is on (the clip diagnostics': steps that
    #: clip and can count it declare :data:`CLIP_DIAGNOSTIC_STATS` here). Releasable.
    optional_stats_dtypes_shapes: dict = {}
    #: Attributes that define the mechanism or its accounting (noise, clip bounds, release
    #: counts, the budget and its ledger). Each class lists its own; together they are fixed
    #: once the step is built: only the step itself changes them (its calibration, its plan),
    #: so every chain runs with the noise and sensitivity its reservation paid for.
    privacy_settings: tuple[str, ...] = (
        "epsilon",
        "delta",
        "planned_chains",
        "guard",
        "private_model",
        "clip_diagnostics",
    )
    _fixed_owner = "step"
    _fixed_reason = "a chain must run with the noise and sensitivity its reservation paid for."

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        clip_diagnostics: int | ClipDiagnostics | None = None,
        chains: int | None = None,
        ledger_dir=None,
        budget=None,
        model=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        rng=None,
    ):
        # Public arguments first: bad input fails before the model or its data is touched.
        # (the checked values are kept: a float subclass could change between two reads)
        eps = check_epsilon(eps)
        self.clip_diagnostics = clip_diagnostics_setting(clip_diagnostics)
        if self.clip_diagnostics is not None and not self.optional_stats_dtypes_shapes:
            raise ValueError(f"{type(self).__name__} clips nothing: it takes no clip_diagnostics.")
        self._check_clip_share()
        if delta is not None:
            delta = check_delta(delta)
        if not blocked:
            raise ValueError(
                f"{type(self).__name__} updates all variables in one block (blocked=True): "
                "separate per-variable steps would each need their own budget."
            )
        if chains is not None:
            chains = _check_chains(chains)
        if self.pure_dp and delta is not None:
            raise ValueError(f"{type(self).__name__} is pure ε-DP: it takes no delta.")
        if budget is not None:
            delta = check_share(budget, eps, delta, owner=type(self).__name__,
                                ledger_dir=ledger_dir, pure=self.pure_dp)

        model = modelcontext(model)
        self.private_model = self._make_adapter(model, vars, initial_point, compile_kwargs)
        self._check_adapter()
        private_deterministics = data_dependent_deterministics(model)
        if private_deterministics:
            warn(
                f"Deterministics {private_deterministics} may hold data (computed from "
                "data, holding arrays of values or code of their own, or as large as the "
                "data as written). pm.sample would record them in the trace without noise; "
                "pymc_dp.sample leaves them out and pymc_dp.release removes them. (Some "
                "PyMC distributions add their own: OrderedLogistic's and OrderedProbit's "
                "'…_probs' unless compute_p=False; LKJCholeskyCov's '…_corr' and '…_stds', "
                "whose graphs hold index arrays.) One computed from parameters and public "
                "constants alone can be recomputed from the released draws of the free "
                "variables afterwards: post-processing costs no privacy.",
                UserWarning,
            )
        self.epsilon = float(eps)
        if self.pure_dp:
            self.delta = 0.0
        else:
            self.delta = float(delta) if delta is not None else 0.1 / self.private_model.n_data
        self.planned_chains = int(chains) if chains is not None else pymc_default_chains()
        if budget is not None:  # a share of the dataset's budget, in its store
            self.guard = budget.slice(self.epsilon, self.delta, owner=type(self).__name__)
        else:
            self.guard = BudgetGuard(
                self.epsilon, self.delta, ledger_dir=ledger_dir, owner=type(self).__name__
            )
        self.run_id: str | None = None  # set by pymc_dp.sample, recorded with reservations
        self._chain: _ChainBudget | None = None
        self._last_q: np.ndarray | None = None  # the point this step last returned
        self._clip_counts: WindowedClipCounts | None = None  # the chain's (private) counts
        self._clip_mu_chain = 0.0
        self._clip_mu_now = 0.0
        if self.clip_diagnostics is not None:
            # (PyMC reads a step's stats from the instance: these only when asked for)
            self.stats_dtypes_shapes = {
                **type(self).stats_dtypes_shapes, **self.optional_stats_dtypes_shapes
            }
            self.stats_dtypes = [{k: d for k, (d, _) in self.stats_dtypes_shapes.items()}]

        vars = self.private_model.value_vars
        shared = make_shared_replacements(initial_point, vars, model)
        super().__init__(vars, shared, blocked=True, rng=rng)

    def _make_adapter(self, model, vars, initial_point, compile_kwargs):
        """The object through which this step reads the model and its data.

        Must have ``value_vars`` (all free variables, in the step's order) and, unless the
        step is pure ε-DP, ``n_data``. Default: :class:`~pymc_dp.model.PrivateModel`.
        """
        return PrivateModel(
            model,
            vars,
            continuous=self.needs_continuous,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
        )

    def public_settings(self) -> dict[str, Any]:
        """Settings that define the mechanism (all public), for reports."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "planned_chains": self.planned_chains,
        }

    def _chain_mu_allotment(self, chains: int) -> float:
        """The Gaussian μ one of ``chains`` equal chains may spend: (ε, δ) → μ_max, split
        evenly (docs/algorithms.md, "Gaussian compositions are exact").

        Less a relative 1e-12, so that rounding in the ledger's sum over chains can never
        take the run over the budget.
        """
        return max_gaussian_mu(self.epsilon, self.delta) / chains * (1 - 1e-12)

    # ------------------------------------------------------------------ copies and state
    def __getstate__(self):
        # A copy (pickle, deepcopy, a worker process) must reserve its own chain: the
        # running chain's iteration allowance never travels with it.
        state = self.__dict__.copy()
        state["_chain"] = None
        state["_last_q"] = None
        state["_clip_counts"] = None
        return state

    @property
    def sampling_state(self):
        # The state may be stored with a trace (ZarrTrace). The chain's generator state
        # would let anyone replay the privacy noise, so a scrubbed generator is stored
        # instead; setup_chain installs the real one for every chain.
        state = super().sampling_state
        state.rng = get_state_from_generator(np.random.default_rng(0))
        return state

    @sampling_state.setter
    def sampling_state(self, state):
        PrivateStep._base_sampling_state.fset(self, state)

    _base_sampling_state = ArrayStepShared.sampling_state

    # ------------------------------------------------------------------ plan
    def default_length(self, chains: int) -> tuple[int, int]:
        """``(draws, tune)`` that :func:`pymc_dp.sample` runs when given neither.

        Chosen from public numbers only (the budget, n, the dimension, ``chains``); steps
        override it where the budget decides how long a chain should be.
        """
        return 500, self.default_tune_steps

    def plan(
        self, chains: int | None = None, *, draws: int | None = None, tune: int | None = None
    ) -> RunPlan:
        """Split the budget over ``chains`` chains, and show the price of a run before it.

        Reads no data: the noise of every release, how many releases a chain makes, and what
        the whole run costs, for ``chains`` chains of ``tune + draws`` iterations (default:
        :meth:`default_length`), as Opacus' ``get_noise_multiplier`` shows the noise before
        training. The step keeps the chain split; a run of another length is calibrated
        again when it starts. With a shared ``budget=``, a run that does not fit in what
        that budget has left now is refused here (nothing is reserved).

        Examples
        --------
        >>> import numpy as np, pymc as pm, pymc_dp
        >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=10_000)
        >>> with pm.Model():
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=y)
        ...     step = pymc_dp.DPPenalty(eps=1.0)
        >>> print(step.plan(chains=2, draws=500, tune=200))  # doctest: +ELLIPSIS
        DPPenalty: 2 chain(s) of 200 tune + 500 draws, budget (ε, δ) = (1, 1e-05)
        ...
        """
        chains = self.planned_chains if chains is None else _check_chains(chains)
        if chains != self.planned_chains and self.guard.reservations():
            raise PrivacyBudgetExceeded(
                f"This step already ran chains planned as {self.planned_chains} shares of its "
                f"budget; it cannot be re-planned for {chains} chains. Create a new step."
            )
        with self._changing_settings():
            self.planned_chains = int(chains)
        default_draws, default_tune = self.default_length(chains)
        draws = default_draws if draws is None else check_int(draws, "draws")
        tune = default_tune if tune is None else check_int(tune, "tune", minimum=0)
        self._check_clip_windows(draws)
        with self._changing_settings():
            self._calibrate(tune + draws, chains)
        events = self._chain_events(tune + draws)
        from pymc_dp.accounting.ledger import PrivacyLedger

        ledger = PrivacyLedger([e for _ in range(chains) for e in events])
        shared = getattr(self.guard, "check_fits", None)  # a share of a pymc_dp.Budget
        if shared is not None:
            # The whole run must fit in what the dataset's budget has left, or its last
            # chains would be refused after the first had spent their share.
            shared(list(ledger))
        return RunPlan(
            step=type(self).__name__,
            chains=chains,
            draws=draws,
            tune=tune,
            epsilon=self.epsilon,
            delta=self.delta,
            cost=ledger.epsilon(self.delta),
            events=tuple(events),
            notes=tuple(self._plan_notes(tune + draws, chains)),
        )

    def _plan_notes(self, iterations: int, chains: int) -> list[str]:
        """Lines a step adds to its :class:`RunPlan` (public numbers only)."""
        return []

    # ------------------------------------------------------------------ clip diagnostics
    def _clip_releases_per_iteration(self) -> int:
        """The clipped-sum releases an iteration makes at most (the diagnostics count)."""
        return 1

    def _clip_releases_at_start(self) -> int:
        """Clipped-sum releases a chain makes once, at its first iteration."""
        return 0

    def _clip_terms_per_release(self) -> int:
        """The per-datum terms one clipped-sum release clips (n; a batch: its size)."""
        return int(self.private_model.n_data)

    def _clip_diagnostics_on(self) -> bool:
        """Whether this chain's draws make clip diagnostic releases (not from the private
        Laplace approximation, which clips nothing)."""
        return self.clip_diagnostics is not None and not getattr(self, "_laplace", False)

    def _clip_diagnostics_mu(self, chains: int) -> float:
        """The μ one of ``chains`` chains spends on clip diagnostics: their share of the
        chain's Gaussian allotment (0 when off)."""
        if not self._clip_diagnostics_on():
            return 0.0
        return self.clip_diagnostics.mu(self._chain_mu_allotment(chains))

    def _clip_diagnostic_events(self) -> list[Event]:
        """One chain's clip diagnostic releases (none when off), for the planned chains."""
        if not self._clip_diagnostics_on():
            return []
        return self.clip_diagnostics.events(self._chain_mu_allotment(self.planned_chains))

    def _check_clip_share(self) -> None:
        """Refuse diagnostics whose share, with the warm-up's (the private warm-up's
        settings are made before the base constructor), leaves the sampler no μ. Public
        arguments only: before any data is read."""
        if self.clip_diagnostics is None:
            return
        warmup_share = self._warmup_share() if hasattr(self, "warmup") else 0.0
        share = self.clip_diagnostics.share
        if warmup_share + share >= 1.0:
            raise ValueError(
                f"clip_diagnostics share {share:g} with the warm-up's share "
                f"{warmup_share:g} leaves {type(self).__name__}'s sampler nothing of the "
                "budget (the two must sum to less than 1). Give a smaller share, e.g. "
                "ClipDiagnostics(windows, share=0.05) (the default), or a smaller warm-up "
                "share. Nothing was read or reserved."
            )

    def _check_clip_windows(self, draws: int) -> None:
        if self.clip_diagnostics is not None:
            check_windows(self.clip_diagnostics.windows, draws)

    def _start_clip_diagnostics(self, tune: int, draws: int) -> None:
        """The chain's window counts (after calibration: the noise is the plan's)."""
        self._clip_mu_chain = 0.0
        self._clip_mu_now = 0.0
        self._clip_counts = None
        if not self._clip_diagnostics_on():
            return
        (event,) = self._clip_diagnostic_events()
        self._clip_counts = WindowedClipCounts(
            diagnostic_windows(tune, draws, self.clip_diagnostics.windows),
            noise_multiplier=event.noise_multiplier,
            releases_per_iteration=self._clip_releases_per_iteration(),
            releases_at_start=self._clip_releases_at_start(),
            terms_per_release=self._clip_terms_per_release(),
        )

    def _clip_counter(self):
        """:meth:`_count_clipped` while the running iteration lies in a window, else None:
        for the minibatch kernels, whose count costs a batch evaluation of its own (the
        iteration, not the data, decides)."""
        counts = self._clip_counts
        return self._count_clipped if counts is not None and counts.counting else None

    def _count_clipped(self, clipped: int, releases: int = 1) -> None:
        """Called by the step's counting functions with a release's count (private)."""
        if self._clip_counts is not None:
            self._clip_counts.add(clipped, releases)

    def _clip_diagnostic_stats(self, iteration: int) -> dict[str, Any]:
        """The diagnostics' stats after iteration ``iteration``: a window's release at its
        last iteration (the noise drawn with the chain's generator), NaN elsewhere."""
        if self.clip_diagnostics is None:
            return {}
        nan = float("nan")
        stats = dict.fromkeys(
            ("dp_clip_window", "dp_clip_count", "dp_clip_terms", "dp_clip_fraction",
             "dp_clip_fraction_sd"), nan
        )
        self._clip_mu_now = 0.0
        counts = self._clip_counts
        released = None if counts is None else counts.end(iteration, self.rng)
        if released is not None:
            (event,) = self._clip_diagnostic_events()
            self._clip_mu_now = event.mu / event.count
            self._clip_mu_chain += self._clip_mu_now
            stats.update(
                dp_clip_window=float(released.window),
                dp_clip_count=released.count,
                dp_clip_terms=float(released.terms),
                dp_clip_fraction=released.fraction,
                dp_clip_fraction_sd=released.fraction_sd,
            )
        stats["dp_clip_mu_chain"] = self._clip_mu_chain
        return stats

    def _progressbar_config(self, n_chains=1):
        """Refuse a run of more chains than the plan has left, then PyMC's bar settings.

        Why here: ``pm.sample`` (PyMC 6.4) gives a step no documented hook with the number
        of chains. It builds its progress-bar manager, which calls this method with that
        number, whether or not a bar is shown, before any chain may step: in
        ``_sample_many`` before the first sequential chain, and in ``ParallelSampler``
        before any worker gets its "start" message. Workers do call ``setup_chain`` earlier,
        but that only checks and calibrates: the budget is reserved by a chain's first
        step. If PyMC stopped calling this, nothing would leak (each chain still reserves
        before reading data); only the early refusal would be lost, and
        ``tests/steps/test_base.py`` would say so.
        """
        self._refuse_non_private_company()
        self._check_run_fits(n_chains)
        columns, stats = super()._progressbar_config(n_chains)
        # A column of the privacy each chain has spent so far (public: from its own stats).
        from rich.progress import TextColumn
        from rich.table import Column

        header = f"chain ε (budget {self.epsilon:.3g})"
        column = TextColumn("{task.fields[dp_epsilon_spent]}", table_column=Column(header))
        return [*columns, column], {**stats, "dp_epsilon_spent": ["0"] * n_chains}

    def _make_progressbar_update_functions(self):
        spent = self._draw_epsilon

        def update_stats(step_stats):
            return {"dp_epsilon_spent": f"{spent(step_stats):.3g}"}

        return (update_stats,)

    def _draw_epsilon(self, stats: Mapping[str, Any]) -> float:
        """The ε a chain has spent so far, from one draw's privacy stats (shown in the
        progress bar; the stats are public). Exact by default; a family whose exact cost is
        slow to compose may show an upper bound instead, never less than the chain spent."""
        return self.epsilon_from_stats(stats)

    @classmethod
    def epsilon_from_stats(cls, stats: Mapping[str, Any], delta: float | None = None) -> float:
        """The ε a chain had spent by one draw, from that draw's privacy stats.

        ``stats`` maps the step's declared stats to one draw's values (public numbers).
        Every release of the chain so far counts, tuning included, and a warm-up its run
        shares; they are composed as the report composes a trace's cost
        (:meth:`cost_from_stats`), at ``delta`` (default: the draw's ``dp_delta``), so at a
        chain's last draw this is the chain's cost recomputed from its trace. Each step
        family reads its own stats (the schema's one owner).
        """
        raise NotImplementedError

    def _refuse_non_private_company(self) -> None:
        """Refuse to run inside a PyMC ``CompoundStep`` with any other step, before
        anything is reserved or read.

        ``pm.sample(step=[pm.Metropolis(...), private])`` combines steps in a
        ``CompoundStep``, which calls this step's hooks (``_progressbar_config``,
        ``setup_chain``) from its own; the other step would read the data without noise.
        The callers' ``self`` is the only place a step can see its company. If PyMC
        combined steps some other way, :meth:`astep` still refuses at the first iteration
        after another step moved the chain, and :func:`pymc_dp.release` refuses a trace
        with another sampler's stats.
        """
        # The outermost CompoundStep on the stack holds every step of the chain (a compound
        # may sit inside another, or inside a wrapper that calls this step's hooks).
        outermost, frame = None, sys._getframe(1)
        while frame is not None:
            caller = frame.f_locals.get("self")
            if isinstance(caller, CompoundStep):
                outermost = caller
            frame = frame.f_back
        if outermost is None:
            return
        check_runs_alone(flatten_steps(outermost))

    def _chain_reservations(self) -> list[dict]:
        """The ledger's reservations of chains (not those of a run's shared warm-up)."""
        return [r for r in self.guard.reservations() if r.get("kind") != "warm-up"]

    def _check_run_fits(self, n_chains) -> None:
        n_chains = check_int(n_chains, "chains")
        ran = len(self._chain_reservations())
        left = self.planned_chains - ran
        if n_chains > left and left <= 0:
            raise PrivacyBudgetExceeded(
                f"This step's budget is spent: all {self.planned_chains} chain(s) it was "
                "planned for already ran. Create a new step for another run (it spends a new "
                "budget, which adds to what this one spent on the same data). Nothing was run "
                "and no budget was reserved."
            )
        if n_chains > left:
            already = f", {ran} of which already ran" if ran else ""
            raise PrivacyBudgetExceeded(
                f"The run asks for {n_chains} chain(s), but this step's budget is planned for "
                f"{self.planned_chains} chain(s){already}: the chains beyond the plan would be "
                "refused after the others had spent their share, and the run would lose all "
                f"draws. Sample at most {max(left, 0)} chain(s), or create the step with "
                f"chains={n_chains} (each chain then gets 1/{n_chains} of the budget). Nothing "
                "was run and no budget was reserved."
            )

    # ------------------------------------------------------------------ chains
    def setup_chain(self, rng, tune: int, draws: int) -> None:
        """Calibrate the noise for this chain's length and check that its cost fits.

        The cost is reserved by the chain's first step (:meth:`astep`), still before any
        data is read: PyMC's worker processes call ``setup_chain`` before the main process
        has checked the run (:meth:`_progressbar_config`), and a refused run must have
        reserved nothing.

        Raises
        ------
        PrivacyBudgetExceeded
            If the chain does not fit in what is left of the budget. Nothing has been read
            from the data at this point.
        """
        self._refuse_non_private_company()
        super().setup_chain(rng, tune, draws)
        if int(draws) < 1 or int(tune) < 0:
            raise ValueError(f"A chain needs draws >= 1 and tune >= 0, got {draws}, {tune}.")
        iterations = int(tune) + int(draws)
        self._chain = None
        self._last_q = None
        self._clip_counts = None
        self._check_clip_windows(int(draws))
        self._check_still_covers_the_model()
        check_data = getattr(self.private_model, "check_data_unchanged", None)
        if check_data is not None:
            check_data()
        with self._changing_settings():
            self._calibrate(iterations, self.planned_chains)
        events = self._chain_events(iterations)
        self._check_fits(events)
        info = {"run_id": self.run_id, "tune": int(tune), "draws": int(draws),
                "step": type(self).__name__}
        self._chain = _ChainBudget(reserved=iterations, events=events, info=info)
        self._start_chain()
        self._start_clip_diagnostics(int(tune), int(draws))

    def _check_fits(self, events: list[Event]) -> None:
        """Refuse a chain whose events do not fit in what the ledger has left (read only)."""
        self.guard.verify(budget=(self.epsilon, self.delta))  # a budget changed in memory
        ledger = self.guard.spent()
        ledger.extend(events)
        cost = ledger.epsilon(self.delta)
        if not cost <= self.epsilon:  # (NaN too: a cost not computed is no fit)
            raise PrivacyBudgetExceeded(
                f"This chain would take the privacy spent to ε = {cost:.4g} (δ = "
                f"{self.delta:.3g}), over the step's budget ε = {self.epsilon:.4g}. More "
                "chains or longer chains than planned, or a second run with a spent step? Plan "
                "the run with chains=... (and the length you sample), or create a new step "
                "with its own budget. No data was read for this chain."
            )
        shared = getattr(self.guard, "check_fits", None)  # a share of a pymc_dp.Budget
        if shared is not None:
            shared(events)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        chain = self._chain
        if chain is None:
            raise PrivacyBudgetExceeded(
                f"{type(self).__name__}.step was called outside a planned chain. Sample with "
                "pm.sample or pymc_dp.sample, which call setup_chain to reserve the budget."
            )
        if chain.done >= chain.reserved:
            raise PrivacyBudgetExceeded(
                f"This chain reserved {chain.reserved} iterations and has run them all; "
                "another iteration would spend privacy that was not reserved."
            )
        # equal_nan: a step may return NaN for a draw it did not make (ABCDP out of draws)
        if self._last_q is not None and not np.array_equal(q0.data, self._last_q, equal_nan=True):
            # Another step moved the chain: a non-private step (e.g. pm.Metropolis in a
            # CompoundStep under plain pm.sample) reads the data without noise.
            raise UnsupportedModelError(
                f"Another step changed the variables between two {type(self).__name__} "
                "iterations. A private step must be the only step of its chains: any other "
                "step reads the data without noise."
            )
        if not chain.in_ledger:
            self._refuse_unchecked_start(q0)
            # (a rewrite or backend code registered since the step was built has compiled
            # PyMC's draws and deterministics: refused before anything is reserved or read)
            refuse_foreign_extensions()
            # The chain's whole cost, before its first read of the data. The guard refuses
            # it if other copies of the step took the budget since setup_chain checked.
            # budget: the ledger refuses a budget changed in memory since the step was built
            self.guard.reserve(chain.events, budget=(self.epsilon, self.delta), **chain.info)
            chain.in_ledger = True
        iteration = chain.done
        chain.done += 1
        if self._clip_counts is not None:
            self._clip_counts.begin(iteration)
        q_new, stats = self._transition(q0.data)
        stats.update(self._clip_diagnostic_stats(iteration))
        stats.update(self._iteration_privacy_stats())
        returned = RaveledVars(q_new, q0.point_map_info)
        # The point as the chain will hold it, in each variable's dtype (PyMC casts it: with
        # floatX = "float32" a float64 q_new is rounded), so that the next iteration's check
        # compares like with like: any change another step makes to those values is seen.
        self._last_q = DictToArrayBijection.map(DictToArrayBijection.rmap(returned)).data.copy()
        return returned, [stats]

    def refuse_unchecked_initvals(self, initvals) -> None:
        """Refuse ``initvals`` (as ``pm.sample`` takes them: a dict, or one per chain) that
        would start a chain away from the point this step checked; before anything is
        reserved (``pymc_dp.sample`` calls it first, the chains check again)."""
        if getattr(self.private_model, "_initial_point", None) is None:
            return  # (a step that checks no start: ABCDP draws from the prior)
        model = self.private_model.model
        for chain_initvals in initvals if isinstance(initvals, list | tuple) else [initvals]:
            start = make_initial_point_fn(
                model=model, overrides=chain_initvals, jitter_rvs=set(), return_transformed=True
            )(0)
            self._refuse_unchecked_start(DictToArrayBijection.map(start))

    def _refuse_unchecked_start(self, q0: RaveledVars) -> None:
        """Refuse a chain started anywhere but at the initial point the step checked when it
        was built (the model's, or the step's ``initial_point``). The start is the chain's
        draw for as long as no proposal is accepted, released without noise, and nothing
        shows that a start given to ``pm.sample`` or ``pymc_dp.sample`` (``initvals``) is
        public: ``initvals={"mu": y.mean()}`` would publish the data's mean."""
        pmodel = self.private_model
        checked = getattr(pmodel, "_initial_point", None)
        if checked is None:
            return
        start = DictToArrayBijection.rmap(q0)

        def away_from(point):
            return [
                name for name, value in start.items()
                if name in point and not np.array_equal(
                    value, np.asarray(point[name], dtype=np.asarray(value).dtype)
                )
            ]

        # (PyMC starts at the model's own initial point, whose initial values were checked
        # too, when the step was given another: as it was then, not as set_initval made it)
        moved = away_from(checked) and away_from(getattr(pmodel, "_pymc_start", checked))
        if moved:
            raise UnsupportedModelError(
                f"The chain would start away from the initial point the step checked, for "
                f"{', '.join(map(repr, moved))} (initvals given to pm.sample or "
                "pymc_dp.sample?). The start is released as the chain's first draws, without "
                "noise, and a start given there cannot be checked: leave initvals out (the "
                "warm-up picks the start privately), or give public initial values with "
                "initval= on the variables or the step's initial_point=, which are checked "
                "when the step is built. Nothing was reserved or read."
            )

    def _check_still_covers_the_model(self) -> None:
        model_vars = [v.name for v in self.private_model.model.value_vars]
        mine = [v.name for v in self.vars]
        if sorted(model_vars) != sorted(mine):
            raise UnsupportedModelError(
                f"The model's free variables {model_vars} are no longer those this step was "
                f"built for {mine} (variables added after the step?). Build a new step."
            )

    @staticmethod
    def competence(var, has_grad):
        # Never picked automatically: privacy needs an explicit budget.
        return Competence.INCOMPATIBLE

    # ------------------------------------------------------------------ subclass hooks
    @classmethod
    def cost_from_stats(cls, stats) -> TraceCost | None:
        """The chains' events from the sample stats this step declares; ``None`` if they are
        not there. Each step family reads its own privacy stats (its schema's one owner)."""
        return None

    def _check_adapter(self) -> None:
        """Refuse, from the adapter's shapes, what the step cannot run, before it compiles
        anything of its own (nothing by default)."""

    def _mu_shared_warmup(self) -> float:
        """μ of the warm-up the run's chains share (none by default), for the trace's stats."""
        return 0.0

    def _calibrate(self, iterations: int, chains: int) -> None:
        raise NotImplementedError

    def _chain_events(self, iterations: int) -> list[Event]:
        raise NotImplementedError

    def _start_chain(self) -> None:
        raise NotImplementedError

    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        raise NotImplementedError

    def _iteration_privacy_stats(self) -> dict[str, Any]:
        raise NotImplementedError


def _check_chains(chains) -> int:
    return check_int(chains, "chains")


@dataclass(frozen=True)
class RunPlan:
    """The price of a run before it runs: every release and its noise (public numbers).

    ``events`` are one chain's releases; ``cost`` is the ε of all ``chains`` chains at the
    budget's δ. ``str()`` gives a readable table.
    """

    step: str
    chains: int
    draws: int
    tune: int
    epsilon: float
    delta: float
    cost: float
    events: tuple
    notes: tuple = ()

    def __str__(self) -> str:
        lines = [
            f"{self.step}: {self.chains} chain(s) of {self.tune} tune + {self.draws} draws, "
            f"budget (ε, δ) = ({self.epsilon:.4g}, {self.delta:.3g})",
            "  releases per chain:",
        ]
        grouped: dict = {}
        for event in self.events:
            grouped.setdefault(event.name, []).append(event)
        for name, group in grouped.items():
            count = sum(e.count for e in group)
            zs = sorted(
                float(e.noise_multiplier) for e in group if hasattr(e, "noise_multiplier")
            )
            noise = ""
            if zs:
                noise = (
                    f", noise multiplier {zs[0]:.4g}"
                    if zs[0] == zs[-1]
                    else f", noise multipliers {zs[0]:.4g} … {zs[-1]:.4g}"
                )
            lines.append(f"    {name}: {count}{noise}")
        lines.append(
            f"  the run costs ε = {self.cost:.4g} at δ = {self.delta:.3g} (all chains)"
        )
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)
