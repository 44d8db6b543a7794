"""DP penalty (docs/algorithms.md "DP penalty"; thesis 3.1–3.2; Yildirim & Ermis 2019).

Small functions of arrays and a generator; nothing here knows PyMC. One iteration from θ:

1. propose θ' (:func:`propose`: Gaussian random walk, one-component update, or guided walk);
2. ``R = Σ_j clip_{b‖θ'−θ‖}(ℓ_j(θ') − ℓ_j(θ))``, sensitivity ``c = 2 b ‖θ'−θ‖`` under
   replace-one;
3. release ``R̂ = R + N(0, σ²)`` with ``σ = z · c`` (z: the noise multiplier, μ = 1/(2z²) per
   iteration whatever c is);
4. accept with probability ``min(1, exp(R̂ + log prior ratio − σ²/2))`` (the proposals here
   are symmetric on the extended space, so there is no proposal ratio).

Huge moves are rejections, never errors
---------------------------------------
A proposal far away (a huge step, a scale tuned up on a flat stretch) makes ``σ`` or
``σ²/2`` overflow, and Python's float power raises ``OverflowError`` where NumPy returns
inf. Every kernel here computes such terms by products (inf, no exception) and rejects a
proposal whose acceptance is not a finite number: ``σ²/2 = inf`` means an acceptance
probability of ``exp(−inf) = 0``, so the decision is the one the formula gives, and it is
taken from public values before the data is read (:func:`public_move_is_finite`); NaN
(e.g. ``inf − inf``) has no acceptance probability, and rejecting keeps the chain where it
is.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, replace
from collections.abc import Callable

import numpy as np

from pymc_dp.kernels.clipping import clipped_sum

__all__ = [
    "PROPOSALS",
    "PenaltyState",
    "RatioFn",
    "clipped_ratio_from",
    "noisy_clipped_ratio",
    "penalty_transition",
    "propose",
    "public_move_is_finite",
    "ratio_noise_sd",
]

PROPOSALS = ("random_walk", "one_component", "guided")


@dataclass(frozen=True)
class PenaltyState:
    """Where the chain is: θ, its cached per-datum log-likelihoods and its log prior."""

    q: np.ndarray
    loglik: np.ndarray  # private: only ever enters a clipped, noised sum
    logprior: float


@dataclass(frozen=True)
class Proposal:
    q: np.ndarray
    coordinate: int | None  # the coordinate moved (one-component and guided walks)


def propose(
    rng: np.random.Generator,
    q: np.ndarray,
    scale: np.ndarray,
    kind: str,
    directions: np.ndarray | None = None,
) -> Proposal:
    """Draw θ' from θ = ``q``.

    ``scale`` is the per-coordinate proposal standard deviation. ``"random_walk"`` moves every
    coordinate; ``"one_component"`` one coordinate drawn uniformly; ``"guided"`` one coordinate
    i, moved by ``directions[i] · |ξ|`` (Gustafson's guided walk: keep the direction on
    accept, flip it on reject — see :func:`guided_directions_after`).
    """
    if kind == "random_walk":
        return Proposal(q + scale * rng.standard_normal(q.shape), None)
    i = int(rng.integers(q.size))
    step = scale[i] * rng.standard_normal()
    if kind == "guided":
        step = directions[i] * abs(step)
    elif kind != "one_component":
        raise ValueError(f"proposal must be one of {PROPOSALS}, got {kind!r}")
    q_new = q.copy()
    q_new[i] += step
    return Proposal(q_new, i)


def guided_directions_after(directions: np.ndarray, coordinate: int, accepted: bool) -> np.ndarray:
    """The guided walk's directions after an accept (kept) or a reject (flipped)."""
    if accepted:
        return directions
    flipped = directions.copy()
    flipped[coordinate] = -flipped[coordinate]
    return flipped


