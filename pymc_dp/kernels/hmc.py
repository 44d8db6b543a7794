"""DP HMC (docs/algorithms.md "DP HMC"; thesis 4.2, Algorithm 4, Theorem 12).

Small functions of arrays and a generator; nothing here knows PyMC. With a diagonal mass
matrix ``M = diag(1 / inv_mass)``, one iteration from θ with its cached noisy gradient G(θ):

1. ``p0 ~ N(0, M)``; L leapfrog steps of size η, each ``p ← p + ½η G``,
   ``θ ← θ + η M⁻¹ p``, ``G ← G(θ)`` (a fresh noisy release), ``p ← p + ½η G``
   (:func:`leapfrog`; Algorithm 4 of the thesis drops the η of the θ update);
2. the noisy clipped log-likelihood ratio of θ_L against θ
   (:func:`pymc_dp.kernels.penalty.noisy_clipped_ratio`, the DP penalty's release);
3. ``ΔH = R̂ + log prior ratio + ½p0ᵀM⁻¹p0 − ½p_LᵀM⁻¹p_L``; accept if ``ln u < ΔH − ½σ_l²``;
4. on accept the last noisy gradient becomes the cached one; on reject the old one stays.

A trajectory that leaves the finite numbers, or is so long that the ratio's noise σ_l, its
penalty ½σ_l² or the kinetic energy overflows, is a divergent proposal: rejected (flagged
``diverging``) from released values alone, before the data is read; an acceptance that is
NaN or infinite for any other reason is a divergent rejection too (see
:mod:`pymc_dp.kernels.penalty`, "Huge moves are rejections, never errors").

The noisy gradient of the log posterior (:func:`noisy_gradient`) is
``G(θ) = Σ_j clip_{b_g}(∇ℓ_j(θ)) + ∇ log prior(θ) + N(0, σ_g² I)`` with ``σ_g = 2 b_g z_g``:
the clipped sum has ℓ2 sensitivity ``2 b_g`` under replace-one, so each release costs
μ = 1/(2 z_g²).

Why the cached gradient does not bias the chain
-----------------------------------------------
Write each released gradient as ``G(θ) = g(θ) + ξ`` with ``ξ ~ N(0, σ_g² I)`` and take the
chain's state to be (θ, ξ_0), ξ_0 the noise of the cached gradient, with target
``π(θ) · N(ξ_0; 0, σ_g² I)``. One iteration draws fresh ``p0`` and fresh ``ξ_1 … ξ_L`` (a Gibbs
refresh of auxiliary variables) and proposes the image of
``(θ, ξ_0, p0, ξ_1, …, ξ_L) ↦ (θ_L, ξ_L, −p_L, ξ_{L−1}, …, ξ_0)``. Running the leapfrog from
``(θ_L, −p_L)`` with the noises in that reversed order retraces the trajectory, so this map is
an involution; each leapfrog stage is a shear, so it preserves volume; and the N(0, σ_g²)
densities of all L + 1 noises appear on both sides. The Metropolis–Hastings ratio on the
extended space is therefore exactly ``π(θ_L) N(p_L; M) / (π(θ) N(p0; M))`` — the HMC ratio,
here with the likelihood part replaced by the penalty-corrected noisy ratio, which keeps it
exact in expectation (Yildirim & Ermis). Keeping ξ_0 on reject and ξ_L on accept is the
MH update of the extended state, whose θ-marginal is π. A fresh start gradient every
iteration would also be valid, but releases one more gradient per iteration (k(L + 1) + …
instead of kL + 1 + …) for nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pymc_dp.kernels.penalty import (
    RatioFn,
    _finite_or_reject,
    noisy_clipped_ratio,
    public_move_is_finite,
    ratio_noise_sd,
)

__all__ = [
    "HMCInfo",
    "HMCState",
    "hmc_transition",
    "leapfrog",
    "noisy_gradient",
]


@dataclass(frozen=True)
class HMCState:
    """Where the chain is: θ, its cached log-likelihoods, log prior and noisy gradient."""

    q: np.ndarray
    loglik: np.ndarray  # private: only ever enters a clipped, noised sum
    logprior: float
    grad: np.ndarray  # a released noisy gradient of the log posterior at q: public


@dataclass(frozen=True)
class HMCInfo:
    accepted: bool
    log_accept: float  # computed from released values only: public
    diverging: bool  # the trajectory (released values only) left the finite numbers
    loglik_noise_sd: float
    distance: float  # ‖θ_L − θ‖: public


def noisy_gradient(
    rng: np.random.Generator,
    q: np.ndarray,
    clipped_gradient_fn: Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray]],
    *,
    clip_bound: float,
    noise_multiplier: float,
) -> np.ndarray:
    """One release: ``Σ_j clip_b(∇ℓ_j(θ)) + N(0, (2 b z)² I) + ∇ log prior(θ)``.

    ``clipped_gradient_fn(q, b)`` returns the private clipped sum and the public prior
    gradient (:meth:`pymc_dp.model.PrivateModel.clipped_gradient`). The sum's ℓ2
    sensitivity is ``2b`` (replace-one), so the noise std is ``z · 2b`` and the release
    costs μ = 1/(2 z²).
    """
    clipped, prior_grad = clipped_gradient_fn(q, clip_bound)
    noise_sd = noise_multiplier * 2.0 * clip_bound
    return clipped + noise_sd * rng.standard_normal(q.shape) + prior_grad


def leapfrog(
    q: np.ndarray,
    p: np.ndarray,
    grad: np.ndarray,
    grad_fn: Callable[[np.ndarray], np.ndarray],
    *,
    step_size: float,
    n_steps: int,
    inv_mass: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``n_steps`` leapfrog steps of size η from (q, p), starting with the gradient ``grad``.

    ``grad_fn(q)`` is the (noisy) gradient of the log posterior; it is called exactly
    ``n_steps`` times unless the trajectory stops being finite, in which case the function
    returns early with ``ok = False`` (the trajectory is built from released values only,
    so stopping is post-processing and releases less, never more).

    Returns ``(q_L, p_L, grad_L, ok)``.
    """
    half = 0.5 * step_size
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked, as ok = False
        for _ in range(n_steps):
            p = p + half * grad
            q = q + step_size * inv_mass * p
            if not np.all(np.isfinite(q)):
                return q, p, grad, False
            grad = grad_fn(q)
            p = p + half * grad
    ok = bool(np.all(np.isfinite(p)) and np.all(np.isfinite(grad)))
    return q, p, grad, ok


