"""Shared parts of steps whose releases are all plain Gaussian mechanisms.

Their cost is exact through the summed μ (ALGORITHMS.md, "Gaussian compositions are
exact"), so every iteration reports the μ it spent, and a trace alone is enough to
recompute the run's (ε, δ) (:func:`pymc_dp.privacy_report`).
"""

from __future__ import annotations

import numpy as np

from pymc_dp.accounting.gaussian import gaussian_epsilon, max_gaussian_mu
from pymc_dp.steps.base import PrivateStep

__all__ = ["GaussianPrivateStep", "GAUSSIAN_PRIVACY_STATS"]

#: Per-draw privacy stats of Gaussian steps: μ of this iteration, μ of the chain so far
#: (tuning included, so discarded tuning draws still count), and the δ of the budget.
GAUSSIAN_PRIVACY_STATS = {
    "dp_mu": (np.float64, []),
    "dp_mu_chain": (np.float64, []),
    "dp_delta": (np.float64, []),
}


class GaussianPrivateStep(PrivateStep):
    """A :class:`PrivateStep` whose iterations each cost a fixed μ (Gaussian releases)."""

    def _mu_per_iteration(self) -> float:
        """μ = Σ 1/(2 z²) over the releases of one iteration, at the current noise."""
        raise NotImplementedError

    def _chain_mu_allotment(self, chains: int) -> float:
        """The μ one of ``chains`` equal chains may spend: (ε, δ) → μ_max, split evenly."""
        return max_gaussian_mu(self.epsilon, self.delta) / chains

    def _check_one_iteration_fits(self) -> None:
        """Refuse, at construction, fixed noise that the budget cannot pay one iteration for."""
        cost = gaussian_epsilon(self._mu_per_iteration(), self.delta)
        if cost > self.epsilon:
            raise ValueError(
                f"The budget ε = {self.epsilon:.4g} (δ = {self.delta:.3g}) is too small for even "
                f"one iteration at this noise (one iteration costs ε = {cost:.4g}). Increase "
                "the noise multiplier or the budget."
            )

    def _start_chain_accounting(self) -> None:
        self._mu_chain = 0.0

    def _iteration_privacy_stats(self) -> dict:
        mu = self._mu_per_iteration()
        self._mu_chain += mu
        return {"dp_mu": mu, "dp_mu_chain": self._mu_chain, "dp_delta": self.delta}
