"""Bridge from :mod:`pymc_dp.accounting.events` to Google's ``dp_accounting`` accountants.

Used for what the closed form of :mod:`pymc_dp.accounting.gaussian` cannot do: subsampled
Gaussian mechanisms (thesis 3.3–3.4). Each query builds one accountant, composes every event
once (``accountant.compose(event, count)``; plain Gaussian events are first merged into one
Gaussian of the summed μ, which is exact) and asks it for ε or δ.

Which accountant supports what (dp-accounting 0.6, checked against its source and by
running it):

=====================================  ============================  ==========================
our event                              PLD accountant                RDP accountant
=====================================  ============================  ==========================
GaussianEvent, either relation         yes (exact up to ~1e-8)       yes (looser)
Subsampled, ``poisson``, add_remove    yes                           yes
Subsampled, ``poisson``, replace_one   yes (see the caveat below)    **no**: raises
Subsampled, ``without_replacement``,   **no**: raises                yes (Wang, Balle &
replace_one                                                          Kasiviswanathan 2019,
                                                                     Thm 27 ≤ thesis Thm 8)
Subsampled, ``without_replacement``,   **no**: raises                **no**: raises
add_remove
LaplaceEvent, PureDPEvent              not handled here: the ledger adds their ε by basic
                                       composition
=====================================  ============================  ==========================

Unsupported combinations raise :class:`UnsupportedEventError` (a :class:`ValueError`).

Sensitivity conventions (the trap)
----------------------------------
Our events normalise every release by its sensitivity Δ under the event's own neighbouring
relation: the two neighbouring output distributions of one plain release are Gaussians whose
means differ by at most Δ, and ``z = σ/Δ``, ``μ = 1/(2 z²)``. dp-accounting instead defines
the noise multiplier against a bound C on the *norm of one record's contribution*, and under
``REPLACE_ONE`` its PLD accountant lets a replacement move the output by **2C**. Hence:

* PLD accountant, ``REPLACE_ONE``: a plain GaussianEvent with multiplier z is passed as
  ``GaussianDpEvent(2 z)``: dp-accounting then models a mean shift of 2C with C = σ/(2z),
  i.e. a shift of σ/z, which is exactly our μ = 1/(2 z²). Passing z unchanged would report
  the ε of 4μ (verified by running it). Under ``ADD_OR_REMOVE_ONE`` z is passed as is.
* RDP accountant: a plain Gaussian's RDP is ``α/(2 z²)`` whatever the relation, and the
  without-replacement bound is built on the base mechanism's replace-one RDP
  ``α/(2 z²)``; both match our convention, z is passed as is.
* Poisson subsampling: a record absent from the batch contributes nothing, so the privacy of
  Poisson sampling depends on the norm of a record's contribution, not only on the
  difference between two records. For ``poisson`` events we read Δ as that norm bound
  (``‖g(x)‖ ≤ Δ`` for every record x), which under ``add_remove`` is exactly the
  sensitivity and under ``replace_one`` makes a replacement move the output by up to 2Δ
  (dp-accounting's REPLACE_ONE model). If the contributions are clipped to a centred ball of
  radius Δ/2 this is conservative by a factor 2 in the shift. Without a norm bound, a
  replace-one sensitivity alone does not bound Poisson-subsampled privacy.
"""

from __future__ import annotations

import functools
import json
import math
import numbers

from collections.abc import Iterable, Sequence
from dataclasses import replace
from fractions import Fraction

import dp_accounting

from dp_accounting import dp_event as _dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from pymc_dp.accounting.events import (
    LaplaceEvent,
    ADD_REMOVE,
    REPLACE_ONE,
    Event,
    GaussianEvent,
    SubsampledGaussianEvent,
)
from pymc_dp.validation import check_delta

__all__ = [
    "UnsupportedEventError",
    "common_neighbouring",
    "make_pld_accountant",
    "make_rdp_accountant",
    "pld_delta",
    "pld_epsilon",
    "rdp_delta",
    "rdp_epsilon",
    "to_dp_event",
    "export_dp_event",
    "export_json",
    "import_json",
    "from_dp_event",
    "events_from_json",
]

NeighborRel = dp_accounting.NeighboringRelation

_RELATIONS = {
    REPLACE_ONE: NeighborRel.REPLACE_ONE,
    ADD_REMOVE: NeighborRel.ADD_OR_REMOVE_ONE,
}
_ACCOUNTANTS = ("pld", "rdp")

DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-4