def hmc_transition(
    rng: np.random.Generator,
    state: HMCState,
    *,
    ratio_fn: RatioFn,
    logprior_fn: Callable[[np.ndarray], float],
    grad_fn: Callable[[np.ndarray], np.ndarray],
    step_size: float,
    n_steps: int,
    inv_mass: np.ndarray,
    loglik_clip: float,
    loglik_noise_multiplier: float,
) -> tuple[HMCState, HMCInfo]:
    """One DP HMC iteration: at most ``n_steps`` gradient releases and one ratio release.

    ``grad_fn(q)`` releases a noisy gradient (:func:`noisy_gradient` with the chain's rng);
    ``ratio_fn`` (:data:`~pymc_dp.kernels.penalty.RatioFn`) reads the data once, at θ_L
    (θ's per-datum log-likelihoods are cached in ``state``); ``logprior_fn`` is the public
    log prior. ``inv_mass`` is the diagonal of M⁻¹.
    """
    p0 = rng.standard_normal(state.q.shape) / np.sqrt(inv_mass)  # p0 ~ N(0, M)
    q_new, p_new, grad_new, ok = leapfrog(
        state.q,
        p0,
        state.grad,
        grad_fn,
        step_size=step_size,
        n_steps=n_steps,
        inv_mass=inv_mass,
    )
    diverged = HMCInfo(False, -np.inf, True, 0.0, float("nan"))
    if not ok:
        # Diverged on released values alone: reject without reading the data.
        return state, diverged
    with np.errstate(over="ignore", invalid="ignore"):
        distance = float(np.linalg.norm(q_new - state.q))
        kinetic_change = 0.5 * float(np.sum(inv_mass * p0**2) - np.sum(inv_mass * p_new**2))
    noise_sd = ratio_noise_sd(
        distance, clip_bound=loglik_clip, noise_multiplier=loglik_noise_multiplier
    )
    if not (public_move_is_finite(q_new, noise_sd) and np.isfinite(kinetic_change)):
        # Huge but finite: the noise, its penalty or the energy overflows. Rejected as
        # divergent from released values alone, without reading the data.
        return state, diverged
    loglik_new, noisy_ratio, noise_sd = noisy_clipped_ratio(  # the release
        rng,
        ratio_fn,
        q_new,
        state.loglik,
        distance,
        clip_bound=loglik_clip,
        noise_multiplier=loglik_noise_multiplier,
    )
    logprior_new = logprior_fn(q_new)
    log_accept = _finite_or_reject(
        noisy_ratio + (logprior_new - state.logprior) + kinetic_change - 0.5 * noise_sd * noise_sd
    )
    if log_accept == -np.inf:  # e.g. the log prior overflowed at θ_L: a divergent rejection
        return state, HMCInfo(False, -np.inf, True, noise_sd, distance)
    accepted = bool(np.log(rng.uniform()) < log_accept)
    if accepted:
        state = HMCState(q=q_new, loglik=loglik_new, logprior=logprior_new, grad=grad_new)
    return state, HMCInfo(accepted, float(log_accept), False, noise_sd, distance)
