"""Accounting of DP Barker (thesis Theorem 7; Heikkilä, Jälkö, Dikmen & Honkela 2019).

The mechanism
-------------
One DP Barker iteration draws a batch of ``b`` of the ``n`` rows without replacement and
releases one number,

    λ + N(0, σ² − s²),     λ = Σ_{j∈B} t_j + (public terms),   s² = Σ_{j∈B} t_j² − (Σ_{j∈B} t_j)²/b,

where ``t_j = (nT/b)·r_j`` are the scaled per-datum log-likelihood ratios, clipped so that
``|t_j| ≤ 1/√b`` (``|r_j| ≤ √b / n0``, ``n0 = nT``), and ``σ² = 2`` is the total noise
variance (:data:`BARKER_NOISE_VARIANCE`). The acceptance test adds a draw of ``V_corr`` and
compares with 0: post-processing.

Why Theorem 7 holds (the conventions)
-------------------------------------
Here there is no single "sensitivity" and "noise multiplier": the *variance* of the
released Gaussian depends on the data too. On replace-one neighbouring batches the mean
``λ`` moves by at most ``2/√b``, the variance estimate ``s²`` (in ``[0, 1]`` by the clip)
by at most ``5/b``, and the Rényi divergence of order α between the two released
Gaussians ``N(λ, 2 − s²)`` and ``N(λ', 2 − s'²)`` is at most

    ε'(α) = 5/(2b) + ln(2b / (b − 5α)) / (2(α − 1)) + 2α / (b − 5α),     α < b/5

(the three terms bound the log-ratio of the standard deviations, the variance mismatch and
the mean shift). Subsampling without replacement amplifies it by
:func:`~pymc_dp.accounting.subsampling.wbk_subsampled_rdp` with ``q = b/n``; ``k``
iterations are ``(α, k ε(α))``-RDP, and ``(ε, δ)``-DP with
``ε = min_α k ε(α) + ln(1/δ)/(α − 1)`` over the integer orders ``2 < α < b/5`` (so the
batch must hold at least 16 rows).

A :class:`BarkerEvent` records ``count`` such iterations. The ledger composes it with other
Barker events and with Gaussian or subsampled-Gaussian events by adding RDP at every
common order (dp-accounting's RDP accountant gives the RDP of the latter), and with pure
events by basic composition. What has no RDP at these orders (Poisson subsampling under
replace-one) is refused.
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from pymc_dp.accounting.dp_accounting_bridge import UnsupportedEventError, make_rdp_accountant
# BarkerEvent and MIN_BARKER_BATCH live with the other events; importable here as before.
from pymc_dp.accounting.events import (
    MIN_BARKER_BATCH,
    BarkerEvent,
    Event,
    _check_batch,
)
from pymc_dp.accounting.rdp import rdp_to_delta, rdp_to_epsilon, wbk_subsampled_rdp
from pymc_dp.validation import check_delta, check_epsilon
from pymc_dp.kernels.barker import BARKER_NOISE_VARIANCE  # re-exported; see events.py

__all__ = [
    "BARKER_NOISE_VARIANCE",
    "MIN_BARKER_BATCH",
    "BarkerEvent",
    "barker_base_rdp",
    "barker_delta",
    "barker_epsilon",
    "barker_max_iterations",
    "barker_orders",
    "barker_rdp",
]

#: Largest RDP order tried. Fewer orders only loosen the bound: ε is a minimum over them.
MAX_ORDER = 512


def barker_orders(batch_size: int) -> np.ndarray:
    """The integer RDP orders Theorem 7 allows for a batch of ``batch_size``: ``2 < α < b/5``.

    Capped at :data:`MAX_ORDER`.

    Examples
    --------
    >>> barker_orders(20).tolist()
    [3]
    """
    hi = min(MAX_ORDER, math.ceil(batch_size / 5) - 1)  # largest integer < b/5
    return np.arange(3, hi + 1)


def barker_base_rdp(alpha: int, batch_size: int) -> float:
    """ε'(α) of Theorem 7: RDP of one Barker release on a batch (requires ``α < b/5``).

    Examples
    --------
    >>> round(barker_base_rdp(3, 1000), 6)
    0.185657
    """
    b = float(batch_size)
    if not 1 < alpha < b / 5:
        raise ValueError(f"Theorem 7 needs 1 < α < b/5, got α={alpha}, b={batch_size}")
    return 5 / (2 * b) + math.log(2 * b / (b - 5 * alpha)) / (2 * (alpha - 1)) + 2 * alpha / (b - 5 * alpha)


@lru_cache(maxsize=256)
def _barker_rdp_curve(n_data: int, batch_size: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    orders = barker_orders(batch_size)
    q = batch_size / n_data
    base = [0.0, 0.0] + [barker_base_rdp(j, batch_size) for j in range(2, int(orders[-1]) + 1)]
    rdp = tuple(wbk_subsampled_rdp(int(a), q, base.__getitem__) for a in orders)
    return tuple(int(a) for a in orders), rdp


def barker_rdp(alpha: int, n_data: int, batch_size: int) -> float:
    """RDP at order α of one DP Barker iteration (Theorem 7's ε(α), subsampling included).

    Examples
    --------
    >>> barker_rdp(10, 100_000, 1000) < barker_base_rdp(10, 1000)
    True
    """
    n_data, batch_size = _check_batch(n_data, batch_size)
    orders, rdp = _barker_rdp_curve(n_data, batch_size)
    if alpha not in orders:
        raise ValueError(f"order {alpha!r} is not an integer in (2, b/5) (b = {batch_size})")
    return rdp[orders.index(alpha)]


def _composed_rdp(events: Sequence[Event]) -> tuple[np.ndarray, np.ndarray]:
    """Orders and summed RDP of Barker events plus any RDP-accountable events."""
    barker = [e for e in events if isinstance(e, BarkerEvent) and e.count > 0]
    others = [e for e in events if not isinstance(e, BarkerEvent) and e.count > 0]
    if not barker:
        raise ValueError("no BarkerEvent to compose")
    orders = barker_orders(min(e.batch_size for e in barker))
    total = np.zeros(orders.size)
    for e in barker:
        e_orders, e_rdp = _barker_rdp_curve(e.n_data, e.batch_size)
        total += e.count * np.asarray(e_rdp[: orders.size])
        assert e_orders[: orders.size] == tuple(orders)
    if others:
        # Gaussian / subsampled Gaussian events: their RDP at the same orders (raises
        # UnsupportedEventError for what dp-accounting's RDP accountant cannot account).
        try:
            acc = make_rdp_accountant(others, orders=[float(a) for a in orders])
        except UnsupportedEventError as err:
            raise UnsupportedEventError(
                "DP Barker events compose with other events in RDP only (thesis Theorem 7 is "
                f"an RDP bound), and this one has no RDP bound here: {err}"
            ) from None
        total += acc.rdp
    return orders, total


def barker_epsilon(events: Iterable[Event], delta: float) -> float:
    """ε(δ) of Barker events (and Gaussian / subsampled-Gaussian events) composed in RDP.

    Parameters
    ----------
    events : iterable of Event
        At least one :class:`BarkerEvent`; the others must be accountable by dp-accounting's
        RDP accountant under replace-one. Pure events are not accepted here (the ledger adds
        them by basic composition).
    delta : float

    Examples
    --------
    >>> ev = BarkerEvent(name="barker", count=1000, n_data=100_000, batch_size=1000)
    >>> round(barker_epsilon([ev], 1e-6), 3)
    2.333
    """
    delta = check_delta(delta)
    orders, rdp = _composed_rdp(list(events))
    return rdp_to_epsilon(orders, rdp, delta)


def barker_delta(events: Iterable[Event], epsilon: float) -> float:
    """δ(ε) by the same composition and conversion as :func:`barker_epsilon`."""
    orders, rdp = _composed_rdp(list(events))
    return rdp_to_delta(orders, rdp, epsilon)


def barker_max_iterations(
    eps: float, delta: float, n_data: int, batch_size: int, fixed_mu: float = 0.0
) -> int:
    """The most DP Barker iterations an (ε, δ) budget allows (Theorem 7, all chains together).

    ``max_α ⌊(ε − ln(1/δ)/(α − 1) − α μ_fixed) / ε(α)⌋`` over the admissible orders (0 if
    none fits), where ``fixed_mu`` is the summed μ of plain Gaussian releases made beside
    them (their RDP at order α is α μ: the clip diagnostics).

    Examples
    --------
    >>> k = barker_max_iterations(1.0, 1e-6, 100_000, 1300)
    >>> ev = BarkerEvent(name="b", count=k, n_data=100_000, batch_size=1300)
    >>> barker_epsilon([ev], 1e-6) <= 1.0
    True
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    n_data, batch_size = _check_batch(n_data, batch_size)
    orders, rdp = _barker_rdp_curve(n_data, batch_size)
    orders = np.asarray(orders, dtype=float)
    room = eps - math.log(1.0 / delta) / (orders - 1.0) - orders * float(fixed_mu)
    k = np.floor(room / np.asarray(rdp) * (1 - 1e-12))
    return int(max(0.0, float(np.max(k))))
