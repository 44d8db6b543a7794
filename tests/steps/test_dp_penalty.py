import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import gaussian_epsilon, max_gaussian_mu, max_iterations
from pymc_dp.errors import PrivacyBudgetExceeded

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)


def _assert_matches_posterior(idata, mean, sd):
    draws = idata.posterior["mu"]
    ess = float(az.ess(draws.values))
    assert ess > 200, f"too few effective draws ({ess:.0f}) for the check"
    # Monte Carlo error of the mean is sd/sqrt(ess); of the sd, about sd/sqrt(2 ess).
    assert float(draws.mean()) == pytest.approx(mean, abs=4 * sd / np.sqrt(ess))
    assert float(draws.std()) == pytest.approx(sd, abs=4 * sd / np.sqrt(2 * ess))


@pytest.mark.parametrize("proposal", ["random_walk", "one_component", "guided"])
def test_huge_epsilon_recovers_the_exact_posterior(conjugate, proposal):
    model, mean, sd = conjugate
    with model:
        # clip bound 20 per unit distance never binds: |∂ℓ_j/∂μ| = |y_j − μ| < 6 here.
        step = pymc_dp.DPPenalty(eps=1e6, clip_bound=20.0, proposal=proposal, chains=2, scaling=0.2)
        idata = pymc_dp.sample(step=step, draws=3000, tune=1000, chains=2, random_seed=11, **SAMPLE)
    _assert_matches_posterior(idata, mean, sd)


def test_penalty_correction_keeps_the_posterior_exact_under_real_noise(conjugate):
    # z = 0.6 with a non-binding clip: the released ratio has sd ~ 1 per step, and only
    # the −σ²/2 correction keeps the chain on the exact posterior.
    model, mean, sd = conjugate
    with model:
        step = pymc_dp.DPPenalty(
            eps=1e6, clip_bound=8.0, noise_multiplier=0.6, chains=2, scaling=0.2
        )
        idata = pymc_dp.sample(step=step, draws=4000, tune=1000, chains=2, random_seed=5, **SAMPLE)
    assert 0.05 < float(idata.sample_stats["accepted"].mean()) < 0.9
    _assert_matches_posterior(idata, mean, sd)


def test_calibration_spends_the_whole_budget_and_no_more(conjugate):
    model, *_ = conjugate
    eps, delta = 0.5, 1e-4
    with model:
        step = pymc_dp.DPPenalty(eps=eps, delta=delta, clip_bound=2.0, warmup=False, chains=2)
        idata = pymc_dp.sample(step=step, draws=200, tune=100, chains=2, random_seed=1, **SAMPLE)
    z_expected = np.sqrt(2 * 300 / (2 * max_gaussian_mu(eps, delta)))
    np.testing.assert_allclose(idata.sample_stats["noise_multiplier"], z_expected, rtol=1e-9)
    assert idata.attrs["dp_epsilon"] <= eps
    assert idata.attrs["dp_epsilon"] == pytest.approx(eps, rel=1e-6)
    # The trace alone gives the same cost: Σ μ over chains, tuning included.
    mu_trace = float(idata.sample_stats["dp_mu_chain"].isel(draw=-1).sum())
    assert mu_trace == pytest.approx(2 * 300 / (2 * z_expected**2), rel=1e-9)
    assert gaussian_epsilon(mu_trace, delta) == pytest.approx(eps, rel=1e-6)


def test_the_step_hands_its_calibrated_noise_to_the_kernel(conjugate, monkeypatch):
    import pymc_dp.steps.dp_penalty as module

    seen = []
    original = module.penalty_transition

    def spy(*args, **kwargs):
        seen.append(kwargs["noise_multiplier"])
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "penalty_transition", spy)
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, delta=1e-5, clip_bound=2.0, warmup=False, chains=1)
        pm.sample(draws=50, tune=50, chains=1, step=step, random_seed=0, **SAMPLE)
    z = np.sqrt(100 / (2 * max_gaussian_mu(1.0, 1e-5)))
    assert len(seen) == 100
    np.testing.assert_allclose(seen, z, rtol=1e-9)


