"""``ABCDP``: private rejection ABC for ``pm.Simulator`` models.

Kernel: :mod:`pymc_dp.kernels.svt`; adapter: :mod:`pymc_dp.abcdp.simulator`.
Park, Vinaroz & Jitkrittum, Algorithm 1 and Thm 4.1; ``docs/algorithms.md``, "ABCDP".
"""

from __future__ import annotations

import math

from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pymc.model import modelcontext
from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.state import dataclass_state

from pymc_dp.errors import warn
from pymc_dp.accounting.events import PureDPEvent
from pymc_dp.validation import check_epsilon, check_int, check_positive
from pymc_dp.abcdp.distances import BoundDistance, Distance, RandomFeatureMMD
from pymc_dp.kernels.svt import draw_noisy_threshold, laplace_scale, svt_scan
from pymc_dp.model.graphs import withholding_details
from pymc_dp.abcdp.simulator import SimulatorModel, simulate_summaries, try_simulate
from pymc_dp.steps.base import (
    PrivateStep,
    TraceCost,
    last_draw,
    shared_arguments,
    shared_parameter_docs,
)

__all__ = ["ABCDP", "accepted_samples"]


@dataclass_state
class ABCDPState(StepMethodState):
    # Nothing else: the chain's private state (bound distance, noisy threshold) never goes
    # into a sampling state that a trace backend may store.
    pass


@dataclass
class _Chain:
    """Private per-chain state of one sparse-vector run. Never stored or released."""

    c: int
    noisy_threshold: float
    threshold_rng: np.random.Generator
    noise_rng: np.random.Generator
    sim_seeds: np.random.SeedSequence
    # bound to the observations by the chain's first step, after its reservation
    bound: BoundDistance | None = None
    # The current batch of ``batch_n`` public prior draws: those whose simulation succeeded
    # (at positions ``kept`` of the batch), their distances and query noise. ``pos`` indexes
    # them; ``batch_pos`` is the position in the whole batch up to which draws were used.
    q: np.ndarray | None = None
    kept: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    distances: np.ndarray = field(default_factory=lambda: np.zeros(0))
    noise: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pos: int = 0
    batch_n: int = 0
    batch_pos: int = 0
    drawn: int = 0  # prior draws made so far
    tested: int = 0  # prior draws used so far: tested by the SVT, or failed and rejected
    simulated: int = 0  # of those, the ones tested by the SVT
    accepted: int = 0
    tested_at_last_accept: int = 0
    exhausted_warned: bool = False


