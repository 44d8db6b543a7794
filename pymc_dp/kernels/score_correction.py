"""A clipped score that is unbiased under the model: the warm-up's gradient release without
clipping bias.

Clipping each person's gradient g_j to norm C biases the sum Σ clip_C(g_j) wherever the
gradients are skewed: a normal scale's per-datum gradient (r/σ)² − 1 is bounded below and
long-tailed above, a clip cuts one side only, and the zero of the clipped sum — the private
mode — sits several posterior sds below σ̂. At the true θ the model says E[g_j] = 0 (the
score has mean zero), so the clip's bias for person j is

    b_j(θ) = E[clip_C(g_j) − g_j],

an expectation over person j's outcome given their covariates, which the model can compute
by simulation: with replicate gradients s_jk (person j's gradient at outcomes drawn from the
model at θ, :class:`pymc_dp.model.replicates.Replicates`),

    b̂_j = (1/K) Σ_k (clip_C(s_jk) − s_jk).

Each term is zero unless that replicate was clipped, so this estimate is far less noisy than
the mean of clip_C(s_jk) itself (tests/kernels/test_score_correction.py: noise-free, the
corrected sum's root for a normal scale lies within 0.4 posterior sds of the maximum
likelihood estimate at a clip at the 0.98 or 0.99 quantile, the plain sum's more than one sd
below it). The release is

    Σ_j clip_C(clip_C(g_j) − b̂_j) + N(0, (2Cz)² I).

The outer clip keeps every person's term within norm C, so the sensitivity stays 2C under
replace-one: b̂_j reads only θ (public), uniforms drawn independently of the data, and
person j's own record. The estimating equation Σ_j (clip_C(g_j) − b_j) = 0 is unbiased
at the true θ (it is Fisher-consistent), whatever C, as long as the outer clip does not
bind; where the clip is low it binds, and cuts the correction (at the 0.9 quantile a
normal scale stays several sds low). A person whose ‖b̂_j‖ exceeds :data:`MAX_CORRECTION`
times C keeps the plain clipped gradient (see :func:`debiased_rows`).
"""

from __future__ import annotations

import numpy as np

from pymc_dp.kernels.clipping import clipped_rows

__all__ = ["MAX_CORRECTION", "debiased_rows"]

#: A person's estimated clipping bias is subtracted only where its norm is at most this
#: share of the clip bound (else their plain clipped gradient is released).
MAX_CORRECTION = 0.25


def debiased_rows(grads: np.ndarray, replicates, bound: float) -> np.ndarray:
    """Each person's clipped gradient less its estimated clipping bias, clipped again.

    Row j is ``clip_C(clip_C(g_j) − b̂_j)`` with ``b̂_j = mean_k (clip_C(s_jk) − s_jk)``
    (``clip_C(g_j)`` where ``‖b̂_j‖ > MAX_CORRECTION · C``) over the replicates (arrays of the same shape as ``grads``, the gradients at simulated
    outcomes, in the same coordinates). Every row has norm at most ``bound`` (a non-finite
    one becomes zero), so a sum of them has sensitivity 2·``bound`` under replace-one
    exactly like the plain clipped sum: row j must read person j's record only, which
    :class:`~pymc_dp.model.replicates.Replicates` proves of the simulation.

    A replicate row with a non-finite entry (an outcome at the edge of the support) adds
    nothing to its person's estimate.

    Examples
    --------
    >>> g = np.array([[3.0], [0.5], [0.5]])
    >>> s = [np.array([[1.2], [-1.4], [5.0]]), np.array([[0.0], [0.0], [0.0]])]
    >>> debiased_rows(g, s, 1.0)  # b̂ = −0.1, +0.2, −2 (too large: no correction)
    array([[1. ],
           [0.3],
           [0.5]])
    >>> debiased_rows(g, [], 1.0)  # no replicates: the plain clipped rows
    array([[1. ],
           [0.5],
           [0.5]])
    """
    clipped = clipped_rows(grads, bound)
    if not len(replicates):
        return clipped
    bias = np.zeros_like(clipped)
    for rows in replicates:
        rows = np.asarray(rows, dtype=float)
        finite = np.all(np.isfinite(rows), axis=1)[:, None]
        # (the difference is taken on the finite rows only: clip(s) − s of an overflowing
        # row would be inf − inf)
        with np.errstate(over="ignore", invalid="ignore"):
            bias += np.where(finite, clipped_rows(rows, bound) - np.where(finite, rows, 0.0), 0.0)
    bias /= len(replicates)
    # A person whose estimated bias is large (the model says their gradient is mostly far
    # beyond the clip: a rare category's few rows) keeps the plain clipped gradient: the
    # outer clip would cut most of their correction, and cut it by how their outcome fell
    # (on a logistic regression with a 1.5 % condition, that moved its coefficient by tens
    # of posterior sds). Decided on b̂_j, which reads person j's covariates, not outcome.
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.sqrt(np.sum(bias**2, axis=1)) <= MAX_CORRECTION * bound
    return clipped_rows(clipped - np.where(small[:, None], bias, 0.0), bound)
