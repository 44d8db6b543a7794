"""SPPE / SPLE without the sbi extra: the lazy import, the error naming the extra, the
refusals before any simulation, and the parts that need no torch (the prior on PyMC's
unconstrained scale, the mechanism's inverse CDF, the randomized quasi-Monte Carlo noise).
The training itself is in ``test_neural_sbi.py`` (marker ``sbi``)."""

import os
import subprocess
import sys

from pathlib import Path

import numpy as np
import pymc as pm
import pytest

from scipy import stats

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    gaussian_release,
    infection_curve_release,
    laplace_release,
    neural_posterior,
)
from pymc_dp.mechanisms.likelihood import mechanism_quantile, mechanism_sample
from pymc_dp.mechanisms.neural import _PrivateDataSimulator, _UnconstrainedPrior

ROOT = Path(__file__).resolve().parents[2]


class Calls:
    """A simulator that counts its calls (none may happen before the checks pass)."""

    def __init__(self):
        self.n = 0

    def __call__(self, rng, values, size):
        self.n += 1
        return {"s": rng.normal(values["mu"], 0.2, size=(size,))}


def _spec(simulator=None):
    rel = gaussian_release(0.7, sensitivity=1.0, sigma=0.5, rng=1)

    def params():
        pm.Normal("mu", 0.0, 2.0)

    return PrivatizedDataModel(params=params, simulator=simulator or Calls(),
                               releases={"s": rel}, n=25)


