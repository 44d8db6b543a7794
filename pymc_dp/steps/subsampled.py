"""Shared parts of the minibatch steps (:class:`~pymc_dp.MinibatchDPPenalty`, :class:`~pymc_dp.DPBarker`).

Each iteration of these steps reads a batch of ``b`` of the ``n`` rows, drawn without
replacement from the chain's generator (the one PyMC hands the chain in ``setup_chain``;
not ``pm.Minibatch``, whose batches are drawn with replacement by its own graph RNG), and
makes one noisy release computed from that batch only
(:meth:`pymc_dp.model.PrivateModel.loglik_rows`, O(b) per evaluation).

The releases are subsampled: their cost is not a sum of μ, so these steps subclass
:class:`~pymc_dp.steps.base.PrivateStep` directly. Every draw records the chain's release
count so far (tuning included), the batch size, n and δ, plus what defines the mechanism
(the noise multiplier, or DP Barker's noise variance), so that
:func:`pymc_dp.privacy_report` recomputes the cost from a plain ``pm.sample`` trace
(:meth:`SubsampledPrivateStep.cost_from_stats`).
"""

from __future__ import annotations

import functools

from typing import Any

import numpy as np

from pymc_dp.accounting.barker import BarkerEvent
from pymc_dp.accounting.events import Event, GaussianEvent, SubsampledGaussianEvent
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.validation import check_fraction, check_int
from pymc_dp.kernels.penalty import Proposal
from pymc_dp.steps.base import (
    CLIP_DIAGNOSTIC_STATS,
    PrivateStep,
    TraceCost,
    shared_arguments,
)
from pymc_dp.steps.proposals import TunedProposal

__all__ = [
    "SUBSAMPLED_PRIVACY_STATS",
    "SubsampledPrivateStep",
]

#: Per-draw privacy stats of the minibatch steps (all public). ``dp_releases_chain`` counts
#: the chain's releases so far, tuning included, so the last draw of a chain says what the
#: whole chain released even when tuning draws are discarded. ``dp_tempering`` is the T of
#: the target p(θ) p(x | θ)^T the draws follow (1: the posterior). ``dp_mu_shared_warmup``
#: is the μ of a warm-up the run's chains share (paid once, before them).
SUBSAMPLED_PRIVACY_STATS = {
    "dp_releases_chain": (np.int64, []),
    "dp_batch_size": (np.int64, []),
    "dp_n_data": (np.int64, []),
    "dp_delta": (np.float64, []),
    "dp_tempering": (np.float64, []),
    "dp_mu_shared_warmup": (np.float64, []),
    # The μ the chain's clip diagnostics spent so far (0 when off). Recorded always: the
    # sampler's own stats cannot show it (its releases are plain Gaussian ones beside the
    # subsampled ones), so a trace without it must not give a cost (it is required).
    "dp_clip_mu_chain": (np.float64, []),
}


#: The clip diagnostics' released values (not what defines the cost: dp_clip_mu_chain does)
_RELEASED = frozenset(CLIP_DIAGNOSTIC_STATS) - {"dp_clip_mu_chain"}


