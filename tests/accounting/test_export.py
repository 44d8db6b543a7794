"""A ledger exported to dp-accounting (issue 18 item 4): the ε dp-accounting computes from
the exported events, in the accountant they were exported for, is ours within its precision."""

import numpy as np
import pymc as pm
import pytest

from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

import pymc_dp

from pymc_dp.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    SubsampledGaussianEvent,
    UnsupportedEventError,
    export_json,
    import_json,
)

DELTA = 1e-6


def _their_epsilon(text: str, delta: float) -> float:
    """ε by a fresh dp-accounting accountant of the kind the document names."""
    event, accountant, relation = import_json(text)
    if accountant == "pld":
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation)
    else:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
    acc.compose(event)
    return float(acc.get_epsilon(delta))


GAUSSIANS = [GaussianEvent(name="ratio", noise_multiplier=4.0, count=200),
             GaussianEvent(name="warm-up", noise_multiplier=2.5, count=6)]


@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_gaussian_releases_round_trip_through_the_pld_accountant(neighbouring):
    events = [GaussianEvent(name=e.name, noise_multiplier=e.noise_multiplier, count=e.count,
                            neighbouring=neighbouring) for e in GAUSSIANS]
    ours = PrivacyLedger(events).epsilon(DELTA)
    theirs = _their_epsilon(export_json(events, "pld"), DELTA)
    assert ours * (1 - 1e-9) <= theirs <= ours * (1 + 1e-4)  # (PLD: pessimistic, discretised)


def test_subsampled_releases_round_trip_through_the_rdp_accountant():
    # (the ledger itself composes these with dp-accounting's RDP accountant: the same number)
    events = [SubsampledGaussianEvent(name="batch", noise_multiplier=1.2, count=300,
                                      sampling_rate=0.01, sampling="without_replacement"),
              *GAUSSIANS]
    ours = PrivacyLedger(events).epsilon(DELTA)
    theirs = _their_epsilon(export_json(events, "rdp"), DELTA)
    assert theirs == pytest.approx(ours, rel=1e-9)


def test_a_runs_reserved_events_round_trip(tmp_path):
    y = np.random.default_rng(0).normal(1.0, 1.0, size=300)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu, 1.0, observed=y)
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, ledger_dir=tmp_path)
        idata = pymc_dp.sample(step=step, draws=50, tune=50, chains=2, random_seed=1,
                               progressbar=False, cores=1)
    report = pymc_dp.privacy_report(idata)
    ledger = report.ledger()
    assert ledger.epsilon(report.delta) == pytest.approx(report.epsilon, rel=1e-9)
    theirs = _their_epsilon(export_json(ledger, "pld"), report.delta)
    assert report.epsilon * (1 - 1e-9) <= theirs <= report.epsilon * (1 + 1e-4)


def test_the_exported_convention_is_the_accountants_own():
    # Under replace-one, a plain Gaussian in PLD form composed by an RDP accountant would
    # count a quarter of its μ: the document says which accountant it is for.
    event, accountant, _ = import_json(export_json(GAUSSIANS, "pld"))
    assert accountant == "pld"
    assert event.events[0].event.noise_multiplier == 2 * GAUSSIANS[0].noise_multiplier


def test_pure_events_are_refused_not_dropped():
    with pytest.raises(UnsupportedEventError):
        export_json([LaplaceEvent(name="count", epsilon=0.1), *GAUSSIANS], "pld")


@pytest.mark.parametrize("document", [
    '{"format": "other"}',
    '{"format": "pymc_dp dp-accounting export 1", "accountant": "pld", '
    '"neighboring_relation": "REPLACE_ONE", "event": {"module_name": "os", '
    '"class_name": "system", "command": "true"}}',
])
def test_an_import_builds_dp_accounting_events_only(document):
    with pytest.raises(ValueError):
        import_json(document)