@shared_parameter_docs
class ABCDP(PrivateStep):
    r"""Differentially private rejection ABC by the sparse vector technique (ABCDP).

    For a model whose observations are a ``pm.Simulator``, each draw of a chain is one
    accepted prior sample: draw θ_t from the prior, simulate Y_t with the model's own simulator
    function, and accept iff ``ρ(Y*, Y_t) + Lap(2b) ≤ ε_abc + Lap(b)`` (Algorithm 1 of Park,
    Vinaroz & Jitkrittum). A chain of ``draws = c`` samples is ε-DP whatever the number of
    prior draws it tests (Thm 4.1), with

    * ``resample=False``: one noisy threshold per chain, ``b = (c + 1) Δ_ρ / ε``;
    * ``resample=True``: the threshold is redrawn after each acceptance, ``b = 2 c Δ_ρ / ε``.

    ``ε`` is this step's budget for its whole life, split equally over the planned chains;
    independent chains are independent sparse-vector runs and their ε add up in the report.
    The prior draws, simulations and their summaries are public: they are made ahead in
    batches, optionally on an executor, and do not cost privacy.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default).
    eps : float
        Privacy budget ε (pure ε-DP, > 0) for all chains and runs of this step object.
    threshold : float
        The ABC threshold ε_abc (> 0) on the distance.
    resample : bool
        RESAMPLE of Algorithm 1 (default False, which needs less noise per sample for c > 1).
    distance : Distance, optional
        A distance of known sensitivity from :mod:`pymc_dp.abcdp.distances`. Default:
        ``RandomFeatureMMD(bandwidth="median", n_features=100)``, the MMD of random Fourier
        features of a Gaussian kernel whose bandwidth is the median heuristic on prior-
        predictive simulations (never on the observations); ``MMD(...)`` is the exact O(N²)
        version; ``ClippedDistance(fn, clip=..., sensitivity=...)`` wraps any other distance.
        PyMC's ``Simulator(distance=..., sum_stat=..., epsilon=...)`` settings are for SMC-ABC
        and are not used.
    max_prior_draws : int
        T: the cap on prior draws per chain. A chain that reaches it with fewer than ``draws``
        acceptances stops testing and fills its remaining draws with one constant point: NaN
        (the smallest integer of its dtype for an integer variable, which has no NaN), marked
        ``accepted=False`` in ``sample_stats`` (``prior_draws`` counts the last tests on the
        first filler, 0 on the others); it warns with the number accepted. These fillers are functions of the sparse vector's output only (how many
        acceptances it made), which the chain's ε covers. :func:`accepted_samples` keeps the
        accepted draws.
    batch_size : int
        Prior draws simulated per batch ahead of the sequential test.
    executor : concurrent.futures.Executor, optional
        Runs the simulations and their public summaries (e.g. a ``ProcessPoolExecutor`` or
        ``dask.distributed.Client.get_executor()``; the simulator function must then be
        picklable). The private observations never leave this process. Results are identical
        to a run without executor for the same seed. Sample with ``cores=1`` when using one.
    chunk_size : int, optional
        Simulations per executor task (default: a batch split in 8).
    n_pilot : int
        Prior-predictive simulations used to fit public hyper-parameters of the distance (the
        median-heuristic bandwidth, random frequencies), per chain (one for a distance with
        nothing to fit). One of them stands in for the observations to check the distance
        before the chain's reservation.
    {shared parameters}

    Notes
    -----
    The simulator must not read the observations: at construction ABCDP refuses a simulator
    whose closure, defaults, module globals, bound object, its class or partial arguments hold
    them, and observations that are missing (NaN), infinite or beyond the distance's range
    (``docs/abcdp.md``, "The simulator must not read the data", says exactly what is checked).

    The observations are read by a chain's first step, after its budget is reserved. Nothing
    that happens after that raises because of them: a prior draw whose simulation fails
    (raises, or returns non-finite values) is rejected, and counted in a warning; the
    distance is first checked on a simulated dataset standing in for the observations (a
    failure there is refused, nothing spent), after which an error while computing it counts
    as its largest value (``docs/abcdp.md``, "Failures").

    Released per draw (all functions of the sparse vector's output): the accepted θ,
    ``accepted``, ``prior_draws`` (prior draws used since the previous acceptance, failed
    simulations included) and ``prior_draws_chain``. Distances, noisy values and the
    threshold noise are never released.
    No tuning: ``pm.sample(tune=None)`` uses 0, and any other value raises.

    Randomness comes only from the chain's generator, split into independent streams for the
    prior, the simulations (one seed per prior draw), the distance noise (one draw per prior
    draw) and the threshold; a run does not depend on ``batch_size``, ``chunk_size`` or the
    executor.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> def simulate(rng, mu, size):
    ...     return rng.normal(mu, 1.0, size=size)
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=500)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 2)
    ...     _ = pm.Simulator("y", simulate, mu, observed=y)
    ...     idata = pymc_dp.sample(step=pymc_dp.ABCDP(eps=1.0, threshold=0.1, chains=1),
    ...                            draws=5, chains=1, random_seed=1, progressbar=False)
    >>> idata.posterior["mu"].shape
    (1, 5)
    """

    name = "abcdp"
    privacy_settings = (
        "sensitivity",
        "distance",
        "resample",
        "simulator",
        "_chain_eps",
        "_scale",
        "_fitted_distance",  # the distance a chain binds and tests with
    )
    needs_continuous = False  # prior draws need no gradient or random walk
    pure_dp = True  # Thm 4.1: each chain is ε-DP, no δ
    default_tune_steps = 0
    _state_class = ABCDPState
    stats_dtypes_shapes = {
        "accepted": (bool, []),
        "prior_draws": (np.int64, []),
        "prior_draws_chain": (np.int64, []),
        "dp_epsilon_chain": (np.float64, []),
    }

    @classmethod
    def epsilon_from_stats(cls, stats, delta: float | None = None) -> float:
        return float(stats["dp_epsilon_chain"])  # pure ε-DP: the same at every δ

    @classmethod
    def cost_from_stats(cls, stats) -> TraceCost | None:
        """Each chain's pure ε from ``dp_epsilon_chain`` at its last draw."""
        if "dp_epsilon_chain" not in stats.data_vars:
            return None
        eps = [float(e) for e in last_draw(stats, "dp_epsilon_chain")]
        return TraceCost(
            [[PureDPEvent(name=f"chain {i}", epsilon=e)] if e > 0 else []
             for i, e in enumerate(eps)],
            {"epsilon": eps}, {},
        )

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        threshold: float,
        resample: bool = False,
        distance: Distance | None = None,
        max_prior_draws: int = 100_000,
        batch_size: int = 256,
        executor: Executor | None = None,
        chunk_size: int | None = None,
        n_pilot: int = 10,
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
        # (messages show numbers, anything else by its type only)
        check_epsilon(eps, "eps")
        self.threshold = check_positive(threshold, "threshold")
        if not isinstance(resample, bool | np.bool_):
            raise TypeError(f"resample must be True or False, got a {type(resample).__name__}")
        self.resample = bool(resample)
        if distance is None:
            distance = RandomFeatureMMD(bandwidth="median", n_features=100)
        if not isinstance(distance, Distance):
            raise TypeError(
                f"distance must be a pymc_dp.abcdp.distances.Distance with a known sensitivity (MMD, "
                f"RandomFeatureMMD, or ClippedDistance(fn, clip=..., sensitivity=...) for any "
                f"other function), got a {type(distance).__name__}"
            )
        if distance.max_value is None:
            raise ValueError(
                "The distance must declare its largest value (max_value, a finite number > 0): "
                "a failed evaluation counts as that value."
            )
        check_positive(distance.max_value, "distance.max_value")
        self.distance = distance
        self.max_prior_draws = check_int(max_prior_draws, "max_prior_draws")
        self.batch_size = check_int(batch_size, "batch_size")
        self.chunk_size = None if chunk_size is None else check_int(chunk_size, "chunk_size")
        self.n_pilot = check_int(n_pilot, "n_pilot")
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor, got a {type(executor).__name__}"
            )
        self.executor = executor

        model = modelcontext(model)
        # Structure of the model, shapes and one validation simulation; no observation values.
        self.simulator = SimulatorModel(model, vars, compile_kwargs=compile_kwargs)
        self.sensitivity = float(self.distance.sensitivity(self.simulator.n_rows))
        if not (math.isfinite(self.sensitivity) and self.sensitivity > 0):
            raise ValueError(f"the distance's sensitivity must be > 0, got {self.sensitivity!r}")
        # The observations, read once before any budget exists: finite, in the distance's
        # range, and out of the simulator's reach.
        self.simulator.check_data(max_abs=self.distance.max_abs_value)

        super().__init__(**shared_arguments(locals()))
        if [v.name for v in self.vars] != [v.name for v in self.simulator.value_vars]:
            raise RuntimeError("internal: the step's and the simulator's variable orders differ")
        self._abc: _Chain | None = None
        self._draws: int | None = None
        self._fitted_distance: Distance | None = None

    # ------------------------------------------------------------------ pickling
    def __getstate__(self):
        if self.executor is not None:
            raise TypeError(
                "An ABCDP step with an executor cannot be sent to PyMC's worker processes. "
                "Sample with cores=1: the executor already runs the simulations in parallel."
            )
        state = super().__getstate__()
        state["_abc"] = None  # private chain state never leaves the process
        return state

    def _make_adapter(self, model, vars, initial_point, compile_kwargs):
        # ABCDP reads the model through its simulator, never through a likelihood.
        return self.simulator

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "threshold": self.threshold,
            "resample": self.resample,
            "distance": self.distance.describe(),
            "sensitivity": self.sensitivity,
            "max_prior_draws": self.max_prior_draws,
        }

    # ------------------------------------------------------------------ privacy plan
    def setup_chain(self, rng, tune: int, draws: int) -> None:
        if int(tune) != 0:
            raise ValueError(
                f"ABCDP draws independent samples from the ABC posterior; tuning has no meaning "
                f"for it (got tune={tune}). Use tune=0 (pm.sample's default for this step)."
            )
        if int(draws) < 1:
            raise ValueError(f"ABCDP needs draws >= 1 accepted samples per chain, got {draws}")
        self._draws = int(draws)
        super().setup_chain(rng, tune, draws)

    def _chain_epsilon(self, chains: int) -> float:
        return self.epsilon / chains

    def laplace_scale(self, draws: int, chains: int | None = None) -> float:
        """The threshold-noise scale b of a chain of ``draws`` samples (Thm 4.1).

        With ``chains`` (default: the planned chains) sharing the budget, each chain runs at
        ε/chains; the distance noise has scale 2b. For planning, e.g. with
        :func:`pymc_dp.kernels.svt.flip_probability` on synthetic data.
        """
        chains = self.planned_chains if chains is None else check_int(chains, "chains")
        return laplace_scale(
            self._chain_epsilon(chains), self.sensitivity, check_int(draws, "draws"),
            self.resample,
        )

    def _calibrate(self, iterations: int, chains: int) -> None:
        self._chain_eps = self._chain_epsilon(chains)
        self._scale = self.laplace_scale(iterations, chains)

    def _chain_events(self, iterations: int) -> list[PureDPEvent]:
        return [
            PureDPEvent(
                name="ABCDP sparse vector",
                epsilon=self._chain_eps,
                count=1,
                description=(
                    f"Algorithm 1 of Park et al., c={iterations} acceptances, "
                    f"RESAMPLE={self.resample}, Δρ={self.sensitivity:.6g} "
                    f"({self.distance.describe()}), Laplace scale b={self._scale:.6g}"
                ),
            )
        ]

    def _iteration_privacy_stats(self) -> dict[str, Any]:
        return {"dp_epsilon_chain": self._chain_eps}

    # ------------------------------------------------------------------ the chain
    def _start_chain(self) -> None:
        # Before the reservation (the chain's first step): public work only, no data read.
        root = np.random.SeedSequence(self.rng.integers(0, 2**32, size=8).tolist())
        fit_seed, prior_seed, sim_seed, noise_seed, threshold_seed = root.spawn(5)
        with self._changing_settings():
            self._fitted_distance = self._fit_distance(fit_seed)
        self.simulator.seed_prior(prior_seed)
        threshold_rng = np.random.default_rng(threshold_seed)
        self._abc = _Chain(
            c=self._draws,
            noisy_threshold=draw_noisy_threshold(self.threshold, self._scale, threshold_rng),
            threshold_rng=threshold_rng,
            noise_rng=np.random.default_rng(noise_seed),
            sim_seeds=sim_seed,
        )

    def _fit_distance(self, fit_seed: np.random.SeedSequence) -> Distance:
        """The distance with its public hyper-parameters, checked on a public stand-in.

        Pilot prior-predictive simulations fit the hyper-parameters (the median-heuristic
        bandwidth, random frequencies); one of them stands in for the observations: the
        distance must bind to it and evaluate a summary without error. So a distance that
        cannot work with data of this shape is refused here, before the reservation, and a
        failure on the observations themselves can only come from their values, which is why
        it counts as the largest distance instead of raising (``docs/abcdp.md``).
        """
        sim, distance = self.simulator, self.distance
        sim.seed_prior(fit_seed.spawn(1)[0])
        n = self.n_pilot if distance.needs_fit else 1
        _, params = sim.draw_prior(n)
        pilot = [try_simulate(sim.simulator_fn, p, s, sim.observed_shape)
                 for p, s in zip(params, fit_seed.spawn(n))]
        pilot = [p for p in pilot if p is not None]  # failed simulations are public: dropped
        if not pilot:
            raise ValueError(
                f"None of the {n} pilot prior-predictive simulations succeeded (the simulator "
                "raised, or returned non-finite values or another shape than the observations). "
                "Check the simulator and the prior. No budget was reserved."
            )
        if distance.needs_fit:
            distance = distance.fit(pilot, np.random.default_rng(fit_seed.spawn(1)[0]))
        stand_in = pilot[0].astype(sim.observed_dtype, copy=False)
        try:
            distance.bind(stand_in).evaluate(distance.summarize(pilot[-1]))
        except Exception as err:
            # The function may hold anything (even the data): its message is not shown.
            raise ValueError(
                f"The distance failed ({type(err).__name__}) on a simulated dataset of the "
                "observed shape and dtype standing in for the observations; the message is "
                "withheld. Check the distance with distance.bind(simulated) on prior-predictive "
                "simulations. No budget was reserved."
            ) from None
        return distance

    def _refill(self, chain: _Chain) -> bool:
        """Draw, simulate and summarise the next batch of public prior draws."""
        n = min(self.batch_size, self.max_prior_draws - chain.drawn)
        if n <= 0:
            return False
        sim = self.simulator
        q, params = sim.draw_prior(n)
        seeds = chain.sim_seeds.spawn(n)
        fn, shape, dist = sim.simulator_fn, sim.observed_shape, self._fitted_distance
        if self.executor is None:
            summaries = simulate_summaries(fn, params, seeds, shape, dist)
        else:
            size = self.chunk_size or max(1, math.ceil(n / 8))
            futures = [
                self.executor.submit(
                    simulate_summaries, fn, params[i : i + size], seeds[i : i + size], shape, dist
                )
                for i in range(0, n, size)
            ]
            summaries = [s for f in futures for s in f.result()]
        # One noise draw per prior draw, failed ones included: a run does not depend on batches.
        noise = chain.noise_rng.laplace(0.0, 1.0, size=n)
        # A failed simulation (None) is public: its draw is rejected without a test.
        kept = np.flatnonzero([s is not None for s in summaries])
        chain.q, chain.noise, chain.kept = q[kept], noise[kept], kept
        # private: never leaves the SVT (a failure of the distance counts as its largest value)
        chain.distances = withholding_details(
            "the distance to the observations", chain.bound, [summaries[i] for i in kept]
        )
        chain.pos = 0
        chain.batch_n, chain.batch_pos = n, 0
        chain.drawn += n
        return True

    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        chain = self._abc
        if chain is None:  # pragma: no cover - the base calls _start_chain first
            raise RuntimeError("ABCDP chain state missing; sample with pm.sample or pymc_dp.sample")
        if chain.bound is None:
            # The chain's first step: the base reserved its budget, the data may be read. It
            # never raises (see _fit_distance): a failure is every distance at its largest.
            chain.bound = self._fitted_distance.bind_quietly(self.simulator.observed())
        while True:
            if chain.pos >= chain.distances.size:
                # the batch's last draws (failed simulations) are used too: rejected
                chain.tested += chain.batch_n - chain.batch_pos
                chain.batch_pos = chain.batch_n
                if not self._refill(chain):
                    return self._out_of_draws(chain)
                continue
            scan = svt_scan(
                chain.distances[chain.pos :],
                threshold=self.threshold,
                noisy_threshold=chain.noisy_threshold,
                scale=self._scale,
                max_accept=1,
                resample=self.resample,
                rng=chain.threshold_rng,
                query_noise=chain.noise[chain.pos :],
            )
            chain.noisy_threshold = scan.noisy_threshold
            start = chain.pos
            chain.pos += scan.n_used
            chain.simulated += scan.n_used
            # in the order drawn: every draw up to the last one tested, failed ones included
            used = int(chain.kept[chain.pos - 1]) + 1
            chain.tested += used - chain.batch_pos
            chain.batch_pos = used
            if scan.accepted.size:
                idx = start + int(scan.accepted[0])
                chain.accepted += 1
                stats = {
                    "accepted": True,
                    "prior_draws": chain.tested - chain.tested_at_last_accept,
                    "prior_draws_chain": chain.tested,
                }
                chain.tested_at_last_accept = chain.tested
                if chain.accepted == chain.c:
                    self._warn_failed_simulations(chain)
                return chain.q[idx].copy(), stats

    def _warn_failed_simulations(self, chain: _Chain) -> None:
        """At the chain's end: how many of its prior draws could not be simulated.

        Public: which draws fail depends on the prior draws and their seeds only, and the
        number of draws used is released (``prior_draws_chain``).
        """
        failed = chain.tested - chain.simulated
        if failed:
            warn(
                f"{failed} of the {chain.tested} prior draws this ABCDP chain used could not be "
                "simulated (the simulator raised, or returned non-finite values or another "
                "shape) and were rejected. If that is many, check the simulator and the prior.",
                RuntimeWarning,
            )

    def _out_of_draws(self, chain: _Chain) -> tuple[np.ndarray, dict[str, Any]]:
        if not chain.exhausted_warned:
            chain.exhausted_warned = True
            warn(
                f"ABCDP chain reached max_prior_draws={self.max_prior_draws} with "
                f"{chain.accepted} of {chain.c} samples accepted. The other "
                f"{chain.c - chain.accepted} draws of this chain are NaN and marked "
                "accepted=False in sample_stats; keep only accepted draws. Raise "
                "max_prior_draws or the threshold, or ask for fewer draws. (The chain's ε is "
                "spent all the same.)",
                RuntimeWarning,
            )
            self._warn_failed_simulations(chain)
        stats = {
            "accepted": False,
            "prior_draws": chain.tested - chain.tested_at_last_accept,
            "prior_draws_chain": chain.tested,
        }
        chain.tested_at_last_accept = chain.tested
        # The same constant point for every missing draw, in the form PyMC stores and hands
        # back (so the next iteration sees its own output): a function of nothing private.
        return self.simulator.missing_point(), stats


def accepted_samples(idata):
    """The posterior draws that ABCDP accepted, chains and draws stacked into ``sample``.

    Draws a chain could not fill within ``max_prior_draws`` (``accepted=False``) are left out.
    ``idata`` is a result of ``pymc_dp.sample`` or ``pm.sample`` with an :class:`ABCDP` step.
    """
    posterior = idata["posterior"].to_dataset()
    accepted = idata["sample_stats"]["accepted"]
    stacked = posterior.stack(sample=("chain", "draw"))
    mask = np.asarray(accepted.stack(sample=("chain", "draw")).values, dtype=bool)
    return stacked.isel(sample=np.flatnonzero(mask))

