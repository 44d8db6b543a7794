"""How a mix of events is composed into (ε, δ): one registered rule per event type.

The one place that decides which accountant a ledger uses (the rules are stated in
:mod:`pymc_dp.accounting.ledger`). Every event type registers an :class:`EventRule`:

* a **pure** event gives its ε (``count · ε``); pure events add by basic composition
  (ledger rule 3);
* any other event names the :class:`Route` its releases need. A mix is composed by the most
  general route any of its events with ``count > 0`` needs, ranked

  ====  ==============  ======================================  ==========================
  rank  route           accountant                              needed by
  ====  ==============  ======================================  ==========================
  1     ``gaussian``    exact Gaussian PLD of the summed μ      GaussianEvent (rule 1)
  2     ``pld``         dp-accounting's PLD accountant          SubsampledGaussianEvent,
                                                                ``poisson`` (rule 2)
  3     ``rdp``         dp-accounting's RDP accountant          SubsampledGaussianEvent,
                                                                ``without_replacement``
                                                                (rule 2)
  4     ``barker_rdp``  RDP at DP Barker's orders, plus         BarkerEvent (rule 4)
                        dp-accounting's RDP of the others
  ====  ==============  ======================================  ==========================

  and every route composes *all* the non-pure events of the mix (so one Barker event moves
  the Gaussians into RDP too). A route therefore has to take every event of lower rank, or
  refuse it with :class:`~pymc_dp.accounting.dp_accounting_bridge.UnsupportedEventError`
  (the RDP routes refuse Poisson subsampling under replace-one): a new event type gets the
  rank above every route that cannot account it. A route may also hold **alternative
  bounds** (:class:`Bound`): other upper bounds on the same mix that hold under their own
  stated assumptions; the route answers with the smallest of its own and those that apply,
  and says which one it was (:func:`composed_bound`). The ``rdp`` route has two: the
  releases' own privacy loss distribution for sampling without replacement
  (:data:`WOR_PLD`), and the same releases as if every batch were the whole data set
  (:data:`UNSAMPLED_GAUSSIAN`), the exact Gaussian composition of their summed μ, which
  sampling without replacement can only improve on;
* and the fields of its row in :meth:`PrivacyLedger.summary
  <pymc_dp.accounting.ledger.PrivacyLedger.summary>`.

Events without a rule cannot be accounted and are refused by the ledger.
"""

from __future__ import annotations

import math

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pymc_dp.accounting.barker import barker_delta, barker_epsilon
from pymc_dp.accounting.dp_accounting_bridge import (
    UnsupportedEventError,
    pld_delta,
    pld_epsilon,
    rdp_delta,
    rdp_epsilon,
)
from pymc_dp.accounting.events import (
    REPLACE_ONE,
    BarkerEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)
from pymc_dp.accounting.gaussian import gaussian_delta, gaussian_epsilon, gaussian_mu
from pymc_dp.accounting.without_replacement import wor_pld_delta, wor_pld_epsilon

__all__ = [
    "BARKER_RDP",
    "GAUSSIAN",
    "PLD",
    "PURE",
    "RDP",
    "UNSAMPLED_GAUSSIAN",
    "WOR_PLD",
    "Bound",
    "EventRule",
    "Route",
    "composed_bound",
    "composed_delta",
    "composed_epsilon",
    "has_rule",
    "nonpure_events",
    "pure_epsilon",
    "register_rule",
    "route_of",
    "rule_for",
    "summary_row",
    "tightest",
]


@dataclass(frozen=True)
class Bound:
    """A second valid upper bound on the cost of a mix, besides its route's own.

    Parameters
    ----------
    name : str
        How the ledger's summary and the reports call it.
    applies : callable
        ``events ↦ bool``: whether the bound's assumptions hold for every event of the mix
        (sampling scheme, neighbouring relation, event type). Only then is it used.
    epsilon, delta : callable
        ``(events, delta) ↦ ε`` and ``(events, epsilon) ↦ δ``, each an upper bound.
    """

    name: str
    applies: Callable[[Sequence[Event]], bool]
    epsilon: Callable[[Sequence[Event], float], float]
    delta: Callable[[Sequence[Event], float], float]


@dataclass(frozen=True)
class Route:
    """An accountant for a mix of non-pure events.

    Parameters
    ----------
    name : str
        How tests and messages call it.
    rank : int
        A mix takes the route of highest rank among its events.
    epsilon, delta : callable
        ``(events, delta) ↦ ε`` and ``(events, epsilon) ↦ δ`` of the non-pure events.
    cached : bool
        Whether a ledger keeps its answers (worth it for dp-accounting queries only).
    accepts : tuple of type
        The event types whose rule it can honour: an event whose rule belongs to another
        type (a subclass with a rule of its own, whose cost its parent's accountant would
        not see) is refused rather than accounted as its parent.
    alternatives : tuple of Bound
        Other valid bounds on the same mix: where one applies and is smaller, it is the
        answer (each upper bound holds, so the smallest does).
    """

    name: str
    rank: int
    epsilon: Callable[[Sequence[Event], float], float] | None = None
    delta: Callable[[Sequence[Event], float], float] | None = None
    cached: bool = True
    accepts: tuple[type, ...] = ()
    alternatives: tuple[Bound, ...] = ()


