"""Clipping: the operation that gives a per-datum quantity a known sensitivity."""

from __future__ import annotations

import numpy as np

__all__ = ["clipped_sum"]


def clipped_sum(values: np.ndarray, bound: float) -> float:
    """``Σ_j clip_b(v_j)`` for scalars: each term clamped to ``[-bound, bound]``.

    Replacing one datum changes the sum by at most ``2 · bound``. Non-finite terms are
    clamped too (``±inf`` to ``±bound``; NaN, e.g. ``-inf - -inf``, to ``-bound``), so the
    bound holds whatever the model returns.

    Examples
    --------
    >>> clipped_sum(np.array([0.5, -3.0, np.inf, np.nan]), 1.0)
    -0.5
    """
    clamped = np.clip(values, -bound, bound)
    return float(np.sum(np.where(np.isnan(clamped), -bound, clamped)))
