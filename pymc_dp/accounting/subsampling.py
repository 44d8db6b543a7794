"""Calibrating the noise of a subsampled Gaussian release to a budget.

:func:`subsampled_noise_multiplier` finds the smallest noise multiplier whose subsampled
releases fit (ε, δ) in the ledger's own accountant: the smallest of the privacy loss
distribution for sampling without replacement
(:mod:`~pymc_dp.accounting.without_replacement`), dp-accounting's RDP bound for that scheme
and the exact Gaussian composition of the same releases without subsampling
(:data:`~pymc_dp.accounting.composition.UNSAMPLED_GAUSSIAN`), so that what is planned is what
the ledger charges (the RDP analysis is in :mod:`pymc_dp.accounting.rdp`).
Everything here is a closed-form computation on public parameters; nothing reads data.
"""

from __future__ import annotations

import math

from functools import lru_cache

from pymc_dp.accounting.roots import safe_root
from pymc_dp.validation import check_delta, check_fraction

__all__ = ["CALIBRATION_ORDERS", "subsampled_noise_multiplier"]


#: RDP orders used while root-finding a noise multiplier: a subset of dp-accounting's
#: default orders chosen for speed (its without-replacement bound costs O(α²) per integer
#: order up to 256, O(α) above). ε over fewer orders can only be larger, so a multiplier
#: calibrated with them is never too small for the ledger, which uses all default orders.
CALIBRATION_ORDERS = tuple(range(2, 33)) + (40, 48, 56, 63, 128, 512, 1024)


@lru_cache(maxsize=128)  # a pure function of public numbers: reuse it across steps and chains
def subsampled_noise_multiplier(
    eps: float,
    delta: float,
    sampling_rate: float,
    releases: int,
    *,
    neighbouring="replace_one",
    fixed=(),
) -> tuple[float, int]:
    """Calibrate z so that ``releases`` subsampled Gaussian releases cost at most (ε, δ).

    ``fixed``: events spent besides them (e.g. a warm-up's Gaussian releases), composed with
    them in every query, so that all together cost at most (ε, δ); pure ones (Laplace, pure
    ε) add their ε on top, as in the ledger.

    Each release adds ``N(0, (z·Δ)²)`` to a statistic of sensitivity Δ computed on a batch
    drawn without replacement at rate ``sampling_rate`` (replace-one neighbours), accounted
    as the ledger does: the smallest of the PLD of sampling without replacement
    (:func:`~pymc_dp.accounting.without_replacement.wor_gaussian_pld`, the tightest almost
    everywhere), dp-accounting's RDP bound (WBK Theorem 27) and the exact Gaussian
    composition of the same releases as if each batch were all the data. Each query
    composes all ``releases`` at once (one query per trial z); z is found by a bracketing
    root search on ln z per bound (about fifteen queries), rounded up, and checked once
    against :class:`~pymc_dp.accounting.ledger.PrivacyLedger`. Every bound falls as z
    grows, so their minimum does; the PLD bound also falls as ``n`` grows at a fixed batch
    size, so z does not grow with ``n``.

    Parameters
    ----------
    eps, delta : float
        The budget the releases may spend together (e.g. all chains and tuning of a run).
    sampling_rate : float
        ``b / n``.
    releases : int
        Number of releases.

    Returns
    -------
    (float, int)
        The noise multiplier z and the number of accountant queries made (results are
        cached: a repeated call returns the first call's numbers).

    Raises
    ------
    ValueError
        If no multiplier up to 1e6 fits the budget, or ``fixed``'s pure ε uses all of it.

    Examples
    --------
    >>> from pymc_dp.accounting import PrivacyLedger, SubsampledGaussianEvent
    >>> z, queries = subsampled_noise_multiplier(1.0, 1e-5, 0.01, 1000)
    >>> ev = SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=0.01, count=1000)
    >>> 0.99 < PrivacyLedger([ev]).epsilon(1e-5) <= 1.0
    True
    """
    from pymc_dp.accounting.composition import WOR_PLD, nonpure_events, pure_epsilon
    from pymc_dp.accounting.dp_accounting_bridge import rdp_epsilon
    from pymc_dp.accounting.without_replacement import wor_pld_epsilon
    from pymc_dp.accounting.events import SubsampledGaussianEvent
    from pymc_dp.accounting.ledger import PrivacyLedger
    from pymc_dp.validation import check_epsilon, check_releases

    eps = check_epsilon(eps)
    delta = check_delta(delta)
    q = check_fraction(sampling_rate, "the sampling rate", include_one=True)
    releases = check_releases(releases)
    queries = 0
    # Pure events add their ε on top of the rest (ledger rule 3): the releases and the other
    # fixed events are calibrated to what is left; the final check composes them all.
    budget, everything = eps, list(fixed)
    eps = budget - pure_epsilon(everything)
    if not eps > 0:
        raise ValueError("the fixed events' pure ε uses the whole budget: no noise fits")
    fixed = nonpure_events(everything)
    pure = [e for e in everything if e not in fixed]

    def events(z):
        return [
            SubsampledGaussianEvent(
                name="calibration",
                noise_multiplier=float(z),
                sampling_rate=q,
                count=releases,
                neighbouring=neighbouring,
            )
        ] + list(fixed)

    def excess_of(bound):
        """log z ↦ the ``bound``'s ε less the budget's (> 0: too little noise for it)."""

        def excess(log_z):
            nonlocal queries
            queries += 1
            return bound(events(math.exp(log_z))) - eps

        return excess

    rdp_excess = excess_of(lambda evs: rdp_epsilon(evs, delta, orders=CALIBRATION_ORDERS))
    pld_excess = excess_of(lambda evs: wor_pld_epsilon(evs, delta))

    # The ledger charges the smallest of bounds that all fall as z grows, so the smallest z
    # within budget is the smallest of the bounds' own smallest z's. The unsampled
    # Gaussian's is a closed form; the PLD's (sampling without replacement) is searched
    # below it; the RDP bound's only if it is within budget at the best z so far.
    z = _unsampled_noise_multiplier(eps, delta, releases, events(1.0))
    searches = [rdp_excess]
    if WOR_PLD.applies(nonpure_events(events(1.0))):
        searches.insert(0, pld_excess)  # (the tighter one first: it lowers the cap)
    for excess in searches:
        if z is not None and excess(math.log(z)) > 0:
            continue  # over the budget at the best z so far: its own z is larger
        log_z = _bound_root(excess, q, releases, eps, delta, z)
        if log_z is not None:
            z = math.exp(log_z) if z is None else min(z, math.exp(log_z))
    # The ledger uses all default orders, a superset: its ε is at most the one found above.
    # Checked anyway, since the ledger is what the budget guard enforces.
    for _ in range(100):
        queries += 1
        if PrivacyLedger(events(z) + pure).epsilon(delta) <= budget:
            return z, queries
        z *= 1.001
    raise RuntimeError("noise calibration did not converge")  # pragma: no cover


