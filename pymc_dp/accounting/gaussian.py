"""Exact (ε, δ) accounting of compositions of Gaussian mechanisms.

A release of ``f(X) + N(0, σ²)``, ``f`` of ℓ2-sensitivity Δ, has the Gaussian privacy-loss
distribution (PLD) ``N(μ, 2μ)`` with ``μ = Δ² / (2σ²) = 1 / (2 z²)`` (``z = σ / Δ`` the noise
multiplier). An adaptive composition of such releases has the PLD ``N(μ_tot, 2μ_tot)`` with
``μ_tot = Σ μ_i`` and is *exactly* ``(ε, δ(ε))``-DP with

    δ(ε) = Φ(−ε/s + s/2) − e^ε Φ(−ε/s − s/2),      s = √(2 μ_tot)

(Sommer, Meiser & Mohammadi 2019; thesis Theorems 4, 6 and 12; equivalently ``s``-GDP,
Dong, Roth & Su). This module evaluates that curve stably and inverts it:

* :func:`gaussian_delta` – δ(ε) for a summed μ;
* :func:`gaussian_epsilon` – the smallest ε with δ(ε) ≤ δ;
* :func:`max_gaussian_mu` – the largest summed μ a budget (ε, δ) allows;
* :func:`max_iterations` – the thesis' Algorithm 2 (iterations a budget allows);
* :func:`noise_multiplier_for` – calibrate z for a number of releases (through
  :func:`noise_multiplier_for_mu`, z for a μ budget);
* :func:`gaussian_mu` – the μ of releases at a noise multiplier, without overflow;
* :func:`zcdp_epsilon` – the looser zCDP conversion, kept for comparison only.

Rounding policy: every inverse is rounded to the side that never under-reports the privacy
cost (:func:`~pymc_dp.accounting.roots.safe_root`). Inverses solve ``δ(ε, μ) = δ·(1 − m)``
for a tiny relative margin ``m`` (1e-10 for
:func:`gaussian_epsilon`, 1e-9 for :func:`max_gaussian_mu`) so that floating-point error in
δ itself cannot tip a result over the budget; the margins move ε by ~1e-10 relative.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from scipy.special import erfcx, log_ndtr, ndtr

from pymc_dp.accounting.roots import safe_root
from pymc_dp.validation import (
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_releases,
)

__all__ = [
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "max_gaussian_mu",
    "max_iterations",
    "noise_multiplier_for",
    "noise_multiplier_for_mu",
    "zcdp_epsilon",
]

_SQRT2 = math.sqrt(2.0)
# Relative safety margins on δ used by the inverses (see the module docstring). The margin
# of max_gaussian_mu is the larger one so that gaussian_epsilon(max_gaussian_mu(ε, δ), δ) ≤ ε.
_MARGIN_EPSILON = 1e-10
_MARGIN_MU = 1e-9
# The smallest μ budget returned (far below what check_epsilon's floor on ε allows): a
# calibrated z = √(k / (2μ)) must stay well inside the floats.
_MU_MIN = 1e-200
# Above this value of a = −ε/s + s/2 the direct formula is used (δ is then close to 1 and
# erfcx(−a/√2) would overflow for large a).
_A_SWITCH = 5.0


def gaussian_mu(noise_multiplier, count=1) -> float:
    """μ = count / (2 z²) of ``count`` Gaussian releases at noise multiplier ``z``.

    Computed without Python's ``OverflowError``: a multiplier so small that μ exceeds the
    floats gives ``inf`` (no budget pays for it), one so large that μ underflows gives 0
    (its ε is then 0 for any δ a float can hold).

    Examples
    --------
    >>> gaussian_mu(2.0, 4)
    0.5
    >>> gaussian_mu(1e-200)
    inf
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    count = check_int(count, "count", minimum=0)
    # z * z, never z**2: a float power overflows with an exception, a product with inf.
    square = z * z
    return count / (2.0 * square) if square > 0 else math.inf


def _check_mu(mu, name: str = "mu") -> float:
    if isinstance(mu, bool) or not isinstance(mu, numbers.Real):
        raise ValueError(f"{name} must be a real number >= 0, got {mu!r}")
    value = float(mu)
    if not (value >= 0 and math.isfinite(value)):  # False for NaN
        raise ValueError(f"{name} must be a finite number >= 0, got {mu!r}")
    return value