class UnsupportedEventError(ValueError):
    """An event that the requested dp-accounting accountant cannot account for."""


def common_neighbouring(events: Iterable[Event]) -> str:
    """The neighbouring relation shared by ``events`` (``"replace_one"`` if there are none).

    Parameters
    ----------
    events : iterable of Event

    Returns
    -------
    str
        ``"replace_one"`` or ``"add_remove"``.

    Raises
    ------
    ValueError
        If the events do not all use the same relation: guarantees under different
        relations cannot be composed into one.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> common_neighbouring([GaussianEvent(name="a", noise_multiplier=1.0)])
    'replace_one'
    """
    relations = {e.neighbouring for e in events}
    if len(relations) > 1:
        raise ValueError(
            f"events use different neighbouring relations {sorted(relations)}; "
            "a composition needs a single relation"
        )
    return relations.pop() if relations else REPLACE_ONE


def _check_accountant(accountant: str) -> str:
    if accountant not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    return accountant


def _label(event: Event) -> str:
    return f"{type(event).__name__}({event.name!r})"


# One converter per event type (singledispatch follows subclasses): one release of the
# event as a dp-accounting DpEvent, see the module docstring.
@functools.singledispatch
def _base_event(event: Event, accountant: str) -> dp_accounting.DpEvent:
    raise UnsupportedEventError(
        f"{_label(event)}: events of kind {event.kind!r} are not converted to dp-accounting; "
        "pure events (laplace, pure) are composed by PrivacyLedger through basic composition"
    )


@_base_event.register(GaussianEvent)
def _gaussian_base_event(event: GaussianEvent, accountant: str) -> dp_accounting.DpEvent:
    z = float(event.noise_multiplier)
    if accountant == "pld" and event.neighbouring == REPLACE_ONE:
        z *= 2.0  # dp-accounting's PLD REPLACE_ONE shifts by 2·sensitivity
    return dp_accounting.GaussianDpEvent(noise_multiplier=z)


@_base_event.register(SubsampledGaussianEvent)
def _subsampled_base_event(
    event: SubsampledGaussianEvent, accountant: str
) -> dp_accounting.DpEvent:
    name = _label(event)
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier=float(event.noise_multiplier))
    q = float(event.sampling_rate)
    if event.sampling == "poisson":
        if accountant == "rdp" and event.neighbouring == REPLACE_ONE:
            raise UnsupportedEventError(
                f"{name}: dp-accounting's RDP accountant does not support Poisson "
                "subsampling under the replace-one relation; use the PLD accountant "
                "(pld_epsilon)"
            )
        return dp_accounting.PoissonSampledDpEvent(sampling_probability=q, event=gaussian)
    # without replacement
    if accountant == "pld":
        raise UnsupportedEventError(
            f"{name}: dp-accounting's PLD accountant does not support sampling without "
            "replacement; use the RDP accountant (rdp_epsilon)"
        )
    if event.neighbouring != REPLACE_ONE:
        raise UnsupportedEventError(
            f"{name}: sampling without replacement is only accounted under the "
            "replace-one relation (dp-accounting's RDP accountant)"
        )
    # The RDP accountant only uses sample_size / source_dataset_size: pass q exactly.
    frac = Fraction(q)
    return dp_accounting.SampledWithoutReplacementDpEvent(
        source_dataset_size=frac.denominator, sample_size=frac.numerator, event=gaussian
    )


def to_dp_event(event: Event, accountant: str = "pld") -> dp_accounting.DpEvent:
    """Convert one event to the dp-accounting DpEvent that ``accountant`` should compose.

    Parameters
    ----------
    event : GaussianEvent or SubsampledGaussianEvent
    accountant : {"pld", "rdp"}
        The accountant the event is meant for: the noise multiplier convention of
        dp-accounting's PLD accountant under ``REPLACE_ONE`` differs from ours (see the
        module docstring).

    Returns
    -------
    dp_accounting.SelfComposedDpEvent
        The base mechanism composed ``event.count`` times.

    Raises
    ------
    UnsupportedEventError
        If ``accountant`` cannot handle the event.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> ev = to_dp_event(GaussianEvent(name="ratio", noise_multiplier=3.0, count=5))
    >>> ev.count, ev.event.noise_multiplier
    (5, 6.0)
    """
    _check_accountant(accountant)
    base = _base_event(event, accountant)
    return dp_accounting.SelfComposedDpEvent(event=base, count=event.count)


