"""MinibatchDPPenalty: tempered-posterior recovery, calibration from (ε, δ), bad input."""

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import PrivacyLedger, SubsampledGaussianEvent
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)


def _tempered_posterior(model, tempering, prior_sd=0.5):
    """Exact posterior of μ ~ N(0, s0²), y_i ~ N(μ, 1) with the likelihood raised to T."""
    y = model.rvs_to_values[model.observed_RVs[0]].data
    precision = 1 / prior_sd**2 + tempering * y.size
    return tempering * y.sum() / precision, precision**-0.5


def _assert_matches(idata, mean, sd):
    draws = idata.posterior["mu"]
    ess = float(az.ess(draws.values))
    assert ess > 200, f"too few effective draws ({ess:.0f}) for the check"
    assert float(draws.mean()) == pytest.approx(mean, abs=4 * sd / np.sqrt(ess))
    assert float(draws.std()) == pytest.approx(sd, abs=4 * sd / np.sqrt(2 * ess))


@pytest.mark.parametrize(
    "proposal, noise_multiplier",
    [("random_walk", 0.5), ("guided", None), ("one_component", None)],
)
def test_huge_epsilon_recovers_the_tempered_posterior(make_conjugate, proposal, noise_multiplier):
    # n = 2000, T = 0.05 (n0 = 100), b = 200. The clip bound 8 never binds (|y − μ| < 8).
    # With z = 0.5 the release has real noise (sd ≈ 0.3) that only the penalty corrects;
    # with ε = 1e6 calibrated, the noise is negligible. Either way the target is the
    # tempered posterior, whose sd is √(1/(4 + 100)) ≈ 0.098, not the untempered 0.022.
    model = make_conjugate(n=2000)[0]
    with model:
        step = MinibatchDPPenalty(
            eps=1e6, batch_size=200, clip_bound=8.0, tempering=0.05, proposal=proposal,
            noise_multiplier=noise_multiplier, scaling=0.15, chains=2,
        )
        idata = pymc_dp.sample(step=step, draws=3000, tune=1000, chains=2, random_seed=11, **SAMPLE)
    _assert_matches(idata, *_tempered_posterior(model, 0.05))


def test_calibration_spends_the_whole_budget_over_all_chains_and_tuning(make_conjugate):
    model = make_conjugate(n=1000)[0]
    eps, delta = 1.0, 1e-4
    with model:
        step = MinibatchDPPenalty(eps=eps, delta=delta, batch_size=100, clip_bound=3.0,
                                  tempering=0.1, chains=2, warmup=False)
        idata = pymc_dp.sample(step=step, draws=150, tune=50, chains=2, random_seed=1, **SAMPLE)
    z = idata.sample_stats["dp_noise_multiplier"].values
    assert np.all(z == z.flat[0])
    z = float(z.flat[0])
    cost = lambda zz: PrivacyLedger(  # noqa: E731  all 2 × 200 releases, tuning included
        [SubsampledGaussianEvent(name="r", noise_multiplier=zz, sampling_rate=0.1, count=400)]
    ).epsilon(delta)
    assert cost(z) <= eps and cost(0.995 * z) > eps
    assert idata.attrs["dp_epsilon"] == pytest.approx(cost(z), rel=1e-9)
    assert pymc_dp.privacy_report(step).epsilon <= eps


