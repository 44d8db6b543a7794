"""The sparse vector test of ABCDP (Park, Vinaroz & Jitkrittum, Algorithm 1, Thm 4.1).

Small functions of arrays and a :class:`numpy.random.Generator`; nothing here knows PyMC.
Notation follows ``docs/algorithms.md`` ("ABCDP"):

* ``sensitivity`` Δ_ρ: the replace-one sensitivity of the distance ρ(Y*, ·);
* ``c``: the number of acceptances the run may output (the sparse vector's "c");
* ``scale`` b: the Laplace scale of the threshold noise; every distance gets ``Lap(2b)``;
* ``threshold`` ε_abc and the noisy threshold ε̂ = ε_abc + Lap(b), redrawn after every
  acceptance when ``resample`` is true.

Thm 4.1: a run that stops after ``c`` acceptances is ε-DP with

    ε = (c + 1) Δ_ρ / b    (resample=False)
    ε = 2 c Δ_ρ / b        (resample=True)

whatever the number of distances tested (the rejections are free). A run that stops early
(fewer than ``c`` acceptances, e.g. when the prior draws run out) is covered by the same ε: its
output is a prefix of the indicator sequence of a run that could have continued.

The distances are *not* released: only the accept/reject indicators are. The functions here
never return a noisy distance or a noisy threshold to the caller that the caller should publish:
:func:`svt_scan` returns the current noisy threshold only so that the caller can continue the
same run on the next batch; it is private state and must stay inside the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_dp.validation import check_epsilon, check_int, check_positive

__all__ = [
    "SVTScan",
    "draw_noisy_threshold",
    "flip_probability",
    "laplace_scale",
    "svt_epsilon",
    "svt_run",
    "svt_scan",
]


def _check_c(c) -> int:
    return check_int(c, "c (the number of accepted samples)")


def laplace_scale(epsilon: float, sensitivity: float, c: int, resample: bool) -> float:
    """Threshold-noise Laplace scale b for an ε-DP run with at most ``c`` acceptances (Thm 4.1).

    ``b = (c + 1) Δ / ε`` when ``resample`` is false and ``b = 2 c Δ / ε`` when it is true.
    The distance noise then has scale ``2 b``.

    Examples
    --------
    >>> laplace_scale(1.0, 2 / 5000, c=10, resample=False)  # MMD at N = 5000: 11 · 0.0004
    0.0044
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    c = _check_c(c)
    factor = 2 * c if resample else c + 1
    # A finite scale or a clear error: Δ/ε may overflow the floats.
    return check_positive(factor * sensitivity / epsilon, "the Laplace scale of the threshold noise")


def svt_epsilon(scale: float, sensitivity: float, c: int, resample: bool) -> float:
    """ε of a run with threshold scale ``b`` and at most ``c`` acceptances (Thm 4.1, eq. 8)."""
    scale = check_positive(scale, "scale")
    sensitivity = check_positive(sensitivity, "sensitivity")
    c = _check_c(c)
    factor = 2 * c if resample else c + 1
    return factor * sensitivity / scale


def draw_noisy_threshold(threshold: float, scale: float, rng: np.random.Generator) -> float:
    """ε̂ = ε_abc + Lap(b) (eq. 6)."""
    return float(threshold + rng.laplace(0.0, scale))


@dataclass(frozen=True)
class SVTScan:
    """What one pass of the sparse vector test over a batch of distances produced.

    ``accepted``: indices (into the batch, increasing) of the accepted distances;
    ``n_used``: how many distances of the batch were tested, i.e. the index after the last
    accepted one when the pass stopped at ``max_accept`` acceptances, else the batch length;
    ``noisy_threshold``: the noisy threshold to continue the run with (private state, never
    released).
    """

    accepted: np.ndarray
    n_used: int
    noisy_threshold: float


