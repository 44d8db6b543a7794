"""``MinibatchDPPenalty``: the DP penalty test on a random batch (kernel: :mod:`pymc_dp.kernels.minibatch_penalty`)."""

from __future__ import annotations

import math

from dataclasses import replace
from typing import Any

import numpy as np

from pymc_dp.accounting.events import SubsampledGaussianEvent
from pymc_dp.accounting.gaussian import max_gaussian_mu
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.accounting.subsampling import subsampled_noise_multiplier
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.kernels.minibatch_penalty import minibatch_penalty_transition
from pymc_dp.validation import check_positive
from pymc_dp.steps.base import shared_arguments, shared_parameter_docs
from pymc_dp.steps.subsampled import SUBSAMPLED_PRIVACY_STATS, SubsampledPrivateStep
from pymc_dp.steps.warmup import PrivateWarmup

__all__ = ["MinibatchDPPenalty"]


@shared_parameter_docs
class MinibatchDPPenalty(PrivateWarmup, SubsampledPrivateStep):
    r"""Differentially private Metropolis–Hastings by the penalty method on random batches.

    Each iteration proposes θ', draws a batch B of ``batch_size`` rows without replacement
    from the chain's generator, clips every per-datum log-likelihood ratio
    ``r_j = ℓ_j(θ') − ℓ_j(θ)`` to ``±L‖θ'−θ‖`` (``L = clip_bound``), and releases

    ``λ − ½σ_b² + N(0, (z c)²)``,  ``λ = (nT/b) Σ_B r_j``,  ``σ_b² = (nT/b)² (Σ_B r_j² − (Σ_B r_j)²/b)``,

    where ``c = Δ_λ + Δ_σ`` is the replace-one sensitivity of ``λ − ½σ_b²`` (thesis Lemma 1,
    Theorem 8; :func:`~pymc_dp.kernels.minibatch_penalty.minibatch_sensitivity`) and ``z``
    the noise multiplier (the thesis' √τ). θ' is accepted with probability
    ``min(1, exp(release + log prior ratio − ½(zc)²))``: the penalty method corrects for the
    Gaussian noise and, approximately (by the central limit theorem), for the subsampling
    error whose variance σ_b² estimates.

    Privacy: each release is a Gaussian mechanism of multiplier z on a batch sampled
    without replacement at rate ``q = b/n``: a :class:`~pymc_dp.accounting.SubsampledGaussianEvent`
    under replace-one neighbours, charged the smallest of its valid bounds: the privacy loss
    distribution of sampling without replacement (:mod:`pymc_dp.accounting.without_replacement`),
    dp-accounting's RDP bound (Wang–Balle–Kasiviswanathan, at most thesis Theorem 8's) and
    the releases without subsampling (``docs/subsampling.md``). With
    ``noise_multiplier=None`` the step calibrates z so that the whole run (every chain,
    tuning included) costs the budget (ε, δ), with one root search over z per run.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default).
    {budget parameters}
    batch_size : int, optional
        b, the rows read per iteration, ``1 ≤ b ≤ n``; default ``10√n`` (at least 100). The
        noise grows with ``nT/b``: use tempering or large batches on large data sets.
    clip_bound : float, optional
        L: each per-datum ratio is clipped to ``±L‖θ'−θ‖`` (on the untempered
        log-likelihood). Default: chosen privately per chain by the warm-up, in its
        whitened coordinates. By hand: from public knowledge, never from the private data.
    tempering : float
        T = n0/n in (0, 1]: the chain targets the tempered posterior ∝ prior · likelihood^T.
        Default 1 (no tempering).
    proposal : {"random_walk", "one_component", "guided"}
        As for :class:`~pymc_dp.DPPenalty`; one-coordinate moves shrink ‖θ'−θ‖ and thus the
        noise, which here grows with its square through Δ_σ.
    noise_multiplier : float, optional
        Fix z instead of calibrating it; the planned run must still fit in the budget.
    S, scaling, tune_interval
        Per-coordinate proposal standard deviations, their initial factor (tuned from
        accept decisions during tuning) and the tuning period; as for
        :class:`~pymc_dp.DPPenalty`.
    warmup : bool or pymc_dp.WarmupPlan
        The private warm-up before the chains (default ``True``: the μ that half of ε buys
        alone, composed with the minibatch releases; the whole budget with the Laplace
        approximation; docs/private-mcmc.md, "Settings chosen privately").
        :func:`pymc_dp.sample` runs one for all chains, ``pm.sample`` one per chain. It
        chooses the start, the coordinates (whitened by a private curvature estimate) and
        the clip bound. ``False``: no warm-up (then give the clip bound).
        The warm-up reads every row (it is not subsampled).
    method : {"auto", "mcmc", "laplace"}
        ``"auto"`` (default) runs the minibatch chain only when its calibrated noise buys
        about :data:`~pymc_dp.steps.warmup.MCMC_MIN_MOVES` independent draws per chain (or
        one, when a setting only MCMC uses is given: ``clip_bound``, ``batch_size``,
        ``scaling``); otherwise the whole budget pays for the private Laplace
        approximation of the (tempered) target and the draws come from it, with a
        :class:`~pymc_dp.steps.warmup.LaplaceApproximationWarning` (no batch is released).
        ``"mcmc"`` runs the chain but refuses one that would freeze; ``"laplace"`` always
        draws from the approximation.
    {diagnostics parameters}
    {shared parameters}

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=20_000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     step = MinibatchDPPenalty(eps=2.0, batch_size=500, clip_bound=3.0,
    ...                               tempering=0.01, scaling=0.1, chains=2)
    ...     idata = pymc_dp.sample(step=step, draws=300, tune=100, chains=2,
    ...                            random_seed=1, progressbar=False)
    >>> idata.attrs["dp_epsilon"] <= 2.0
    True
    """

    name = "minibatch_dp_penalty"
    privacy_settings = (
        "clip_bound", "noise_multiplier", "_fixed_noise", "_calibrations",
    )
    laplace_capable = True
    _subsampled = True
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),
        "scaling": (np.float64, []),
        "clip_bound": (np.float64, []),
        "dp_noise_multiplier": (np.float64, []),
        "dp_warmup_mu": (np.float64, []),
        **SUBSAMPLED_PRIVACY_STATS,
    }

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        batch_size: int | None = None,
        clip_bound: float | None = None,
        tempering: float = 1.0,
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
        self._init_clip_bound(
            clip_bound, S, warmup, method=method,
            mcmc_asked=batch_size is not None or scaling is not None,
        )
        self._fixed_noise = noise_multiplier is not None
        self.noise_multiplier = (
            check_positive(noise_multiplier, "noise_multiplier") if self._fixed_noise else None
        )
        super().__init__(
            batch_size=batch_size,
            tempering=tempering,
            proposal=proposal,
            S=S,
            scaling=scaling,
            tune_interval=tune_interval,
            **shared_arguments(locals()),
        )
        self._calibrations: dict[tuple[int, int], float] = {}
        self._check_warmup_model()
        if self._fixed_noise:
            cost = self._cost(1)
            if not cost <= self.epsilon:
                raise ValueError(
                    f"The budget ε = {self.epsilon:.4g} (δ = {self.delta:.3g}) is too small for "
                    f"even one iteration at this noise (one iteration costs ε = {cost:.4g}). "
                    "Increase the noise multiplier or the budget."
                )

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "clip_bound": "chosen privately per chain" if self._whiten else self.clip_bound,
            "noise_multiplier": self.noise_multiplier if self._fixed_noise else "calibrated",
            "warmup": None if self.warmup is None else repr(self.warmup),
        }

    # ------------------------------------------------------------------ privacy plan
    def _events(self, count: int) -> list[SubsampledGaussianEvent]:
        return [
            SubsampledGaussianEvent(
                name="minibatch log-likelihood ratio",
                count=count,
                noise_multiplier=self.noise_multiplier,
                sampling_rate=self.sampling_rate,
                sampling="without_replacement",
                sensitivity="Δ_λ + Δ_σ of λ − σ_b²/2 on the batch (thesis Thm 8, replace-one)",
            )
        ]

    def _cost(self, releases: int, chains: int = 1) -> float:
        return PrivacyLedger(
            self._events(releases) + self._warmups(chains) + self._clip_diagnostics_of(chains)
        ).epsilon(self.delta)

    def _clip_diagnostics_of(self, chains: int, calibrating: bool = False) -> list:
        """The clip diagnostic events of ``chains`` chains (none when off). ``calibrating``:
        whatever the route (a calibration is cached, and may be computed while the route
        is chosen: it never leaves out releases the chains will make)."""
        if calibrating and self.clip_diagnostics is not None:
            events = self.clip_diagnostics.events(self._chain_mu_allotment(chains))
        else:
            events = self._clip_diagnostic_events()
        return [replace(e, count=e.count * chains) for e in events]

    def _warmups(self, chains: int) -> list:
        """The warm-up events of ``chains`` chains."""
        return [replace(e, count=e.count * chains) for e in self._warmup_events()]

    def _default_batch_size(self, n: int) -> int:
        # 10 √n (at least 100): the batch's share of the data, and with it the noise
        # λ carries (∝ n/b), falls as n grows, while a batch stays cheap to read.
        return int(min(n, max(100, math.ceil(10 * math.sqrt(n)))))

    def _shared_warmup_mu(self) -> float:
        if self._laplace:
            return self._chain_mu_allotment(1)
        return self._mcmc_warmup_mu()

    def _mcmc_warmup_mu(self) -> float:
        """The μ of a run's warm-up (all chains together) when MCMC follows it.

        The warm-up's Gaussian releases compose with subsampled ones through a PLD or RDP,
        not the Gaussian closed form, so a share of the Gaussian μ is not that share of ε:
        the warm-up gets the μ that
        half its share of ε would buy alone, the calibration the rest. (A chain's own
        warm-up gets 1/chains of it: the same cost in every accountant.)
        """
        share = self._warmup_share()
        return max_gaussian_mu(share * self.epsilon / 2, self.delta) if share else 0.0

    def _calibrate(self, iterations: int, chains: int) -> None:
        self._choose_method(iterations, chains)
        shared = self._shared_warmup is not None
        self._warmup_mu = 0.0 if shared else self._shared_warmup_mu() / chains
        if self._laplace:
            return  # the warm-up spends the whole budget; the draws release nothing
        if self._fixed_noise:
            cost = self._cost(iterations * chains, chains)
            if not cost <= self.epsilon:
                raise PrivacyBudgetExceeded(
                    f"{chains} chain(s) of {iterations} iterations at noise multiplier "
                    f"{self.noise_multiplier:.4g} would cost ε = {cost:.4g} (δ = "
                    f"{self.delta:.3g}), over the budget ε = {self.epsilon:.4g}. Run fewer or "
                    "shorter chains, or let the step calibrate its noise. No data was read."
                )
            return
        self.noise_multiplier = self._mcmc_noise_multiplier(iterations, chains, shared)

    def _mcmc_noise_multiplier(self, iterations: int, chains: int, shared: bool) -> float:
        """z for ``chains`` chains of ``iterations`` releases beside the warm-up(s).

        One root search over z for the whole planned run (every chain, tuning included),
        the warm-up's releases composed in (``shared``: those reserved for the run's
        warm-up, whatever route it took): all of them together cost (ε, δ). Cached.
        """
        key = (iterations, chains, shared)
        if key not in self._calibrations:
            # (the clip diagnostics are plain Gaussian releases: no amplification claimed)
            fixed = self._clip_diagnostics_of(chains, calibrating=True)
            fixed += list(self._shared_warmup_events) if shared else []
            if self.warmup is not None and not shared:
                # `chains` warm-ups of 1/chains of the run's μ: what one for all would cost
                mu = self._mcmc_warmup_mu() / chains
                fixed += [
                    replace(e, count=e.count * chains)
                    for e in self.warmup.events(mu / self.warmup.share)
                ]
            z, _ = subsampled_noise_multiplier(
                self.epsilon, self.delta, self.sampling_rate, iterations * chains,
                fixed=tuple(fixed),
            )
            self._calibrations[key] = z
        return self._calibrations[key]

    def _sampling_mu_equivalent(self, iterations: int, chains: int) -> float:
        # λ's noise sd per unit of move is z·(nT/b) times the full-data penalty's (whose
        # k releases of multiplier z' cost μ = k/(2z'²)): the μ of a full-data chain as
        # noisy. (Δ_σ adds to the noise: a best case.)
        if self._fixed_noise:
            z = self.noise_multiplier
        else:
            z = self._mcmc_noise_multiplier(iterations, chains, shared=False)
        n = self.private_model.n_data
        z_full = z * n * self.tempering / self.batch_size
        return iterations / (2.0 * z_full**2)

    def _chain_events(self, iterations: int) -> list:
        if self._laplace:
            return self._warmup_events()
        return self._warmup_events() + self._events(iterations) + self._clip_diagnostic_events()

    def _start_chain(self) -> None:
        super()._start_chain()
        self._start_warmup_chain()
        self._u = None

    # ------------------------------------------------------------------ sampling
    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        if self._laplace:
            return self._laplace_transition(q)
        if self._u is None:
            # First iteration of the chain: the warm-up (its releases) sets the start, the
            # coordinates and the clip bound. (The base class guarantees that q is where
            # the chain left off afterwards.)
            self._u = self._view.u(self._warm_up(q))
            self._choose_settings()
        view, u = self._view, self._u
        proposal = self._propose(u)
        u_new, logprior_new, info = minibatch_penalty_transition(
            self.rng,
            u,
            self._logprior(u),
            proposal.q,
            view.loglik_rows,
            view.logprior,
            n_data=self.private_model.n_data,
            batch_size=self.batch_size,
            tempering=self.tempering,
            clip_bound=self.clip_bound,
            noise_multiplier=self.noise_multiplier,
            count_clipped=self._clip_counter(),
        )
        self._after(proposal, u_new, logprior_new, info.accepted)
        self._u = u_new
        stats = {
            "accept": float(np.exp(min(info.log_accept, 0.0))),
            "accepted": float(info.accepted),
            "scaling": float(np.mean(self.scaling)),
            "clip_bound": self.clip_bound,
            "dp_noise_multiplier": self.noise_multiplier,
            "dp_warmup_mu": self._mu_warmup(),
        }
        return view.theta(u_new), stats

    def _logprior(self, u: np.ndarray) -> float:
        # the cached prior, in the warm-up's coordinates
        cache = self._logprior_cache
        if cache is None or not np.array_equal(cache[0], u):
            cache = (u.copy(), self._view.logprior(u))
        return cache[1]

    def _choose_settings(self) -> None:
        # λ's noise sd per unit of ‖θ' − θ‖: its sensitivity grows with nT/b
        n = self.private_model.n_data
        self._choose_proposal(
            lambda: self.noise_multiplier * (n * self.tempering / self.batch_size) * 2.0
            * self.clip_bound
        )
