"""The steps under ``pytensor.config.floatX = "float32"``: PyMC rounds each returned point to
its variables' dtype, which the check for another step's changes must allow for (and only
that: a change to the values the chain holds is still refused)."""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytensor
import pytest

import pymc_dp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
RUN = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)
STEPS = {
    "DPPenalty": lambda: pymc_dp.DPPenalty(eps=20.0, clip_bound=3.0, scaling=0.1, warmup=False,
                                           chains=1),
    "DPHMC": lambda: pymc_dp.DPHMC(eps=20.0, grad_clip=3.0, loglik_clip=3.0, n_steps=2,
                                   step_size=0.05, warmup=False, chains=1),
    "MinibatchDPPenalty": lambda: pymc_dp.MinibatchDPPenalty(
        eps=20.0, clip_bound=3.0, scaling=0.1, batch_size=20, warmup=False, chains=1),
    "DPBarker": lambda: pymc_dp.DPBarker(eps=50.0, batch_size=20, scaling=0.1, method="mcmc",
                                         chains=1),
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_every_step_samples_in_float32(name):
    logging.getLogger("pymc").setLevel(logging.ERROR)
    y = np.random.default_rng(0).normal(1.0, 1.5, size=100)
    with pytensor.config.change_flags(floatX="float32"), pm.Model():
        mu = pm.Normal("mu", 0.0, 3.0)
        sigma = pm.HalfNormal("sigma", 3.0)
        pm.Normal("y", mu, sigma, observed=y)
        step = STEPS[name]()
        idata = pymc_dp.sample(step=step, draws=8, tune=2, random_seed=1, **RUN)
    assert idata.posterior["mu"].dtype == np.float32
    assert idata.posterior["mu"].shape == (1, 8)
    assert idata.attrs["dp_epsilon"] <= step.epsilon * (1 + 1e-12)
