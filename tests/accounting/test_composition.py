"""The composition registry: each rule alone, and the route and ε/δ of every mix pinned.

The pinned numbers were computed with the ledger as it was before the registry (its
``isinstance`` branches), at commit 561e4f1; the route recorded there is the accountant
function that ledger called. A refactoring must reproduce them to rel 1e-9.
"""

from __future__ import annotations

import json
import math

import pytest

from pymc_dp.accounting import PrivacyLedger, UnsupportedEventError
from pymc_dp.accounting.composition import (
    BARKER_RDP,
    GAUSSIAN,
    PLD,
    PURE,
    RDP,
    composed_delta,
    composed_epsilon,
    has_rule,
    nonpure_events,
    pure_epsilon,
    register_rule,
    route_of,
    rule_for,
    summary_row,
)
from pymc_dp.accounting.events import (
    BarkerEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
)

# (PLD's numerics move in the last digits, and a tiny δ by 1e-4, with the library versions
# a fresh install gets; a changed route or noise scale moves them by far more)
REL = 1e-4
DELTA = 1e-6
AR = "add_remove"


def g(z, count=1, **kw):
    return GaussianEvent(name="g", noise_multiplier=z, count=count, **kw)


def lap(eps, count=1, **kw):
    return LaplaceEvent(name="lap", epsilon=eps, count=count, **kw)


def pure(eps, count=1, **kw):
    return PureDPEvent(name="svt", epsilon=eps, count=count, **kw)


def wor(z=1.0, q=0.01, count=1000):
    return SubsampledGaussianEvent(name="wor", noise_multiplier=z, sampling_rate=q, count=count)


def poisson(z=1.0, q=0.01, count=100, **kw):
    return SubsampledGaussianEvent(
        name="poisson", noise_multiplier=z, sampling_rate=q, sampling="poisson", count=count, **kw
    )


def barker(count=1000, n=100_000, b=1000):
    return BarkerEvent(name="barker", count=count, n_data=n, batch_size=b)


# ---------------------------------------------------------------------- each rule alone
def test_gaussian_rule():
    rule = rule_for(g(2.0, 4))
    assert not rule.pure and rule.route(g(2.0)) is GAUSSIAN
    assert rule.row(g(2.0, 4)) == {"noise_multiplier": 2.0, "sensitivity": "normalised", "mu": 0.5}


def test_subsampled_rule_depends_on_the_sampling_scheme():
    rule = rule_for(wor())
    assert not rule.pure
    assert rule.route(wor()) is RDP  # PLD does not support sampling without replacement
    assert rule.route(poisson()) is PLD
    fields = ["noise_multiplier", "sampling_rate", "sampling", "sensitivity"]
    assert list(rule.row(poisson())) == fields


def test_barker_rule():
    rule = rule_for(barker())
    assert not rule.pure and rule.route(barker()) is BARKER_RDP
    assert rule.row(barker())["sampling_rate"] == 0.01


@pytest.mark.parametrize("event", [lap(0.25, 3), pure(0.25, 3)])
def test_pure_rules_cost_count_times_epsilon(event):
    rule = rule_for(event)
    assert rule.pure and rule.route is None
    assert rule.pure_epsilon(event) == 0.75
    assert rule.row(event)["epsilon"] == 0.75


def test_pure_row_shows_a_description_only_when_there_is_one():
    assert "description" not in rule_for(pure(0.1)).row(pure(0.1))
    assert rule_for(pure(0.1)).row(pure(0.1, description="svt"))["description"] == "svt"


def test_routes_are_ranked_from_the_closed_form_to_barker():
    assert [r.rank for r in (PURE, GAUSSIAN, PLD, RDP, BARKER_RDP)] == [0, 1, 2, 3, 4]
    assert not GAUSSIAN.cached and PLD.cached and RDP.cached and BARKER_RDP.cached


def test_count_zero_events_need_no_route():
    assert nonpure_events([g(1.0, count=0), barker(count=0), lap(0.1)]) == ()
    assert route_of([g(1.0, count=0), barker(count=0)]) is PURE
    assert pure_epsilon([g(1.0), lap(0.1, 2), pure(0.3)]) == math.fsum([0.2, 0.3])


def test_a_subclass_uses_its_base_rule_and_an_unknown_type_has_none():
    class Renamed(GaussianEvent):
        pass

    class Unknown(Event):
        pass

    assert rule_for(Renamed(name="r", noise_multiplier=1.0)) is rule_for(g(1.0))
    assert not has_rule(Unknown(name="u"))
    with pytest.raises(ValueError, match="cannot account"):
        PrivacyLedger([Unknown(name="u")])


