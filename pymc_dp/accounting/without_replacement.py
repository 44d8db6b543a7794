"""A privacy loss distribution for Gaussian releases on batches drawn without replacement.

dp-accounting's PLD accountant composes Poisson-sampled releases only. The minibatch steps
draw fixed-size batches without replacement and are accounted under replace-one neighbours;
this module gives those releases a PLD of their own, which dp-accounting then composes.

The dominating pair
-------------------
Normalise a release to sensitivity 1: on a fixed batch it is ``N(F(B), z²)`` with ``F``
moving by at most 1 when one row of the batch is replaced. Let ``P = N(1, z²)``,
``Q = N(0, z²)``, ``q = b/n`` and ``U = qP + (1−q)Q``. For neighbours ``D, D'`` (row ``i``
differs) and every ``α ≥ 1``::

    H_α(M(D) ‖ M(D')) ≤ H_α(U ‖ Q).                                                  (1)

Why: couple each batch ``B ∋ i`` with ``B \\ {i} ∪ {k}``, ``k`` uniform outside ``B`` (which
is a uniform batch without ``i``). Given the coupled pair, ``M(D)`` is
``q N(F(B, x_i)) + (1−q) N(F(B''))`` and ``M(D')`` the same with ``x_i'``; the three means
differ pairwise by at most 1 (each pair of batches differs in one row). The hockey-stick
divergence is jointly convex, so it suffices to bound one coupled pair; there Balle, Barthe &
Gaboardi's advanced joint convexity (2018, Thm 2) gives at most
``q·H_{α₀}(N(1, z²) ‖ N(0, z²))`` with ``α₀ = 1 + (α−1)/q``, which is exactly
``H_α(U ‖ Q)``. The bound is attained: if every other row contributes like ``x_i'``,
``M(D)`` is ``U`` and ``M(D')`` is ``Q`` (shifted).

For ``α < 1``, ``H_α(A ‖ B) = 1 − α + α·H_{1/α}(B ‖ A)`` and ``(D', D)`` are neighbours too,
so ``H_α(M(D) ‖ M(D')) ≤ H_α(Q ‖ U)``. A single pair with both profiles is the symmetric pair
whose privacy loss ``L`` under its first distribution is:

* for ``L > 0``, the law of ``ℓ(x) = ln(1 − q + q·e^{(x − ½)/z²})`` under ``x ~ U``, on
  ``x > ½`` (where ``ℓ > 0``);
* for ``L < 0``, its mirror: mass ``e^{−l}·ω(l)`` at ``−l`` (the law of ``−ℓ`` under ``Q``);
* the rest, ``1 − U(x > ½) − Q(x > ½) ≥ 0``, at ``L = 0``.

Its hockey-stick divergence is ``H_α(U ‖ Q)`` for ``α ≥ 1`` (only losses above ``ln α ≥ 0``
enter) and, by symmetry, ``H_α(Q ‖ U)`` below: it dominates every release whichever order of
neighbours each release sees, and dominating pairs compose over adaptively chosen releases
(Zhu, Dong & Wang 2022). It is the pair of Dong, Roth & Su's subsampling theorem
(``C_q(G_{1/z})``, GDP 2022, Thm 9). At ``q = 1`` it is the Gaussian pair.

Its privacy profile (δ as a function of ε, :func:`wor_privacy_profile`) is a closed form in
the Gaussian one, and dp-accounting turns a profile on a grid of ε into a pessimistic PLD
("connect the dots", Doroshenko et al. 2022): the losses on the grid get masses whose
hockey-stick divergences are at least the true ones, the mass beyond the grid's top counts
as infinite loss, and the FFT's rounding in a composition is allowed for (see
:data:`_FFT_ALLOWANCE`), so every ε and δ read from it, composed or not, is an upper bound.
Everything here reads public numbers only.
"""

from __future__ import annotations

import functools
import math

from collections.abc import Iterable, Sequence

import numpy as np

from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import special

from pymc_dp.accounting.gaussian import gaussian_delta
from pymc_dp.accounting.events import REPLACE_ONE, Event, GaussianEvent, SubsampledGaussianEvent

__all__ = ["wor_gaussian_pld", "wor_pld_delta", "wor_pld_epsilon", "wor_privacy_profile"]

