"""Bad input to any step is refused with a clear ValueError before the model is read.

Issue 12, item 9: ε = 1e-300 or a noise multiplier of 1e-200 ended in ZeroDivisionError or
OverflowError inside the calibration, and ``chains=True`` was taken as one chain. Every
step checks its public arguments with the shared validators of
:mod:`pymc_dp.validation` ("a positive finite number", "a positive int, not a
bool") before it touches the model; what needs the model (the default δ = 0.1/n) is
checked at construction, before any chain or reservation.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_dp.steps.base as base

from pymc_dp import DPHMC, DPPenalty
from pymc_dp.steps.dp_barker import DPBarker
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty

STEPS = {
    "DPPenalty": (DPPenalty, dict(eps=1.0, clip_bound=1.0)),
    "DPHMC": (DPHMC, dict(eps=1.0, grad_clip=1.0, loglik_clip=1.0)),
    "MinibatchDPPenalty": (MinibatchDPPenalty, dict(eps=1.0, batch_size=20, clip_bound=1.0)),
    "DPBarker": (DPBarker, dict(eps=1.0, batch_size=20)),
}
COMMON = [  # (argument, bad value, what the message must name)
    ("eps", 1e-300, "epsilon"),
    ("eps", True, "epsilon"),
    ("eps", "1", "epsilon"),
    ("eps", float("inf"), "epsilon"),
    ("delta", True, "delta"),
    ("delta", 1e-400, "delta"),  # 0.0 once parsed
    ("chains", True, "chains"),
    ("chains", 2.0, "chains"),
    ("chains", "2", "chains"),
    ("chains", 0, "chains"),
]
OWN = {
    "DPPenalty": [
        ("clip_bound", True, "clip_bound"), ("clip_bound", "1", "clip_bound"),
        ("clip_bound", 1e400, "clip_bound"), ("clip_bound", float("nan"), "clip_bound"),
        ("noise_multiplier", True, "noise_multiplier"), ("scaling", True, "scaling"),
        ("scaling", float("inf"), "scaling"), ("tune_interval", True, "tune_interval"),
        ("proposal", ["guided"], "proposal"),
    ],
    "DPHMC": [
        ("grad_clip", True, "grad_clip"), ("loglik_clip", "2", "loglik_clip"),
        ("n_steps", True, "n_steps"), ("n_steps", 2.0, "n_steps"),
        ("step_size", True, "step_size"), ("step_size", 1e400, "step_size"),
        ("budget_split", True, "budget_split"), ("target_accept", True, "target_accept"),
        ("target_accept", 1.0, "target_accept"),
    ],
    "MinibatchDPPenalty": [
        ("batch_size", True, "batch_size"), ("batch_size", 20.0, "batch_size"),
        ("tempering", True, "tempering"), ("tempering", 1.5, "tempering"),
        ("clip_bound", True, "clip_bound"), ("noise_multiplier", float("nan"), "noise_multiplier"),
    ],
    "DPBarker": [
        ("batch_size", True, "batch_size"), ("batch_size", "20", "batch_size"),
        ("tempering", float("nan"), "tempering"), ("noise_variance", True, "noise_variance"),
    ],
}
CASES = [
    pytest.param(name, arg, value, match, id=f"{name}-{arg}={value!r}")
    for name in STEPS
    for arg, value, match in COMMON + OWN[name]
]


@pytest.fixture
def model():
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.random.default_rng(0).normal(size=100))
    return model


@pytest.mark.parametrize("name, arg, value, match", CASES)
def test_bad_arguments_are_refused_before_the_model_is_read(model, monkeypatch, name, arg, value, match):
    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    cls, kwargs = STEPS[name]
    with model, pytest.raises(ValueError, match=match):
        cls(**{**kwargs, arg: value})


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("DPPenalty", dict(noise_multiplier=1e-200)),
        ("DPHMC", dict(grad_noise_multiplier=1e-200, loglik_noise_multiplier=1.0)),
        ("MinibatchDPPenalty", dict(noise_multiplier=1e-200)),
    ],
)
def test_noise_too_small_to_account_is_refused_at_construction(model, name, kwargs):
    # Needs δ = 0.1/n, so the model is read; still a clear ValueError, before any chain.
    cls, base_kwargs = STEPS[name]
    with model, pytest.raises(ValueError, match="too small"):
        cls(**{**base_kwargs, **kwargs})


def test_a_path_longer_than_any_run_is_refused(model):
    with model, pytest.raises(ValueError, match="leapfrog steps"):
        DPHMC(**STEPS["DPHMC"][1], path_length=1e300, step_size=1e-300)