def _log_delta(eps, mu) -> np.ndarray:
    """ln δ(ε) of the Gaussian PLD N(μ, 2μ), vectorised; inputs are assumed validated.

    With ``a = −ε/s + s/2`` and ``b = a − s`` one has ``ε − b²/2 = −a²/2``, so, writing
    ``Φ(x) = ½ erfcx(−x/√2) e^{−x²/2}``,

        δ = ½ e^{−a²/2} [erfcx(−a/√2) − erfcx(−b/√2)],

    a difference of two O(1) numbers times an exact exponential: no under- or overflow for
    large ε. For ``a > 5`` (δ close to 1) the direct formula is used instead.
    """
    eps, mu = np.broadcast_arrays(np.asarray(eps, dtype=float), np.asarray(mu, dtype=float))
    out = np.full(eps.shape, -np.inf)
    with np.errstate(all="ignore"):
        out[np.isposinf(mu)] = 0.0  # no noise at all: δ = 1
        live = (mu > 0) & np.isfinite(mu) & np.isfinite(eps)
        if np.any(live):
            e = eps[live]
            s = np.sqrt(2.0 * mu[live])
            a = -e / s + s / 2.0
            b = -e / s - s / 2.0
            res = np.empty_like(a)
            near = a <= _A_SWITCH
            an, bn = a[near], b[near]
            diff = erfcx(-an / _SQRT2) - erfcx(-bn / _SQRT2)
            res[near] = np.where(diff > 0, -0.5 * an * an + np.log(0.5 * diff), -np.inf)
            far = ~near
            if np.any(far):
                direct = ndtr(a[far]) - np.exp(e[far] + log_ndtr(b[far]))
                res[far] = np.log(np.maximum(direct, 0.0))
            out[live] = res
    return out


def gaussian_delta(eps, mu):
    """δ(ε) of a composition of Gaussian mechanisms with summed ``mu``.

    ``δ(ε) = Φ(−ε/s + s/2) − e^ε Φ(−ε/s − s/2)`` with ``s = √(2 μ)``: the exact (tight)
    privacy profile of the Gaussian privacy-loss distribution ``N(μ, 2μ)``. Evaluated in log
    space, so it stays finite, non-negative and monotone for large ε where the naive formula
    under- or overflows.

    Parameters
    ----------
    eps : float or array_like
        ε ≥ 0 (``inf`` gives δ = 0).
    mu : float or array_like
        Summed μ ≥ 0 of all Gaussian releases (μ = 1/(2 z²) per release); ``mu = 0`` gives
        δ = 0, ``mu = inf`` gives δ = 1. Broadcast against ``eps``.

    Returns
    -------
    float or numpy.ndarray
        δ(ε); a float when both inputs are scalars.

    Raises
    ------
    ValueError
        If any ``eps`` or ``mu`` is NaN or negative.

    Examples
    --------
    >>> round(gaussian_delta(1.0, 0.5), 6)
    0.126937
    >>> gaussian_delta(0.0, 0.0)
    0.0
    >>> import numpy as np
    >>> d = gaussian_delta([10.0, 50.0, 200.0], 20.0)  # the naive formula fails at 200
    >>> bool(np.all(d > 0) and np.all(np.diff(d) < 0))
    True
    """
    eps_arr = np.asarray(eps, dtype=float)
    mu_arr = np.asarray(mu, dtype=float)
    if np.any(np.isnan(eps_arr)) or np.any(eps_arr < 0):
        raise ValueError(f"eps must be >= 0 and not NaN, got {eps!r}")
    if np.any(np.isnan(mu_arr)) or np.any(mu_arr < 0):
        raise ValueError(f"mu must be >= 0 and not NaN, got {mu!r}")
    delta = np.exp(_log_delta(eps_arr, mu_arr))
    if delta.ndim == 0:
        return float(delta)
    return delta


