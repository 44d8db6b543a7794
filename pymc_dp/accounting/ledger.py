"""The privacy ledger: an ordered list of mechanism events and their composed (ε, δ) cost.

Composition rules (all events of a ledger must share one neighbouring relation):

1. **Gaussian events compose exactly.** Every :class:`GaussianEvent` is a Gaussian privacy
   loss ``N(μ, 2μ)`` with ``μ = count / (2 z²)``; an adaptive composition of them is the
   Gaussian PLD of the summed μ (:attr:`PrivacyLedger.mu`), whose ε(δ) is
   :func:`~pymc_dp.accounting.gaussian.gaussian_epsilon` (thesis Theorems 4, 6, 12).
2. **Subsampled Gaussian events go through dp-accounting.** If the ledger holds any
   :class:`SubsampledGaussianEvent`, *all* non-pure events (plain Gaussians included, as
   Gaussian mechanisms of their noise multiplier and unit sensitivity) are composed in one
   dp-accounting accountant (:mod:`~pymc_dp.accounting.dp_accounting_bridge`): the PLD
   accountant, or the RDP accountant when an event samples without replacement (the PLD
   accountant does not support that scheme). In the latter case the ledger also computes
   two other valid bounds on the same releases: their own privacy loss distribution
   (:mod:`~pymc_dp.accounting.without_replacement`, composed by dp-accounting; the smallest
   almost everywhere) and the exact Gaussian composition as if each batch were the whole
   data set (sampling without replacement under replace-one can only lower the cost). It
   charges the smallest of the three; :meth:`PrivacyLedger.bound` says which one.
3. **Pure events add by basic composition.** A :class:`LaplaceEvent` or
   :class:`PureDPEvent` costs ``count · ε`` with δ = 0. The composition of an
   ``(ε_pure, 0)``- and an ``(ε', δ)``-DP mechanism is ``(ε_pure + ε', δ)``-DP, so
   ``ε_total(δ) = ε_pure + ε_nonpure(δ)``.

4. **DP Barker events compose in RDP.** If the ledger holds any
   :class:`~pymc_dp.accounting.events.BarkerEvent` (thesis Theorem 7, whose guarantee is an
   RDP bound), all non-pure events are composed by adding RDP at the integer orders
   ``2 < α < b/5`` (Gaussian and without-replacement subsampled Gaussian events through
   dp-accounting's RDP accountant) and converted with ``ε = min_α ρ_α + ln(1/δ)/(α − 1)``
   (:mod:`~pymc_dp.accounting.barker`); pure events add by rule 3. Events with no RDP at
   those orders (Poisson subsampling under replace-one) are refused.

An empty ledger (or one whose events all have ``count == 0``) costs ε = 0.

Which rule applies is decided in one place, :mod:`pymc_dp.accounting.composition`, from one
registered rule per event type; the ledger asks it once per query.
"""

from __future__ import annotations

import math
import numbers

from collections.abc import Iterable, Iterator

from pymc_dp.accounting.composition import (
    composed_bound,
    composed_delta,
    composed_epsilon,
    has_rule,
    nonpure_events,
    pure_epsilon,
    summary_row,
)
from pymc_dp.accounting.dp_accounting_bridge import common_neighbouring
from pymc_dp.accounting.events import Event, GaussianEvent, event_from_dict
from pymc_dp.validation import check_delta

__all__ = ["PrivacyLedger"]

_FORMAT = "pymc_dp.PrivacyLedger"
_VERSION = 1


