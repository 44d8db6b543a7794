"""Guarantees shared by the minibatch steps (MinibatchDPPenalty, DPBarker): budget guard,
refusal to mix, release-safe results, privacy report from a plain trace, batches only."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp

from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.model import PrivateModel
from pymc_dp.steps.dp_barker import DPBarker
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)

STEPS = {
    "minibatch_penalty": lambda **kw: MinibatchDPPenalty(
        **{"eps": 2.0, "batch_size": 50, "clip_bound": 5.0, "tempering": 0.1, "scaling": 0.2,
           "warmup": False, **kw}
    ),
    "barker": lambda **kw: DPBarker(
        # ε = 13.5 allows 183 iterations in all (thesis Thm 7, n = 500, b = 50, δ = 2e-4)
        **{"eps": 13.5, "batch_size": 50, "tempering": 0.1, "scaling": 0.2, **kw}
    ),
}
MECHANISM_STAT = {"minibatch_penalty": "dp_noise_multiplier", "barker": "dp_noise_variance"}


@pytest.fixture(params=sorted(STEPS))
def make_step(request):
    factory = STEPS[request.param]
    factory.kind = request.param
    return factory


@pytest.fixture
def model(make_conjugate):
    return make_conjugate(n=500)[0]


def _spy_reads(monkeypatch):
    reads = {"rows": [], "full": 0}
    rows_original, full_original = PrivateModel.loglik_rows, PrivateModel.loglik
    ratio_original = PrivateModel.clipped_ratio

    def rows(self, q, r):
        reads["rows"].append(len(r))
        return rows_original(self, q, r)

    def full(self, q):
        reads["full"] += 1
        return full_original(self, q)

    def full_ratio(self, q, current, bound):
        reads["full"] += 1
        return ratio_original(self, q, current, bound)

    monkeypatch.setattr(PrivateModel, "loglik_rows", rows)
    monkeypatch.setattr(PrivateModel, "loglik", full)
    monkeypatch.setattr(PrivateModel, "clipped_ratio", full_ratio)
    return reads


def test_every_iteration_reads_one_batch_and_never_the_whole_data(model, make_step, monkeypatch):
    reads = _spy_reads(monkeypatch)
    with model:
        step = make_step(chains=1)
        pm.sample(draws=30, tune=10, chains=1, step=step, random_seed=0, **SAMPLE)
    assert reads["full"] == 0
    assert reads["rows"] == [50] * (2 * 40)  # θ and θ' on the batch, once per iteration


def test_a_spent_step_refuses_a_second_run_before_reading_data(model, make_step, monkeypatch):
    reads = _spy_reads(monkeypatch)
    with model:
        step = make_step(chains=2)
        pymc_dp.sample(step=step, draws=40, tune=10, chains=2, random_seed=0, **SAMPLE)
        before = len(reads["rows"])
        with pytest.raises(PrivacyBudgetExceeded):
            pymc_dp.sample(step=step, draws=40, tune=10, chains=2, random_seed=1, **SAMPLE)
    assert len(reads["rows"]) == before


def test_more_chains_than_planned_are_refused(model, make_step, monkeypatch):
    with model:
        step = make_step(chains=2)
        with pytest.raises(PrivacyBudgetExceeded, match="planned for 2 chain"):
            pm.sample(draws=60, tune=10, chains=3, step=step, random_seed=0, **SAMPLE)
    assert step.guard.reservations() == []  # refused before the first chain


def test_step_outside_a_planned_chain_is_refused(model, make_step):
    with model:
        step = make_step()
    with pytest.raises(PrivacyBudgetExceeded, match="setup_chain"):
        step.step(model.initial_point())


def test_refuses_to_mix_with_non_private_steps(make_step):
    with pm.Model():
        a = pm.Normal("a")
        b = pm.Normal("b")
        pm.Normal("y", a + b, 1, observed=np.random.default_rng(0).normal(size=200))
        with pytest.raises(UnsupportedModelError, match="NUTS"):
            make_step(vars=[a])
        step = make_step()
        with pytest.raises(UnsupportedModelError, match="Non-private"):
            pymc_dp.sample(step=[step, pm.Metropolis([a])], draws=10, chains=1, **SAMPLE)


def test_results_are_release_safe_and_report_their_cost(model, make_step):
    with model:
        pm.Deterministic("resid", model["y"] - model["mu"])  # reads data: must not be released
        step = make_step(chains=2)
        idata = pymc_dp.sample(step=step, draws=60, tune=20, chains=2, random_seed=2, **SAMPLE)
    assert sorted(idata.children) == ["posterior", "sample_stats"]
    assert "resid" not in idata.posterior
    public = {
        "accept", "accepted", "scaling", "dp_releases_chain", "dp_batch_size", "dp_n_data",
        "dp_delta", "dp_tempering", MECHANISM_STAT[make_step.kind],
    }
    public |= {"dp_warmup_mu", "dp_mu_shared_warmup"}  # warm-up μ (public: from the budget)
    public |= {"dp_clip_mu_chain"}  # the clip diagnostics' μ (0: off; required for the cost)
    if make_step.kind == "minibatch_penalty":  # the warm-up's clip bound (released)
        public |= {"clip_bound"}
    assert set(idata.sample_stats.data_vars) == public
    report = pymc_dp.privacy_report(idata)
    assert report.epsilon == idata.attrs["dp_epsilon"] <= step.epsilon
    assert report.details["spent"]["from_trace"]["epsilon"] == pytest.approx(report.epsilon, rel=1e-9)
    assert report.details["spent"]["from_trace"]["releases_per_chain"] == [80, 80]


def test_privacy_report_recomputes_a_plain_pm_sample_trace(model, make_step):
    with model:
        step = make_step(chains=2)
        idata = pm.sample(draws=50, tune=30, chains=2, step=step, random_seed=3, **SAMPLE)
    report = pymc_dp.privacy_report(pymc_dp.release(idata, model=model))
    assert report.epsilon == pytest.approx(pymc_dp.privacy_report(step).epsilon, rel=1e-9)
    assert [c["releases"] for c in report.details["chains"]] == [80, 80]  # tuning included
    assert report.delta == step.delta


def test_same_seed_same_draws(model, make_step):
    runs = []
    for seed in (42, 42, 43):
        with model:
            step = make_step(chains=2, proposal="guided")
            runs.append(
                pymc_dp.sample(step=step, draws=50, tune=10, chains=2, random_seed=seed, **SAMPLE)
            )
    np.testing.assert_array_equal(runs[0].posterior["mu"], runs[1].posterior["mu"])
    assert not np.array_equal(runs[0].posterior["mu"], runs[2].posterior["mu"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=-3), "batch_size"),
        (dict(batch_size=2.5), "batch_size"),
        (dict(batch_size=True), "batch_size"),
        (dict(tempering=0.0), "tempering"),
        (dict(tempering=-0.5), "tempering"),
        (dict(tempering=1.5), "tempering"),
        (dict(tempering=float("nan")), "tempering"),
        (dict(tempering="half"), "tempering"),
        (dict(proposal="nuts"), "proposal"),
        (dict(scaling=0.0), "scaling"),
        (dict(eps=0.0), "eps"),
        (dict(delta=1.0), "delta"),
        (dict(chains=0), "chains"),
    ],
)
def test_bad_arguments_fail_before_the_model_is_read(model, make_step, monkeypatch, kwargs, match):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    with model, pytest.raises(ValueError, match=match):
        make_step(**kwargs)


def test_batch_larger_than_the_data_is_refused_before_any_release(model, make_step, monkeypatch):
    reads = _spy_reads(monkeypatch)
    with model, pytest.raises(ValueError, match="cannot exceed"):
        make_step(batch_size=501)
    assert reads == {"rows": [], "full": 0}


def test_models_that_cannot_be_batched_are_refused_at_construction(make_step):
    # The leading length of the mean is fixed to n by a constant shape, not by the data.
    x = np.random.default_rng(0).normal(size=(300, 2))
    with pm.Model():
        beta = pm.Normal("beta", 0, 1, shape=2)
        mean = pt.alloc(beta[0], 300)
        pm.Normal("y", mean, 1, observed=x[:, 0])
        with pytest.raises(UnsupportedModelError, match="pm.Data"):
            make_step()


def test_budget_guard_holds_across_worker_processes(model, make_step):
    with model:
        step = make_step(chains=2)
        idata = pymc_dp.sample(
            step=step, draws=40, tune=10, chains=2, random_seed=5,
            progressbar=False, compute_convergence_checks=False, cores=2,
        )
        assert idata.attrs["dp_epsilon"] <= step.epsilon
        # the workers' copies reserved in the shared ledger: the parent's object sees it
        assert pymc_dp.privacy_report(step).epsilon == pytest.approx(idata.attrs["dp_epsilon"])
        with pytest.raises(Exception) as err:  # PyMC wraps the workers' errors
            pm.sample(draws=40, tune=10, chains=2, cores=2, step=step, random_seed=6,
                      progressbar=False, compute_convergence_checks=False)
    assert "PrivacyBudgetExceeded" in repr(err.value) or "budget" in str(err.value)
    assert len(step.guard.reservations()) == 2
