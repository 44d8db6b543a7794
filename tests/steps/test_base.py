"""The shared guarantees of every private step (pymc_dp.steps.base), shown with DPPenalty."""

import copy
import cloudpickle

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc.blocking import DictToArrayBijection
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.steps.base import flatten_steps

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)


def _point_q(step, model):
    point = model.initial_point()
    return DictToArrayBijection.map({v.name: point[v.name] for v in step.vars})


def test_copies_of_a_running_step_must_reserve_their_own_chain(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
    step.setup_chain(np.random.default_rng(0), 0, 5)
    q = _point_q(step, model)
    for _ in range(5):
        q, _ = step.astep(q)
    with pytest.raises(PrivacyBudgetExceeded):
        step.astep(q)
    for clone in (copy.deepcopy(step), cloudpickle.loads(cloudpickle.dumps(step))):
        with pytest.raises(PrivacyBudgetExceeded, match="setup_chain"):
            clone.astep(q)
        with pytest.raises(PrivacyBudgetExceeded):  # and the budget is spent
            clone.setup_chain(np.random.default_rng(1), 0, 5)


@pytest.mark.parametrize("company, refusal", [
    (lambda step: [step, pm.Metropolis()], "Non-private steps"),
    (lambda step: [pm.Metropolis(), step], "Non-private steps"),
    # PyMC accepts a CompoundStep in the list: the step's own compound is all private, the
    # outermost one is not
    (lambda step: [pm.Metropolis(), pm.CompoundStep([step])], "Non-private steps"),
    # each covers every free variable: each would move the other's chain, and pay twice
    (lambda step: [step, pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)],
     "2 private steps in one run"),
], ids=["after", "before", "nested", "two private"])
def test_a_step_next_to_a_private_one_is_refused_before_reserving(conjugate, company, refusal):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        steps = company(step)
        with pytest.raises(UnsupportedModelError, match=refusal):
            pm.sample(draws=20, tune=0, chains=1, step=steps, random_seed=0, **SAMPLE)
    private = [s for s in flatten_steps(steps) if isinstance(s, pymc_dp.DPPenalty)]
    assert private and all(s.guard.reservations() == [] for s in private)


def test_setting_up_a_chain_inside_a_mixed_compound_is_refused(conjugate):
    # PyMC's population samplers call setup_chain and never _progressbar_config: that hook
    # refuses on its own.
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        compound = pm.CompoundStep([step, pm.Metropolis()])
        with pytest.raises(UnsupportedModelError, match="Non-private steps"):
            compound.setup_chain(np.random.default_rng(0), 0, 10)
    assert step.guard.reservations() == []


def test_another_step_that_moves_the_chain_is_refused_by_the_private_step(conjugate,
                                                                          monkeypatch):
    # The check behind the early one, for steps combined where this step cannot see them.
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        monkeypatch.setattr(step, "_refuse_non_private_company", lambda: None)
        with pytest.raises(UnsupportedModelError, match="Another step"):
            pm.sample(draws=20, tune=0, chains=1, step=[step, pm.Metropolis()], random_seed=0,
                      **SAMPLE)


def test_variables_added_after_the_step_are_refused_before_reserving(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        pm.Normal("late", 0, 1)
        with pytest.raises(UnsupportedModelError, match="no longer"):
            step.setup_chain(np.random.default_rng(0), 0, 10)
    assert step.guard.reservations() == []


def test_data_changed_after_the_step_is_refused():
    with pm.Model():
        yd = pm.Data("yd", np.zeros(10))
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=yd)
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        pm.set_data({"yd": np.ones(10)})
        with pytest.raises(ValueError, match="changed after the step was built"):
            step.setup_chain(np.random.default_rng(0), 0, 10)
    assert step.guard.reservations() == []