def test_small_epsilon_runs_and_never_reports_more_than_requested(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=0.1, clip_bound=1.0, warmup=False, proposal="guided", chains=2)
        idata = pymc_dp.sample(step=step, draws=100, tune=100, chains=2, random_seed=2, **SAMPLE)
    report = pymc_dp.privacy_report(idata)
    assert report.epsilon <= 0.1 and np.all(np.isfinite(idata.posterior["mu"]))
    assert pymc_dp.privacy_report(step).epsilon <= 0.1


def test_same_seed_same_draws(conjugate):
    model, *_ = conjugate
    runs = []
    for _ in range(2):
        with model:
            step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, warmup=False, proposal="guided", chains=2)
            runs.append(
                pymc_dp.sample(step=step, draws=100, tune=50, chains=2, random_seed=42, **SAMPLE)
            )
    np.testing.assert_array_equal(runs[0].posterior["mu"], runs[1].posterior["mu"])
    with model:
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, warmup=False, proposal="guided", chains=2)
        other = pymc_dp.sample(step=step, draws=100, tune=50, chains=2, random_seed=43, **SAMPLE)
    assert not np.array_equal(runs[0].posterior["mu"], other.posterior["mu"])


# ---------------------------------------------------------------------- budget guard
def _count_data_reads(monkeypatch):
    from pymc_dp.model import PrivateModel

    calls = {"n": 0}
    loglik, ratio = PrivateModel.loglik, PrivateModel.clipped_ratio

    def counting(self, q):
        calls["n"] += 1
        return loglik(self, q)

    def counting_ratio(self, q, current, bound):
        calls["n"] += 1
        return ratio(self, q, current, bound)

    monkeypatch.setattr(PrivateModel, "loglik", counting)
    monkeypatch.setattr(PrivateModel, "clipped_ratio", counting_ratio)
    return calls


def test_a_spent_step_refuses_a_second_run_before_reading_data(conjugate, monkeypatch):
    model, *_ = conjugate
    calls = _count_data_reads(monkeypatch)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=2)
        pm.sample(draws=30, tune=0, chains=2, step=step, random_seed=0, **SAMPLE)
        reads = calls["n"]
        assert reads == 2 * 31  # one cached start + one per iteration, per chain
        with pytest.raises(PrivacyBudgetExceeded):
            pm.sample(draws=30, tune=0, chains=2, step=step, random_seed=1, **SAMPLE)
        with pytest.raises(PrivacyBudgetExceeded):
            pymc_dp.sample(step=step, draws=30, tune=0, chains=2, random_seed=1, **SAMPLE)
    assert calls["n"] == reads


def test_more_chains_than_planned_are_refused(conjugate, monkeypatch):
    model, *_ = conjugate
    calls = _count_data_reads(monkeypatch)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=2)
        with pytest.raises(PrivacyBudgetExceeded, match="planned for 2 chain"):
            pm.sample(draws=20, tune=0, chains=3, step=step, random_seed=0, **SAMPLE)
    # Refused before the first chain (issue 12, 10d): chains 0-1 did not spend the budget
    # only for chain 2 to fail and the run to lose their draws.
    assert calls["n"] == 0
    assert step.guard.reservations() == []


def test_plain_pm_sample_assumes_pymcs_default_chain_count(conjugate):
    from pymc_dp.steps.base import pymc_default_chains

    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False)
        assert step.planned_chains == pymc_default_chains()
        idata = pm.sample(draws=20, tune=10, step=step, random_seed=0, **SAMPLE)
    assert idata.posterior.sizes["chain"] == pymc_default_chains()
    assert pymc_dp.privacy_report(idata).epsilon == pytest.approx(1.0, rel=1e-6)