def test_the_step_hands_its_calibrated_noise_to_the_kernel(make_conjugate, monkeypatch):
    import pymc_dp.steps.minibatch_penalty as module

    seen = []
    original = module.minibatch_penalty_transition

    def spy(*args, **kwargs):
        seen.append((kwargs["noise_multiplier"], kwargs["batch_size"], kwargs["tempering"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "minibatch_penalty_transition", spy)
    model = make_conjugate(n=1000)[0]
    with model:
        step = MinibatchDPPenalty(eps=1.0, delta=1e-5, batch_size=100, clip_bound=2.0,
                                  tempering=0.5, chains=1, warmup=False)
        pm.sample(draws=40, tune=10, chains=1, step=step, random_seed=0, **SAMPLE)
    z, _ = pymc_dp.accounting.subsampling.subsampled_noise_multiplier(1.0, 1e-5, 0.1, 50)
    assert len(seen) == 50
    assert set(seen) == {(z, 100, 0.5)}


def test_fixed_noise_plans_that_overspend_are_refused_before_reading_data(make_conjugate, monkeypatch):
    from pymc_dp.model import PrivateModel

    calls = []
    monkeypatch.setattr(PrivateModel, "loglik_rows", lambda self, q, rows: calls.append(1))
    model = make_conjugate(n=1000)[0]
    with model:
        step = MinibatchDPPenalty(eps=1.0, delta=1e-5, batch_size=100, clip_bound=2.0,
                                  noise_multiplier=3.0, chains=2)
        with pytest.raises(PrivacyBudgetExceeded, match="over the budget"):
            pm.sample(draws=2000, tune=0, chains=2, step=step, random_seed=0, **SAMPLE)
    assert calls == [] and step.guard.reservations() == []


def test_budget_too_small_for_one_iteration(make_conjugate):
    with make_conjugate(n=1000)[0], pytest.raises(ValueError, match="too small for even one"):
        MinibatchDPPenalty(eps=0.01, delta=1e-6, batch_size=500, clip_bound=1.0, noise_multiplier=0.5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(clip_bound=0.0), "clip_bound"),
        (dict(clip_bound=float("inf")), "clip_bound"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_bad_arguments_fail_before_the_model_is_read(make_conjugate, monkeypatch, kwargs, match):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    kwargs = {"eps": 1.0, "batch_size": 10, "clip_bound": 1.0, **kwargs}
    with make_conjugate()[0], pytest.raises(ValueError, match=match):
        MinibatchDPPenalty(**kwargs)



@pytest.mark.parametrize(
    "make_step, whitened",
    [
        (lambda: MinibatchDPPenalty(eps=1e3, batch_size=200, clip_bound=8.0, tempering=0.01,
                                    chains=1), False),
        (lambda: MinibatchDPPenalty(eps=1e3, batch_size=200, tempering=0.01, chains=1), True),
    ],
    ids=["clip-bound-given", "whitened"],
)
def test_the_warmup_shapes_proposals_for_the_tempered_target(make_conjugate, make_step, whitened):
    # n = 2000, prior sd 0.2, T = 0.01: the tempered posterior's sd is (25 + 20)^-½ ≈ 0.149;
    # the warm-up's approximation, of the untempered posterior, has sd (25 + 2000)^-½ ≈ 0.022
    # (proposals that small hardly move a tempered chain), and tempering the prior too
    # would give 0.222.
    model, _, sd = make_conjugate(n=2000, prior_sd=0.2)
    tempered_sd = (1 / 0.2**2 + 0.01 * 2000) ** -0.5
    with model:
        step = make_step()
        pymc_dp.sample(step=step, draws=5, tune=0, chains=1, random_seed=3, **SAMPLE)
    # in the warm-up's whitened units the untempered sd is 1; else θ's own units
    expected = tempered_sd / sd if whitened else tempered_sd
    assert step.S[0] == pytest.approx(expected, rel=0.1)


@pytest.mark.parametrize("step_class", ["MinibatchDPPenalty", "DPBarker"])
def test_the_laplace_route_draws_the_tempered_target(make_conjugate, step_class):
    # The approximation's draws follow p(θ) p(x | θ)^T, as the result's label says: here
    # N(0.876, 0.149²) (n = 2000, prior sd 0.2, T = 0.01), not the untempered N(1.947, 0.022²).
    from pymc_dp.steps.dp_barker import DPBarker

    model, mean, sd = make_conjugate(n=2000, prior_sd=0.2)
    precision = 1 / 0.2**2 + 2000
    tempered_precision = 1 / 0.2**2 + 0.01 * 2000
    tempered_mean = 0.01 * mean * precision / tempered_precision
    make = {"MinibatchDPPenalty": MinibatchDPPenalty, "DPBarker": DPBarker}[step_class]
    with model:
        step = make(eps=50.0, tempering=0.01, method="laplace", chains=1)
        with pytest.warns(UserWarning, match="Tempered target"):
            idata = pymc_dp.sample(step=step, draws=1500, tune=0, chains=1, random_seed=4,
                                   **SAMPLE)
    draws = idata.posterior["mu"].values.ravel()
    tempered_sd = tempered_precision**-0.5
    assert draws.mean() == pytest.approx(tempered_mean, abs=0.25 * tempered_sd)
    assert draws.std() == pytest.approx(tempered_sd, rel=0.15)


@pytest.mark.parametrize("n, eps", [(2000, 2.0), (20_000, 50.0)])
def test_only_eps_and_tempering_draw_the_tempered_approximation_when_mcmc_cannot_mix(
    make_conjugate, n, eps
):
    # tempering defines the target, not how to sample it: with no MCMC setting given, DP
    # Barker's budget goes to the Laplace approximation of the tempered target when its
    # chain cannot make 1000 draws: at n = 2000, ε = 2 the budget buys too few
    # iterations; at n = 20000, ε = 50 it buys plenty, but the default chain (1000
    # iterations) is too short to make them.
    from pymc_dp.steps.dp_barker import DPBarker

    model, mean, _ = make_conjugate(n=n, prior_sd=0.2)
    tempered_precision = 1 / 0.2**2 + 0.01 * n
    tempered_mean = 0.01 * mean * (1 / 0.2**2 + n) / tempered_precision
    with model:
        step = DPBarker(eps=eps, tempering=0.01, chains=1)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning):
            idata = pymc_dp.sample(step=step, draws=1000, tune=0, chains=1, random_seed=5,
                                   **SAMPLE)
    draws = idata.posterior["mu"].values.ravel()
    assert draws.mean() == pytest.approx(tempered_mean, abs=0.3 * tempered_precision**-0.5)
    assert draws.std() == pytest.approx(tempered_precision**-0.5, rel=0.15)
