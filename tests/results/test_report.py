"""PrivacyReport.releases: each release a report lists, its own ε, and (asked) what it and
the releases before it compose to, ending at the report's ε (the ledger chart's numbers)."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import Budget, GaussianEvent, LaplaceEvent, gaussian_epsilon

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False, random_seed=1)
Y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)


def _model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu, 1.0, observed=Y)
    return model


def test_a_runs_releases_are_its_warmup_and_chains():
    with _model():
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0)
        idata = pymc_dp.sample(step=step, draws=20, tune=10, chains=2, **SAMPLE)
    report = pymc_dp.privacy_report(idata)
    rows = report.releases(composed=True)
    assert [r["kind"] for r in rows] == ["warm-up", "chain", "chain"]
    assert [r["label"] for r in rows] == ["DPPenalty warm-up (all chains)", "DPPenalty chain 0",
                                          "DPPenalty chain 1"]
    assert rows[0]["epsilon"] == report.details["shared_warmup"][0]["epsilon"]
    assert [r["epsilon"] for r in rows[1:]] == [c["epsilon"] for c in report.details["chains"]]
    assert rows[-1]["composed"] == pytest.approx(report.epsilon, rel=1e-9)
    assert rows[0]["composed"] == pytest.approx(rows[0]["epsilon"], rel=1e-9)
    assert np.all(np.diff([r["composed"] for r in rows]) > 0)
    # composed, not added: Gaussian costs compose to less than their sum
    assert report.epsilon < sum(r["epsilon"] for r in rows)
    assert "composed" not in report.releases()[0]


def test_a_budgets_releases_are_every_reservation_against_it(tmp_path):
    budget = Budget("b", epsilon=3.0, delta=1e-4, store=str(tmp_path / "b.db"), create=True)
    budget.reserve([LaplaceEvent(name="count", epsilon=0.5)], owner="a count")
    with _model():
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, budget=budget)
        pymc_dp.sample(step=step, draws=20, tune=10, chains=2, **SAMPLE)
    budget.reserve([GaussianEvent(name="mean", noise_multiplier=10.0)], owner="")
    report = pymc_dp.privacy_report(budget)
    rows = report.releases(composed=True)
    assert [r["kind"] for r in rows] == ["release", "warm-up", "chain", "chain", "release"]
    assert rows[0]["label"] == "#1 a count" and rows[0]["epsilon"] == 0.5
    assert rows[1]["label"].endswith("DPPenalty (warm-up)")
    assert rows[-1]["label"].endswith(" release")
    assert rows[-1]["epsilon"] == pytest.approx(gaussian_epsilon(0.005, 1e-4), rel=1e-9)
    assert [r["epsilon"] for r in rows] == [r["epsilon"] for r in report.details["releases"]]
    assert rows[-1]["composed"] == pytest.approx(report.epsilon, rel=1e-9)


def test_a_report_without_each_releases_cost_says_so():
    with _model() as model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, scaling=0.02, chains=1)
        trace = pm.sample(draws=10, tune=5, chains=1, step=step, **SAMPLE)
    report = pymc_dp.privacy_report(pymc_dp.release(trace, model=model))  # from the stats
    with pytest.raises(ValueError, match="no release with its own cost"):
        report.releases()
    with pytest.raises(ValueError, match="no release with its own cost"):
        pymc_dp.privacy_report(step).releases()