#: The loss grid's step. With "connect the dots" ε moves by ~1e-4 between steps of 1e-4
#: and 5e-4 (both upper bounds), and 5e-4 is five times faster.
DISCRETIZATION = 5e-4
#: Gaussian tail mass left out of the grid (counted as infinite loss).
_TAIL = 1e-16
#: Losses above this many nats count as infinite (keeps a release's grid at ≤ 4·10⁵ points).
_LOSS_CAP = 100.0
#: Compositions whose mean privacy loss exceeds this many nats are not computed (ε would be
#: in the hundreds; the bound answers ∞ and the ledger's other bounds are used).
_MEAN_CAP = 200.0
#: More releases of one kind than this are not composed here (dp-accounting's composition of
#: a very narrow PLD that many times does not finish); the other bounds answer.
_MAX_COUNT = 10**7
#: Allowance for the FFT's rounding in a composition: every δ read from it is raised by this
#: plus 100 times the negative mass the rounding left (both well below the δ's budgets use),
#: and ε is read at δ minus it (∞ when nothing is left).
_FFT_ALLOWANCE = 1e-10


@functools.lru_cache(maxsize=256)  # a pure function of public numbers
def wor_gaussian_pld(
    noise_multiplier: float, sampling_rate: float, discretization: float = DISCRETIZATION
) -> pld_lib.PrivacyLossDistribution:
    """The PLD of one Gaussian release on a batch drawn without replacement (replace-one).

    Parameters
    ----------
    noise_multiplier : float
        ``z``: noise standard deviation over the release's replace-one sensitivity.
    sampling_rate : float
        ``q = b/n`` in (0, 1].
    discretization : float, optional
        Step of the loss grid.

    Returns
    -------
    dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution
        Symmetric, pessimistic (see the module docstring).

    Examples
    --------
    >>> from pymc_dp.accounting.gaussian import gaussian_epsilon
    >>> pld = wor_gaussian_pld(1.0, 1.0)  # the whole data set: the plain Gaussian
    >>> abs(pld.get_epsilon_for_delta(1e-5) - gaussian_epsilon(0.5, 1e-5)) < 1e-3
    True
    """
    z, q = float(noise_multiplier), float(sampling_rate)
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"noise_multiplier must be a finite number > 0, got {z!r}")
    if not 0 < q <= 1:
        raise ValueError(f"sampling_rate must lie in (0, 1], got {q!r}")
    # The largest loss worth a grid point: U puts less than 1e-16 above the x where
    # ℓ(x) = ln(1 − q + q e^{(x − ½)/z²}) reaches it.
    exponent = (0.5 - z * special.ndtri(_TAIL)) / (z * z)
    top = math.log(q) + exponent if exponent > 700 else math.log1p(q * math.expm1(exponent))
    k_max = max(1, math.ceil(min(top, _LOSS_CAP) / discretization))
    epsilons = np.arange(-k_max, k_max + 1) * discretization
    deltas = wor_privacy_profile(epsilons, z, q)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
        discretization, -k_max, k_max, deltas
    )
    return pld_lib.PrivacyLossDistribution(pmf)


def wor_privacy_profile(epsilons, noise_multiplier: float, sampling_rate: float) -> np.ndarray:
    """δ(ε) of the dominating pair of :func:`wor_gaussian_pld`, for any real ε, in closed form.

    For ``ε ≥ 0``, ``H_{e^ε}(U ‖ Q) = q·δ_G(ln(1 + (e^ε − 1)/q))`` with ``δ_G`` the profile of
    ``N(1, z²)`` against ``N(0, z²)``; below 0, ``1 − e^ε + e^ε·δ(−ε)`` (the other order).

    Examples
    --------
    >>> from pymc_dp.accounting.gaussian import gaussian_delta
    >>> float(wor_privacy_profile([1.0], 2.0, 1.0)[0]) == gaussian_delta(1.0, 1 / 8)
    True
    """
    eps = np.asarray(epsilons, dtype=float)
    mu = 1.0 / (2.0 * noise_multiplier**2)
    q = sampling_rate
    a = np.abs(eps)
    upper = q * gaussian_delta(np.log1p(np.expm1(a) / q), mu)
    return np.where(eps >= 0, upper, -np.expm1(eps) + np.exp(eps) * upper)


@functools.lru_cache(maxsize=256)
def _mean_loss(z: float, q: float) -> float:
    """E[L] of one release's pair: ∫_{x>½} ℓ(x)·(U − Q)(dx), by quadrature (the mirrored part
    contributes −∫ ℓ dQ). At most the Gaussian's 1/(2z²)."""
    from scipy import integrate

    def integrand(x):
        loss = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + (x - 0.5) / z**2)
        dens = q * math.exp(-0.5 * ((x - 1) / z) ** 2) + (1 - q) * math.exp(-0.5 * (x / z) ** 2)
        return loss * (dens - math.exp(-0.5 * (x / z) ** 2)) / (z * math.sqrt(2 * math.pi))

    value, _ = integrate.quad(integrand, 0.5, 1.0 + 40.0 * z, points=[1.0], limit=200)
    return max(0.0, value)


