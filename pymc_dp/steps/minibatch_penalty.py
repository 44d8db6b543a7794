"""``MinibatchDPPenalty``: the DP penalty test on a random batch (kernel: :mod:`pymc_dp.kernels.minibatch_penalty`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pymc_dp.accounting.events import SubsampledGaussianEvent
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.accounting.subsampling import subsampled_noise_multiplier
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.kernels.minibatch_penalty import minibatch_penalty_transition
from pymc_dp.accounting.validation import check_positive
from pymc_dp.steps.subsampled import SUBSAMPLED_PRIVACY_STATS, SubsampledPrivateStep

__all__ = ["MinibatchDPPenalty"]


class MinibatchDPPenalty(SubsampledPrivateStep):
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
    under replace-one neighbours, accounted by dp-accounting's RDP accountant (the
    Wang–Balle–Kasiviswanathan bound, which is at most thesis Theorem 8's). With
    ``noise_multiplier=None`` the step calibrates z so that the whole run (every chain,
    tuning included) costs the budget (ε, δ), with one root search over z per run.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default).
    eps : float
        Privacy budget ε of this step object, for its whole life, all chains and tuning
        included.
    delta : float, optional
        Budget δ in (0, 1); default ``0.1 / n``.
    batch_size : int
        b, the rows read per iteration, ``1 ≤ b ≤ n``. The noise grows with ``nT/b``: use
        tempering or large batches on large data sets.
    clip_bound : float
        L: each per-datum ratio is clipped to ``±L‖θ'−θ‖`` (on the untempered
        log-likelihood). Choose it from public knowledge, never from the private data.
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
        accept decisions during tuning) and the tuning period.
    chains, ledger_dir, model, initial_point, compile_kwargs, rng
        See :class:`pymc_dp.steps.base.PrivateStep`.

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
    privacy_settings = ("clip_bound", "noise_multiplier", "_fixed_noise", "_calibrations")
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),
        "scaling": (np.float64, []),
        "dp_noise_multiplier": (np.float64, []),
        **SUBSAMPLED_PRIVACY_STATS,
    }

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        batch_size: int,
        clip_bound: float,
        tempering: float = 1.0,
        proposal: str = "random_walk",
        noise_multiplier: float | None = None,
        S=None,
        scaling: float = 1.0,
        tune_interval: int = 100,
        chains: int | None = None,
        ledger_dir=None,
        model=None,
        initial_point=None,
        compile_kwargs=None,
        blocked: bool = True,
        rng=None,
    ):
        self.clip_bound = check_positive(clip_bound, "clip_bound")
        self._fixed_noise = noise_multiplier is not None
        self.noise_multiplier = (
            check_positive(noise_multiplier, "noise_multiplier") if self._fixed_noise else None
        )
        super().__init__(
            vars,
            eps=eps,
            delta=delta,
            batch_size=batch_size,
            tempering=tempering,
            proposal=proposal,
            S=S,
            scaling=scaling,
            tune_interval=tune_interval,
            chains=chains,
            ledger_dir=ledger_dir,
            model=model,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
            blocked=blocked,
            rng=rng,
        )
        self._calibrations: dict[tuple[int, int], float] = {}
        if self._fixed_noise:
            cost = self._cost(1)
            if cost > self.epsilon:
                raise ValueError(
                    f"The budget ε = {self.epsilon:.4g} (δ = {self.delta:.3g}) is too small for "
                    f"even one iteration at this noise (one iteration costs ε = {cost:.4g}). "
                    "Increase the noise multiplier or the budget."
                )

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "clip_bound": self.clip_bound,
            "noise_multiplier": self.noise_multiplier if self._fixed_noise else "calibrated",
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

    def _cost(self, releases: int) -> float:
        return PrivacyLedger(self._events(releases)).epsilon(self.delta)

    def _calibrate(self, iterations: int, chains: int) -> None:
        releases = iterations * chains
        if self._fixed_noise:
            cost = self._cost(releases)
            if cost > self.epsilon:
                raise PrivacyBudgetExceeded(
                    f"{chains} chain(s) of {iterations} iterations at noise multiplier "
                    f"{self.noise_multiplier:.4g} would cost ε = {cost:.4g} (δ = "
                    f"{self.delta:.3g}), over the budget ε = {self.epsilon:.4g}. Run fewer or "
                    "shorter chains, or let the step calibrate its noise. No data was read."
                )
            return
        key = (iterations, chains)
        if key not in self._calibrations:
            # One root search over z for the whole planned run: every chain, tuning included.
            z, _ = subsampled_noise_multiplier(
                self.epsilon, self.delta, self.sampling_rate, releases
            )
            self._calibrations[key] = z
        self.noise_multiplier = self._calibrations[key]

    def _chain_events(self, iterations: int) -> list[SubsampledGaussianEvent]:
        return self._events(iterations)

    # ------------------------------------------------------------------ sampling
    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        pmodel = self.private_model
        proposal = self._propose(q)
        q_new, logprior_new, info = minibatch_penalty_transition(
            self.rng,
            q,
            self._logprior(q),
            proposal.q,
            pmodel.loglik_rows,
            pmodel.logprior,
            n_data=pmodel.n_data,
            batch_size=self.batch_size,
            tempering=self.tempering,
            clip_bound=self.clip_bound,
            noise_multiplier=self.noise_multiplier,
        )
        self._after(proposal, q_new, logprior_new, info.accepted)
        stats = {
            "accept": float(np.exp(min(info.log_accept, 0.0))),
            "accepted": float(info.accepted),
            "scaling": float(np.mean(self.scaling)),
            "dp_noise_multiplier": self.noise_multiplier,
        }
        return q_new, stats