def _grouped(events: Sequence[Event], accountant: str) -> list[tuple[dp_accounting.DpEvent, int]]:
    """(DpEvent, count) pairs to compose: plain Gaussians merged into one, others grouped."""
    events = [e for e in events if e.count > 0]
    out: list[tuple[dp_accounting.DpEvent, int]] = []
    gaussians = [e for e in events if isinstance(e, GaussianEvent)]
    if gaussians:
        mu = math.fsum(e.mu for e in gaussians)
        merged = GaussianEvent(
            name="merged",
            noise_multiplier=1.0 / math.sqrt(2.0 * mu),
            neighbouring=gaussians[0].neighbouring,
        )
        out.append((_base_event(merged, accountant), 1))
    counts: dict[dp_accounting.DpEvent, int] = {}
    for e in events:
        if isinstance(e, GaussianEvent):
            continue
        base = _base_event(e, accountant)  # raises for unsupported events
        counts[base] = counts.get(base, 0) + e.count
    out.extend(counts.items())
    return out


def _compose(accountant_obj, pairs) -> None:
    for base, count in pairs:
        if not accountant_obj.supports(base):  # a safety net behind _base_event's checks
            raise UnsupportedEventError(f"dp-accounting cannot account for {base!r}")
        accountant_obj.compose(base, count)


def make_pld_accountant(
    events: Iterable[Event],
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> pld_privacy_accountant.PLDAccountant:
    """A dp-accounting PLD accountant with all ``events`` composed into it.

    Parameters
    ----------
    events : iterable of Event
        Gaussian and Poisson-subsampled Gaussian events, all under one neighbouring relation.
    value_discretization_interval : float, optional
        Discretisation of the privacy loss; 1e-4 (dp-accounting's default) gives an ε within
        ~1e-8 above the exact value for plain Gaussians and takes well under a second.

    Returns
    -------
    dp_accounting.pld.PLDAccountant
        Pessimistic (its ε and δ are upper bounds).

    Raises
    ------
    UnsupportedEventError
        For sampling without replacement, or a pure event.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> acc = make_pld_accountant([GaussianEvent(name="g", noise_multiplier=1.0)])
    >>> round(float(acc.get_epsilon(1e-5)), 4)
    4.3772
    """
    events = list(events)
    relation = _RELATIONS[common_neighbouring(events)]
    acc = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=relation,
        value_discretization_interval=value_discretization_interval,
    )
    _compose(acc, _grouped(events, "pld"))
    return acc


def make_rdp_accountant(
    events: Iterable[Event], *, orders: Sequence[float] | None = None
) -> rdp_privacy_accountant.RdpAccountant:
    """A dp-accounting RDP accountant with all ``events`` composed into it.

    Parameters
    ----------
    events : iterable of Event
        Gaussian events; Poisson-subsampled ones under ``add_remove``; without-replacement
        ones under ``replace_one``. All under one neighbouring relation.
    orders : sequence of float, optional
        RDP orders (dp-accounting's default set if omitted).

    Returns
    -------
    dp_accounting.rdp.RdpAccountant

    Raises
    ------
    UnsupportedEventError
        For Poisson subsampling under replace-one, or a pure event.

    Examples
    --------
    >>> from pymc_dp.accounting.events import SubsampledGaussianEvent
    >>> ev = SubsampledGaussianEvent(name="batch", noise_multiplier=1.0, sampling_rate=0.01,
    ...                              count=1000)
    >>> acc = make_rdp_accountant([ev])
    >>> round(float(acc.get_epsilon(1e-5)), 3)
    3.576
    """
    events = list(events)
    relation = _RELATIONS[common_neighbouring(events)]
    acc = rdp_privacy_accountant.RdpAccountant(orders=orders, neighboring_relation=relation)
    _compose(acc, _grouped(events, "rdp"))
    return acc


def _check_nonnegative_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    value = float(epsilon)
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return value


def _is_empty(events: Sequence[Event]) -> bool:
    return all(e.count == 0 for e in events)