def _groups(events: Iterable[Event]) -> dict[tuple[float, float], int]:
    """Release counts by (z, q): plain Gaussians merged into one of their summed μ (exact) at
    q = 1, releases without replacement by their own (z, q). The ledger's
    :data:`~pymc_dp.accounting.composition.WOR_PLD` has already refused subclasses with a
    rule of their own."""
    events = [e for e in events if e.count > 0]
    counts: dict[tuple[float, float], int] = {}
    mu = math.fsum(e.mu for e in events
                   if isinstance(e, GaussianEvent) and e.neighbouring == REPLACE_ONE)
    if mu > 0:
        counts[(1.0 / math.sqrt(2.0 * mu), 1.0)] = 1
    for e in events:
        if isinstance(e, GaussianEvent) and e.neighbouring == REPLACE_ONE:
            continue
        if not (isinstance(e, SubsampledGaussianEvent) and e.sampling == "without_replacement"
                and e.neighbouring == REPLACE_ONE):
            raise ValueError(  # (a safety net behind WOR_PLD.applies)
                f"{type(e).__name__}({e.name!r}) is not a plain Gaussian or a Gaussian on a "
                "batch drawn without replacement under replace-one neighbours"
            )
        key = (float(e.noise_multiplier), float(e.sampling_rate))
        counts[key] = counts.get(key, 0) + e.count
    return counts


def _composed(events, discretization: float) -> pld_lib.PrivacyLossDistribution | None:
    """The PLD of all ``events`` composed, or None when their mean privacy loss exceeds
    :data:`_MEAN_CAP` (ε is far beyond any budget there, and the composed grid would not fit
    in memory: the bound is then not offered, and the ledger's others answer)."""
    counts = _groups(events)
    if any(not (math.isfinite(z) and z > 0) or k > _MAX_COUNT for (z, q), k in counts.items()):
        return None  # (a μ so large that its multiplier rounds to 0; or too many releases)
    if math.fsum(k * _mean_loss(z, q) for (z, q), k in counts.items()) > _MEAN_CAP:
        return None
    plds = [wor_gaussian_pld(z, q, discretization).self_compose(k)
            for (z, q), k in counts.items()]
    total = plds[0]
    for pld in plds[1:]:
        total = total.compose(pld)
    return total


def wor_pld_epsilon(
    events: Sequence[Event], delta: float, *, discretization: float = DISCRETIZATION
) -> float:
    """ε(δ) of ``events`` (plain Gaussians and Gaussians on batches drawn without
    replacement, replace-one) through :func:`wor_gaussian_pld`.

    Examples
    --------
    >>> from pymc_dp.accounting.events import SubsampledGaussianEvent
    >>> ev = SubsampledGaussianEvent(name="batch", noise_multiplier=2.0, sampling_rate=0.01,
    ...                              count=1000)
    >>> round(wor_pld_epsilon([ev], 1e-5), 2)
    0.72
    """
    if not any(e.count > 0 for e in events):
        return 0.0
    pld = _composed(events, discretization)
    if pld is None:
        return math.inf
    left = delta - _allowance(pld)
    return float(pld.get_epsilon_for_delta(left)) if left > 0 else math.inf


def wor_pld_delta(
    events: Sequence[Event], epsilon: float, *, discretization: float = DISCRETIZATION
) -> float:
    """δ(ε) of ``events`` (see :func:`wor_pld_epsilon`), capped at 1."""
    if not any(e.count > 0 for e in events):
        return 0.0
    pld = _composed(events, discretization)
    if pld is None:
        return 1.0
    return min(1.0, max(0.0, float(pld.get_delta_for_epsilon(epsilon))) + _allowance(pld))


def _allowance(pld) -> float:
    """What a δ read from ``pld`` may be off by through the FFT's rounding, which leaves
    negative probabilities of about that size: :data:`_FFT_ALLOWANCE` plus 100 times their
    mass (1.0, i.e. no bound, if the masses cannot be read)."""
    negative = 0.0
    for pmf in {id(p): p for p in (pld._pmf_remove, pld._pmf_add)}.values():
        if isinstance(pmf, pld_pmf.DensePLDPmf):
            probs = np.asarray(pmf._probs)
        elif isinstance(pmf, pld_pmf.SparsePLDPmf):
            probs = np.fromiter(pmf._loss_probs.values(), float)
        else:
            return 1.0
        negative = max(negative, -float(np.minimum(probs, 0.0).sum()))
    return _FFT_ALLOWANCE + 100.0 * negative
