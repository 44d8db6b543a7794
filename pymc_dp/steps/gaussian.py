"""Shared parts of steps whose releases are all plain Gaussian mechanisms.

Their cost is exact through the summed μ (docs/algorithms.md, "Gaussian compositions are
exact"), so every iteration reports the μ it spent, and a trace alone is enough to
recompute the run's (ε, δ) (:func:`pymc_dp.privacy_report`).
"""

from __future__ import annotations

import math

import numpy as np

from pymc_dp.accounting.gaussian import gaussian_epsilon
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.accounting.events import GaussianEvent
from pymc_dp.steps.base import PrivateStep, TraceCost, last_draw

__all__ = ["GaussianPrivateStep", "GAUSSIAN_PRIVACY_STATS"]

#: Per-draw privacy stats of Gaussian steps: μ of this iteration, μ of the chain so far
#: (tuning included, so discarded tuning draws still count), the δ of the budget, and the μ
#: of a warm-up the run's chains share (paid once, before them: counted once per trace).
GAUSSIAN_PRIVACY_STATS = {
    "dp_mu": (np.float64, []),
    "dp_mu_chain": (np.float64, []),
    "dp_delta": (np.float64, []),
    "dp_mu_shared_warmup": (np.float64, []),
}


class GaussianPrivateStep(PrivateStep):
    """A :class:`PrivateStep` whose iterations each cost a fixed μ (Gaussian releases)."""

    @classmethod
    def epsilon_from_stats(cls, stats, delta: float | None = None) -> float:
        # (exact: the chain's μ so far, tuning included, and a warm-up its run shares)
        mu = float(stats["dp_mu_chain"]) + float(stats.get("dp_mu_shared_warmup", 0.0))
        delta = float(stats["dp_delta"]) if delta is None else delta
        return gaussian_epsilon(mu, delta) if mu > 0 else 0.0

    @classmethod
    def cost_from_stats(cls, stats) -> TraceCost | None:
        """Each chain's μ, tuning included, from ``dp_mu_chain`` at its last draw: one
        Gaussian event of that μ per chain (exact: μ adds up)."""
        if "dp_mu_chain" not in stats.data_vars:
            return None
        mu = [float(m) for m in last_draw(stats, "dp_mu_chain")]
        return TraceCost(
            chains=[
                [GaussianEvent(name=f"chain {i}", noise_multiplier=(2.0 * m) ** -0.5)]
                if m > 0 else []
                for i, m in enumerate(mu)
            ],
            per_chain={"mu": mu},
            details={},
        )

    def _mu_per_iteration(self) -> float:
        """μ = Σ 1/(2 z²) over the releases of one iteration, at the current noise."""
        raise NotImplementedError

    def _cost(self, iterations: int, chains: int = 1) -> float:
        """ε of ``chains`` chains of ``iterations`` at the current noise (inf if μ overflows)."""
        mu = chains * sum(event.mu for event in self._chain_events(iterations))
        return gaussian_epsilon(mu, self.delta) if math.isfinite(mu) else math.inf

    def _check_one_iteration_fits(self) -> None:
        """Refuse, at construction, fixed noise that the budget cannot pay one iteration for."""
        cost = self._cost(1)
        if not cost <= self.epsilon:
            raise ValueError(
                f"The budget ε = {self.epsilon:.4g} (δ = {self.delta:.3g}) is too small for even "
                f"one iteration at this noise (one iteration costs ε = {cost:.4g}). Increase "
                "the noise multiplier(s) or the budget."
            )

    def _check_fixed_noise_plan(self, iterations: int, chains: int) -> None:
        """Refuse, before the first chain, a fixed-noise plan whose chains do not all fit.

        Without this, the first chains of a run would spend their share and a later one be
        refused, losing the run's draws.
        """
        cost = self._cost(iterations, chains)
        if not cost <= self.epsilon:
            raise PrivacyBudgetExceeded(
                f"{chains} chain(s) of {iterations} iterations at this fixed noise would cost "
                f"ε = {cost:.4g} (δ = {self.delta:.3g}), over the budget ε = {self.epsilon:.4g}. "
                "Run fewer or shorter chains, or let the step calibrate its noise. No data was "
                "read."
            )

    def _mu_chain_start(self) -> float:
        """μ of the releases a chain makes once, before its first iteration (default none)."""
        return 0.0

    def _start_chain_accounting(self) -> None:
        self._mu_chain = 0.0
        self._mu_pending = self._mu_chain_start()

    def _iteration_privacy_stats(self) -> dict:
        # The first iteration of a chain also reports what the chain released once before
        # it (warm-up, a start gradient): summed over a chain this is the reservation
        # exactly, so the trace alone gives the run's cost.
        # (and, at a window's end, the clip diagnostics' release: PrivateStep.astep)
        mu = self._mu_per_iteration() + self._mu_pending + self._clip_mu_now
        self._mu_pending = 0.0
        self._mu_chain += mu
        return {
            "dp_mu": mu,
            "dp_mu_chain": self._mu_chain,
            "dp_delta": self.delta,
            "dp_mu_shared_warmup": self._mu_shared_warmup(),
        }