def test_importing_the_package_and_the_route_imports_neither_torch_nor_sbi():
    code = ("import sys, pymc_dp, pymc_dp.mechanisms\n"
            "from pymc_dp.mechanisms import neural_posterior\n"
            "import pymc_dp.mechanisms.neural\n"
            "print(sorted(m for m in ('torch', 'sbi') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize("missing", ["sbi", "torch"])
def test_without_the_extra_the_error_names_it(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` raises ImportError
    if missing == "sbi":
        monkeypatch.setitem(sys.modules, "sbi.inference", None)
    sim = Calls()
    with pytest.raises(ImportError, match=r'pip install "pymc_dp\[sbi\]"'):
        neural_posterior(_spec(sim), rounds=1, simulations=50, rng=0)
    assert sim.n == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "SNPE"}, "method must be 'SPPE' or 'SPLE'"),
    ({"method": 3}, "method must be 'SPPE' or 'SPLE', got a int"),
    ({"rounds": 0}, "rounds must be an integer >= 1"),
    ({"rounds": 2.0}, "rounds must be an integer >= 1"),
    ({"simulations": 10}, r"simulations \(per round\) must be an integer >= 50"),
    ({"noise_draws": 0}, "noise_draws must be an integer >= 1"),
    ({"noise_draws": 3}, "power of 2"),
    ({"qmc": "yes"}, "qmc must be True or False"),
    ({"draws": 0}, "draws must be an integer >= 1"),
    ({"chains": True}, "chains must be an integer >= 1"),
    ({"training": [1]}, "training must be a dict"),
])
def test_bad_arguments_are_refused_before_any_simulation(kwargs, message):
    sim = Calls()
    with pytest.raises(ValueError, match=message):
        neural_posterior(_spec(sim), **kwargs)
    assert sim.n == 0


def test_a_spec_is_required_and_its_data_is_never_shown():
    secret = np.array([123.456, 789.012])
    with pytest.raises(ValueError, match="PrivatizedDataModel") as err:
        neural_posterior(secret)
    assert "123.456" not in str(err.value)
    # releases are what the route conditions on: a spec without them cannot be made
    with pytest.raises(ValueError, match="releases must be a non-empty mapping"):
        PrivatizedDataModel(params=lambda: None, simulator=Calls(), releases={}, n=5)


def test_noise_draws_without_qmc_need_not_be_a_power_of_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "sbi", None)
    monkeypatch.setitem(sys.modules, "sbi.inference", None)
    with pytest.raises(ImportError):  # past the argument checks
        neural_posterior(_spec(), noise_draws=3, qmc=False)


def test_the_prior_on_the_unconstrained_scale_is_pymcs():
    def params():
        pm.Normal("mu", 1.0, 2.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.5)
        pm.Deterministic("twice_sigma", 2 * sigma)

    spec = PrivatizedDataModel(params=params, simulator=Calls(),
                               releases={"s": gaussian_release(0.0, sensitivity=1.0, sigma=1.0,
                                                               rng=0)}, n=3)
    prior = _UnconstrainedPrior(spec)
    assert prior.names == ["mu", "sigma"] and prior.dim == 3
    assert prior.out_names == ["mu", "sigma", "twice_sigma"]
    assert prior.free_shapes == [(2,), ()]
    z = np.array([[0.3, -1.0, np.log(0.8)], [2.0, 1.0, np.log(2.5)]])
    want = (stats.norm.logpdf(z[:, :2], 1.0, 2.0).sum(1)
            + stats.halfnorm.logpdf(np.exp(z[:, 2]), scale=1.5) + z[:, 2])  # + log-Jacobian
    np.testing.assert_allclose(prior.logp(z), want, rtol=1e-7)
    mu, sigma, twice = prior.constrained(z[1])
    np.testing.assert_allclose(mu, [2.0, 1.0])
    assert sigma == pytest.approx(2.5) and twice == pytest.approx(5.0)
    draws = prior.draw(4000, seed=3)
    assert draws.shape == (4000, 3)
    np.testing.assert_array_equal(draws, prior.draw(4000, seed=3))
    assert stats.kstest(np.exp(draws[:, 2]), stats.halfnorm(scale=1.5).cdf).pvalue > 1e-3
    assert stats.kstest(draws[:, 0], stats.norm(1.0, 2.0).cdf).pvalue > 1e-3


def test_discrete_parameters_are_refused():
    def params():
        pm.Poisson("k", 3.0)

    spec = PrivatizedDataModel(params=params, simulator=Calls(),
                               releases={"s": gaussian_release(0.0, sensitivity=1.0, sigma=1.0,
                                                               rng=0)}, n=3)
    with pytest.raises(ValueError, match=r"continuous parameters; \['k'\] are discrete"):
        _UnconstrainedPrior(spec)


@pytest.mark.parametrize("release", [
    laplace_release([1.0, -2.0], sensitivity=1.0, epsilon=0.5, rng=0),
    gaussian_release([1.0, -2.0], sensitivity=1.0, sigma=1.5, rng=0),
    infection_curve_release([10, 600], population=1000, n_trials=200, m=100, rng=0),
], ids=["laplace", "gaussian", "infection_curve"])
def test_the_inverse_cdf_draws_the_released_mechanism(release):
    rng = np.random.default_rng(5)
    stat = np.tile([3.0, 500.0], (20_000, 1))
    by_sample = mechanism_sample(release, stat, rng)
    by_quantile = mechanism_quantile(release, stat, rng.uniform(size=stat.shape))
    for j in range(2):
        assert stats.ks_2samp(by_sample[:, j], by_quantile[:, j]).pvalue > 1e-3
        assert abs(by_sample[:, j].mean() - by_quantile[:, j].mean()) < 0.05 * (
            by_sample[:, j].std() + 1.0)


def test_rqmc_noise_balances_the_draws_of_each_statistic():
    """Scrambled Sobol noise: each statistic's M draws average close to it (far closer
    than M independent draws), and every draw is still the mechanism's distribution."""
    spec = _spec()
    prior = _UnconstrainedPrior(spec)
    stats_ = np.linspace(-1, 1, 400)[:, None]
    err = {}
    for qmc in (True, False):
        sim = _PrivateDataSimulator(spec, prior, noise_draws=16, qmc=qmc)
        x = sim.privatize(stats_, np.random.default_rng(0))
        assert x.shape == (400 * 16, 1)
        noise = (x[:, 0] - np.repeat(stats_[:, 0], 16)).reshape(400, 16)
        assert stats.kstest(noise.ravel(), stats.norm(0, 0.5).cdf).pvalue > 1e-3
        err[qmc] = np.sqrt(np.mean(noise.mean(axis=1) ** 2))
    assert err[False] == pytest.approx(0.5 / 4, rel=0.15)      # σ/√M
    assert err[True] < 0.2 * err[False]
