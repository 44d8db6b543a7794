import numpy as np
import pymc as pm
import pytest


@pytest.fixture(autouse=True)
def _ledgers_in_tmp(tmp_path, monkeypatch):
    """Every test's budget ledgers live in its own temporary directory."""
    monkeypatch.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path / "ledgers"))


def conjugate_normal(n=50, prior_sd=0.5, seed=0, true_mean=2.0):
    """y_i ~ N(μ, 1), μ ~ N(0, prior_sd²): the model and its exact posterior (mean, sd)."""
    y = np.random.default_rng(seed).normal(true_mean, 1.0, size=n)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("y", mu, 1.0, observed=y)
    precision = 1 / prior_sd**2 + n
    return model, y.sum() / precision, precision**-0.5


@pytest.fixture
def conjugate():
    return conjugate_normal()


@pytest.fixture
def make_conjugate():
    return conjugate_normal
