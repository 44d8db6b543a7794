"""Tests of the privacy ledger (pymc_dp.accounting.ledger)."""

import json
import math

import pytest

from pymc_dp.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    PureDPEvent,
    SubsampledGaussianEvent,
    UnsupportedEventError,
    gaussian_delta,
    gaussian_epsilon,
    pld_epsilon,
    rdp_epsilon,
)


def all_kinds(neighbouring="replace_one"):
    return [
        GaussianEvent(name="ratio", count=100, noise_multiplier=30.0, sensitivity="2 b |θ'-θ|",
                      neighbouring=neighbouring),
        GaussianEvent(name="grad", count=11, noise_multiplier=12.5, sensitivity=2.0,
                      neighbouring=neighbouring),
        SubsampledGaussianEvent(name="batch", count=50, noise_multiplier=3.0, sampling_rate=0.02,
                                sampling="poisson", neighbouring=neighbouring),
        LaplaceEvent(name="count", count=2, epsilon=0.1, sensitivity=1.0,
                     neighbouring=neighbouring),
        PureDPEvent(name="svt", epsilon=0.3, description="ABCDP run", neighbouring=neighbouring),
    ]


# ------------------------------------------------------------------ composition
def test_empty_ledger_costs_nothing():
    ledger = PrivacyLedger()
    assert len(ledger) == 0
    assert ledger.epsilon(1e-6) == 0.0
    assert ledger.epsilon(0.0) == 0.0
    assert ledger.delta(0.5) == 0.0
    assert ledger.mu == 0.0


def test_gaussian_events_compose_exactly_through_summed_mu():
    events = [
        GaussianEvent(name="a", count=100, noise_multiplier=30.0),
        GaussianEvent(name="b", count=7, noise_multiplier=4.0),
        GaussianEvent(name="c", count=1, noise_multiplier=0.9),
    ]
    ledger = PrivacyLedger(events)
    mu = 100 / 1800 + 7 / 32 + 1 / (2 * 0.81)
    assert ledger.mu == pytest.approx(mu, rel=1e-15)
    assert ledger.epsilon(1e-6) == gaussian_epsilon(mu, 1e-6)
    assert ledger.delta(2.0) == gaussian_delta(2.0, mu)
    # tighter than adding the events' separate costs
    separate = sum(gaussian_epsilon(e.mu, 1e-6) for e in events)
    assert ledger.epsilon(1e-6) < separate


def test_pure_events_add():
    ledger = PrivacyLedger([
        LaplaceEvent(name="a", count=3, epsilon=0.1),
        PureDPEvent(name="b", count=2, epsilon=0.25),
    ])
    assert ledger.pure_epsilon == pytest.approx(0.8)
    assert ledger.epsilon(1e-6) == pytest.approx(0.8)
    assert ledger.epsilon(0.0) == pytest.approx(0.8)  # pure: δ = 0 allowed
    assert ledger.delta(0.8) == 0.0
    assert ledger.delta(0.5) == 1.0  # below the pure ε: no guarantee


def test_pure_and_gaussian_events_compose_by_basic_composition():
    gaussian = GaussianEvent(name="g", count=20, noise_multiplier=10.0)
    ledger = PrivacyLedger([gaussian, LaplaceEvent(name="l", epsilon=0.4)])
    expected = 0.4 + gaussian_epsilon(gaussian.mu, 1e-6)
    assert ledger.epsilon(1e-6) == pytest.approx(expected, rel=1e-15)
    assert ledger.epsilon(0.0) == math.inf  # a Gaussian has no finite ε at δ = 0
    assert ledger.delta(1.4) == pytest.approx(gaussian_delta(1.0, gaussian.mu), rel=1e-12)
    assert ledger.delta(ledger.epsilon(1e-6)) <= 1e-6


def test_mixed_events_go_through_one_pld_accountant():
    events = all_kinds()
    ledger = PrivacyLedger(events)
    nonpure = events[:3]
    pure = 2 * 0.1 + 0.3
    eps = ledger.epsilon(1e-6)
    assert eps == pytest.approx(pure + pld_epsilon(nonpure, 1e-6), rel=1e-12)
    # the subsampled releases cost something on top of the plain ones
    assert pure + gaussian_epsilon(ledger.mu, 1e-6) < eps
    # δ at that ε is within δ (PLD: upper bounds both ways, up to discretisation)
    assert ledger.delta(eps) <= 1e-6 * (1 + 1e-3)


def test_mixed_add_remove_ledger_is_below_unsampled_bound():
    events = all_kinds("add_remove")
    ledger = PrivacyLedger(events)
    unsampled_mu = ledger.mu + 50 / (2 * 3.0**2)
    assert ledger.epsilon(1e-6) < 0.5 + gaussian_epsilon(unsampled_mu, 1e-6)


def test_without_replacement_events_take_the_smaller_of_rdp_and_their_pld():
    from pymc_dp.accounting.without_replacement import wor_pld_epsilon

    events = [
        GaussianEvent(name="g", count=10, noise_multiplier=20.0),
        SubsampledGaussianEvent(name="mb", count=100, noise_multiplier=1.0, sampling_rate=0.01),
    ]
    ledger = PrivacyLedger(events)
    pld, rdp = wor_pld_epsilon(events, 1e-6), rdp_epsilon(events, 1e-6)
    assert ledger.epsilon(1e-6) == pytest.approx(min(pld, rdp), rel=1e-12)
    assert pld < rdp and ledger.bound(1e-6) == "pld_without_replacement"
    # Poisson under replace-one is PLD-only, without-replacement is RDP-only: refuse the mix
    ledger.add(SubsampledGaussianEvent(name="p", noise_multiplier=1.0, sampling_rate=0.01,
                                       sampling="poisson"))
    with pytest.raises(UnsupportedEventError):
        ledger.epsilon(1e-6)


