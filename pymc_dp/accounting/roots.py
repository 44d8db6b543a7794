"""The root search every calibration shares: a monotone root, returned on its safe side.

Each inverse of an accountant (:func:`~pymc_dp.accounting.gaussian.gaussian_epsilon`,
:func:`~pymc_dp.accounting.gaussian.max_gaussian_mu`,
:func:`~pymc_dp.accounting.subsampling.subsampled_noise_multiplier`) solves
``excess(x) = 0`` for an ``excess`` (cost minus budget) that is monotone in ``x``, and must
return a point where ``excess(x) ≤ 0``: the cost does not exceed the budget. A root finder
only promises a point *near* the root, on either side, so :func:`safe_root` steps from it
towards the safe side until the cost is within the budget. Each caller brackets its own root
(how to find a bracket depends on the problem) and chooses the tolerances.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scipy.optimize import brentq

__all__ = ["safe_root"]

#: Steps towards the safe side before giving up (each the last one times ``growth``).
_MAX_SAFE_STEPS = 100_000

#: brentq's default relative tolerance (4 ulp at 1), named because callers pass it explicitly.
RTOL = 4 * np.finfo(float).eps


def safe_root(
    excess: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    side: int,
    xtol: float,
    rtol: float = RTOL,
    maxiter: int = 100,
    margin: float = 0.0,
    step: float | None = None,
    growth: float = 2.0,
) -> float:
    """A root of the monotone ``excess`` in ``[lo, hi]``, moved until ``excess(x) ≤ 0``.

    Parameters
    ----------
    excess : callable
        ``x ↦ cost(x) − budget`` (any monotone transform of it), of opposite signs at ``lo``
        and ``hi``.
    lo, hi : float
        The bracket.
    side : {+1, −1}
        The direction of the safe side: +1 if ``excess`` falls as ``x`` grows (more noise,
        or a larger ε reported, is safe), −1 if it rises (a smaller μ budget is safe).
    xtol, rtol, maxiter
        Tolerances of :func:`scipy.optimize.brentq`.
    margin : float, optional
        Moved towards the safe side before the first check (e.g. twice ``xtol``, so that
        the check passes at once).
    step : float, optional
        The first step towards the safe side while ``excess(x) > 0``; by default
        ``max(|x|·1e-15, 1e-300)``, a few ulp of ``x``.
    growth : float, optional
        Each further step is ``growth`` times the last (1 keeps it constant).

    Returns
    -------
    float
        ``x`` with ``excess(x) ≤ 0``, within the root's tolerance plus ``margin`` plus the
        steps taken.

    Examples
    --------
    >>> x = safe_root(lambda x: 2.0 - x * x, 0.0, 2.0, side=+1, xtol=1e-15)
    >>> x >= 2.0**0.5 and 2.0 - x * x <= 0
    True
    """
    if side not in (1, -1) or isinstance(side, bool):
        raise ValueError(f"side must be +1 or -1, got {side!r}")
    if not (growth >= 1.0 and margin >= 0.0 and (step is None or step > 0.0)):
        raise ValueError("safe_root needs growth >= 1, margin >= 0 and step > 0")
    x = brentq(excess, lo, hi, xtol=xtol, rtol=rtol, maxiter=maxiter) + side * margin
    if step is None:
        step = max(abs(x) * 1e-15, 1e-300)
    # defensive: brentq's tolerance leaves either side of the root. A NaN cost is not safe.
    for _ in range(_MAX_SAFE_STEPS):
        if excess(x) <= 0.0:
            return x
        x += side * step
        step *= growth
    raise ArithmeticError("safe_root: no point within budget near the root (cost NaN or rising)")
