"""Clipping: the operation that gives a per-datum quantity a known sensitivity."""

from __future__ import annotations

import numpy as np

__all__ = [
    "clipped_count", "clipped_row_count", "clipped_rows", "clipped_scalars", "clipped_sum",
    "clipped_vector_sum",
]


def clipped_sum(values: np.ndarray, bound: float) -> float:
    """``Σ_j clip_b(v_j)`` for scalars: each term clamped to ``[-bound, bound]``.

    Replacing one datum changes the sum by at most ``2 · bound``. Non-finite terms are
    clamped too (``±inf`` to ``±bound``; NaN, e.g. ``-inf - -inf``, to 0: no evidence either
    way, and symmetric in the direction of the move), so the bound holds whatever the model
    returns.

    Examples
    --------
    >>> clipped_sum(np.array([0.5, -3.0, np.inf, np.nan]), 1.0)
    0.5
    """
    return float(np.sum(clipped_scalars(values, bound)))


def clipped_scalars(values: np.ndarray, bound: float) -> np.ndarray:
    """Each scalar ``clip_b(v_j)``, as an array: the terms whose sum :func:`clipped_sum` gives.

    Same rule as :func:`clipped_sum` (``±inf`` to ``±bound``, NaN to 0), for
    mechanisms that release more than the sum of the clipped terms (the minibatch penalty
    and DP Barker use their sample variance too). Every term lies in ``[-bound, bound]``.

    Examples
    --------
    >>> clipped_scalars(np.array([0.5, -3.0, np.inf, np.nan]), 1.0)
    array([ 0.5, -1. ,  1. ,  0. ])
    """
    clamped = np.clip(np.asarray(values, dtype=float), -bound, bound)
    return np.where(np.isnan(clamped), 0.0, clamped)


def clipped_vector_sum(values: np.ndarray, bound: float) -> np.ndarray:
    """``Σ_j clip_b(v_j)`` for the rows ``v_j`` of ``values`` (shape ``(n, d)``), in ℓ2 norm:
    the sum of :func:`clipped_rows`.

    Replacing one datum changes the sum by at most ``2 · bound`` in ℓ2 norm. This is the
    reference of the compiled per-datum gradient clipping of
    :meth:`pymc_dp.model.PrivateModel.clipped_gradient`.

    Examples
    --------
    >>> clipped_vector_sum(np.array([[3.0, 4.0], [0.0, 0.0], [np.nan, 1.0], [0.3, 0.4]]), 1.0)
    array([0.9, 1.2])
    """
    return clipped_rows(values, bound).sum(axis=0)


def clipped_rows(values: np.ndarray, bound: float) -> np.ndarray:
    """Each row ``v_j`` of ``values`` (shape ``(n, d)``) scaled by ``min(1, bound / ‖v_j‖₂)``.

    Every row then has norm at most ``bound``. A zero row stays zero (no division by zero),
    and a row with a non-finite entry, or whose squared norm overflows, becomes zero: any
    vector of norm ≤ ``bound`` keeps the sensitivity, and zero says nothing about the datum.

    Examples
    --------
    >>> clipped_rows(np.array([[3.0, 4.0], [np.inf, 1.0], [0.3, 0.4]]), 1.0)
    array([[0.6, 0.8],
           [0. , 0. ],
           [0.3, 0.4]])
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be a 2-d array (n, d), got shape {values.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        squared = np.sum(values * values, axis=1)
        norms = np.sqrt(squared)
        finite = np.isfinite(squared)
        scale = np.where(norms > bound, bound / np.where(norms > 0, norms, 1.0), 1.0)
        return np.where(finite[:, None], values * np.where(finite, scale, 0.0)[:, None], 0.0)


def clipped_count(values: np.ndarray, bound: float) -> int:
    """How many scalars :func:`clipped_scalars` clamps: ``|v_j| > bound`` or not finite.

    Non-finite terms count as clipped (they are clamped: ``±inf`` to ``±bound``, NaN to 0).
    The reference of the compiled count of the clip diagnostics
    (:mod:`pymc_dp.kernels.clip_diagnostics`). Private: released only with noise.

    Examples
    --------
    >>> clipped_count(np.array([0.5, -3.0, np.inf, np.nan, 1.0]), 1.0)
    3
    """
    with np.errstate(invalid="ignore"):
        return int(np.count_nonzero(~(np.abs(np.asarray(values, dtype=float)) <= bound)))


def clipped_row_count(values: np.ndarray, bound: float) -> int:
    """How many rows :func:`clipped_vector_sum` scales down or zeroes: ``‖v_j‖₂ > bound``,
    or a non-finite row (or one whose squared norm overflows).

    Examples
    --------
    >>> clipped_row_count(np.array([[3.0, 4.0], [0.0, 0.0], [np.nan, 1.0], [0.3, 0.4]]), 1.0)
    2
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be a 2-d array (n, d), got shape {values.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.sum(values * values, axis=1))
        return int(np.count_nonzero(~(norms <= bound)))