def test_zero_draws_are_refused_before_reserving(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
    with pytest.raises(ValueError, match="draws >= 1"):
        step.setup_chain(np.random.default_rng(0), 10, 0)
    assert step.guard.reservations() == []


def test_stored_sampling_state_does_not_carry_the_noise_generator(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
    rng = np.random.default_rng(123)
    step.setup_chain(rng, 0, 3)
    q = _point_q(step, model)
    step.astep(q)
    from pymc.util import get_state_from_generator

    stored = step.sampling_state.rng
    assert stored != get_state_from_generator(step.rng)
    assert stored == get_state_from_generator(np.random.default_rng(0))


def test_default_tuning_is_short(conjugate):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        idata = pm.sample(draws=20, chains=1, step=step, random_seed=0, **SAMPLE)
    report = pymc_dp.privacy_report(step)
    assert report.epsilon == pytest.approx(1.0, rel=1e-6)
    assert idata.posterior.attrs["tuning_steps"] == 100


# ---------------------------------------------------------------------- the run's plan
def test_a_run_beyond_what_the_plan_has_left_is_refused_before_its_first_chain(conjugate):
    # Issue 12, 10d: one chain of a plan of two ran; a run of two more chains would spend
    # the second share in chain 0 and fail at chain 1, losing chain 0's draws.
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=2)
        pm.sample(draws=10, tune=0, chains=1, step=step, random_seed=0, **SAMPLE)
        with pytest.raises(PrivacyBudgetExceeded, match="1 of which already ran"):
            pm.sample(draws=10, tune=0, chains=2, step=step, random_seed=1, **SAMPLE)
    assert len(step.guard.reservations()) == 1


def test_a_fixed_noise_plan_that_cannot_fit_is_refused_before_its_first_chain(conjugate):
    # One chain of 40 iterations fits the budget, two do not: refused before chain 0.
    model, *_ = conjugate
    z = 20.0
    from pymc_dp.accounting import gaussian_epsilon

    assert gaussian_epsilon(40 / (2 * z**2), 1e-3) < 1.0 < gaussian_epsilon(80 / (2 * z**2), 1e-3)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, delta=1e-3, clip_bound=2.0, noise_multiplier=z, chains=2)
        with pytest.raises(PrivacyBudgetExceeded, match="2 chain"):
            pm.sample(draws=30, tune=10, chains=2, step=step, random_seed=0, **SAMPLE)
    assert step.guard.reservations() == []


def test_setup_chain_reserves_nothing_until_the_first_step(conjugate):
    # PyMC's workers call setup_chain before the main process has checked the run.
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
    step.setup_chain(np.random.default_rng(0), 0, 3)
    assert step.guard.reservations() == []
    step.astep(_point_q(step, model))
    assert len(step.guard.reservations()) == 1


# ------------------------------------------------------------------ fixed privacy settings
def _built_steps():
    """One built step of every kind, on a small conjugate model."""
    import pymc as pm

    y = np.random.default_rng(0).normal(size=200)
    with pm.Model():
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1, observed=y)
        yield pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, chains=1)
        yield pymc_dp.DPHMC(eps=1.0, grad_clip=1.0, loglik_clip=1.0, chains=1)
        yield pymc_dp.MinibatchDPPenalty(eps=1.0, clip_bound=1.0, batch_size=20, chains=1)
        yield pymc_dp.DPBarker(eps=8.0, batch_size=20, chains=1)


SETTINGS = {
    "DPPenalty": {"noise_multiplier": 1e-6, "clip_bound": 1e-9, "epsilon": 1e9},
    "DPHMC": {"n_steps": 1000, "grad_noise_multiplier": 1e-6, "loglik_clip": 1e-9},
    "MinibatchDPPenalty": {"batch_size": 200, "sampling_rate": 1e-9, "noise_multiplier": 1e-6},
    "DPBarker": {"batch_size": 200, "noise_variance": 1e-9, "delta": 0.5},
}


def test_privacy_settings_cannot_be_changed_once_the_step_is_built():
    # An outside review changed a built step's noise, release count or batch size (before
    # the run, or from a callback during it): the ledger kept the reserved cost while the
    # chain spent far more. Such attributes are fixed; the step's own calibration still
    # sets its noise.
    for step in _built_steps():
        for name, value in SETTINGS[type(step).__name__].items():
            before = getattr(step, name)
            with pytest.raises(AttributeError, match="fixed once the step is built"):
                setattr(step, name, value)
            assert getattr(step, name) == before
        step.plan(1)  # the step's own plan may still set its chain count
        step.setup_chain(np.random.default_rng(0), 0, 5)  # and its calibration the noise
        step.tune_interval = 10  # settings that do not define the mechanism stay free


