"""The curvature release of the private warm-up, and the curvature a step may use.

:func:`hessian_columns` gives every datum's Hessian (in whitened coordinates, by central
differences of its gradients), :func:`noisy_matrix_sum` releases their clipped sum with
Gaussian noise, and :func:`hessian_curvature` turns a released curvature into a
positive-definite one, floored at the noise's level (post-processing). Used by the warm-up
(:mod:`pymc_dp.kernels.warmup`) and the surrogate likelihood (:mod:`pymc_dp.kernels.surrogate`);
the math is in ``docs/algorithms.md``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CONSISTENT_NOISE_LEVELS",
    "CurvaturePool",
    "RESOLVED_NOISE_LEVELS",
    "hessian_columns",
    "hessian_curvature",
    "matrix_row_norms",
    "noisy_matrix_sum",
]


def hessian_columns(
    grads_fn, q: np.ndarray, w: np.ndarray, *, step: float = 1e-3, directions=None,
    clip: float | None = None,
):
    """The per-datum Hessians in the coordinates whitened by ``w``, column by column.

    Returns a function of k giving the n×d array whose row j is column k of
    ``W ∇²ℓ_j(θ) Wᵀ``, by central differences of the per-datum gradients (``grads_fn``,
    private rows) along the public direction ``Wᵀ e_k``, ``step`` whitened units (about
    ``step`` posterior sds) either side. Each row depends on its own datum only, so a
    clip of the row bounds the sensitivity whatever the differences' accuracy. The
    columns are kept when they fit in memory (n·d² ≤ 2.5·10⁷), else recomputed on each
    call. ``directions`` (row k: the move of θ per whitened unit along coordinate k)
    defaults to W's rows, for gradients on θ itself.

    With ``clip``, each datum's whitened gradients ``W g_j`` are clipped to norm ``clip``
    before they are differenced: every column then has norm at most ``clip / step``, and
    a datum's matrix Frobenius norm at most ``√d · clip / step``, whatever its Hessian.
    This is for a likelihood with a kink in every row, differenced over a ``step`` of
    several posterior sds: most rows' Hessians are zero there, and the rows whose kink lies
    between the two points carry the curvature.
    """
    q = np.asarray(q, dtype=float)
    w = np.asarray(w, dtype=float)
    directions = w if directions is None else np.asarray(directions, dtype=float)
    d = w.shape[0]
    kept = {}

    def column(k: int) -> np.ndarray:
        if k in kept:
            return kept[k]
        v = step * directions[k]  # (row k of W: column k of Wᵀ)
        with np.errstate(over="ignore", invalid="ignore"):
            plus = np.asarray(grads_fn(q + v), dtype=float) @ w.T
            minus = np.asarray(grads_fn(q - v), dtype=float) @ w.T
            if clip is not None:
                plus, minus = _clipped(plus, clip), _clipped(minus, clip)
            block = (plus - minus) / (2.0 * step)
        if block.shape[0] * d * d <= 25_000_000:
            kept[k] = block
        return block

    return column


def _clipped(rows: np.ndarray, clip: float) -> np.ndarray:
    """Rows scaled to norm ≤ ``clip`` (a non-finite row stays non-finite: counted as zero
    by :func:`noisy_matrix_sum`)."""
    norms = np.sqrt(np.sum(rows**2, axis=1, keepdims=True))
    return rows * np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))


def matrix_row_norms(column, d: int) -> np.ndarray:
    """Frobenius norms of the per-datum matrices; ∞ for a row with a non-finite entry."""
    total = None
    for k in range(d):
        block = column(k)
        with np.errstate(over="ignore", invalid="ignore"):
            part = np.sum(block**2, axis=1)
        total = part if total is None else total + part
    return np.where(np.isfinite(total), np.sqrt(total), np.inf)


def noisy_matrix_sum(
    rng: np.random.Generator, column, d: int, *, clip: float, noise_multiplier: float,
    norms: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """One release: ``Σ_j clip_C(A_j) + N(0, (2 C z)²)`` on every one of the d² entries.

    The per-datum d×d matrices A_j come column by column (``column(k)``: row j is
    ``A_j[:, k]``, e.g. :func:`hessian_columns`); each is scaled to Frobenius norm ≤ C,
    and a matrix with a non-finite entry counts as zero. Replace-one moves the sum by at
    most 2C in Frobenius (ℓ2 over all entries) norm: Δ₂ = 2C. The noisy sum is then
    symmetrised (post-processing). Returns it and the sd of one off-diagonal entry's noise
    after symmetrising, ``2Cz/√2`` (public). ``norms`` (private, from
    :func:`matrix_row_norms`) saves a pass when the caller has them.
    """
    if norms is None:
        norms = matrix_row_norms(column, d)
    finite = np.isfinite(norms)
    scale = np.where(norms > clip, clip / np.where(finite & (norms > 0), norms, 1.0), 1.0)
    scale = np.where(finite, scale, 0.0)
    total = np.empty((d, d))
    released_sq = np.zeros(len(scale))  # the clipped rows' own squared norms
    for k in range(d):
        block = np.where(finite[:, None], column(k), 0.0) * scale[:, None]
        released_sq += np.sum(block**2, axis=1)
        total[:, k] = block.sum(axis=0)
    if not np.all(released_sq <= (clip * (1.0 + 1e-9)) ** 2):
        # Fail closed: norms that do not belong to these columns would void Δ₂ = 2C.
        raise ValueError("noisy_matrix_sum: a clipped matrix exceeds the clip bound; the "
                         "norms given do not match the columns.")
    total = total + noise_multiplier * 2.0 * clip * rng.standard_normal((d, d))
    return 0.5 * (total + total.T), float(noise_multiplier * 2.0 * clip / np.sqrt(2.0))


def hessian_curvature(
    neg_hessian: np.ndarray, prior_precision: np.ndarray, noise_sd: float, *,
    noise_floor: float = 1.0, floor: float = 1e-8, previous: np.ndarray | None = None,
) -> np.ndarray:
    """A positive-definite curvature from the released negative Hessian of the log-likelihood.

    The public prior's negative Hessian is added. A direction of negative curvature (the
    log posterior convex there: far from the mode of a scale parameter, or between two
    modes) gets its absolute value, so a Newton step along it still goes uphill with a
    sensible length; eigenvalues below ``noise_floor`` times the noise's own level (the
    spectral norm of the added symmetric noise, about 2s√d for an entry sd s) or below
    ``floor`` times the largest are raised to it. Post-processing only.

    With ``previous`` (the metric the release was made in: the identity, or
    ``diag(scale²)`` in the release coordinates of :func:`_group_scale`), for the metric
    an iteration passes on: along an eigenvector the release did not measure (its
    eigenvalue within :data:`RESOLVED_NOISE_LEVELS` noise levels) the curvature is at
    most ``previous``'s along it. The release says only that the curvature there is below
    the noise's level, so it may widen the metric, never narrow it. The noise's own
    ``|λ|`` had narrowed directions the data barely curve: a scale parameter started far
    above its mode (a county model's residual sd at PyMC's start, 800 posterior sds away)
    got a metric a thousand times too narrow from the first, noisiest, curvature release,
    and the releases after it, made in that metric, could no longer see its curvature.
    """
    h = np.asarray(neg_hessian, dtype=float) + np.asarray(prior_precision, dtype=float)
    vals, vecs = np.linalg.eigh(0.5 * (h + h.T))
    size = np.abs(vals)
    top = float(size.max())
    level = 2.0 * noise_sd * np.sqrt(len(vals))
    out = np.maximum(size, max(floor * top, noise_floor * level, 1e-12 * max(top, 1.0)))
    if previous is not None:
        hidden = size <= RESOLVED_NOISE_LEVELS * level
        before = np.einsum("ik,ij,jk->k", vecs, np.asarray(previous, dtype=float), vecs)
        out[hidden] = np.minimum(out[hidden], before[hidden])
    return (vecs * out) @ vecs.T


#: How many times the noise's own spectral norm (2s√d) an eigenvalue of a released
#: curvature must exceed for the release to have measured it (:func:`hessian_curvature`).
RESOLVED_NOISE_LEVELS = 2.0


#: How many times the spectral norm of their noise a curvature release may differ from the
#: mean of the pooled ones by and still join them (:class:`CurvaturePool`).
CONSISTENT_NOISE_LEVELS = 1.5


class CurvaturePool:
    """The curvature releases of the iterations near the mode, averaged (post-processing).

    Near the mode the curvature barely changes from one iterate to the next, while each
    release carries noise of its own: their precision-weighted mean is as noisy as one
    release with all their budget. Each release was made in its own whitened coordinates
    (``W_s``); it is kept on the chart's coordinates (``W_s⁻¹ H̃_s W_s⁻ᵀ``) and brought
    into the current ones by ``A = W W_s⁻¹``. Its noise there is at most its entry sd
    times ``‖A‖₂²`` in spectral norm, which is the sd it is weighted and counted with (a
    release from a metric unlike the current one counts for less). Without the pool, an
    iteration's steps saw one release's noise: on a model with intercepts and slopes per
    clinic (17 likelihood parameters) at ε = 4 its floor kept the steps along the
    intercept–slope ridge to a fraction of Newton's, and the iterates were still
    travelling when the warm-up ended. A release that differs from the pool's mean by more
    than :data:`CONSISTENT_NOISE_LEVELS` times what both noises explain was made where the
    curvature differs (a rare covariate's coefficient swinging, its rows' curvature with
    it), and the pool starts again from it: averaging across such releases had let that
    coefficient's steps overshoot by tens of posterior sds.
    """

    def __init__(self):
        self._chart = None
        self._entries: list[tuple[np.ndarray, np.ndarray, float]] = []
        self._before = (None, [])

    def pooled(self, chart, w: np.ndarray, hess_sum: np.ndarray, noise_sd: float):
        """Add this iteration's release (``hess_sum`` in the coordinates whitened by ``w``,
        entry noise sd ``noise_sd``) and return the pooled curvature in the same coordinates
        with its entry noise sd. A new ``chart`` (the coordinates the releases are made on)
        starts the pool afresh, and so does a release that disagrees with the mean of the
        earlier ones by more than :data:`CONSISTENT_NOISE_LEVELS` times what the noise of
        both explains (spectral norm of their difference against ``2s√d``): the curvature
        moved. The test is against the pool's mean, whose noise shrinks as it grows, so
        the drift it lets through shrinks with the noise the pool claims."""
        self._before = (self._chart, list(self._entries))
        if chart is not self._chart or not noise_sd > 0.0:
            self._chart, self._entries = chart, []
        w_inv = np.linalg.inv(w)
        entry = (w_inv @ hess_sum @ w_inv.T, w_inv, float(noise_sd))
        if not self._entries or not noise_sd > 0.0:
            self._entries = [entry]
            return hess_sum, noise_sd
        total, weight = np.zeros_like(hess_sum), 0.0
        for h, w_inv_s, sd in self._entries:
            sd_here = sd * float(np.linalg.norm(w @ w_inv_s, 2)) ** 2
            total += (w @ h @ w.T) / sd_here**2
            weight += 1.0 / sd_here**2
        earlier, earlier_sd = total / weight, weight**-0.5
        gap = float(np.linalg.norm(earlier - hess_sum, 2))
        level = 2.0 * float(np.hypot(earlier_sd, noise_sd)) * np.sqrt(len(hess_sum))
        if gap > CONSISTENT_NOISE_LEVELS * level:
            self._entries = [entry]
            return hess_sum, noise_sd
        self._entries.append(entry)
        total += hess_sum / noise_sd**2
        weight += 1.0 / noise_sd**2
        pooled = total / weight
        return 0.5 * (pooled + pooled.T), float(weight**-0.5)

    def undo(self) -> None:
        """Put the pool back as it was before the last :meth:`pooled` (that iterate's step
        was taken back: only its verdict is used, and its release neither joins the pool
        nor empties it)."""
        self._chart, self._entries = self._before
