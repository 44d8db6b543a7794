"""ABCDP as a PyMC step: the paper's toy model, accounting, guards, reproducibility."""

from __future__ import annotations

import logging
import warnings

from concurrent.futures import ThreadPoolExecutor

import cloudpickle
import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.abcdp.distances import ClippedDistance, MMD, RandomFeatureMMD
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.kernels.svt import laplace_scale
from pymc_dp.abcdp.simulator import SimulatorModel
from pymc_dp.steps.abcdp import ABCDP, accepted_samples

THETA_STAR = np.array([0.25, 0.04, 0.33, 0.04, 0.34])


def mixture_of_uniforms(rng, theta, size):
    """Park et al. eq. (10): a mixture of Uniform[i−1, i), i = 1..5, with weights θ."""
    theta = np.asarray(theta, dtype=float)
    component = rng.choice(theta.size, size=size, p=theta / theta.sum())
    return component + rng.random(size)


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path))
    logging.getLogger("pymc").setLevel(logging.ERROR)


def toy_model(n, seed=0, simulator=mixture_of_uniforms):
    y = mixture_of_uniforms(np.random.default_rng(seed), THETA_STAR, n)
    with pm.Model() as model:
        theta = pm.Dirichlet("theta", a=np.ones(5))
        pm.Simulator("y", simulator, theta, observed=y)
    return model


def run(model, step, draws, chains=1, seed=1, **kwargs):
    with model:
        return pymc_dp.sample(
            step=step, draws=draws, chains=chains, cores=1, random_seed=seed,
            progressbar=False, **kwargs,
        )


# ---------------------------------------------------------------- the paper's toy model
@pytest.mark.parametrize("resample", [False, True])
def test_toy_posterior_mean_is_closer_to_truth_than_prior_mean(resample):
    # Section 6.1 at a small size: N = 5000, ε = 1, c = 20 accepted samples.
    model = toy_model(5000, seed=3)
    with model:
        step = ABCDP(
            eps=1.0, threshold=0.15, resample=resample, chains=1,
            distance=RandomFeatureMMD(bandwidth=0.5, n_features=50),
        )
    idata = run(model, step, draws=20, seed=4)
    post = idata.posterior["theta"].values.reshape(-1, 5)
    assert post.shape == (20, 5) and np.all(np.isfinite(post))
    prior_error = np.abs(np.full(5, 0.2) - THETA_STAR).mean()  # 0.128
    error = np.abs(post.mean(axis=0) - THETA_STAR).mean()
    assert error < 0.6 * prior_error
    assert idata.attrs["dp_epsilon"] == pytest.approx(1.0)
    assert bool(idata.sample_stats["accepted"].all())


# ---------------------------------------------------------------- accounting
def test_chains_are_independent_runs_whose_epsilon_adds_up():
    model = toy_model(300)
    with model:
        step = ABCDP(eps=2.0, threshold=0.3, resample=True, chains=2)
    idata = run(model, step, draws=3, chains=2)
    report = pymc_dp.privacy_report(idata)
    chains = report.details["chains"]
    assert [c["epsilon"] for c in chains] == [pytest.approx(1.0)] * 2
    assert report.epsilon == pytest.approx(2.0)
    # Thm 4.1 with RESAMPLE: b = 2 c Δ / ε_chain, c = draws per chain
    assert step._scale == pytest.approx(laplace_scale(1.0, step.sensitivity, 3, True))
    assert step.sensitivity == pytest.approx(2 / 300, rel=1e-3)
    # the two chains are different runs
    post = idata.posterior["theta"].values
    assert not np.allclose(post[0], post[1])


def test_budget_is_held_for_the_step_life():
    model = toy_model(200)
    with model:
        step = ABCDP(eps=1.0, threshold=0.3, chains=1)
    run(model, step, draws=2)
    read = []
    step.simulator.observed = lambda: read.append(1)  # the private data must not be read
    with pytest.raises(PrivacyBudgetExceeded):
        run(model, step, draws=2)
    assert read == []


def test_tuning_is_refused_before_any_reservation():
    model = toy_model(200)
    with model:
        step = ABCDP(eps=1.0, threshold=0.3, chains=1)
        with pytest.raises(ValueError, match="tuning has no meaning"):
            pm.sample(step=step, tune=5, draws=2, chains=1, progressbar=False)
    assert step.guard.reservations() == []
    assert ABCDP.default_tune_steps == 0