def _summed_mu(events: Sequence[Event]) -> float:
    return math.fsum(e.mu for e in events)


# The exact closed form needs no cache; dp-accounting's answers are kept (seconds each).
# Its δ can exceed 1 by rounding: capped, as a probability.
PURE = Route("pure", 0)
GAUSSIAN = Route(
    "gaussian",
    1,
    epsilon=lambda events, delta: gaussian_epsilon(_summed_mu(events), delta),
    delta=lambda events, epsilon: gaussian_delta(epsilon, _summed_mu(events)),
    cached=False,
    accepts=(GaussianEvent,),
)
_DP_ACCOUNTING = (GaussianEvent, SubsampledGaussianEvent)


def _unsampled_applies(events: Sequence[Event]) -> bool:
    """Every event a plain Gaussian, or a Gaussian on a batch drawn without replacement under
    replace-one neighbours (nothing else: not Poisson, not a subclass with its own rule)."""
    return all(
        _rule_owner(e) is GaussianEvent
        or (
            _rule_owner(e) is SubsampledGaussianEvent
            and e.sampling == "without_replacement"
            and e.neighbouring == REPLACE_ONE
        )
        for e in events
    )


def _unsampled_mu(events: Sequence[Event]) -> float:
    """Summed μ = count/(2 z²) of every release, its batch ignored."""
    return math.fsum(gaussian_mu(e.noise_multiplier, e.count) for e in events)


#: The releases as if each batch were the whole data set: exact Gaussian composition of
#: their summed μ (thesis Thm 4). Valid for sampling without replacement under replace-one:
#: coupling the two neighbours' batches by the same indices, every batch pair differs in at
#: most one row, so given the batch the release is a Gaussian whose means differ by at most
#: the sensitivity; the release is a mixture of such pairs over batches, and a hockey-stick
#: divergence of mixtures is at most the largest of their pairs' (joint convexity), at every
#: ε including negative ones. So N(1, z²) vs N(0, z²) dominates each release, and dominating
#: pairs compose adaptively (Zhu, Dong & Wang 2022). See docs/subsampling.md.
UNSAMPLED_GAUSSIAN = Bound(
    "gaussian_without_subsampling",
    applies=_unsampled_applies,
    epsilon=lambda events, delta: gaussian_epsilon(_unsampled_mu(events), delta),
    delta=lambda events, epsilon: gaussian_delta(epsilon, _unsampled_mu(events)),
)

#: The same mix through the privacy loss distribution of a Gaussian release on a batch drawn
#: without replacement under replace-one neighbours (a dominating pair for every order of
#: the neighbours, composed by dp-accounting; the derivation is in
#: :mod:`pymc_dp.accounting.without_replacement` and docs/subsampling.md). Applies to the same
#: mixes as :data:`UNSAMPLED_GAUSSIAN`.
WOR_PLD = Bound(
    "pld_without_replacement",
    applies=_unsampled_applies,
    epsilon=wor_pld_epsilon,
    delta=wor_pld_delta,
)

PLD = Route("pld", 2, pld_epsilon, lambda events, epsilon: min(1.0, pld_delta(events, epsilon)),
            accepts=_DP_ACCOUNTING)
RDP = Route("rdp", 3, rdp_epsilon, lambda events, epsilon: min(1.0, rdp_delta(events, epsilon)),
            accepts=_DP_ACCOUNTING, alternatives=(WOR_PLD, UNSAMPLED_GAUSSIAN))
BARKER_RDP = Route("barker_rdp", 4, barker_epsilon, barker_delta,
                   accepts=_DP_ACCOUNTING + (BarkerEvent,))


@dataclass(frozen=True)
class EventRule:
    """How one event type is composed and summarised (see :func:`register_rule`)."""

    row: Callable[[Event], dict]
    route: Callable[[Event], Route] | None = None
    pure_epsilon: Callable[[Event], float] | None = None

    @property
    def pure(self) -> bool:
        return self.route is None


_RULES: dict[type, EventRule] = {}