def ratio_noise_sd(distance: float, *, clip_bound: float, noise_multiplier: float) -> float:
    """σ = z · 2 b · distance of the clipped ratio of a move of length ``distance`` (public)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.float64(noise_multiplier) * 2.0 * clip_bound * distance)


def public_move_is_finite(q_proposed: np.ndarray, noise_sd: float) -> bool:
    """Whether a proposal and its penalty ``σ²/2`` are finite floats (public values only).

    If not, the proposal is rejected before the data is read (see the module notes).
    """
    return bool(np.all(np.isfinite(q_proposed)) and math.isfinite(0.5 * noise_sd * noise_sd))


#: ``ratio_fn(θ', ℓ(θ), b) -> (ℓ(θ'), Σ_j clip_b(ℓ_j(θ') − ℓ_j(θ)))``: the per-datum
#: log-likelihoods at θ' (private; the next cache if θ' is accepted) and their clipped
#: ratio to the cached ones by the rule of :func:`~pymc_dp.kernels.clipping.clipped_sum`.
#: :meth:`pymc_dp.model.PrivateModel.clipped_ratio` computes both in one compiled pass;
#: :func:`clipped_ratio_from` builds one from a per-datum log-likelihood function.
RatioFn = Callable[[np.ndarray, np.ndarray, float], tuple[np.ndarray, float]]


def clipped_ratio_from(loglik_fn: Callable[[np.ndarray], np.ndarray]) -> RatioFn:
    """A :data:`RatioFn` from a function returning per-datum log-likelihoods (NumPy).

    The reference the compiled one is tested against, and a way to run the kernels on
    plain arrays.

    Examples
    --------
    >>> ratio_fn = clipped_ratio_from(lambda q: -0.5 * (np.array([0.0, 1.0, 5.0]) - q[0]) ** 2)
    >>> current, _ = ratio_fn(np.array([0.0]), np.zeros(3), 1.0)
    >>> _, ratio = ratio_fn(np.array([1.0]), current, 2.0)
    >>> float(ratio)  # the differences −0.5, 0.5, 4.5 clamped to [−2, 2]
    2.0
    """

    def ratio_fn(q: np.ndarray, current: np.ndarray, bound: float) -> tuple[np.ndarray, float]:
        loglik = loglik_fn(q)
        with np.errstate(invalid="ignore"):  # inf − inf (diverged values): NaN, clipped to 0
            return loglik, clipped_sum(loglik - current, bound)

    return ratio_fn


def noisy_clipped_ratio(
    rng: np.random.Generator,
    ratio_fn: RatioFn,
    q_proposed: np.ndarray,
    loglik_current: np.ndarray,
    distance: float,
    *,
    clip_bound: float,
    noise_multiplier: float,
) -> tuple[np.ndarray, float, float]:
    """Release the clipped log-likelihood ratio of a move of length ``distance``: one release.

    ``R = Σ_j clip_{b·distance}(ℓ_j(θ') − ℓ_j(θ))`` (by ``ratio_fn``) has sensitivity
    ``c = 2 b · distance`` under replace-one; the release is ``R̂ = R + N(0, σ²)`` with
    ``σ = z · c``, which costs μ = 1/(2 z²) whatever ``distance`` is. Shared by the DP
    penalty and DP HMC acceptance tests (docs/algorithms.md, "DP penalty" step 2–3 and "DP HMC"
    step 2).

    Returns
    -------
    (ndarray, float, float)
        ``ℓ(θ')`` (private: the next cache), the released ``R̂`` and the noise standard
        deviation ``σ`` (public: it depends only on the public distance and settings), which
        the caller needs for the ``−σ²/2`` penalty correction.
    """
    bound = clip_bound * distance
    loglik_proposed, ratio = ratio_fn(q_proposed, loglik_current, bound)
    # A sum of n terms each in [−b, b]: anything else means ratio_fn did not clip (a caller
    # passing an unclipped function), and releasing it would not be private. O(1), public.
    if not abs(ratio) <= len(loglik_current) * bound * (1.0 + 1e-6):
        raise RuntimeError(
            "ratio_fn returned a sum outside ±n·bound: it does not clip each term to the "
            "bound (pymc_dp.kernels.penalty.RatioFn); nothing was released"
        )
    noise_sd = ratio_noise_sd(distance, clip_bound=clip_bound, noise_multiplier=noise_multiplier)
    return loglik_proposed, float(ratio) + noise_sd * rng.standard_normal(), noise_sd


def _finite_or_reject(log_accept) -> float:
    """``log_accept`` as a float, −inf (a sure rejection) if it is NaN or infinite."""
    with np.errstate(invalid="ignore"):
        value = float(log_accept)
    return value if math.isfinite(value) else -math.inf


@dataclass(frozen=True)
class PenaltyInfo:
    accepted: bool
    log_accept: float  # computed from released values only: public
    noise_sd: float


def penalty_transition(
    rng: np.random.Generator,
    state: PenaltyState,
    q_proposed: np.ndarray,
    ratio_fn: RatioFn,
    logprior_fn: Callable[[np.ndarray], float],
    *,
    clip_bound: float,
    noise_multiplier: float,
) -> tuple[PenaltyState, PenaltyInfo]:
    """One DP penalty accept/reject of ``q_proposed``: exactly one noisy release.

    ``ratio_fn`` (:data:`RatioFn`) reads the data once per call, at θ' only (θ's per-datum
    log-likelihoods are cached in ``state``); ``logprior_fn`` is the public log prior. A
    proposal whose
    acceptance is not a finite number is rejected (module notes), before the data is read
    when public values already say so.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        distance = float(np.linalg.norm(q_proposed - state.q))
    noise_sd = ratio_noise_sd(distance, clip_bound=clip_bound, noise_multiplier=noise_multiplier)
    if not public_move_is_finite(q_proposed, noise_sd):
        return state, PenaltyInfo(False, -math.inf, noise_sd)
    loglik_proposed, noisy_ratio, noise_sd = noisy_clipped_ratio(  # the release
        rng,
        ratio_fn,
        q_proposed,
        state.loglik,
        distance,
        clip_bound=clip_bound,
        noise_multiplier=noise_multiplier,
    )
    logprior_proposed = logprior_fn(q_proposed)
    log_accept = _finite_or_reject(
        noisy_ratio + (logprior_proposed - state.logprior) - 0.5 * noise_sd * noise_sd
    )
    accepted = bool(np.log(rng.uniform()) < log_accept)
    if accepted:
        state = replace(
            state, q=q_proposed, loglik=loglik_proposed, logprior=logprior_proposed
        )
    return state, PenaltyInfo(accepted, float(log_accept), noise_sd)
