"""The private warm-up of the Gaussian steps: start, shape and clip bounds from the data.

Each chain, at its first iteration (after its whole cost is reserved), spends a share of
its budget on a private Laplace approximation of the posterior
(:func:`pymc_dp.kernels.warmup.laplace_warmup`: noisy clipped Fisher scoring, planned by
:class:`pymc_dp.accounting.plan.WarmupPlan`). What it releases sets the sampler up:

* the chain starts at the private mode θ̂;
* the sampler works in the whitened coordinates u of ``θ = θ̂ + B u``, ``B Bᵀ = Ĥ⁻¹`` for
  the private curvature Ĥ (:class:`AffineView`), where the posterior is close to N(0, I):
  one proposal scale and one clip bound suit every direction, whatever the model's units;
* the clip bounds are the released high quantile of the per-datum gradient norms in that
  metric, ``‖∇ℓ_j‖_{Ĥ⁻¹} = ‖Bᵀ∇ℓ_j‖``: a bound on a datum's log-likelihood slope per unit
  of ``‖u' − u‖`` near the mode (mean value theorem), which is what DPPenalty's and DPHMC's
  clipping needs.

All of it is post-processing of Gaussian releases, accounted as ledger events beside the
sampler's (so the whole run, warm-up included, stays inside (ε, δ)). Clip bounds change the
sensitivity but not the noise multiplier, so the privacy cost does not depend on them.

A setting the user gives wins: a clip bound given by hand is in θ's own units, so with one
the sampler stays in θ coordinates and the warm-up (if on) gives only the start and, unless
given too, the proposal sds or mass matrix (the diagonal of Ĥ⁻¹).
"""

from __future__ import annotations

import numpy as np

from pymc_dp.accounting.plan import WarmupPlan
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.kernels.warmup import LaplaceWarmup, laplace_warmup, whitening

__all__ = ["AffineView", "PrivateWarmup", "DEFAULT_WARMUP"]

#: The default warm-up: half of each chain's μ over twelve noisy Fisher-scoring iterations,
#: clip bounds at the 0.999 quantile (see docs/private-mcmc.md, "Settings chosen privately").
DEFAULT_WARMUP = WarmupPlan(share=0.5, iterations=12, quantile=0.999, growth=1.3)


class AffineView:
    """The private model seen in the coordinates u of ``θ = mean + basis · u`` (public).

    Offers what the kernels call (``loglik``, ``logprior``, ``clipped_gradient``) as
    functions of u; ``basis`` is invertible. The log prior in u differs from θ's by the
    constant log-Jacobian, which cancels in every ratio.
    """

    def __init__(self, pmodel, mean: np.ndarray | None = None, basis: np.ndarray | None = None):
        self.pmodel = pmodel
        dim = pmodel.dim
        self.mean = np.zeros(dim) if mean is None else np.asarray(mean, dtype=float)
        self.basis = np.eye(dim) if basis is None else np.asarray(basis, dtype=float)
        self._inverse = np.linalg.inv(self.basis)
        self.whitened = basis is not None

    def theta(self, u: np.ndarray) -> np.ndarray:
        return self.mean + self.basis @ u

    def u(self, theta: np.ndarray) -> np.ndarray:
        return self._inverse @ (np.asarray(theta, dtype=float) - self.mean)

    def loglik(self, u: np.ndarray) -> np.ndarray:
        return self.pmodel.loglik(self.theta(u))

    def logprior(self, u: np.ndarray) -> float:
        return self.pmodel.logprior(self.theta(u))

    def loglik_rows(self, u: np.ndarray, rows) -> np.ndarray:
        return self.pmodel.loglik_rows(self.theta(u), rows)

    def clipped_gradient(self, u: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
        return self.pmodel.clipped_gradient(self.theta(u), bound, self.basis)


def _check_warmup(warmup) -> WarmupPlan | None:
    if warmup is None or warmup is True:
        return DEFAULT_WARMUP
    if warmup is False:
        return None
    if isinstance(warmup, WarmupPlan):
        return warmup
    raise ValueError(
        "warmup must be True (the default plan), False (no warm-up: give every setting) or "
        f"a pymc_dp.WarmupPlan, got {type(warmup).__name__}"
    )


class PrivateWarmup:
    """Mixin of a :class:`~pymc_dp.steps.gaussian.GaussianPrivateStep` with a private warm-up.

    The step calls :meth:`_init_warmup` before the base constructor (public arguments only),
    :meth:`_check_warmup_model` after it, uses :meth:`_sampling_mu_allotment` in its
    calibration and :meth:`_warmup_events` in its events, and calls :meth:`_warm_up` at a
    chain's first iteration (after the base class reserved the chain's cost). The view the
    kernels use is ``self._view``.
    """

    def _init_warmup(self, warmup, *, hand_clipped: bool) -> None:
        self.warmup = _check_warmup(warmup)
        self._whiten = self.warmup is not None and not hand_clipped
        self._warmup_mu = 0.0
        self._view = None
        self._warmup_result: LaplaceWarmup | None = None

    def _check_warmup_model(self) -> None:
        """Refuse now, before any data is read, a model the warm-up cannot differentiate."""
        self._view = AffineView(self.private_model)
        if self.warmup is None:
            return
        try:
            self.private_model.compile_gradient_rows()
        except UnsupportedModelError as err:
            raise UnsupportedModelError(
                f"{err} The private warm-up that chooses the start, proposal shape and clip "
                "bounds needs gradients: give the settings by hand and warmup=False."
            ) from None
        self._sampling_mu_allotment(self.planned_chains)  # the warm-up's μ, until calibrated

    def _warmup_share(self) -> float:
        return 0.0 if self.warmup is None else self.warmup.share

    def _sampling_mu_allotment(self, chains: int) -> float:
        """The μ a chain's sampler may spend: its allotment less the warm-up's share."""
        mu = self._chain_mu_allotment(chains)
        self._warmup_mu = self._warmup_share() * mu
        return mu - self._warmup_mu

    def _warmup_events(self) -> list:
        if self.warmup is None:
            return []
        return self.warmup.events(self._warmup_mu / self.warmup.share)

    def _mu_warmup(self) -> float:
        return sum(event.mu for event in self._warmup_events())

    def _warm_up(self, q: np.ndarray) -> np.ndarray:
        """Run the chain's warm-up from θ = ``q`` (releases); return the chain's start θ."""
        if self.warmup is None:
            self._view = AffineView(self.private_model)
            return q
        pmodel = self.private_model
        cache = {}

        def rows(theta):  # one compiled pass gives the rows and the prior's two derivatives
            key = theta.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = pmodel.gradient_rows(theta)
            return cache[key]

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            found = laplace_warmup(
                self.rng,
                np.asarray(q, dtype=float),
                lambda t: rows(t)[0],
                lambda t: rows(t)[1],
                lambda t: rows(t)[2],
                noise_multipliers=self.warmup.noise_multipliers(self._warmup_mu / self.warmup.share),
                quantile=self.warmup.quantile,
            )
        self._warmup_result = found
        if not np.all(np.isfinite(found.mean)):
            # Noise took the iterate off the model's support: start where the chain was.
            found = LaplaceWarmup(q, found.hessian, found.clip, found.iterations)
            self._warmup_result = found
        if self._whiten:
            self._view = AffineView(pmodel, found.mean, whitening(found.hessian).T)
        else:
            self._view = AffineView(pmodel)
        return found.mean

    def _warmup_variances(self) -> np.ndarray:
        """The diagonal of Ĥ⁻¹: posterior variances of θ's coordinates (released)."""
        return np.diag(np.linalg.inv(self._warmup_result.hessian))