def test_data_changed_in_place_after_the_step_is_refused():
    # The step computes with the container's own array: written to in place, the data
    # compared equal with itself, and an index array was no longer in its table's range.
    group = np.arange(10) % 3
    with pm.Model():
        gd = pm.Data("g", group)
        a = pm.Normal("a", shape=3)
        pm.Normal("y", a[gd], 1, observed=np.zeros(10))
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        held = gd.get_value(borrow=True)
        with pytest.raises(ValueError, match="read-only"):  # (a callback's write, mid-chain)
            held[:2] = 10**6
        held.flags.writeable = True  # (made writable again on purpose: the digest sees it)
        held[:2] = 10**6
        with pytest.raises(ValueError, match="changed in place after the step was built"):
            step.setup_chain(np.random.default_rng(0), 0, 10)
    assert step.guard.reservations() == []


@pytest.mark.parametrize("start", ["per-person values", "their mean"])
def test_a_chain_started_away_from_the_checked_point_is_refused_before_reserving(start):
    # initvals reach the chain's start unchecked: with no proposal accepted, the first draws
    # were the observations themselves, or their mean (a start's shape cannot show it public).
    y = np.random.default_rng(0).normal(3.0, 1.0, 20)
    with pm.Model():
        u = pm.Normal("u", 0, 10, shape=20)
        pm.Normal("y", u, 1.0, observed=y)
        step = pymc_dp.DPPenalty(eps=0.1, clip_bound=1.0, warmup=False, chains=1)
        initvals = {"u": y if start == "per-person values" else np.full(20, y.mean())}
        with pytest.raises(UnsupportedModelError, match="start away from the initial point the step checked, for 'u'"):
            pymc_dp.sample(step=step, chains=1, draws=5, tune=0, progressbar=False,
                           initvals=initvals, random_seed=0, compute_convergence_checks=False)
    assert step.guard.reservations() == []


def test_a_chain_starts_at_the_steps_own_checked_initial_point():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.0, observed=np.zeros(20))
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, warmup=False, chains=1,
                                 initial_point={**model.initial_point(), "mu": np.array(0.5)})
        idata = pymc_dp.sample(step=step, chains=1, draws=3, tune=0, progressbar=False,
                               random_seed=0, compute_convergence_checks=False)
    assert idata["posterior"]["mu"].shape == (1, 3)


def test_an_initial_value_set_after_the_step_was_built_is_refused_at_the_start():
    # (a review) the start was compared with the model's initial point as it is at run
    # time, which set_initval had changed after the step's checks: the data came out
    n = 40
    rng = np.random.default_rng(0)
    x_obs = rng.normal(size=n)
    with pm.Model() as model:
        b = pm.Normal("b")
        u = pm.Normal("u", 0, 1, shape=n)
        pm.Normal("y", b + u, 1, observed=x_obs + rng.normal(size=n))
        step = pymc_dp.DPPenalty(eps=0.5, clip_bound=5.0, scaling=0.01, method="mcmc",
                                 warmup=False, chains=1)
        model.set_initval(u, x_obs)
        with pytest.raises(UnsupportedModelError, match="start away from the initial point"):
            pymc_dp.sample(step=step, draws=3, tune=0, chains=1, random_seed=1,
                           progressbar=False)


def test_initvals_away_from_the_checked_start_are_refused_before_the_runs_warm_up_is_reserved():
    # (a review) with the warm-up on, pymc_dp.sample reserved the run's warm-up and only then
    # did the chains refuse the start, under a message saying nothing was reserved
    y = np.random.default_rng(1).normal(3.0, 1.0, 50)
    with pm.Model():
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.0, observed=y)
        step = pymc_dp.DPPenalty(eps=1.0, chains=1)
        with pytest.raises(UnsupportedModelError, match="start away from the initial point"):
            pymc_dp.sample(step=step, chains=1, draws=5, tune=0, progressbar=False,
                           initvals={"mu": float(y.mean())}, random_seed=0)
    assert step.guard.reservations() == []