def _unsampled_noise_multiplier(eps, delta, releases, events) -> float | None:
    """The smallest z with the exact Gaussian composition of ``events`` (the first one's
    multiplier replaced by z, ``releases`` of it), subsampling ignored, within (ε, δ): from
    the μ budget in closed form. None where that bound does not apply or cannot fit."""
    from pymc_dp.accounting.composition import UNSAMPLED_GAUSSIAN
    from pymc_dp.accounting.gaussian import gaussian_mu, max_gaussian_mu

    spent = [e for e in events if e.count > 0]
    if not UNSAMPLED_GAUSSIAN.applies(spent):
        return None
    budget = max_gaussian_mu(eps, delta)
    others = math.fsum(gaussian_mu(e.noise_multiplier, e.count) for e in spent[1:])
    if not budget - others > 0:
        return None
    z = math.sqrt(releases / (2.0 * (budget - others)))
    while others + gaussian_mu(z, releases) > budget:  # (float rounding: a few ulp up)
        z = math.nextafter(z, math.inf)
    return z


def _bound_root(excess, q, releases, eps, delta, z_max) -> float | None:
    """ln z of the smallest z whose bound is within the budget (``excess ≤ 0``),
    found by bracketing from the small-q approximation and a safe-side root search. With
    ``z_max``, only below it: None if the bound is over the budget even there."""
    # Start near the small-q approximation ε ≈ 2 q √(k ln(1/δ)) / z, then bracket.
    log_z = math.log(max(1e-3, 2.0 * q * math.sqrt(releases * math.log(1 / delta)) / eps))
    if z_max is not None:
        log_z = min(log_z, math.log(z_max))
    lo = hi = log_z
    f = excess(log_z)
    step = math.log(1.5)
    while f > 0:
        lo, hi = hi, hi + step
        if z_max is not None and hi >= math.log(z_max):
            hi = math.log(z_max)
            f = excess(hi)
            if f > 0:
                return None  # (this bound does not beat z_max)
            break
        if hi > math.log(1e6):
            raise ValueError(
                f"no noise multiplier up to 1e6 makes {releases} releases at sampling rate "
                f"{q:.3g} fit in (ε = {eps:.4g}, δ = {delta:.3g}) with the events spent "
                "besides them: use a larger budget."
            )
        f = excess(hi)
        step *= 2
    if lo == hi:  # the start was already private enough: go down until it is not
        while True:
            hi, lo = lo, lo - step
            if excess(lo) > 0:
                break
            step *= 2
    # Started 2·xtol above the root, on the side with enough noise; then up by factors of
    # 1.0001 while the bound is still over the budget.
    return safe_root(
        excess, lo, hi, side=+1, xtol=1e-5, margin=2e-5, step=math.log(1.0001), growth=1.0
    )


#: The RDP analysis that lived here until it moved to :mod:`pymc_dp.accounting.rdp`.
_MOVED_TO_RDP = frozenset(
    {"rdp_to_delta", "rdp_to_epsilon", "thesis_subsampled_gaussian_rdp", "wbk_subsampled_rdp"}
)


def __getattr__(name):
    # (for one release: the old import path of the RDP analysis still works, with a warning)
    if name not in _MOVED_TO_RDP:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    import pymc_dp.accounting.rdp as rdp

    warnings.warn(f"{__name__}.{name} moved to pymc_dp.accounting.rdp; the old path goes in "
                  "the next release.", DeprecationWarning, stacklevel=2)
    return getattr(rdp, name)