def test_only_public_stats_are_released():
    model = toy_model(200)
    with model:
        step = ABCDP(eps=1.0, threshold=0.3, chains=1)
    idata = run(model, step, draws=3)
    assert set(idata.sample_stats.data_vars) == {
        "accepted", "prior_draws", "prior_draws_chain", "dp_epsilon_chain"
    }
    assert "observed_data" not in idata.children
    draws = idata.sample_stats["prior_draws"].values.ravel()
    assert np.all(draws >= 1)
    np.testing.assert_array_equal(
        np.cumsum(draws), idata.sample_stats["prior_draws_chain"].values.ravel()
    )


# ---------------------------------------------------------------- running out of draws
def test_running_out_of_prior_draws_neither_loses_nor_fabricates():
    model = toy_model(300)
    with model:
        # threshold far below any distance: almost nothing is accepted in 40 prior draws
        step = ABCDP(eps=1.0, threshold=1e-6, chains=1, max_prior_draws=40, batch_size=16)
    with pytest.warns(RuntimeWarning, match=r"with \d+ of 5 samples accepted"):
        idata = run(model, step, draws=5)
    accepted = idata.sample_stats["accepted"].values.ravel()
    post = idata.posterior["theta"].values.reshape(5, 5)
    # accepted draws are real prior draws, the others NaN: nothing fabricated, nothing lost
    assert np.all(np.isfinite(post[accepted]))
    assert np.all(np.isnan(post[~accepted]))
    assert accepted.sum() < 5 and list(accepted) == sorted(accepted, reverse=True)
    assert idata.sample_stats["prior_draws_chain"].values.max() == 40
    kept = accepted_samples(idata)["theta"].values  # (5, accepted)
    np.testing.assert_array_equal(kept.T, post[accepted])


# ---------------------------------------------------------------- reproducibility
def test_results_do_not_depend_on_batches_or_executor():
    model = toy_model(200)

    def draws(**kwargs):
        with model:
            step = ABCDP(eps=1.0, threshold=0.25, chains=1, **kwargs)
        idata = run(model, step, draws=4, seed=7)
        return (
            idata.posterior["theta"].values,
            idata.sample_stats["prior_draws_chain"].values,
        )

    reference = draws(batch_size=256)
    for other in (
        draws(batch_size=5),
        draws(batch_size=32, executor=ThreadPoolExecutor(2), chunk_size=3),
    ):
        np.testing.assert_array_equal(other[0], reference[0])
        np.testing.assert_array_equal(other[1], reference[1])


def test_step_pickles_without_executor_only():
    # PyMC sends steps to worker processes with cloudpickle (cores > 1).
    model = toy_model(100)
    with model:
        step = ABCDP(eps=1.0, threshold=0.3, chains=1)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*object mode.*")  # numba, on unpickling
            clone = cloudpickle.loads(cloudpickle.dumps(step))
        with_pool = ABCDP(eps=1.0, threshold=0.3, chains=1, executor=ThreadPoolExecutor(1))
    assert clone.guard.path == step.guard.path  # copies share one budget ledger
    with pytest.raises(TypeError, match="cores=1"):
        cloudpickle.dumps(with_pool)


def test_bandwidth_is_fitted_on_simulations_not_observations():
    fitted = []
    for seed in (0, 1):
        model = toy_model(300, seed=seed)  # different private data
        with model:
            step = ABCDP(eps=1.0, threshold=0.3, chains=1, distance=MMD())
        run(model, step, draws=1, seed=5)  # same chain seed
        fitted.append(step._fitted_distance.bandwidth)
    assert fitted[0] == fitted[1]


# ---------------------------------------------------------------- bad input
def _forbid_reading_data(monkeypatch):
    def boom(self):
        raise AssertionError("the private data was read")

    monkeypatch.setattr(SimulatorModel, "observed", boom)


@pytest.mark.parametrize(
    "kwargs,error",
    [
        (dict(eps=0.0, threshold=0.1), ValueError),
        (dict(eps=-1.0, threshold=0.1), ValueError),
        (dict(eps=1.0, threshold=0.0), ValueError),
        (dict(eps=1.0, threshold=-0.1), ValueError),
        (dict(eps=1.0, threshold=0.1, distance=lambda a, b: 0.0), TypeError),
        (dict(eps=1.0, threshold=0.1, max_prior_draws=0), ValueError),
        (dict(eps=1.0, threshold=0.1, resample="yes"), TypeError),
    ],
)
def test_bad_arguments_fail_before_the_data_is_read(monkeypatch, kwargs, error):
    _forbid_reading_data(monkeypatch)
    with toy_model(100):
        with pytest.raises(error):
            ABCDP(**kwargs)


def test_distance_without_sensitivity_is_refused():
    with pytest.raises(ValueError, match="sensitivity"):
        ClippedDistance(lambda a, b: 0.0, clip=1.0, sensitivity=None)