def test_zero_count_events_are_free():
    ledger = PrivacyLedger([
        GaussianEvent(name="g", count=0, noise_multiplier=0.01),
        SubsampledGaussianEvent(name="s", count=0, noise_multiplier=0.01, sampling_rate=0.5),
        LaplaceEvent(name="l", count=0, epsilon=5.0),
    ])
    assert ledger.epsilon(1e-6) == 0.0
    assert ledger.epsilon(0.0) == 0.0


def test_adding_events_never_lowers_epsilon():
    ledger = PrivacyLedger()
    previous = 0.0
    for event in all_kinds()[:2] + all_kinds()[3:]:
        ledger.add(event)
        eps = ledger.epsilon(1e-6)
        assert eps >= previous
        previous = eps


def test_epsilon_is_cached_per_event_list():
    ledger = PrivacyLedger(all_kinds())
    first = ledger.epsilon(1e-6)
    assert ledger.epsilon(1e-6) == first
    ledger.add(GaussianEvent(name="more", noise_multiplier=1.0))
    assert ledger.epsilon(1e-6) > first


# ------------------------------------------------------------------ list behaviour
def test_add_extend_events_len():
    events = all_kinds()
    ledger = PrivacyLedger(events[:2])
    ledger.extend(events[2:4])
    ledger.add(events[4])
    assert len(ledger) == 5
    assert ledger.events == tuple(events)
    assert list(ledger) == events
    snapshot = ledger.events
    ledger.add(GaussianEvent(name="x", noise_multiplier=1.0))
    assert len(snapshot) == 5  # a snapshot, not a view


def test_refuses_non_events_and_mixed_relations():
    ledger = PrivacyLedger([GaussianEvent(name="g", noise_multiplier=1.0)])
    with pytest.raises(ValueError, match="cannot account"):
        ledger.add({"kind": "gaussian"})
    with pytest.raises(ValueError, match="neighbouring"):
        ledger.add(LaplaceEvent(name="l", epsilon=0.1, neighbouring="add_remove"))
    assert len(ledger) == 1
    assert ledger.neighbouring == "replace_one"


@pytest.mark.parametrize("bad", [1.0, 1.5, -1e-6, math.nan, math.inf, "1e-6", True])
def test_bad_delta_raises(bad):
    ledger = PrivacyLedger([GaussianEvent(name="g", noise_multiplier=1.0)])
    with pytest.raises(ValueError, match="delta"):
        ledger.epsilon(bad)


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf, None, True])
def test_bad_epsilon_raises(bad):
    ledger = PrivacyLedger([GaussianEvent(name="g", noise_multiplier=1.0)])
    with pytest.raises(ValueError, match="epsilon"):
        ledger.delta(bad)


# ------------------------------------------------------------------ serialisation
def test_to_dict_from_dict_round_trip_through_json():
    ledger = PrivacyLedger(all_kinds())
    data = json.loads(json.dumps(ledger.to_dict()))
    back = PrivacyLedger.from_dict(data)
    assert back == ledger
    assert back.events == ledger.events
    assert back.epsilon(1e-6) == ledger.epsilon(1e-6)
    assert PrivacyLedger.from_dict(PrivacyLedger().to_dict()) == PrivacyLedger()


def test_from_dict_rejects_garbage():
    with pytest.raises(ValueError):
        PrivacyLedger.from_dict([])
    with pytest.raises(ValueError):
        PrivacyLedger.from_dict({"format": "something else", "events": []})
    with pytest.raises(ValueError):
        PrivacyLedger.from_dict({"events": [{"kind": "nonsense", "name": "x"}]})


def test_summary_rows():
    ledger = PrivacyLedger(all_kinds())
    rows = ledger.summary()
    json.dumps(rows)
    kinds = ["gaussian", "gaussian", "subsampled_gaussian", "laplace", "pure"]
    assert [r["kind"] for r in rows] == kinds
    assert rows[0]["noise_multiplier"] == 30.0
    assert rows[0]["sensitivity"] == "2 b |θ'-θ|"
    assert rows[0]["mu"] == pytest.approx(100 / 1800)
    assert rows[2]["sampling_rate"] == 0.02 and rows[2]["sampling"] == "poisson"
    assert rows[3]["epsilon_per_release"] == 0.1 and rows[3]["epsilon"] == pytest.approx(0.2)
    assert rows[4]["epsilon"] == 0.3 and rows[4]["description"] == "ABCDP run"
    assert all("epsilon" not in r for r in rows[:3])

    with_delta = ledger.summary(delta=1e-6)
    json.dumps(with_delta)
    assert with_delta[0]["epsilon"] == gaussian_epsilon(100 / 1800, 1e-6)
    assert with_delta[2]["epsilon"] == pytest.approx(pld_epsilon([all_kinds()[2]], 1e-6))
    # each row's own cost is at most the composed cost
    assert max(r["epsilon"] for r in with_delta) <= ledger.epsilon(1e-6)
