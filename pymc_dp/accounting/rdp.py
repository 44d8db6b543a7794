"""RDP of subsampled mechanisms in the form of the thesis (Theorems 7 and 8), and RDP → (ε, δ).

Subsampling without replacement amplifies privacy (Wang, Balle & Kasiviswanathan 2019,
"WBK", Theorem 9): if a mechanism M run on a batch of ``b`` of the ``n`` rows is
``(j, ε'(j))``-RDP for every integer order ``2 ≤ j ≤ α`` under replace-one neighbouring
*batches*, then M run on a uniformly random batch drawn without replacement is
``(α, ε(α))``-RDP under replace-one neighbouring *datasets*, with ``q = b / n`` and

    ε(α) = 1/(α − 1) · ln(1 + q² C(α, 2) min{4(e^{ε'(2)} − 1), 2 e^{ε'(2)}}
                          + 2 Σ_{j=3}^{α} q^j C(α, j) e^{(j − 1) ε'(j)}).

(WBK's bound has ``min{2, (e^{ε'(∞)} − 1)^j}`` where this form has 2; dropping ε'(∞) only
loosens it.) The thesis applies it twice:

* Theorem 8 (minibatch DP penalty): the base mechanism is a Gaussian release whose noise
  standard deviation is ``√τ`` times the sensitivity, so ``ε'(j) = j / (2τ)``;
  :func:`thesis_subsampled_gaussian_rdp`. The library accounts the minibatch penalty with
  dp-accounting's RDP accountant instead (its Theorem-27 bound of WBK is tighter); this
  function is the independent check it is tested against.
* Theorem 7 (DP Barker): see :mod:`pymc_dp.accounting.barker`.

Conversion to (ε, δ) (thesis Theorem 1, Mironov 2017): an ``(α, ρ)``-RDP mechanism is
``(ρ + ln(1/δ)/(α − 1), δ)``-DP for every δ in (0, 1); :func:`rdp_to_epsilon` minimises it
over the orders given, :func:`rdp_to_delta` is its inverse ``δ = min_α e^{(α−1)(ρ_α − ε)}``.

Everything here is a closed-form computation on public parameters; nothing reads data.
"""

from __future__ import annotations

import math

from collections.abc import Callable, Sequence

import numpy as np

from scipy.special import gammaln, logsumexp

from pymc_dp.validation import check_delta, check_fraction, check_int, check_positive

__all__ = [
    "rdp_to_delta",
    "rdp_to_epsilon",
    "thesis_subsampled_gaussian_rdp",
    "wbk_subsampled_rdp",
]


def _check_order(alpha) -> int:
    if isinstance(alpha, float) and alpha.is_integer():
        alpha = int(alpha)
    return check_int(alpha, "the RDP order", minimum=2)


def _check_rate(q) -> float:
    return check_fraction(q, "the sampling rate", include_one=True)


def wbk_subsampled_rdp(alpha: int, q: float, base_rdp: Callable[[int], float]) -> float:
    """RDP at integer order ``alpha`` of a mechanism run on a batch sampled without replacement.

    Parameters
    ----------
    alpha : int
        The order, ≥ 2.
    q : float
        Sampling rate ``b / n`` in (0, 1].
    base_rdp : callable
        ``j ↦ ε'(j)``: the RDP of the mechanism on a batch, under replace-one neighbouring
        batches, for the integer orders ``2 ≤ j ≤ alpha``.

    Returns
    -------
    float
        ``ε(α)`` of the module docstring (computed in log space; ``inf`` if it overflows).

    Examples
    --------
    >>> round(wbk_subsampled_rdp(2, 1.0, lambda j: j / 2.0), 4)  # q = 1: the bound is loose
    1.862
    """
    alpha = _check_order(alpha)
    q = _check_rate(q)
    log_q = math.log(q)
    e2 = float(base_rdp(2))
    if not e2 >= 0:
        raise ValueError(f"base RDP at order 2 must be >= 0, got {e2!r}")
    # min{4(e^{ε'(2)} − 1), 2 e^{ε'(2)}} in log space
    log_min = min(math.log(4.0) + _log_expm1(e2), math.log(2.0) + e2)
    terms = [0.0, 2 * log_q + _log_comb(alpha, 2) + log_min]
    for j in range(3, alpha + 1):
        ej = float(base_rdp(j))
        terms.append(math.log(2.0) + j * log_q + _log_comb(alpha, j) + (j - 1) * ej)
    return float(logsumexp(terms)) / (alpha - 1)


def thesis_subsampled_gaussian_rdp(alpha: int, q: float, noise_multiplier: float) -> float:
    """Thesis Theorem 8: per-release RDP of a subsampled Gaussian mechanism (without replacement).

    The release adds noise of standard deviation ``z · Δ`` (``z`` the noise multiplier,
    ``z² = τ`` in the thesis) to a statistic of sensitivity Δ computed on a batch of rate
    ``q``; the base RDP is ``ε'(j) = j / (2 z²)``.

    Examples
    --------
    >>> rdp = thesis_subsampled_gaussian_rdp(8, 0.01, 2.0)
    >>> 0 < rdp < 8 / (2 * 2.0**2)   # amplified: far below the unsampled α/(2z²)
    True
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    return wbk_subsampled_rdp(alpha, q, lambda j: j / 2.0 / z / z)


def rdp_to_epsilon(orders: Sequence[int], rdp: Sequence[float], delta: float) -> float:
    """``min_α ρ_α + ln(1/δ)/(α − 1)`` (thesis Theorem 1).

    Examples
    --------
    >>> round(rdp_to_epsilon([2, 3], [0.5, 1.0], 1e-5), 4)
    6.7565
    """
    delta = check_delta(delta)
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if orders.shape != rdp.shape or orders.size == 0 or np.any(orders <= 1):
        raise ValueError("orders and rdp must be non-empty arrays of equal length, orders > 1")
    return float(np.min(rdp + math.log(1.0 / delta) / (orders - 1.0)))


def rdp_to_delta(orders: Sequence[int], rdp: Sequence[float], epsilon: float) -> float:
    """``min(1, min_α exp((α − 1)(ρ_α − ε)))``: the δ at ``epsilon`` by the same conversion.

    Examples
    --------
    >>> rdp_to_delta([2, 3], [0.5, 1.0], 10.0) < 1e-5
    True
    """
    epsilon = float(epsilon)
    if not (epsilon >= 0 and math.isfinite(epsilon)):  # ε = 0 is a question here, not a budget
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    with np.errstate(invalid="ignore"):
        log_delta = np.min((orders - 1.0) * (rdp - epsilon))
    return float(min(1.0, math.exp(min(log_delta, 0.0))))


def _log_comb(n: int, k: int) -> float:
    return float(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


def _log_expm1(x: float) -> float:
    """ln(e^x − 1) for x ≥ 0 (−inf at 0)."""
    if x == 0:
        return -math.inf
    return x + math.log(-math.expm1(-x)) if x > 1 else math.log(math.expm1(x))
