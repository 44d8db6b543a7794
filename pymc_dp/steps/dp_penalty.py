"""``DPPenalty``: the DP penalty Metropolis–Hastings step (kernel: :mod:`pymc_dp.kernels.penalty`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pymc_dp.accounting.events import GaussianEvent
from pymc_dp.accounting.gaussian import gaussian_mu, noise_multiplier_for_mu
from pymc_dp.validation import check_positive
from pymc_dp.kernels.penalty import PenaltyState, penalty_transition
from pymc_dp.steps.base import CLIP_DIAGNOSTIC_STATS, shared_arguments, shared_parameter_docs
from pymc_dp.steps.gaussian import GAUSSIAN_PRIVACY_STATS, GaussianPrivateStep
from pymc_dp.steps.proposals import TunedProposal
from pymc_dp.steps.warmup import PrivateWarmup

__all__ = ["DPPenalty"]


@shared_parameter_docs
class DPPenalty(PrivateWarmup, TunedProposal, GaussianPrivateStep):
    r"""Differentially private Metropolis–Hastings by the penalty method.

    Each iteration releases one noisy clipped log-likelihood ratio
    ``R̂ = Σ_j clip_{b‖θ'−θ‖}(ℓ_j(θ') − ℓ_j(θ)) + N(0, (2 b ‖θ'−θ‖ z)²)`` and accepts θ' with
    probability ``min(1, exp(R̂ + log prior ratio − σ²/2))`` (Yildirim & Ermis 2019; thesis
    3.1–3.2). The cost of ``k`` iterations over all chains is exactly μ = k / (2 z²) of a
    Gaussian mechanism under replace-one neighbours.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default).
    {budget parameters}
    clip_bound : float, optional
        b: each per-datum log-likelihood ratio is clipped to ``±b‖θ'−θ‖₂`` (the Lipschitz
        bound the model is forced to have). Default: chosen privately per chain by the
        warm-up, in its whitened coordinates. Given by hand it is in θ's units: too small
        biases the posterior, too large adds noise.
    proposal : {"random_walk", "one_component", "guided"}
        Gaussian random walk on all coordinates; one random coordinate per iteration
        (smaller ‖θ'−θ‖, so less noise); or the guided walk (one coordinate, moving in its
        current direction, which flips on rejection).
    noise_multiplier : float, optional
        Fix z (noise std / sensitivity) instead of calibrating it from ``eps``; the run is
        then accounted and must still fit in the budget.
    S : array, optional
        Per-coordinate proposal standard deviations on the value space (needs
        ``clip_bound``). Default: from the warm-up (unit sds in its whitened coordinates,
        or the sds of its Laplace approximation with a hand-set clip bound).
    scaling : float, optional
        Initial factor on ``S``; tuned from acceptance decisions during tuning. Default:
        chosen after the warm-up so that the ratio's noise sd is about 1 (1.0 without it).
    tune_interval : int
        Tuning period in iterations.
    warmup : bool or pymc_dp.WarmupPlan
        The private warm-up at the start of every chain (default ``True``: half of each
        chain's budget; docs/private-mcmc.md, "Settings chosen privately"). It chooses the
        start, the coordinates (whitened by a private curvature estimate) and the clip
        bound(s). ``False``: no warm-up (then give the clip bound(s)).
    {method parameters}
    {diagnostics parameters}
    {shared parameters}

    Notes
    -----
    Calibration: with ``noise_multiplier=None`` the step, told the chain length
    ``tune + draws`` by PyMC, sets ``z = sqrt(chains · (tune + draws) / (2 μ_max))`` where
    μ_max is the largest μ the exact Gaussian accountant allows for (ε, δ). Tuning adapts
    the proposal scale from accept/reject decisions only (post-processing).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=1000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     step = pymc_dp.DPPenalty(eps=1.0, chains=2)
    ...     idata = pymc_dp.sample(step=step, chains=2, random_seed=1, progressbar=False)
    >>> idata.attrs["dp_epsilon"] <= 1.0
    True
    """

    name = "dp_penalty"
    privacy_settings = (
        "clip_bound", "noise_multiplier", "_fixed_noise",
    )
    laplace_capable = True
    optional_stats_dtypes_shapes = CLIP_DIAGNOSTIC_STATS
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),
        "scaling": (np.float64, []),
        "clip_bound": (np.float64, []),
        "noise_multiplier": (np.float64, []),
        **GAUSSIAN_PRIVACY_STATS,
    }

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        clip_bound: float | None = None,
        proposal: str = "random_walk",
        noise_multiplier: float | None = None,
        S=None,
        scaling: float | None = None,
        warmup=True,
        method: str = "auto",
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
        self._init_clip_bound(clip_bound, S, warmup, method=method, mcmc_asked=scaling is not None)
        self._check_proposal_args(proposal, scaling, tune_interval)
        self.noise_multiplier = (
            None if noise_multiplier is None else check_positive(noise_multiplier, "noise_multiplier")
        )
        self._fixed_noise = noise_multiplier is not None
        super().__init__(**shared_arguments(locals()))
        self._check_warmup_model()
        self._S_given = S is not None
        self._init_proposal(S, self.private_model.dim)
        if self._fixed_noise:
            self._check_one_iteration_fits()
        self._penalty_state: PenaltyState | None = None

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "clip_bound": "chosen privately per chain" if self._whiten else self.clip_bound,
            "proposal": self.proposal,
            "warmup": None if self.warmup is None else repr(self.warmup),
            "noise_multiplier": self.noise_multiplier if self._fixed_noise else "calibrated",
        }

    # ------------------------------------------------------------------ privacy plan
    def _mu_per_iteration(self) -> float:
        return 0.0 if self._laplace else gaussian_mu(self.noise_multiplier)

    def _mu_chain_start(self) -> float:
        return self._mu_warmup()

    def _calibrate(self, iterations: int, chains: int) -> None:
        self._choose_method(iterations, chains)
        mu = self._sampling_mu_allotment(chains)
        if self._laplace:
            return  # the warm-up spends the chain's whole share; the draws release nothing
        if self._fixed_noise:
            self._check_fixed_noise_plan(iterations, chains)
            return
        # k releases of multiplier z cost k / (2 z²); a chain may spend its allotment less
        # the warm-up's share.
        self.noise_multiplier = noise_multiplier_for_mu(iterations, mu)

    def _chain_events(self, iterations: int) -> list[GaussianEvent]:
        if self._laplace:
            return self._warmup_events()
        return self._warmup_events() + [
            GaussianEvent(
                name="log-likelihood ratio",
                count=iterations,
                noise_multiplier=self.noise_multiplier,
                sensitivity="2·clip_bound·‖θ'−θ‖ (replace-one)",
            )
        ] + self._clip_diagnostic_events()

    # ------------------------------------------------------------------ sampling
    def _start_chain(self) -> None:
        self._penalty_state = None
        self._start_chain_accounting()
        self._start_warmup_chain()
        self._start_proposal_chain()

    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        if self._laplace:
            return self._laplace_transition(q)
        state = self._penalty_state
        if state is None:
            # First iteration of the chain: the warm-up (its releases), then cache ℓ(θ) at
            # the start. Not a release: it only enters the clipped, noised ratio of the
            # next proposal. The base class guarantees that q is where the chain left off.
            start = self._warm_up(q)
            self._choose_settings()
            view = self._view
            u = view.u(start)
            state = PenaltyState(q=u, loglik=view.loglik(u), logprior=view.logprior(u))

        view = self._view
        proposal = self._propose(state.q)
        state, info = penalty_transition(
            self.rng,
            state,
            proposal.q,
            view.clipped_ratio if self._clip_counts is None else self._counted_ratio,
            view.logprior,
            clip_bound=self.clip_bound,
            noise_multiplier=self.noise_multiplier,
        )
        self._record_decision(proposal, info.accepted)
        self._penalty_state = state
        stats = {
            "accept": float(np.exp(min(info.log_accept, 0.0))),
            "accepted": float(info.accepted),
            "scaling": float(np.mean(self.scaling)),
            "clip_bound": self.clip_bound,
            "noise_multiplier": self.noise_multiplier,
        }
        return view.theta(state.q), stats

    def _counted_ratio(self, q, current, bound):
        """The ratio function with the clip diagnostics' count (one release: one count)."""
        loglik, ratio, clipped = self._view.clipped_ratio(q, current, bound, count=True)
        self._count_clipped(clipped)
        return loglik, ratio

    def _choose_settings(self) -> None:
        # the ratio's noise sd per unit of ‖θ' − θ‖ (in the sampler's coordinates)
        self._choose_proposal(lambda: 2.0 * self.clip_bound * self.noise_multiplier)