class SubsampledPrivateStep(TunedProposal, PrivateStep):
    """A private step whose iterations each release one statistic of a random batch.

    Holds the batch size, the tempering, the proposal (:class:`TunedProposal`) and the
    per-draw privacy stats. Subclasses implement the release (``_transition``) and its
    accounting (``_calibrate``, ``_chain_events``).
    """

    privacy_settings = ("batch_size", "tempering", "sampling_rate")
    #: (dp_clip_mu_chain is one of SUBSAMPLED_PRIVACY_STATS: recorded whether on or off)
    optional_stats_dtypes_shapes = {
        k: v for k, v in CLIP_DIAGNOSTIC_STATS.items() if k not in SUBSAMPLED_PRIVACY_STATS
    }

    def _clip_terms_per_release(self) -> int:
        return int(self.batch_size)

    def _draw_epsilon(self, stats) -> float:
        # Composed by the ledger (PLD or RDP): for a count rounded up to two significant digits, so
        # that a long chain costs at most a few hundred compositions, each an upper bound.
        count = int(stats["dp_releases_chain"])
        step = 10 ** max(0, len(str(count)) - 2)
        return self.epsilon_from_stats({**stats, "dp_releases_chain": -(-count // step) * step})

    @classmethod
    def epsilon_from_stats(cls, stats, delta: float | None = None) -> float:
        # (exact for the count given; one dp-accounting composition per distinct count, cached)
        stats = {k: v for k, v in stats.items() if k.startswith("dp_") and k not in _RELEASED}
        if delta is not None:
            stats["dp_delta"] = delta
        shared = float(stats.get("dp_mu_shared_warmup", 0.0))
        key = tuple(sorted((k, float(v)) for k, v in stats.items()))
        return _draw_cost(key, shared)

    @classmethod
    def cost_from_stats(cls, stats) -> TraceCost | None:
        """Each chain's releases from the last draw's ``dp_releases_chain`` (tuning
        included), batch size, n and noise: subsampled events, composed by the ledger."""
        chains = _chain_events_from_stats(stats)
        if chains is None:
            return None
        releases = [
            sum(e.count for e in events if e.name not in ("warm-up", "clip diagnostics"))
            for events in chains
        ]
        tempering = (
            float(np.min(stats["dp_tempering"].values)) if "dp_tempering" in stats else 1.0
        )
        return TraceCost(chains, {"releases": releases}, {"tempering": tempering})

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        batch_size: int | None = None,
        tempering: float = 1.0,
        proposal: str = "random_walk",
        S=None,
        scaling: float | None = None,
        tune_interval: int = 100,
        clip_diagnostics=None,
        chains: int | None = None,
        ledger_dir=None,
        budget=None,
        model=None,
        initial_point=None,
        compile_kwargs=None,
        blocked: bool = True,
        rng=None,
    ):
        self.batch_size = None if batch_size is None else check_int(batch_size, "batch_size")
        self.tempering = check_fraction(tempering, "tempering (T = n0/n)", include_one=True)
        self._check_proposal_args(proposal, scaling, tune_interval)
        super().__init__(**shared_arguments(locals()))
        n = self.private_model.n_data
        if self.batch_size is None:  # n is public: a default from n reads no data
            self.batch_size = self._default_batch_size(n)
        if self.batch_size > n:
            # n is public under replace-one neighbouring (it is not changed by a replacement).
            raise ValueError(
                f"batch_size ({self.batch_size}) cannot exceed the number of individuals n = {n}"
            )
        self.sampling_rate = self.batch_size / n
        # Compile the batch evaluation now: a model that cannot follow a batch of rows is
        # refused before any data is read.
        self.private_model.compile_rows()
        self._S_given = S is not None
        self._init_proposal(S, self.private_model.dim)
        self._releases = 0
        self._logprior_cache: tuple[np.ndarray, float] | None = None

    def _default_batch_size(self, n: int) -> int:
        """The batch size when none is given (a function of the public n)."""
        raise NotImplementedError

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "batch_size": self.batch_size,
            "n_data": self.private_model.n_data,
            "tempering": self.tempering,
            "proposal": self.proposal,
        }

    # ------------------------------------------------------------------ chain, prior cache
    def _start_chain(self) -> None:
        self._releases = 0
        self._logprior_cache = None
        self._start_proposal_chain()

    def _logprior(self, q: np.ndarray) -> float:
        """The public log prior at ``q``, cached for the current point."""
        cache = self._logprior_cache
        if cache is None or not np.array_equal(cache[0], q):
            cache = (q.copy(), self.private_model.logprior(q))
        return cache[1]

    def _after(self, proposal: Proposal, q_new: np.ndarray, logprior_new: float, accepted: bool):
        self._record_decision(proposal, accepted)
        self._logprior_cache = (np.array(q_new, copy=True), logprior_new)

    # ------------------------------------------------------------------ privacy stats
    #: whether the draws come from the private Laplace approximation (set by the steps'
    #: warm-up, :class:`~pymc_dp.steps.warmup.PrivateWarmup`): then no batch is released
    _laplace = False

    def _releases_per_iteration(self) -> int:
        """How many subsampled releases an iteration makes."""
        return 0 if self._laplace else 1

    def _iteration_privacy_stats(self) -> dict[str, Any]:
        releases = self._releases_per_iteration()
        self._releases += releases
        return {
            "dp_releases_chain": self._releases,
            "dp_batch_size": self.batch_size if releases else 0,  # (0: no batch read)
            "dp_n_data": self.private_model.n_data,
            "dp_delta": self.delta,
            "dp_tempering": self.tempering,
            "dp_mu_shared_warmup": self._mu_shared_warmup(),
            # (this iteration's diagnostic release included: PrivateStep.astep)
            "dp_clip_mu_chain": self._clip_mu_chain,
        }


def _chain_events_from_stats(stats) -> list[list[Event]] | None:
    """The events of each chain of a trace made by a minibatch step, from its sample stats.

    Reads the last draw of every chain (:func:`_draw_events`). Returns ``None`` if the stats
    are not from such a step.
    """
    names = set(stats.data_vars)
    if not {"dp_releases_chain", "dp_batch_size", "dp_n_data", "dp_clip_mu_chain"} <= names:
        return None
    last = {k: np.ravel(stats[k].isel(draw=-1).values) for k in names if k.startswith("dp_")}
    chains = []
    for i in range(last["dp_releases_chain"].size):
        events = _draw_events({k: v[i] for k, v in last.items()})
        if events is None:
            return None
        chains.append(events)
    return chains


@functools.lru_cache(maxsize=1024)
def _draw_cost(key: tuple, shared_mu: float) -> float:
    """ε at the draw's δ of :func:`_draw_events` for ``key`` (the draw's ``dp_`` stats as
    sorted pairs) and a shared warm-up of μ ``shared_mu``."""
    last = dict(key)
    events = _draw_events(last)
    if events is None:
        raise ValueError(
            "These are not the privacy stats of a minibatch step (dp_releases_chain, "
            "dp_batch_size, dp_n_data, dp_clip_mu_chain and its noise): no cost can be "
            "computed from them."
        )
    if shared_mu > 0:
        events.append(GaussianEvent(name="warm-up for all chains",
                                    noise_multiplier=(2.0 * shared_mu) ** -0.5))
    return PrivacyLedger(events).epsilon(last["dp_delta"]) if events else 0.0


def _draw_events(last) -> list[Event] | None:
    """A chain's events so far, from one draw's stats: ``dp_releases_chain`` (tuning
    included), ``dp_batch_size``, ``dp_n_data`` and ``dp_noise_multiplier`` (minibatch DP
    penalty) or ``dp_noise_variance`` (DP Barker), and the chain's own warm-up μ."""
    if "dp_clip_mu_chain" not in last:
        return None  # (required: without it the clip diagnostics' cost is unknown)
    count = int(last["dp_releases_chain"])
    n, b = int(last["dp_n_data"]), int(last["dp_batch_size"])
    if count == 0:
        event = None  # draws from the private Laplace approximation: no batch released
    elif "dp_noise_variance" in last:
        event = BarkerEvent(
            name="Barker test statistic",
            count=count,
            n_data=n,
            batch_size=b,
            noise_variance=float(last["dp_noise_variance"]),
        )
    elif "dp_noise_multiplier" in last:
        event = SubsampledGaussianEvent(
            name="minibatch log-likelihood ratio",
            count=count,
            noise_multiplier=float(last["dp_noise_multiplier"]),
            sampling_rate=b / n,
            sampling="without_replacement",
        )
    else:
        return None
    events = [] if event is None else [event]
    clip_mu = float(last["dp_clip_mu_chain"])
    if clip_mu > 0:
        # The clip diagnostics' windows: Gaussian releases, composed to one of their μ.
        events.append(
            GaussianEvent(name="clip diagnostics", noise_multiplier=(2.0 * clip_mu) ** -0.5)
        )
    warmup_mu = float(last.get("dp_warmup_mu", 0.0))
    if warmup_mu > 0:
        # The warm-up's Gaussian releases compose to one of the same μ (exactly, in every
        # accountant: Gaussian PLDs and RDP curves add like μ).
        events.append(GaussianEvent(name="warm-up", noise_multiplier=(2.0 * warmup_mu) ** -0.5))
    return events