def test_fixed_noise_chain_longer_than_the_budget_is_refused(conjugate):
    model, *_ = conjugate
    eps, delta, z = 1.0, 1e-5, 30.0
    k_max = max_iterations(eps, delta, 1 / (2 * z**2))
    with model:
        ok = pymc_dp.DPPenalty(eps=eps, delta=delta, clip_bound=2.0, warmup=False, noise_multiplier=z, chains=1)
        pm.sample(draws=k_max, tune=0, chains=1, step=ok, random_seed=0, **SAMPLE)
        too_long = pymc_dp.DPPenalty(
            eps=eps, delta=delta, clip_bound=2.0, warmup=False, noise_multiplier=z, chains=1
        )
        with pytest.raises(PrivacyBudgetExceeded):
            pm.sample(draws=k_max + 1, tune=0, chains=1, step=too_long, random_seed=0, **SAMPLE)


def test_budget_guard_holds_across_worker_processes(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=2)
        idata = pm.sample(draws=20, tune=10, chains=2, cores=2, step=step, random_seed=0,
                          progressbar=False, compute_convergence_checks=False)
        assert idata.posterior.sizes["chain"] == 2
        # the workers' copies reserved in the shared ledger: the parent's object sees it
        assert pymc_dp.privacy_report(step).epsilon == pytest.approx(1.0, rel=1e-6)
        with pytest.raises(Exception) as err:
            pm.sample(draws=20, tune=10, chains=2, cores=2, step=step, random_seed=1,
                      progressbar=False, compute_convergence_checks=False)
    assert "PrivacyBudgetExceeded" in repr(err.value) or "budget" in str(err.value)
    assert pymc_dp.privacy_report(step).epsilon <= 1.0


def test_more_chains_than_planned_in_parallel_are_refused(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=2)
        with pytest.raises(PrivacyBudgetExceeded, match="planned for 2 chain"):
            pm.sample(draws=20, tune=10, chains=3, cores=2, step=step, random_seed=0,
                      progressbar=False, compute_convergence_checks=False)
    # The workers were started (and ran setup_chain) before PyMC asked the step; none
    # reserved: the run was refused before any chain stepped.
    assert step.guard.reservations() == []


def test_step_outside_a_planned_chain_is_refused(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False)
    with pytest.raises(PrivacyBudgetExceeded, match="setup_chain"):
        step.step(model.initial_point())


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=-1.0), "eps"),
        (dict(eps=float("nan")), "eps"),
        (dict(eps=float("inf")), "eps"),
        (dict(eps=1.0, delta=0.0), "delta"),
        (dict(eps=1.0, delta=1.0), "delta"),
        (dict(eps=1.0, delta=-0.1), "delta"),
        (dict(eps=1.0, clip_bound=0.0), "clip_bound"),
        (dict(eps=1.0, clip_bound=-2.0), "clip_bound"),
        (dict(eps=1.0, clip_bound=float("nan")), "clip_bound"),
        (dict(eps=1.0, proposal="nuts"), "proposal"),
        (dict(eps=1.0, chains=0), "chains"),
        (dict(eps=1.0, noise_multiplier=0.0), "noise_multiplier"),
    ],
)
def test_bad_arguments_fail_before_the_model_is_read(conjugate, monkeypatch, kwargs, match):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    model, *_ = conjugate
    kwargs = {"clip_bound": 1.0, **kwargs}
    with model, pytest.raises(ValueError, match=match):
        pymc_dp.DPPenalty(**kwargs)


def test_budget_too_small_for_one_iteration(conjugate):
    model, *_ = conjugate
    with model, pytest.raises(ValueError, match="too small for even one iteration"):
        pymc_dp.DPPenalty(eps=0.01, delta=1e-6, clip_bound=1.0, noise_multiplier=1.0)


def test_non_finite_data_is_refused():
    with pm.Model():
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.array([0.0, np.inf, 1.0]))
        with pytest.raises(ValueError, match="non-finite"):
            pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0)


def test_partial_coverage_and_unblocked_steps_are_refused():
    with pm.Model():
        a = pm.Normal("a")
        b = pm.Normal("b")
        pm.Normal("y", a + b, 1, observed=np.zeros(4))
        with pytest.raises(pymc_dp.UnsupportedModelError, match="NUTS"):
            pymc_dp.DPPenalty([a], eps=1.0, clip_bound=1.0)
        with pytest.raises(ValueError, match="blocked"):
            pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, blocked=False)