def test_register_rule_needs_exactly_one_of_route_and_pure_epsilon():
    class Unknown(Event):
        pass

    with pytest.raises(ValueError, match="exactly one"):
        register_rule(Unknown, row=dict)
    with pytest.raises(ValueError, match="exactly one"):
        register_rule(Unknown, row=dict, route=lambda e: GAUSSIAN, pure_epsilon=lambda e: 0.0)
    assert not has_rule(Unknown(name="u"))


def test_a_ledger_caches_only_the_cached_routes():
    cache = {}
    composed_epsilon([g(1.0)], DELTA, cache)
    assert cache == {}
    ev = wor(count=10)
    first = composed_epsilon([ev], DELTA, cache)
    assert list(cache) == [("rdp", "epsilon", (ev,), DELTA)]
    assert composed_epsilon([ev], DELTA, cache) == first


def test_summary_row_of_a_nonpure_event_is_its_own_cost():
    ev = wor(count=10)
    assert summary_row(ev, DELTA)["epsilon"] == PrivacyLedger([ev]).epsilon(DELTA)
    assert summary_row(g(1.0, count=0), DELTA)["epsilon"] == 0.0
    assert "epsilon" not in summary_row(ev)


# ---------------------------------------------------------------------- every mix, pinned
# name: (events, route, ε(1e-6), δ(1.0), δ(3.0)); None: UnsupportedEventError.
MIXES = {
    "empty": ([], PURE, 0.0, 0.0, 0.0),
    "pure": ([lap(0.1, 3), pure(0.5, 2)], PURE, 1.3, 1.0, 0.0),
    "pure_and_unused_gaussian": ([g(1.0, count=0), lap(0.3)], PURE, 0.3, 0.0, 0.0),
    "gaussian": (
        [g(30.0, 100), g(2.0)],
        GAUSSIAN, 2.760655830573714, 0.019111111531509174, 1.4383585753834267e-07,
    ),
    "gaussian_laplace": (
        [g(30.0, 100), g(2.0), lap(0.1)],
        GAUSSIAN, 2.860655830573714, 0.026875307980362723, 3.292744446867397e-07,
    ),
    "gaussian_and_unused_barker": (
        [g(1.0), barker(count=0, n=10_000, b=500)],
        GAUSSIAN, 4.88655411748323, 0.12693673750664386, 0.0015371853694009572,
    ),
    "gaussian_and_unused_subsampled": (
        [g(1.0), wor(count=0)],
        GAUSSIAN, 4.88655411748323, 0.12693673750664386, 0.0015371853694009572,
    ),
    "poisson": (
        [poisson()],
        PLD, 1.1104293798010298, 3.1085159785986042e-06, 5.307012377941022e-13,
    ),
    "poisson_gaussian_pure_add_remove": (
        [
            poisson(1.1, 0.02, 50, neighbouring=AR),
            g(5.0, 3, neighbouring=AR),
            pure(0.2, neighbouring=AR),
        ],
        PLD, 1.984049420533785, 0.003988784883442176, 1.0590872330467976e-10,
    ),
    "without_replacement": (
        [wor()],  # (its route is RDP; the PLD without replacement is the smaller bound)
        RDP, 2.5129689110771283, 0.009908009590301277, 2.2261606914960468e-08,
    ),
    "without_replacement_gaussian_laplace": (
        [wor(), g(10.0, 5), lap(0.05, 2)],
        RDP, 2.818630640074005, 0.022160149580539287, 2.617255109699365e-07,
    ),
    "without_replacement_and_poisson": ([wor(), poisson()], RDP, None, None, None),
    "barker": (
        [barker()],
        BARKER_RDP, 2.3334853547537557, 0.09431952595893331, 1.13913530392954e-10,
    ),
    "barker_gaussian": (
        [barker(), g(10.0, 5)],
        BARKER_RDP, 2.642368195390821, 0.1738203012751784, 1.6602935814612254e-08,
    ),
    "barker_without_replacement_pure": (
        [barker(), wor(2.0, 0.01, 200), pure(0.1)],
        BARKER_RDP, 2.5856323847333176, 0.1980957325820118, 6.292148588076268e-09,
    ),
    "barker_two_batch_sizes": (
        [barker(), barker(count=200, b=500)],
        BARKER_RDP, 2.393347562530714, 0.10802738668360735, 3.4677404622928837e-10,
    ),
    "barker_and_poisson": ([barker(), poisson()], BARKER_RDP, None, None, None),
}