def pld_epsilon(
    events: Iterable[Event],
    delta: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """ε(δ) of the composition of ``events`` by dp-accounting's PLD accountant.

    Parameters
    ----------
    events : iterable of Event
        See :func:`make_pld_accountant`.
    delta : float
        δ in (0, 1).
    value_discretization_interval : float, optional
        See :func:`make_pld_accountant`.

    Returns
    -------
    float
        An upper bound on the tight ε (0.0 for no events).

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> from pymc_dp.accounting.gaussian import gaussian_epsilon
    >>> ev = GaussianEvent(name="g", noise_multiplier=2.0, count=10)
    >>> abs(pld_epsilon([ev], 1e-5) - gaussian_epsilon(ev.mu, 1e-5)) < 1e-6
    True
    """
    events = list(events)
    delta = check_delta(delta)
    acc = make_pld_accountant(events, value_discretization_interval=value_discretization_interval)
    if _is_empty(events):
        return 0.0
    return float(acc.get_epsilon(delta))


def pld_delta(
    events: Iterable[Event],
    epsilon: float,
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """δ(ε) of the composition of ``events`` by dp-accounting's PLD accountant.

    Parameters
    ----------
    events : iterable of Event
        See :func:`make_pld_accountant`.
    epsilon : float
        ε ≥ 0.
    value_discretization_interval : float, optional
        See :func:`make_pld_accountant`.

    Returns
    -------
    float
        An upper bound on the tight δ (0.0 for no events).

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> round(pld_delta([GaussianEvent(name="g", noise_multiplier=1.0)], 1.0), 4)
    0.1269
    """
    events = list(events)
    epsilon = _check_nonnegative_epsilon(epsilon)
    acc = make_pld_accountant(events, value_discretization_interval=value_discretization_interval)
    if _is_empty(events):
        return 0.0
    return float(acc.get_delta(epsilon))


def rdp_epsilon(
    events: Iterable[Event], delta: float, *, orders: Sequence[float] | None = None
) -> float:
    """ε(δ) of the composition of ``events`` by dp-accounting's RDP accountant.

    Parameters
    ----------
    events : iterable of Event
        See :func:`make_rdp_accountant`.
    delta : float
        δ in (0, 1).
    orders : sequence of float, optional
        RDP orders.

    Returns
    -------
    float
        An upper bound on ε (looser than the PLD one; 0.0 for no events).

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> from pymc_dp.accounting.gaussian import gaussian_epsilon
    >>> ev = GaussianEvent(name="g", noise_multiplier=2.0, count=10)
    >>> rdp_epsilon([ev], 1e-5) >= gaussian_epsilon(ev.mu, 1e-5)
    True
    """
    events = list(events)
    delta = check_delta(delta)
    acc = make_rdp_accountant(events, orders=orders)
    if _is_empty(events):
        return 0.0
    return float(acc.get_epsilon(delta))


def rdp_delta(
    events: Iterable[Event], epsilon: float, *, orders: Sequence[float] | None = None
) -> float:
    """δ(ε) of the composition of ``events`` by dp-accounting's RDP accountant.

    Parameters
    ----------
    events : iterable of Event
        See :func:`make_rdp_accountant`.
    epsilon : float
        ε ≥ 0.
    orders : sequence of float, optional
        RDP orders.

    Returns
    -------
    float
        An upper bound on δ (0.0 for no events).

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> rdp_delta([GaussianEvent(name="g", noise_multiplier=1.0)], 1.0) >= 0.1269
    True
    """
    events = list(events)
    epsilon = _check_nonnegative_epsilon(epsilon)
    acc = make_rdp_accountant(events, orders=orders)
    if _is_empty(events):
        return 0.0
    return float(acc.get_delta(epsilon))


# ---------------------------------------------------------------------- export
def export_dp_event(events: Iterable[Event], accountant: str) -> dp_accounting.DpEvent:
    """Every event of a ledger as one dp-accounting ``ComposedDpEvent``, for ``accountant``.

    The events are in ``accountant``'s own convention (see "Sensitivity conventions" above):
    compose the result only in a dp-accounting accountant of that kind (``"pld"``: a
    ``PLDAccountant``; ``"rdp"``: an ``RdpAccountant``) built with the ledger's
    neighbouring relation (:func:`common_neighbouring`). Under replace-one neighbouring a
    plain Gaussian exported for ``"pld"`` and composed by an RDP accountant would count a
    quarter of its μ. Pure events (Laplace, pure ε, DP Barker) have no dp-accounting form
    here and are refused: add their ε by basic composition.

    Raises
    ------
    UnsupportedEventError
        An event ``accountant`` cannot account for, or one with no dp-accounting form.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent
    >>> ev = export_dp_event([GaussianEvent(name="g", noise_multiplier=2.0, count=3)], "rdp")
    >>> ev.events[0].count, ev.events[0].event.noise_multiplier
    (3, 2.0)
    """
    events = [e for e in events if e.count > 0]
    common_neighbouring(events)  # (one relation, or refused)
    return dp_accounting.ComposedDpEvent([to_dp_event(e, accountant) for e in events])


def export_json(events: Iterable[Event], accountant: str) -> str:
    """:func:`export_dp_event` as JSON that names its accountant and neighbouring relation.

    The event is dp-accounting's own named-tuple form (``DpEvent.to_named_tuple``) with
    field names kept; :func:`import_json` reads it back.
    """
    events = list(events)
    relation = _RELATIONS[common_neighbouring(events)] if events else None
    return json.dumps({
        "format": _EXPORT_FORMAT,
        "accountant": _check_accountant(accountant),
        "neighboring_relation": None if relation is None else relation.name,
        "event": _plain(export_dp_event(events, accountant).to_named_tuple()),
    })


def import_json(text: str) -> tuple[dp_accounting.DpEvent, str, NeighborRel | None]:
    """``(event, accountant, neighbouring relation)`` from :func:`export_json`'s text.

    Only event classes of ``dp_accounting.dp_event`` are built (the text names classes:
    nothing else is imported or called).
    """
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != _EXPORT_FORMAT:
        raise ValueError(f"not a {_EXPORT_FORMAT!r} document")
    relation = data["neighboring_relation"]
    return (
        _event_from_plain(data["event"]),
        _check_accountant(data["accountant"]),
        None if relation is None else NeighborRel[relation],
    )


_EXPORT_FORMAT = "pymc_dp dp-accounting export 1"


# ---------------------------------------------------------------------- import
def from_dp_event(
    event: dp_accounting.DpEvent, accountant: str, neighbouring: str, *, name: str = "imported"
) -> list[Event]:
    """Our events for a dp-accounting ``DpEvent``: other releases, counted in a budget.

    The reverse of :func:`export_dp_event`, for the releases a user made elsewhere (with
    TF Privacy, Opacus, PipelineDP or by hand) on the same people, so that a
    :class:`pymc_dp.Budget` counts them: ``budget.reserve(from_dp_event(...))``. The noise
    multiplier of a dp-accounting event means different things to its two accountants
    (see "Sensitivity conventions" above), so ``accountant`` must name the one the event
    was written for, and ``neighbouring`` the relation it was accounted under.

    Converted: ``GaussianDpEvent``; ``LaplaceDpEvent`` (not for ``"pld"`` under
    replace-one, which dp-accounting does not define); ``PoissonSampledDpEvent`` and
    ``SampledWithoutReplacementDpEvent`` of a Gaussian where dp-accounting's accountant of
    that kind accounts for them; ``SelfComposedDpEvent``, ``ComposedDpEvent`` and
    ``NoOpDpEvent``. Anything else (zCDP, randomized response, tree aggregation, a
    non-private or unsupported event) is refused: no release is counted at a guess.

    Parameters
    ----------
    event : dp_accounting.DpEvent
    accountant : {"pld", "rdp"}
        The dp-accounting accountant the event was written for.
    neighbouring : {"replace_one", "add_remove"}
        The relation it was accounted under; a budget composes only one relation.
    name : str
        The events' name in the ledger and the report.

    Returns
    -------
    list of Event

    Raises
    ------
    UnsupportedEventError
        An event with no faithful counterpart here.

    Examples
    --------
    >>> import dp_accounting
    >>> census = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(8.0), 3)
    >>> [e] = from_dp_event(census, "pld", "replace_one", name="census tables")
    >>> e.noise_multiplier, e.count
    (4.0, 3)
    """
    _check_accountant(accountant)
    if neighbouring not in _RELATIONS:
        raise ValueError(
            f"neighbouring must be {REPLACE_ONE!r} or {ADD_REMOVE!r}, got {neighbouring!r}"
        )
    return [
        replace(e, name=str(name)) for e in _from_dp_event(event, accountant, neighbouring, 1)
    ]


def events_from_json(text: str, *, name: str = "imported") -> list[Event]:
    """Our events from :func:`export_json`'s text (ours or another tool's in that format)."""
    event, accountant, relation = import_json(text)
    relations = {v: k for k, v in _RELATIONS.items()}
    neighbouring = REPLACE_ONE if relation is None else relations[relation]
    return from_dp_event(event, accountant, neighbouring, name=name)


@functools.singledispatch
def _from_dp_event(event, accountant: str, neighbouring: str, count: int) -> list[Event]:
    raise UnsupportedEventError(
        f"{type(event).__name__} has no counterpart among pymc_dp's events: it cannot be "
        "counted in a budget. Reserve a PureDPEvent with the ε your own accountant gives "
        "it, if that is a pure ε."
    )


@_from_dp_event.register(dp_accounting.NoOpDpEvent)
def _(event, accountant, neighbouring, count):
    return []


@_from_dp_event.register(dp_accounting.ComposedDpEvent)
def _(event, accountant, neighbouring, count):
    return [e for part in event.events
            for e in _from_dp_event(part, accountant, neighbouring, count)]


@_from_dp_event.register(dp_accounting.SelfComposedDpEvent)
def _(event, accountant, neighbouring, count):
    times = event.count
    if not (isinstance(times, numbers.Integral) and times >= 0):
        raise UnsupportedEventError("a SelfComposedDpEvent needs a count that is an integer ≥ 0")
    return _from_dp_event(event.event, accountant, neighbouring, count * int(times))


@_from_dp_event.register(dp_accounting.GaussianDpEvent)
def _(event, accountant, neighbouring, count):
    z = float(event.noise_multiplier)
    if accountant == "pld" and neighbouring == REPLACE_ONE:
        z /= 2.0  # (the inverse of _gaussian_base_event's doubling)
    return [] if count == 0 else [
        GaussianEvent(name="imported", noise_multiplier=z, count=count, neighbouring=neighbouring)
    ]


@_from_dp_event.register(dp_accounting.LaplaceDpEvent)
def _(event, accountant, neighbouring, count):
    if accountant == "pld" and neighbouring == REPLACE_ONE:
        raise UnsupportedEventError(
            "dp-accounting's PLD accountant does not define a LaplaceDpEvent under the "
            "replace-one relation; give the ε your own accounting gives it as a PureDPEvent"
        )
    b = float(event.noise_multiplier)
    if not (math.isfinite(b) and b > 0):
        raise UnsupportedEventError("a LaplaceDpEvent needs a noise multiplier > 0")
    # Both accountants read Lap(b) as ε = 1/b for one unit of sensitivity.
    return [] if count == 0 else [
        LaplaceEvent(name="imported", epsilon=1.0 / b, count=count, neighbouring=neighbouring)
    ]


@_from_dp_event.register(dp_accounting.PoissonSampledDpEvent)
def _(event, accountant, neighbouring, count):
    if accountant == "rdp" and neighbouring == REPLACE_ONE:
        raise UnsupportedEventError(
            "dp-accounting's RDP accountant does not account for Poisson subsampling under "
            "the replace-one relation"
        )
    return _subsampled(event.event, float(event.sampling_probability), "poisson",
                       neighbouring, count)


@_from_dp_event.register(dp_accounting.SampledWithoutReplacementDpEvent)
def _(event, accountant, neighbouring, count):
    if accountant != "rdp" or neighbouring != REPLACE_ONE:
        raise UnsupportedEventError(
            "sampling without replacement is accounted only by dp-accounting's RDP "
            "accountant under the replace-one relation"
        )
    size, sample = event.source_dataset_size, event.sample_size
    if not (isinstance(size, numbers.Integral) and isinstance(sample, numbers.Integral)
            and 0 < sample <= size):
        raise UnsupportedEventError(
            "a SampledWithoutReplacementDpEvent needs integer sizes 0 < sample ≤ source"
        )
    return _subsampled(event.event, sample / size, "without_replacement", neighbouring, count)


def _subsampled(base, rate: float, sampling: str, neighbouring: str, count: int) -> list[Event]:
    # Subsampled Gaussians only: what our ledger accounts for (the noise multiplier is the
    # same number in both conventions, see the module docstring).
    if type(base) is not dp_accounting.GaussianDpEvent:
        raise UnsupportedEventError(
            f"only a subsampled GaussianDpEvent is converted, not one of {type(base).__name__}"
        )
    return [] if count == 0 else [SubsampledGaussianEvent(
        name="imported", noise_multiplier=float(base.noise_multiplier), sampling_rate=rate,
        sampling=sampling, count=count, neighbouring=neighbouring,
    )]


def _plain(value):
    """dp-accounting's named tuples as dicts (field names kept), recursively."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _event_from_plain(value):
    if isinstance(value, list):
        return [_event_from_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    fields = dict(value)
    module, name = fields.pop("module_name", None), fields.pop("class_name", None)
    cls = getattr(_dp_event, str(name), None)
    if module != "dp_accounting.dp_event" or not (
        isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)
    ):
        raise ValueError("the document names a class that is not a dp-accounting DpEvent")
    return cls(**{k: _event_from_plain(v) for k, v in fields.items()})
