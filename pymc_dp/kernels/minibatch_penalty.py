"""Minibatch DP penalty (docs/algorithms.md "Minibatch DP penalty"; thesis 3.4, Lemma 1, Thm 8).

Small functions of arrays and a generator; nothing here knows PyMC. One iteration from θ,
after the step has proposed θ' (:func:`pymc_dp.kernels.penalty.propose`):

1. draw a batch B of ``b`` of the ``n`` rows without replacement (:func:`draw_batch`);
2. ``r_j = clip_{L‖θ'−θ‖}(ℓ_j(θ') − ℓ_j(θ))`` for j ∈ B (L: the clip bound per unit distance);
3. with ``s = nT/b`` (T: tempering), ``λ = s Σ_B r_j`` and ``σ_b² = s² (Σ_B r_j² − (Σ_B r_j)²/b)``
   (:func:`batch_estimate`: the batch estimate of the tempered log-likelihood ratio and of
   its variance);
4. release ``(λ − ½σ_b²) + N(0, σ²)``, ``σ = z · c`` with the replace-one sensitivity
   ``c = Δ_λ + Δ_σ`` of :func:`minibatch_sensitivity`;
5. accept with probability ``min(1, exp(release + log prior ratio − ½σ²))`` (the proposals
   are symmetric, so there is no proposal ratio).

Convention: ``c`` bounds how far ``λ − ½σ_b²`` moves when one row of the *batch* is replaced,
and the noise multiplier z (the thesis' √τ) is the noise standard deviation over ``c``. The
sampling of the batch then amplifies the privacy of each release: it is a subsampled
Gaussian mechanism with rate ``q = b/n`` (sampling without replacement, replace-one), which
is how the step accounts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pymc_dp.kernels.clipping import clipped_count, clipped_scalars
from pymc_dp.kernels.penalty import _finite_or_reject, public_move_is_finite

__all__ = [
    "MinibatchInfo",
    "batch_estimate",
    "draw_batch",
    "fresh_batch_clipped_count",
    "minibatch_penalty_transition",
    "minibatch_sensitivity",
]


def draw_batch(rng: np.random.Generator, n_data: int, batch_size: int) -> np.ndarray:
    """``batch_size`` distinct row indices out of ``n_data``, uniformly without replacement.

    Costs O(batch_size) for small batches (NumPy's Generator uses a hash set, not a
    permutation of all n rows, when the batch is a small fraction of n).

    Examples
    --------
    >>> rows = draw_batch(np.random.default_rng(0), 10, 4)
    >>> len(set(rows.tolist())), bool(rows.min() >= 0), bool(rows.max() < 10)
    (4, True, True)
    """
    return rng.choice(n_data, size=batch_size, replace=False)


def fresh_batch_clipped_count(
    rng: np.random.Generator,
    loglik_rows: Callable[[np.ndarray, np.ndarray], np.ndarray],
    q_proposed: np.ndarray,
    q: np.ndarray,
    *,
    n_data: int,
    batch_size: int,
    bound: float,
) -> int:
    """The clip diagnostics' count at one move of a minibatch step, on a batch of its own.

    How many of ``batch_size`` log-likelihood ratio terms ``ℓ_j(θ') − ℓ_j(θ)`` exceed
    ``bound`` (or are not finite), on rows drawn afresh: never on the batch the step's
    release reads. That release is private only on average over its secret batch
    (amplification by subsampling); a count of the same batch would tell something about
    which rows it held, and their composition would need a joint analysis. A batch of its
    own shares no hidden randomness with the release that the release's guarantee depends
    on, so the two compose as any two mechanisms (docs/steps.md, "Clip diagnostics").
    One person is in this batch at most once: the count has sensitivity 1 (replace-one).
    Private: released only with noise (:mod:`pymc_dp.kernels.clip_diagnostics`).

    Examples
    --------
    >>> rows_loglik = lambda q, rows: q[0] * np.asarray(rows, dtype=float)
    >>> fresh_batch_clipped_count(np.random.default_rng(0), rows_loglik, np.array([1.0]),
    ...                           np.array([0.0]), n_data=10, batch_size=10, bound=4.5)
    5
    """
    rows = draw_batch(rng, n_data, batch_size)
    # (no warning whose presence would depend on the rows: inf − inf, overflow)
    with np.errstate(over="ignore", invalid="ignore"):
        differences = loglik_rows(q_proposed, rows) - loglik_rows(q, rows)
    return clipped_count(differences, bound)


def batch_estimate(clipped: np.ndarray, scale: float) -> tuple[float, float]:
    """``(s Σ r_j, s² (Σ r_j² − (Σ r_j)²/b))``: the batch estimate of the ratio and its variance.

    The variance is ``b`` times the (ddof = 0) sample variance of the scaled terms ``s r_j``:
    the variance of a sum of ``b`` draws, as the thesis and the DP Barker analysis use it.
    Rounding can make it a hair negative; it is floored at 0.

    Examples
    --------
    >>> batch_estimate(np.array([1.0, -1.0, 0.0, 0.0]), 2.0)
    (0.0, 8.0)
    """
    total = float(np.sum(clipped))
    # Products, not powers: an overflow gives inf (then a rejection), never OverflowError.
    variance = scale * scale * (float(np.dot(clipped, clipped)) - total * total / clipped.size)
    return scale * total, max(variance, 0.0)


def minibatch_sensitivity(
    distance: float, *, n_data: int, batch_size: int, tempering: float, clip_bound: float
) -> float:
    """``c = Δ_λ + Δ_σ``: replace-one sensitivity of ``λ − ½σ_b²`` (thesis Lemma 1, Thm 8).

    With ``s = nT/b`` and ``ℓ = L‖θ'−θ‖`` (every ``|r_j| ≤ ℓ`` by clipping):
    ``Δ_λ = 2 s ℓ`` and ``Δ_σ = s² |1 − 1/b| ℓ² + (2(b − 1)/b) s² ℓ²``.

    (Replacing one row changes ``Σ r² − R²/b`` by ``(1 − 1/b)(r² − r'²) − (2/b) R*(r − r')``
    with ``|R*| ≤ (b − 1)ℓ``, so half of it moves by at most
    ``s²((1 − 1/b)/2 + 2(b − 1)/b) ℓ²`` ≤ Δ_σ: Lemma 1's bound holds, with room to spare.)

    Examples
    --------
    >>> minibatch_sensitivity(0.1, n_data=1000, batch_size=100, tempering=0.1, clip_bound=2.0)
    0.5188
    """
    scale = n_data * tempering / batch_size
    ell = np.float64(clip_bound) * distance  # NumPy floats: a huge move overflows to inf
    b = float(batch_size)
    with np.errstate(over="ignore", invalid="ignore"):
        delta_lambda = 2.0 * scale * ell
        square = scale * scale * ell * ell
        delta_sigma = square * abs(1.0 - 1.0 / b) + (2.0 * (b - 1.0) / b) * square
        return float(delta_lambda + delta_sigma)


@dataclass(frozen=True)
class MinibatchInfo:
    accepted: bool
    log_accept: float  # computed from the release and public values only
    noise_sd: float  # public: z · c, c from public quantities


def minibatch_penalty_transition(
    rng: np.random.Generator,
    q: np.ndarray,
    logprior_q: float,
    q_proposed: np.ndarray,
    loglik_rows: Callable[[np.ndarray, np.ndarray], np.ndarray],
    logprior_fn: Callable[[np.ndarray], float],
    *,
    n_data: int,
    batch_size: int,
    tempering: float,
    clip_bound: float,
    noise_multiplier: float,
    count_clipped: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, float, MinibatchInfo]:
    """One minibatch DP penalty accept/reject of ``q_proposed``: exactly one noisy release.

    ``loglik_rows(θ, rows)`` returns the per-datum log-likelihoods of the given rows (two
    calls, O(b) each); ``logprior_fn`` the public log prior. Returns the new point, its log
    prior and the public info of the iteration. A proposal whose acceptance is not a finite
    number is rejected, before the batch is read when public values already say so
    (:mod:`pymc_dp.kernels.penalty`, "Huge moves are rejections, never errors").
    ``count_clipped``, if given, is called with the number of terms clipped at this move on
    a batch of its own (:func:`fresh_batch_clipped_count`; private: for the clip
    diagnostics, :mod:`pymc_dp.kernels.clip_diagnostics`).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        distance = float(np.linalg.norm(q_proposed - q))
    sensitivity = minibatch_sensitivity(
        distance, n_data=n_data, batch_size=batch_size, tempering=tempering, clip_bound=clip_bound
    )
    with np.errstate(over="ignore", invalid="ignore"):
        noise_sd = float(np.float64(noise_multiplier) * sensitivity)
    if not public_move_is_finite(q_proposed, noise_sd):
        return q, logprior_q, MinibatchInfo(False, -np.inf, noise_sd)
    rows = draw_batch(rng, n_data, batch_size)
    # inf − inf between diverged log-likelihoods (NaN: clipped to 0), or a difference that
    # overflows (clipped to ±bound): no warning, whose presence would depend on the batch
    with np.errstate(over="ignore", invalid="ignore"):
        differences = loglik_rows(q_proposed, rows) - loglik_rows(q, rows)
    ratios = clipped_scalars(differences, clip_bound * distance)
    if count_clipped is not None:
        count_clipped(fresh_batch_clipped_count(
            rng, loglik_rows, q_proposed, q, n_data=n_data, batch_size=batch_size,
            bound=clip_bound * distance,
        ))
    estimate, variance = batch_estimate(ratios, n_data * tempering / batch_size)
    release = estimate - 0.5 * variance + noise_sd * rng.standard_normal()  # the release
    logprior_proposed = logprior_fn(q_proposed)
    log_accept = _finite_or_reject(
        release + (logprior_proposed - logprior_q) - 0.5 * noise_sd * noise_sd
    )
    accepted = bool(np.log(rng.uniform()) < log_accept)
    info = MinibatchInfo(accepted, float(log_accept), float(noise_sd))
    if accepted:
        return q_proposed, logprior_proposed, info
    return q, logprior_q, info