def svt_scan(
    distances,
    *,
    threshold: float,
    noisy_threshold: float,
    scale: float,
    max_accept: int,
    resample: bool,
    rng: np.random.Generator,
    query_noise=None,
) -> SVTScan:
    """Test distances in order against the noisy threshold, stopping after ``max_accept`` accepts.

    Lines 4–16 of Algorithm 1 on one batch: distance ``t`` is accepted iff
    ``distances[t] + Lap(2b) <= noisy_threshold``; with ``resample`` the threshold is redrawn
    from ``rng`` as ``threshold + Lap(b)`` after every acceptance.

    ``query_noise``: standard Laplace draws (scale 1), one per distance, to use as the distance
    noise ``2b · query_noise[t]``; by default they are drawn from ``rng``. Each distance must be
    tested with its own fresh draw exactly once; draws of distances after the stopping point
    are never looked at, so a caller may keep them for those distances' (first) test later.
    Passing the noise lets a caller attach one draw to each prior draw, which makes a run
    independent of how its stream is cut into batches.
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 1:
        raise ValueError(f"distances must be a 1-d array, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("distances must be finite")
    scale = check_positive(scale, "scale")
    if isinstance(max_accept, bool) or not isinstance(max_accept, int | np.integer):
        raise TypeError(f"max_accept must be an int, got {max_accept!r}")
    max_accept = int(max_accept)
    current = float(noisy_threshold)
    if max_accept <= 0 or d.size == 0:
        return SVTScan(np.zeros(0, dtype=np.int64), 0, current)

    if query_noise is None:
        query_noise = rng.laplace(0.0, 1.0, size=d.size)
    else:
        query_noise = np.asarray(query_noise, dtype=np.float64)
        if query_noise.shape != d.shape:
            raise ValueError(
                f"query_noise has shape {query_noise.shape}, the distances {d.shape}"
            )
    noisy = d + (2.0 * scale) * query_noise
    accepted: list[int] = []
    start = 0
    while start < d.size and len(accepted) < max_accept:
        hits = np.flatnonzero(noisy[start:] <= current)
        if not resample:
            take = hits[: max_accept - len(accepted)] + start
            accepted.extend(int(i) for i in take)
            break
        if hits.size == 0:
            break
        t = start + int(hits[0])
        accepted.append(t)
        current = draw_noisy_threshold(threshold, scale, rng)
        start = t + 1
    if len(accepted) >= max_accept:
        n_used = accepted[-1] + 1
    else:
        n_used = int(d.size)
    return SVTScan(np.asarray(accepted, dtype=np.int64), n_used, current)


def svt_run(
    distances,
    *,
    threshold: float,
    scale: float,
    c: int,
    resample: bool,
    rng: np.random.Generator,
) -> SVTScan:
    """Algorithm 1 on a fixed sequence of distances: draw ε̂, then :func:`svt_scan` up to ``c``.

    The output that may be released is ``accepted`` together with ``n_used`` (the indicator
    sequence τ̃_1..τ̃_{n_used}); it is ε-DP with
    ε = :func:`svt_epsilon` ``(scale, Δ, c, resample)``.
    """
    c = _check_c(c)
    scale = check_positive(scale, "scale")
    start = draw_noisy_threshold(threshold, scale, rng)
    return svt_scan(
        distances,
        threshold=threshold,
        noisy_threshold=start,
        scale=scale,
        max_accept=c,
        resample=resample,
        rng=rng,
    )


def flip_probability(distance, threshold: float, scale: float) -> np.ndarray:
    """Probability that ABCDP's decision differs from exact rejection ABC's (Prop 4.2).

    ``G_b(a) = (4 exp(−a / (2b)) − exp(−a / b)) / 6`` with ``a = |ρ − ε_abc|``, for the threshold
    scale ``b`` of :func:`laplace_scale` (the distance noise has scale ``2b``).

    **Analysis tool only.** ``distance`` is the exact distance to the private data, so the result
    is not differentially private. Use it on synthetic data, or on distances to a public stand-in
    for the data, to plan ``c`` and ε before a private run (e.g. the mean flip probability over
    prior-predictive distances for a candidate ``laplace_scale(eps, Δ, c, resample)``); never
    publish it for the private data.

    Examples
    --------
    >>> b = laplace_scale(1.0, 2 / 5000, c=10, resample=False)
    >>> flip_probability([0.1, 0.11, 0.2], threshold=0.1, scale=b).round(4)
    array([0.5   , 0.1968, 0.    ])
    """
    scale = check_positive(scale, "scale")
    a = np.abs(np.asarray(distance, dtype=np.float64) - float(threshold))
    return (4.0 * np.exp(-a / (2.0 * scale)) - np.exp(-a / scale)) / 6.0