def zcdp_epsilon(mu, delta) -> float:
    """ε from the zCDP conversion: ρ = μ, ``ε = ρ + 2 √(ρ ln(1/δ))`` (thesis Thm 1, 5, 11).

    A valid but loose bound, never smaller than :func:`gaussian_epsilon`; kept only for
    comparison with the exact accountant (thesis Fig. 6.1).

    Parameters
    ----------
    mu : float
        Summed μ ≥ 0 (the zCDP ρ of a Gaussian composition).
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        The zCDP-based ε.

    Examples
    --------
    >>> round(zcdp_epsilon(0.5, 1e-5), 4)
    5.2985
    >>> zcdp_epsilon(0.5, 1e-5) >= gaussian_epsilon(0.5, 1e-5)
    True
    """
    rho = _check_mu(mu)
    delta = check_delta(delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_epsilon(mu, delta) -> float:
    """The smallest ε ≥ 0 with ``gaussian_delta(ε, mu) ≤ delta``.

    Root of the exact Gaussian privacy profile, rounded up: the returned ε satisfies
    ``gaussian_delta(ε, mu) ≤ delta·(1 − 1e-10)``, so it never under-reports.

    Parameters
    ----------
    mu : float
        Summed μ ≥ 0 of all Gaussian releases.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ε; 0.0 when ``gaussian_delta(0, mu) ≤ delta`` (e.g. ``mu = 0``).

    Raises
    ------
    ValueError
        If ``mu`` is negative, NaN or infinite, or ``delta`` is not in (0, 1).

    Examples
    --------
    >>> round(gaussian_epsilon(0.5, 1e-5), 4)
    4.3772
    >>> gaussian_epsilon(0.0, 1e-5)
    0.0
    """
    mu = _check_mu(mu)
    delta = check_delta(delta)
    if mu == 0.0:
        return 0.0
    target = math.log(delta) + math.log1p(-_MARGIN_EPSILON)

    def excess(e: float) -> float:
        return float(_log_delta(e, mu)) - target

    if excess(0.0) <= 0.0:
        return 0.0
    hi = zcdp_epsilon(mu, delta)  # a valid bound: δ(hi) ≤ δ up to rounding
    while excess(hi) > 0.0:
        hi *= 2.0
    # Rounded up onto the safe side: a larger ε never under-reports.
    return float(safe_root(excess, 0.0, hi, side=+1, xtol=1e-15, maxiter=500))


def max_gaussian_mu(eps, delta) -> float:
    """The largest summed μ with ``gaussian_delta(eps, μ) ≤ delta``.

    δ(ε) increases with μ, so this is a one-dimensional root; the returned μ lies on the
    safe side of it: ``gaussian_delta(eps, μ) ≤ delta·(1 − 1e-9)``.

    Parameters
    ----------
    eps : float
        ε > 0, finite.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        The μ budget: any composition of Gaussian releases whose μ's sum to at most this is
        ``(eps, delta)``-DP.

    Raises
    ------
    ValueError
        If ``eps`` or ``delta`` is invalid, or ε is so large that the μ budget overflows a
        float.

    Examples
    --------
    >>> mu = max_gaussian_mu(1.0, 1e-6)
    >>> round(mu, 6)
    0.028014
    >>> gaussian_delta(1.0, mu) <= 1e-6
    True
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    target = math.log(delta) + math.log1p(-_MARGIN_MU)

    def excess(m: float) -> float:
        return float(_log_delta(eps, m)) - target

    log_inv = -math.log(delta)
    # The zCDP ρ, δ(ε, ρ) ≤ δ, as (√(ε + L) − √L)² written without the cancellation.
    lo = (eps / (math.sqrt(eps + log_inv) + math.sqrt(log_inv))) ** 2
    while lo >= _MU_MIN and excess(lo) > 0.0:
        lo /= 2.0
    if lo < _MU_MIN:  # not reached with check_epsilon's floor; kept so it never returns 0
        raise ValueError(
            f"The budget ε = {eps:.4g} (δ = {delta:.3g}) is too small to be accounted in "
            f"double precision: the μ it allows is below {_MU_MIN:.3g}. Use a larger ε."
        )
    hi = 2.0 * lo
    while excess(hi) <= 0.0:
        hi *= 2.0
        if not math.isfinite(hi):
            raise ValueError(
                f"The budget ε = {eps:.4g} (δ = {delta:.3g}) is too large to be accounted in "
                "double precision: the μ it allows overflows a float. Use a smaller ε."
            )
    # Rounded down onto the safe side: a smaller μ budget buys more noise.
    return float(safe_root(excess, lo, hi, side=-1, xtol=1e-300, maxiter=500))


def max_iterations(eps, delta, mu_per_iteration, *, mu_initial=0.0) -> int:
    """How many iterations of cost ``mu_per_iteration`` a budget (ε, δ) allows.

    ``floor((max_gaussian_mu(eps, delta) − mu_initial) / mu_per_iteration)``, checked so that
    the composition of the returned number of iterations is within budget (the thesis'
    Algorithm 2, solved through the μ budget instead of a bisection over iterations).

    Parameters
    ----------
    eps : float
        ε > 0.
    delta : float
        δ in (0, 1).
    mu_per_iteration : float
        Summed μ of the Gaussian releases of one iteration, > 0. DP penalty with noise
        multiplier z: ``1/(2 z²)``.
    mu_initial : float, optional
        μ spent once before the first iteration (e.g. DP HMC's initial gradient,
        ``1/(2 z_g²)`` in thesis Theorem 12). Default 0.

    Returns
    -------
    int
        The number of iterations k ≥ 0 with ``mu_initial + k · mu_per_iteration`` within
        the μ budget.

    Raises
    ------
    ValueError
        If an argument is invalid, or if ``mu_initial`` alone exceeds the budget.

    Examples
    --------
    DP penalty of the thesis (τ = 0.1, n = 10⁵, z = τ√n) at ε = 1, δ = 10⁻⁶:

    >>> max_iterations(1.0, 1e-6, 1 / (2 * 0.1**2 * 1e5))
    56
    """
    mu_budget = max_gaussian_mu(eps, delta)
    per = check_positive(mu_per_iteration, "mu_per_iteration")
    initial = _check_mu(mu_initial, "mu_initial")
    if initial > mu_budget:
        raise ValueError(
            f"mu_initial={initial!r} alone exceeds the budget (epsilon={eps!r}, delta={delta!r}),"
            f" which allows a summed mu of {mu_budget!r}"
        )
    k = math.floor((mu_budget - initial) / per)
    while k > 0 and initial + k * per > mu_budget:
        k -= 1
    return int(k)


def noise_multiplier_for(eps, delta, releases) -> float:
    """The smallest noise multiplier z for ``releases`` Gaussian releases within (ε, δ).

    Each release of ``f + N(0, (z·Δ)²)`` costs ``μ = 1/(2 z²)``; the result is
    ``z = √(releases / (2 μ_max))`` with ``μ_max = max_gaussian_mu(eps, delta)``, rounded up
    so that ``releases / (2 z²) ≤ μ_max`` (the cost never exceeds the budget; it is within
    about 1e-9 relative of it).

    Parameters
    ----------
    eps : float
        ε > 0.
    delta : float
        δ in (0, 1).
    releases : int
        Number of Gaussian releases, ≥ 1.

    Returns
    -------
    float
        The noise multiplier z (noise standard deviation / sensitivity).

    Raises
    ------
    ValueError
        If ``releases < 1`` or ``eps``/``delta`` are invalid.

    Examples
    --------
    >>> z = noise_multiplier_for(1.0, 1e-6, 100)
    >>> round(z, 4)
    42.2468
    >>> gaussian_epsilon(100 / (2 * z**2), 1e-6) <= 1.0
    True
    """
    releases = check_releases(releases)
    return noise_multiplier_for_mu(releases, max_gaussian_mu(eps, delta))


def noise_multiplier_for_mu(releases, mu_budget) -> float:
    """The smallest z with ``releases / (2 z²) ≤ mu_budget`` (rounded up, never down).

    The calibration every Gaussian step and release shares: ``z = √(releases / (2 μ))``.

    Raises
    ------
    ValueError
        If ``releases`` is not an integer ≥ 1, ``mu_budget`` not a finite number > 0, or
        the multiplier does not fit in a float (a budget far too small for this many
        releases).

    Examples
    --------
    >>> noise_multiplier_for_mu(100, 50.0)
    1.0
    """
    releases = check_releases(releases)
    mu_budget = check_positive(mu_budget, "mu_budget")
    z = math.sqrt(releases / (2.0 * mu_budget))
    if not (math.isfinite(z) and z > 0):
        raise ValueError(
            f"{releases} Gaussian releases cannot fit in a μ budget of {mu_budget:.3g}: the "
            "noise multiplier they need does not fit in a float. Use a larger budget or fewer "
            "releases."
        )
    while gaussian_mu(z, releases) > mu_budget:
        z = math.nextafter(z, math.inf)
    return float(z)