@pytest.mark.parametrize("name", list(MIXES))
def test_each_mix_takes_its_route_and_costs_what_it_did(name):
    events, route, eps, delta_at_1, delta_at_3 = MIXES[name]
    assert route_of(events) is route
    ledger = PrivacyLedger(events)
    queries = [
        (lambda: ledger.epsilon(DELTA), eps),
        (lambda: ledger.delta(1.0), delta_at_1),
        (lambda: ledger.delta(3.0), delta_at_3),
    ]
    for query, expected in queries:
        if expected is None:
            with pytest.raises(UnsupportedEventError):
                query()
        else:
            # (a δ below 1e-12 is PLD's truncation noise: against budgets of 1e-5 and more)
            assert query() == pytest.approx(expected, rel=REL, abs=1e-12)
    # δ = 0: finite only without non-pure releases.
    assert ledger.epsilon(0.0) == (ledger.pure_epsilon if route is PURE else math.inf)


def test_composed_delta_is_the_ledgers_without_the_pure_part():
    events = [g(1.0), lap(0.5)]
    assert composed_delta(events, 1.0) == PrivacyLedger(events).delta(1.5)
    assert composed_delta([lap(0.5)], 1.0) == 0.0


# ---------------------------------------------------------------------- reports, pinned
_REPORT_EVENTS = [
    g(2.0, 3, sensitivity="2·clip"),
    wor(2.0, 0.01, 200),
    barker(count=10),
    lap(0.1, 2, sensitivity=1.0),
    pure(0.5, description="svt run"),
    pure(0.25),
]
_LEDGER_JSON = (
    '{"format": "pymc_dp.PrivacyLedger", "version": 1, "events": [{"kind": "gaussian", "name": '
    '"g", "count": 3, "neighbouring": "replace_one", "noise_multiplier": 2.0, "sensitivity": '
    '"2·clip"}, {"kind": "subsampled_gaussian", "name": "wor", "count": 200, "neighbouring": '
    '"replace_one", "noise_multiplier": 2.0, "sampling_rate": 0.01, "sampling": '
    '"without_replacement", "sensitivity": "normalised"}, {"kind": "dp_barker", "name": '
    '"barker", "count": 10, "neighbouring": "replace_one", "n_data": 100000, "batch_size": '
    '1000, "noise_variance": 2.0}, {"kind": "laplace", "name": "lap", "count": 2, '
    '"neighbouring": "replace_one", "epsilon": 0.1, "sensitivity": 1.0}, {"kind": "pure", '
    '"name": "svt", "count": 1, "neighbouring": "replace_one", "epsilon": 0.5, "description": '
    '"svt run"}, {"kind": "pure", "name": "svt", "count": 1, "neighbouring": "replace_one", '
    '"epsilon": 0.25, "description": ""}]}'
)
_SUMMARY = [
    {"kind": "gaussian", "name": "g", "count": 3, "neighbouring": "replace_one",
     "noise_multiplier": 2.0, "sensitivity": "2·clip", "mu": 0.375},
    {"kind": "subsampled_gaussian", "name": "wor", "count": 200, "neighbouring": "replace_one",
     "noise_multiplier": 2.0, "sampling_rate": 0.01, "sampling": "without_replacement",
     "sensitivity": "normalised"},
    {"kind": "dp_barker", "name": "barker", "count": 10, "neighbouring": "replace_one",
     "n_data": 100000, "batch_size": 1000, "sampling_rate": 0.01, "noise_variance": 2.0,
     "sensitivity": "|Δλ| ≤ 2/√b, |Δs²| ≤ 5/b (thesis Thm 7)"},
    {"kind": "laplace", "name": "lap", "count": 2, "neighbouring": "replace_one",
     "epsilon_per_release": 0.1, "sensitivity": 1.0, "epsilon": 0.2},
    {"kind": "pure", "name": "svt", "count": 1, "neighbouring": "replace_one",
     "epsilon_per_release": 0.5, "epsilon": 0.5, "description": "svt run"},
    {"kind": "pure", "name": "svt", "count": 1, "neighbouring": "replace_one",
     "epsilon_per_release": 0.25, "epsilon": 0.25},
]
# Each non-pure row's own ε at δ = 1e-6, and the bound that gave it.
_ROW_EPSILONS = {0: 4.1518167277831965, 1: 0.35432165335467386, 2: 0.1954118347501146}
_ROW_BOUNDS = {0: "gaussian", 1: "pld_without_replacement", 2: "barker_rdp"}