def register_rule(
    event_type: type[Event],
    *,
    row: Callable[[Event], dict],
    route: Callable[[Event], Route] | None = None,
    pure_epsilon: Callable[[Event], float] | None = None,
) -> None:
    """Say how events of ``event_type`` (and its subclasses) are composed.

    Parameters
    ----------
    event_type : type
        A subclass of :class:`~pymc_dp.accounting.events.Event`.
    row : callable
        ``event ↦ dict``: the fields of its summary row after ``kind``, ``name``, ``count``
        and ``neighbouring``.
    route : callable, optional
        ``event ↦ Route``: the accountant a non-pure event needs.
    pure_epsilon : callable, optional
        ``event ↦ ε``: the whole cost of a pure event (δ = 0). Exactly one of ``route`` and
        ``pure_epsilon`` is given.

    Raises
    ------
    ValueError
        If not exactly one of ``route`` and ``pure_epsilon`` is given.
    """
    if (route is None) == (pure_epsilon is None):
        raise ValueError("register_rule needs exactly one of route= and pure_epsilon=")
    _RULES[event_type] = EventRule(row=row, route=route, pure_epsilon=pure_epsilon)


def _rule_owner(event) -> type | None:
    """``event``'s type or its nearest base class with a registered rule (else None)."""
    for cls in type(event).__mro__:
        if cls in _RULES:
            return cls
    return None


def rule_for(event: Event) -> EventRule | None:
    """The rule of ``event``'s type or of its nearest registered base class (else None)."""
    owner = _rule_owner(event)
    return None if owner is None else _RULES[owner]


def has_rule(event) -> bool:
    """Whether ``event`` can be accounted (its type has a rule)."""
    return rule_for(event) is not None


# ---------------------------------------------------------------------- the rules, per type
def _count_times_epsilon(event) -> float:
    """Basic composition of ``count`` ε-DP releases (ledger rule 3)."""
    return event.count * event.epsilon


def _gaussian_route(event: GaussianEvent) -> Route:
    return GAUSSIAN


def _subsampled_route(event: SubsampledGaussianEvent) -> Route:
    # dp-accounting's PLD accountant does not support sampling without replacement.
    return RDP if event.sampling == "without_replacement" else PLD


def _barker_route(event: BarkerEvent) -> Route:
    return BARKER_RDP


def _gaussian_row(e: GaussianEvent) -> dict:
    return {"noise_multiplier": e.noise_multiplier, "sensitivity": e.sensitivity, "mu": e.mu}


def _subsampled_row(e: SubsampledGaussianEvent) -> dict:
    return {
        "noise_multiplier": e.noise_multiplier,
        "sampling_rate": e.sampling_rate,
        "sampling": e.sampling,
        "sensitivity": e.sensitivity,
    }


def _barker_row(e: BarkerEvent) -> dict:
    return {
        "n_data": e.n_data,
        "batch_size": e.batch_size,
        "sampling_rate": e.sampling_rate,
        "noise_variance": e.noise_variance,
        "sensitivity": "|Δλ| ≤ 2/√b, |Δs²| ≤ 5/b (thesis Thm 7)",
    }


def _laplace_row(e: LaplaceEvent) -> dict:
    return {
        "epsilon_per_release": e.epsilon,
        "sensitivity": e.sensitivity,
        "epsilon": _count_times_epsilon(e),
    }


def _pure_row(e: PureDPEvent) -> dict:
    row = {"epsilon_per_release": e.epsilon, "epsilon": _count_times_epsilon(e)}
    if e.description:
        row["description"] = e.description
    return row


register_rule(GaussianEvent, route=_gaussian_route, row=_gaussian_row)
register_rule(SubsampledGaussianEvent, route=_subsampled_route, row=_subsampled_row)
register_rule(BarkerEvent, route=_barker_route, row=_barker_row)
register_rule(LaplaceEvent, pure_epsilon=_count_times_epsilon, row=_laplace_row)
register_rule(PureDPEvent, pure_epsilon=_count_times_epsilon, row=_pure_row)


# ---------------------------------------------------------------------- composition
def pure_epsilon(events: Iterable[Event]) -> float:
    """Summed ε of the pure events (ledger rule 3)."""
    rules = ((rule_for(e), e) for e in events)
    return math.fsum(rule.pure_epsilon(e) for rule, e in rules if rule.pure)


def nonpure_events(events: Iterable[Event]) -> tuple[Event, ...]:
    """The non-pure events that released something (``count > 0``), in order."""
    return tuple(e for e in events if not rule_for(e).pure and e.count > 0)