class PrivacyLedger:
    """An ordered list of mechanism events and their composed privacy cost.

    See the module docstring for the composition rules.

    Parameters
    ----------
    events : iterable of Event, optional
        Initial events, added in order with :meth:`add`.

    Examples
    --------
    >>> from pymc_dp.accounting import GaussianEvent, LaplaceEvent, PrivacyLedger
    >>> ledger = PrivacyLedger([GaussianEvent(name="ratio", count=100, noise_multiplier=30.0)])
    >>> ledger.add(LaplaceEvent(name="count", epsilon=0.1))
    >>> len(ledger), round(ledger.mu, 6)
    (2, 0.055556)
    >>> round(ledger.epsilon(1e-6), 4)
    1.548
    >>> PrivacyLedger.from_dict(ledger.to_dict()) == ledger
    True
    """

    def __init__(self, events: Iterable[Event] = ()):
        self._events: list[Event] = []
        self._cache: dict = {}
        self.extend(events)

    # ------------------------------------------------------------------ the list
    def add(self, event: Event) -> None:
        """Append one event.

        Parameters
        ----------
        event : GaussianEvent, SubsampledGaussianEvent, BarkerEvent, LaplaceEvent or PureDPEvent

        Raises
        ------
        ValueError
            If ``event`` is not an event this ledger can account for, or its neighbouring
            relation differs from that of the events already in the ledger.

        Examples
        --------
        >>> from pymc_dp.accounting import PureDPEvent
        >>> ledger = PrivacyLedger()
        >>> ledger.add(PureDPEvent(name="svt", epsilon=0.5, count=2))
        >>> ledger.epsilon(1e-6)
        1.0
        """
        if not has_rule(event):
            raise ValueError(
                f"PrivacyLedger cannot account for {event!r}: expected a GaussianEvent, "
                "SubsampledGaussianEvent, BarkerEvent, LaplaceEvent or PureDPEvent (an event "
                "type with a rule in pymc_dp.accounting.composition)"
            )
        if self._events and event.neighbouring != self._events[0].neighbouring:
            raise ValueError(
                f"event {event.name!r} uses the {event.neighbouring!r} neighbouring relation but "
                f"this ledger uses {self._events[0].neighbouring!r}; guarantees under different "
                "relations cannot be composed"
            )
        self._events.append(event)

    def extend(self, events: Iterable[Event]) -> None:
        """Append several events in order (see :meth:`add`).

        Examples
        --------
        >>> from pymc_dp.accounting import LaplaceEvent
        >>> ledger = PrivacyLedger()
        >>> ledger.extend([LaplaceEvent(name="a", epsilon=0.1),
        ...                LaplaceEvent(name="b", epsilon=0.2)])
        >>> len(ledger)
        2
        """
        for event in events:
            self.add(event)

    @property
    def events(self) -> tuple[Event, ...]:
        """The events, in the order they were added (an immutable snapshot)."""
        return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(tuple(self._events))

    def __eq__(self, other) -> bool:
        if not isinstance(other, PrivacyLedger):
            return NotImplemented
        return self._events == other._events

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return f"PrivacyLedger({list(self._events)!r})"

    @property
    def neighbouring(self) -> str:
        """The neighbouring relation of the events (``"replace_one"`` for an empty ledger)."""
        return common_neighbouring(self._events)

    # ------------------------------------------------------------------ costs
    @property
    def mu(self) -> float:
        """Summed μ of the plain :class:`GaussianEvent` releases (subsampled ones excluded).

        Examples
        --------
        >>> from pymc_dp.accounting import GaussianEvent
        >>> PrivacyLedger([GaussianEvent(name="g", count=8, noise_multiplier=2.0)]).mu
        1.0
        """
        return math.fsum(e.mu for e in self._events if isinstance(e, GaussianEvent))

    @property
    def pure_epsilon(self) -> float:
        """Summed ε of the pure events (``count · ε`` each).

        Examples
        --------
        >>> from pymc_dp.accounting import LaplaceEvent
        >>> PrivacyLedger([LaplaceEvent(name="l", count=3, epsilon=0.25)]).pure_epsilon
        0.75
        """
        return pure_epsilon(self._events)

    def epsilon(self, delta: float) -> float:
        """The composed ε at ``delta`` (see the module docstring for the rules).

        Parameters
        ----------
        delta : float
            δ in (0, 1), or 0 (then ε is finite only if every non-zero event is pure).

        Returns
        -------
        float
            ε ≥ 0, an upper bound on the privacy loss (exact for Gaussian events).

        Raises
        ------
        ValueError
            If ``delta`` is invalid, or the events need an accountant combination that
            dp-accounting does not support (see
            :mod:`~pymc_dp.accounting.dp_accounting_bridge`).

        Examples
        --------
        >>> from pymc_dp.accounting import GaussianEvent
        >>> round(PrivacyLedger([GaussianEvent(name="g", noise_multiplier=1.0)]).epsilon(1e-5), 4)
        4.3772
        """
        if delta == 0 and not isinstance(delta, bool):
            return self.pure_epsilon if not nonpure_events(self._events) else math.inf
        return composed_epsilon(self._events, check_delta(delta), self._cache)

    def bound(self, delta: float) -> str:
        """Which bound gave :meth:`epsilon` at ``delta``.

        ``"gaussian"`` (exact composition of plain Gaussians), ``"pld"``, ``"rdp"``
        (dp-accounting's accountants), ``"pld_without_replacement"`` (releases on batches
        drawn without replacement through their own privacy loss distribution, see
        :mod:`~pymc_dp.accounting.without_replacement`), ``"gaussian_without_subsampling"``
        (the same releases as if each batch were the whole data set), ``"barker_rdp"`` or
        ``"pure"``; for batches drawn without replacement, whichever of the last three bounds
        was smallest.

        Examples
        --------
        >>> from pymc_dp.accounting import SubsampledGaussianEvent
        >>> ev = SubsampledGaussianEvent(name="s", noise_multiplier=1.0, sampling_rate=0.94,
        ...                              count=10)
        >>> PrivacyLedger([ev]).bound(1e-5)
        'pld_without_replacement'
        """
        if delta == 0 and not isinstance(delta, bool):
            return "pure" if not nonpure_events(self._events) else "none"
        return composed_bound(self._events, check_delta(delta), self._cache)[1]

    def delta(self, epsilon: float) -> float:
        """The composed δ at ``epsilon``.

        By basic composition ``δ(ε) = δ_nonpure(ε − ε_pure)``; for ``ε < ε_pure`` there is no
        guarantee and 1.0 is returned.

        Parameters
        ----------
        epsilon : float
            ε ≥ 0, finite.

        Returns
        -------
        float
            δ in [0, 1], an upper bound (exact for Gaussian events).

        Raises
        ------
        ValueError
            If ``epsilon`` is negative, NaN or infinite.

        Examples
        --------
        >>> from pymc_dp.accounting import GaussianEvent, LaplaceEvent
        >>> ledger = PrivacyLedger([GaussianEvent(name="g", noise_multiplier=1.0),
        ...                         LaplaceEvent(name="l", epsilon=0.5)])
        >>> round(ledger.delta(1.5), 4)
        0.1269
        >>> ledger.delta(0.25)
        1.0
        """
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        remaining = float(epsilon) - self.pure_epsilon
        if remaining < 0:
            return 1.0
        return composed_delta(self._events, remaining, self._cache)

    # ------------------------------------------------------------------ reporting
    def summary(self, delta: float | None = None) -> list[dict]:
        """One plain dict per event: what it is and what it costs on its own.

        Keys: ``kind``, ``name``, ``count``, ``neighbouring``; for Gaussian events
        ``noise_multiplier``, ``sensitivity`` and ``mu`` (plus ``sampling_rate`` and
        ``sampling`` when subsampled); for pure events ``epsilon_per_release``,
        ``sensitivity`` (Laplace) and ``epsilon`` (``count · ε``). With ``delta`` given,
        Gaussian rows also get ``epsilon``: the cost of that event alone at ``delta``
        (subsampled rows then run dp-accounting once each), and ``bound``: which bound gave
        it (see :meth:`bound`). Costs of separate rows do not
        add up to the ledger's ε: the ledger composes them tightly.

        Parameters
        ----------
        delta : float, optional
            δ at which to give each Gaussian event's own ε.

        Returns
        -------
        list of dict
            JSON-safe rows, in the ledger's order.

        Examples
        --------
        >>> from pymc_dp.accounting import GaussianEvent
        >>> PrivacyLedger([GaussianEvent(name="g", count=2, noise_multiplier=1.0)]).summary()
        [{'kind': 'gaussian', 'name': 'g', 'count': 2, 'neighbouring': 'replace_one', \
'noise_multiplier': 1.0, 'sensitivity': 'normalised', 'mu': 1.0}]
        """
        if delta is not None:
            delta = check_delta(delta)
        return [summary_row(e, delta) for e in self._events]

    def to_dict(self) -> dict:
        """A JSON-safe dict that :meth:`from_dict` reads back.

        Examples
        --------
        >>> import json
        >>> from pymc_dp.accounting import GaussianEvent
        >>> ledger = PrivacyLedger([GaussianEvent(name="g", noise_multiplier=2.0)])
        >>> PrivacyLedger.from_dict(json.loads(json.dumps(ledger.to_dict()))) == ledger
        True
        """
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "events": [e.to_dict() for e in self._events],
        }

    @classmethod
    def from_dict(cls, data: dict) -> PrivacyLedger:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If ``data`` is not a ledger dict of a known version.

        Examples
        --------
        >>> PrivacyLedger.from_dict({"events": []})
        PrivacyLedger([])
        """
        if not isinstance(data, dict) or "events" not in data:
            raise ValueError("not a PrivacyLedger dict: expected a dict with an 'events' list")
        if data.get("format", _FORMAT) != _FORMAT or data.get("version", _VERSION) != _VERSION:
            raise ValueError(
                f"unsupported ledger format {data.get('format')!r} version {data.get('version')!r}"
            )
        return cls(event_from_dict(e) for e in data["events"])