def test_ledger_json_is_byte_identical():
    ledger = PrivacyLedger(_REPORT_EVENTS)
    assert json.dumps(ledger.to_dict(), ensure_ascii=False) == _LEDGER_JSON
    assert PrivacyLedger.from_dict(json.loads(_LEDGER_JSON)) == ledger


def test_summary_rows_are_unchanged():
    ledger = PrivacyLedger(_REPORT_EVENTS)
    rows = ledger.summary()
    assert rows == _SUMMARY
    assert [list(r) for r in rows] == [list(r) for r in _SUMMARY]  # key order too
    with_eps = ledger.summary(DELTA)
    for i, (row, plain) in enumerate(zip(with_eps, _SUMMARY)):
        if i in _ROW_EPSILONS:
            assert list(row) == [*plain, "epsilon", "bound"]
            assert row["epsilon"] == pytest.approx(_ROW_EPSILONS[i], rel=REL, abs=0.0)
            assert row["bound"] == _ROW_BOUNDS[i]
        else:
            assert row == plain



# ---------------------------------------------------------------------- extension points
def test_an_event_type_defined_elsewhere_is_read_back_and_accounted(monkeypatch):
    from dataclasses import dataclass

    # The registries the ledger itself consults: pytest's doctest collection
    # (--import-mode=importlib) may import second copies of these modules.
    composition = PrivacyLedger.add.__globals__["has_rule"].__globals__
    events = PrivacyLedger.from_dict.__globals__["event_from_dict"].__globals__

    @dataclass(frozen=True, kw_only=True)
    class RoundedEvent(Event):  # a pure mechanism of this test only
        epsilon: float
        kind = "test_rounded"

    monkeypatch.setitem(events["_EVENT_TYPES"], RoundedEvent.kind, RoundedEvent)
    monkeypatch.setitem(composition["_RULES"], RoundedEvent, None)  # restored afterwards
    assert events["register_event_type"](RoundedEvent) is RoundedEvent
    composition["register_rule"](
        RoundedEvent, row=lambda e: {"epsilon": e.epsilon}, pure_epsilon=lambda e: e.epsilon
    )
    ledger = PrivacyLedger([RoundedEvent(name="r", epsilon=0.5), g(1.0)])
    assert PrivacyLedger.from_dict(json.loads(json.dumps(ledger.to_dict()))) == ledger
    assert ledger.epsilon(DELTA) == pytest.approx(0.5 + PrivacyLedger([g(1.0)]).epsilon(DELTA))
    assert ledger.summary()[0] == {
        "kind": "test_rounded", "name": "r", "count": 1, "neighbouring": "replace_one",
        "epsilon": 0.5,
    }


def test_a_subclass_with_a_rule_of_its_own_is_never_accounted_as_its_parent(monkeypatch):
    # A Gaussian mechanism that releases twice per count, with its own route. Mixed with an
    # event whose route ranks higher, that route would account it as a plain GaussianEvent
    # (half its cost): refused instead.
    from dataclasses import dataclass

    from pymc_dp.accounting.composition import Route

    composition = PrivacyLedger.add.__globals__["has_rule"].__globals__

    @dataclass(frozen=True, kw_only=True)
    class TwiceGaussian(GaussianEvent):
        kind = "test_twice_gaussian"

    twice = Route(
        "twice", 1, cached=False, accepts=(TwiceGaussian,),
        epsilon=lambda evs, d: PrivacyLedger([g(e.noise_multiplier, 2 * e.count) for e in evs]).epsilon(d),
    )
    monkeypatch.setitem(composition["_RULES"], TwiceGaussian, None)  # restored afterwards
    composition["register_rule"](TwiceGaussian, route=lambda e: twice, row=dict)
    double = TwiceGaussian(name="twice", noise_multiplier=1.0, count=100)
    alone = composition["composed_epsilon"]([double], DELTA)
    assert alone == pytest.approx(PrivacyLedger([g(1.0, 200)]).epsilon(DELTA), rel=REL)
    with pytest.raises(UnsupportedEventError, match="TwiceGaussian"):
        composition["composed_epsilon"]([double, wor(z=50.0, count=1)], DELTA)
    # a subclass without a rule of its own is its parent, in any mix
    @dataclass(frozen=True, kw_only=True)
    class Renamed(GaussianEvent):
        kind = "test_renamed_gaussian"

    mixed = [Renamed(name="r", noise_multiplier=1.0), wor(z=50.0, count=1)]
    assert composition["composed_epsilon"](mixed, DELTA) == pytest.approx(
        composition["composed_epsilon"]([g(1.0), wor(z=50.0, count=1)], DELTA), rel=REL)
