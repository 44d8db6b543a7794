"""DPBarker: tempered-posterior recovery, Theorem 7 budget plan, bad input."""

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import PrivacyLedger
from pymc_dp.accounting.barker import BarkerEvent, barker_max_iterations
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.steps.dp_barker import DPBarker

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)


def _tempered_posterior(model, tempering, prior_sd=0.5):
    y = model.rvs_to_values[model.observed_RVs[0]].data
    precision = 1 / prior_sd**2 + tempering * y.size
    return tempering * y.sum() / precision, precision**-0.5


@pytest.mark.parametrize("proposal", ["random_walk", "guided"])
def test_recovers_the_tempered_posterior(make_conjugate, proposal):
    # n = 2000, T = 0.01 (n0 = 20), b = 400: the clip √b/n0 = 1 per row binds only for
    # |y − μ̄|·|Δμ| > 1, i.e. almost never at these step sizes. The posterior sd is
    # √(1/(4 + 20)) ≈ 0.20 (untempered: 0.022). ε is large so that the chains can be long:
    # Barker's noise does not depend on ε.
    model = make_conjugate(n=2000)[0]
    with model:
        step = DPBarker(eps=1e3, batch_size=400, tempering=0.01, proposal=proposal, scaling=0.3, chains=2)
        idata = pymc_dp.sample(step=step, draws=3000, tune=1000, chains=2, random_seed=11, **SAMPLE)
    mean, sd = _tempered_posterior(model, 0.01)
    draws = idata.posterior["mu"]
    ess = float(az.ess(draws.values))
    assert ess > 200
    assert float(draws.mean()) == pytest.approx(mean, abs=4 * sd / np.sqrt(ess))
    assert float(draws.std()) == pytest.approx(sd, abs=4 * sd / np.sqrt(2 * ess))
    assert idata.attrs["dp_epsilon"] <= 1e3


def test_the_budget_plan_is_theorem_7s_iterations_split_over_chains(make_conjugate, monkeypatch):
    from pymc_dp.model import PrivateModel

    model = make_conjugate(n=2000)[0]
    eps, delta, b = 3.0, 1e-4, 100
    allowed = barker_max_iterations(eps, delta, 2000, b)
    per_chain = allowed // 2
    with model:
        step = DPBarker(eps=eps, delta=delta, batch_size=b, tempering=0.05, scaling=0.2, chains=2)
        assert step.max_iterations() == allowed
        # one iteration more than a chain's share: refused before any data is read
        calls = []
        original = PrivateModel.loglik_rows
        monkeypatch.setattr(
            PrivateModel, "loglik_rows", lambda self, q, r: calls.append(1) or original(self, q, r)
        )
        with pytest.raises(PrivacyBudgetExceeded, match="allotment"):
            pm.sample(draws=per_chain + 1, tune=0, chains=2, step=step, random_seed=0, **SAMPLE)
        assert calls == [] and step.guard.reservations() == []
        # exactly the share fits, and costs what Theorem 7 says
        idata = pymc_dp.sample(step=step, draws=per_chain - 20, tune=20, chains=2, random_seed=1, **SAMPLE)
    expected = PrivacyLedger([BarkerEvent(name="b", n_data=2000, batch_size=b, count=2 * per_chain)])
    assert idata.attrs["dp_epsilon"] == pytest.approx(expected.epsilon(delta), rel=1e-9)
    assert idata.attrs["dp_epsilon"] <= eps


def test_budget_too_small_for_one_iteration(make_conjugate):
    with make_conjugate(n=200)[0], pytest.raises(ValueError, match="too small for even one"):
        DPBarker(eps=0.5, batch_size=100)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise_variance=3.3), "π²/3"),
        (dict(noise_variance=float("nan")), "noise_variance"),
        (dict(noise_variance=0.0), "noise_variance"),
        (dict(noise_variance=1.5), "2.0 only"),
        (dict(batch_size=15), "16"),
        (dict(batch_size=0), "batch_size"),
        (dict(tempering=2.0), "tempering"),
    ],
)
def test_bad_arguments_fail_before_the_model_is_read(make_conjugate, monkeypatch, kwargs, match):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    kwargs = {"eps": 1.0, "batch_size": 100, **kwargs}
    with make_conjugate()[0], pytest.raises(ValueError, match=match):
        DPBarker(**kwargs)