def test_models_without_simulator_are_refused(monkeypatch):
    _forbid_reading_data(monkeypatch)
    with pm.Model():
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.zeros(10))
        with pytest.raises(UnsupportedModelError, match="pm.Simulator"):
            ABCDP(eps=1.0, threshold=0.1)
    with pm.Model():
        mu = pm.Normal("mu")
        pm.Simulator("y", lambda rng, m, size: rng.normal(m, 1, size), mu, observed=np.zeros(10))
        pm.Normal("z", mu, 1, observed=np.zeros(10))
        with pytest.raises(UnsupportedModelError, match="one observed"):
            ABCDP(eps=1.0, threshold=0.1)


def test_simulated_size_must_match_observed(monkeypatch):
    _forbid_reading_data(monkeypatch)

    def too_short(rng, theta, size):
        return mixture_of_uniforms(rng, theta, (size[0] - 1,))

    with toy_model(100, simulator=too_short):
        with pytest.raises(ValueError, match="exactly the observed shape"):
            ABCDP(eps=1.0, threshold=0.1)


def test_zero_draws_are_refused(monkeypatch):
    model = toy_model(100)
    with model:
        step = ABCDP(eps=1.0, threshold=0.1, chains=1)
    _forbid_reading_data(monkeypatch)
    with pytest.raises(ValueError):
        step.setup_chain(np.random.default_rng(0), 0, 0)  # c = 0
    assert step.guard.reservations() == []


def test_smc_settings_of_the_simulator_are_flagged():
    y = np.zeros(20)
    with pm.Model():
        mu = pm.Normal("mu")
        pm.Simulator(
            "y", lambda rng, m, size: rng.normal(m, 1, size), mu,
            distance="laplace", epsilon=0.5, observed=y,
        )
        with pytest.warns(UserWarning, match="SMC-ABC"):
            ABCDP(eps=1.0, threshold=0.1)


def test_pure_epsilon_reports_have_zero_delta_and_plain_traces_are_recomputed():
    model = toy_model(300, seed=2)
    with model:
        step = ABCDP(eps=2.0, threshold=0.2, chains=2, max_prior_draws=200)
        idata = pm.sample(draws=3, chains=2, cores=1, step=step, random_seed=4,
                          progressbar=False, compute_convergence_checks=False)
    report = pymc_dp.privacy_report(idata)
    assert report.delta == 0.0
    assert report.epsilon == pytest.approx(2.0)
    lifetime = pymc_dp.privacy_report(step)
    assert lifetime.delta == 0.0 and lifetime.epsilon == pytest.approx(2.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(max_prior_draws="SECRET-123456789"),
        dict(batch_size=[123456789]),
        dict(chunk_size="SECRET"),
        dict(n_pilot=np.array([123456789])),
        dict(resample="SECRET"),
        dict(distance="SECRET"),
        dict(executor="SECRET"),
        dict(threshold="SECRET"),
    ],
    ids=lambda kw: next(iter(kw)),
)
def test_messages_show_numbers_or_types_only(monkeypatch, kwargs):
    _forbid_reading_data(monkeypatch)
    with toy_model(50):
        with pytest.raises((ValueError, TypeError)) as err:
            ABCDP(**{"eps": 1.0, "threshold": 0.1, **kwargs})
    message = str(err.value)
    assert "SECRET" not in message and "123456789" not in message
    assert next(iter(kwargs)) in message


# ---------------------------------------------------------------- fixed privacy settings
def test_privacy_settings_are_fixed_once_the_step_is_built():
    # Before: the fitted distance a chain binds, and a ClippedDistance's clip from which the
    # sensitivity was computed, could be replaced after construction.
    model = toy_model(100)
    clipped = ClippedDistance(lambda o, s: 0.0, clip=1.0, sensitivity=5.0)
    with model:
        step = ABCDP(eps=1.0, threshold=0.3, chains=1, distance=clipped)
    run(model, step, draws=1)
    other = ClippedDistance(lambda o, s: 0.0, clip=100.0, sensitivity=5.0)
    for name, value in [
        ("sensitivity", 1e-9), ("distance", other), ("resample", True),
        ("simulator", None), ("_chain_eps", 10.0), ("_scale", 1e-9),
        ("_fitted_distance", other),
    ]:
        with pytest.raises(AttributeError, match="fixed once the step is built"):
            setattr(step, name, value)
    for name in ("clip", "fn", "declared_sensitivity", "summary"):
        with pytest.raises(AttributeError, match="fixed once built"):
            setattr(clipped, name, None)
    assert step.sensitivity == 1.0 and step._fitted_distance is clipped