def route_of(events: Iterable[Event]) -> Route:
    """The route that composes ``events``: the highest-ranked one any non-pure event needs.

    :data:`PURE` when no non-pure event has ``count > 0``.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent, SubsampledGaussianEvent
    >>> route_of([GaussianEvent(name="g", noise_multiplier=1.0)]).name
    'gaussian'
    >>> route_of([GaussianEvent(name="g", noise_multiplier=1.0),
    ...           SubsampledGaussianEvent(name="s", noise_multiplier=1.0, sampling_rate=0.1)]).name
    'rdp'
    """
    nonpure = nonpure_events(events)
    routes = [rule_for(e).route(e) for e in nonpure]
    route = max(routes, key=lambda r: r.rank, default=PURE)
    foreign = sorted({_rule_owner(e).__name__ for e, own in zip(nonpure, routes)
                      if own is not route and _rule_owner(e) not in route.accepts})
    if foreign:  # (fail closed: its own rule would be bypassed)
        raise UnsupportedEventError(
            f"Events of type {foreign} cannot be composed with the others: their mix needs "
            f"the {route.name!r} route, which does not know their rule."
        )
    return route


def tightest(route: Route, which: str, nonpure: Sequence[Event], value: float,
             own: float | None = None) -> tuple[float, str]:
    """``(answer, bound name)``: the smallest of ``route``'s own answer (``own`` if given,
    e.g. computed over fewer RDP orders) and its alternatives that apply to ``nonpure``.

    ``which`` is ``"epsilon"`` (``value`` is δ) or ``"delta"`` (``value`` is ε). The route's
    own bound is asked first, so a mix it refuses is refused whatever the alternatives say.
    """
    if own is None:
        own = (route.epsilon if which == "epsilon" else route.delta)(nonpure, value)
    best = (own, route.name)
    for bound in route.alternatives:
        if bound.applies(nonpure):
            answer = (bound.epsilon if which == "epsilon" else bound.delta)(nonpure, value)
            if answer < best[0]:
                best = (answer, bound.name)
    return best


def _ask(route: Route, which: str, nonpure: tuple[Event, ...], value: float,
         cache) -> tuple[float, str]:
    if cache is None or not route.cached:
        return tightest(route, which, nonpure, value)
    key = (route.name, which, nonpure, value)
    if key not in cache:
        cache[key] = tightest(route, which, nonpure, value)
    return cache[key]


def composed_epsilon(
    events: Sequence[Event], delta: float, cache: dict | None = None
) -> float:
    """ε(δ) of ``events``: the pure ε plus the non-pure events' ε by their route.

    ``delta`` must already be checked to lie in (0, 1). ``cache`` (a dict) keeps the
    answers of the cached routes.

    Examples
    --------
    >>> from pymc_dp.accounting.events import GaussianEvent, LaplaceEvent
    >>> events = [GaussianEvent(name="g", noise_multiplier=1.0),
    ...           LaplaceEvent(name="l", epsilon=0.5)]
    >>> round(composed_epsilon(events, 1e-5), 4)
    4.8772
    """
    return composed_bound(events, delta, cache)[0]


def composed_bound(
    events: Sequence[Event], delta: float, cache: dict | None = None
) -> tuple[float, str]:
    """``(ε, bound)``: :func:`composed_epsilon` and the name of the bound that gave it.

    The name is the route's (``"gaussian"``, ``"pld"``, ``"rdp"``, ``"barker_rdp"``;
    ``"pure"`` with no non-pure event) or that of the alternative bound that was smaller
    (``"pld_without_replacement"``, ``"gaussian_without_subsampling"``).

    Examples
    --------
    >>> from pymc_dp.accounting.events import SubsampledGaussianEvent
    >>> whole = SubsampledGaussianEvent(name="s", noise_multiplier=1.0, sampling_rate=1.0)
    >>> composed_bound([whole], 1e-5)[1]
    'gaussian_without_subsampling'
    >>> composed_bound([whole.__class__(name="s", noise_multiplier=1.0,
    ...                                 sampling_rate=0.01)], 1e-5)[1]
    'pld_without_replacement'
    """
    pure = pure_epsilon(events)
    nonpure = nonpure_events(events)
    if not nonpure:
        return pure, PURE.name
    eps, bound = _ask(route_of(nonpure), "epsilon", nonpure, delta, cache)
    return pure + eps, bound


def composed_delta(
    events: Sequence[Event], remaining: float, cache: dict | None = None
) -> float:
    """δ of the non-pure ``events`` at ``remaining = ε − ε_pure ≥ 0`` (0.0 if there are none).

    ``cache`` as in :func:`composed_epsilon`.
    """
    nonpure = nonpure_events(events)
    if not nonpure:
        return 0.0
    return _ask(route_of(nonpure), "delta", nonpure, remaining, cache)[0]


def summary_row(event: Event, delta: float | None = None) -> dict:
    """One event's summary row; with ``delta``, a non-pure event's own ε at ``delta``."""
    rule = rule_for(event)
    row = {"kind": event.kind, "name": event.name, "count": event.count}
    row["neighbouring"] = event.neighbouring
    row.update(rule.row(event))
    if delta is not None and not rule.pure:
        row["epsilon"], row["bound"] = composed_bound([event], delta)
    return row
