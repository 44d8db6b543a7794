"""Private steps drawing from a shared pymc_dp.Budget (``budget=``), and its report."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import Budget, LaplaceEvent
from pymc_dp.accounting.guard import BudgetGuard
from pymc_dp.errors import PrivacyBudgetExceeded

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)
DELTA = 1e-4


@pytest.fixture
def budget(tmp_path):
    return Budget("conjugate", epsilon=1.0, delta=DELTA, store=str(tmp_path / "b.db"), create=True)


def _step(model, **kwargs):
    with model:
        return pymc_dp.DPPenalty(clip_bound=2.0, chains=1, warmup=False, **kwargs)


def _run(model, step, seed=0):
    with model:
        return pymc_dp.sample(step=step, draws=20, tune=0, chains=1, random_seed=seed,
                              **SAMPLE)


def test_a_step_with_a_budget_reserves_its_run_in_the_shared_store(conjugate, budget):
    model, *_ = conjugate
    step = _step(model, eps=0.5, budget=budget)
    assert step.delta == DELTA  # the budget's δ by default
    assert not isinstance(step.guard, BudgetGuard)
    idata = _run(model, step)
    records = budget.records()
    assert len(records) == 1 and records[0]["owner"] == "DPPenalty"
    assert records[0]["cap"] == [0.5, DELTA] and records[0]["draws"] == 20
    report = pymc_dp.privacy_report(idata)
    assert report.epsilon == pytest.approx(budget.spent().epsilon(DELTA))
    assert report.epsilon <= 0.5
    with pytest.raises(PrivacyBudgetExceeded):  # the step's own share is spent
        _run(model, step, seed=1)
    assert len(budget.records()) == 1


def test_same_seed_same_draws_with_or_without_a_budget(conjugate, budget):
    model, *_ = conjugate
    alone = _run(model, _step(model, eps=0.5, delta=DELTA))
    shared = _run(model, _step(model, eps=0.5, budget=budget))
    np.testing.assert_array_equal(alone.posterior["mu"], shared.posterior["mu"])
    assert pymc_dp.privacy_report(alone).epsilon == pymc_dp.privacy_report(shared).epsilon


def test_steps_share_one_budget_and_their_costs_compose(conjugate, budget):
    model, *_ = conjugate
    _run(model, _step(model, eps=0.6, budget=budget))
    # 0.6 + 0.6 > 1, yet two Gaussian runs compose to less: a second share fits ...
    _run(model, _step(model, eps=0.6, budget=budget), seed=1)
    assert 0.6 < budget.spent().epsilon(DELTA) <= 1.0
    # ... a third does not, and is refused before its chain reads anything
    third = _step(model, eps=0.6, budget=budget)
    with pytest.raises(PrivacyBudgetExceeded, match="budget 'conjugate'"):
        _run(model, third, seed=2)
    assert len(budget.records()) == 2 and third.guard.reservations() == []
    report = pymc_dp.privacy_report(budget)
    assert [r["owner"] for r in report.details["releases"]] == ["DPPenalty", "DPPenalty"]
    assert report.epsilon == pytest.approx(budget.spent().epsilon(DELTA))
    assert report.details["remaining"]["epsilon"] == pytest.approx(1.0 - report.epsilon)
    assert "release seq=2" in str(report) and "witness" in str(report)


def test_a_budget_taken_by_others_after_setup_is_refused_before_any_read(conjugate, budget):
    model, *_ = conjugate
    step = _step(model, eps=0.5, budget=budget)
    step.setup_chain(np.random.default_rng(0), 0, 5)  # fits now
    budget.reserve([LaplaceEvent(name="someone else", epsilon=0.9)])

    def no_read(q):
        raise AssertionError("the chain read the data")

    step._transition = no_read
    point = model.initial_point()
    from pymc.blocking import DictToArrayBijection

    q = DictToArrayBijection.map({v.name: point[v.name] for v in step.vars})
    with pytest.raises(PrivacyBudgetExceeded, match="budget 'conjugate'"):
        step.astep(q)
    assert len(budget.records()) == 1


def test_budget_arguments_are_checked_before_the_model_is_read(conjugate, budget, tmp_path):
    model, *_ = conjugate
    with pytest.raises(TypeError, match="pymc_dp.Budget"):
        _step(model, eps=0.5, budget=(1.0, DELTA))
    with pytest.raises(ValueError, match="not both"):
        _step(model, eps=0.5, budget=budget, ledger_dir=str(tmp_path))
    with pytest.raises(ValueError, match="more than the whole budget"):
        _step(model, eps=2.0, budget=budget)
    pure = Budget("pure", epsilon=1.0, delta=0, store=str(tmp_path / "p.db"), create=True)
    with pytest.raises(ValueError, match="δ = 0"):
        _step(model, eps=0.5, budget=pure)


def test_abcdp_draws_from_a_budget(tmp_path):
    y = np.random.default_rng(0).normal(1.0, 1.0, size=20)

    def simulate(rng, mu, size=None):
        return rng.normal(mu, 1.0, size=size)

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 2)
        pm.Simulator("y", simulate, mu, epsilon=1.0, observed=y)
    budget = Budget("abc", epsilon=1.0, delta=DELTA, store=str(tmp_path / "a.db"), create=True)
    with model:
        step = pymc_dp.ABCDP(eps=0.5, threshold=0.5, budget=budget, chains=1,
                             max_prior_draws=200)
        pymc_dp.sample(step=step, draws=3, tune=0, chains=1, random_seed=0, **SAMPLE)
    (record,) = budget.records()
    assert record["owner"] == "ABCDP" and record["cap"] == [0.5, 0.0]
    assert budget.spent().epsilon(DELTA) <= 0.5


def test_a_run_that_the_budget_cannot_cover_is_refused_before_its_first_chain(conjugate, budget):
    model, *_ = conjugate
    budget.reserve([LaplaceEvent(name="someone else", epsilon=0.7)])
    # one chain alone would fit in the 0.3 left, the run of four does not
    step = _step(model, eps=0.6, budget=budget)
    with model, pytest.raises(PrivacyBudgetExceeded, match="budget 'conjugate'"):
        pymc_dp.sample(step=step, draws=20, tune=0, chains=4, random_seed=0, **SAMPLE)
    assert len(budget.records()) == 1
