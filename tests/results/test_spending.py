"""ε spent by each draw of each chain (pymc_dp.results.epsilon_by_draw, issue 18 item 2): read
from the chains' own privacy stats by the step that declares them, exact at every point, and
at a chain's last draw the chain's cost as the report recomputes it from the trace."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_dp

from pymc_dp.accounting import (
    GaussianEvent,
    PrivacyLedger,
    SubsampledGaussianEvent,
    gaussian_epsilon,
)
from pymc_dp.results import NotReleasableWarning, epsilon_by_draw
from pymc_dp.steps.base import shared_warmup_events

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False, random_seed=3)
TUNE, DRAWS = 10, 20
Y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)


def _model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu, 1.0, observed=Y)
    return model


def _uniforms(rng, theta, size):
    return theta[0] + rng.random(size)


def _abcdp_run():
    with pm.Model():
        theta = pm.Uniform("theta", 0, 1, shape=1)
        pm.Simulator("y", _uniforms, theta, observed=np.random.default_rng(0).random(40))
        step = pymc_dp.ABCDP(eps=1.0, threshold=0.5, chains=2)
        return pymc_dp.sample(step=step, draws=4, chains=2, **SAMPLE), step


def _run(make):
    with _model():
        step = make()
        return pymc_dp.sample(step=step, draws=DRAWS, tune=TUNE, chains=2, **SAMPLE), step


RUNS = {
    "DPPenalty": lambda: _run(lambda: pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, warmup=False,
                                                        scaling=0.02)),
    "DPPenalty shared warm-up": lambda: _run(lambda: pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0)),
    "MinibatchDPPenalty": lambda: _run(lambda: pymc_dp.MinibatchDPPenalty(
        eps=10.0, batch_size=100, clip_bound=2.0)),
    "DPBarker": lambda: _run(lambda: pymc_dp.DPBarker(eps=10.0, batch_size=200, method="mcmc")),
    "ABCDP": _abcdp_run,
}


def _chain_costs(idata, step_class, delta):
    """Each chain's cost recomputed from the trace, as privacy_report does (the chain's
    events from its step's own reading of the stats, and a warm-up the chains share)."""
    stats = idata.sample_stats
    cost = step_class.cost_from_stats(stats)
    return [PrivacyLedger([*events, *shared_warmup_events(stats)]).epsilon(delta)
            for events in cost.chains]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_last_draw_is_the_chains_cost_recomputed_from_the_trace(name):
    idata, step = RUNS[name]()
    spent = epsilon_by_draw(idata)
    assert spent.dims == ("chain", "draw") and spent.sizes["chain"] == 2
    expected = _chain_costs(idata, type(step), step.delta)
    np.testing.assert_allclose(spent.isel(draw=-1).values, expected, rtol=1e-9)
    assert np.all(np.diff(spent.values, axis=1) >= 0)  # spending never goes back
    assert np.all(spent.values <= step.epsilon * (1 + 1e-9))
    tune = int(idata.posterior.attrs["tuning_steps"])
    np.testing.assert_array_equal(spent["iteration"].values, tune + 1 + spent["draw"].values)
    report = pymc_dp.privacy_report(idata)
    if not report.details.get("shared_warmup"):  # each chain's own row is the whole of it
        np.testing.assert_allclose(spent.isel(draw=-1).values,
                                   [c["epsilon"] for c in report.details["chains"]], rtol=1e-9)


def test_every_draw_of_a_gaussian_chain_costs_its_iterations_so_far():
    idata, step = RUNS["DPPenalty"]()
    spent = epsilon_by_draw(idata)
    mu = float(idata.sample_stats["dp_mu"].values[0, 0])  # one iteration's μ
    iterations = TUNE + 1 + np.arange(DRAWS)
    expected = [gaussian_epsilon(k * mu, step.delta) for k in iterations]
    for chain in range(2):
        np.testing.assert_allclose(spent.values[chain], expected, rtol=1e-9)
    # at another δ, the same releases composed there
    other = epsilon_by_draw(idata, delta=1e-2)
    assert other.attrs["delta"] == 1e-2
    np.testing.assert_allclose(other.values[0, -1], gaussian_epsilon((TUNE + DRAWS) * mu, 1e-2),
                               rtol=1e-9)


def test_a_minibatch_chain_is_composed_exactly_at_the_points_asked():
    idata, step = RUNS["MinibatchDPPenalty"]()
    spent = epsilon_by_draw(idata, points=4)
    assert spent.sizes["draw"] == 4
    assert spent["draw"].values[0] == 0 and spent["draw"].values[-1] == DRAWS - 1
    stats = idata.sample_stats
    for i, draw in enumerate(spent["draw"].values):
        releases = int(stats["dp_releases_chain"].values[0, draw])
        event = SubsampledGaussianEvent(
            name="minibatch log-likelihood ratio", count=releases,
            noise_multiplier=float(stats["dp_noise_multiplier"].values[0, draw]),
            sampling_rate=100 / Y.size, sampling="without_replacement")
        # (a warm-up of the chain's own, or one the chains share: a Gaussian of its μ)
        warmup = sum(float(stats[k].values[0, draw]) for k in ("dp_warmup_mu",
                                                                "dp_mu_shared_warmup")
                     if k in stats)
        assert warmup > 0
        events = [event, GaussianEvent(name="warm-up", noise_multiplier=(2 * warmup) ** -0.5)]
        assert spent.values[0, i] == pytest.approx(
            PrivacyLedger(events).epsilon(step.delta), rel=1e-9)


def test_a_plain_pm_sample_trace_with_its_tuning_kept():
    with _model() as model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=1)
        trace = pm.sample(draws=DRAWS, tune=TUNE, chains=1, step=step,
                          discard_tuned_samples=False, **SAMPLE)
    spent = epsilon_by_draw(trace)  # reads only stats: no warning about what else it holds
    assert spent.sizes["draw"] == TUNE + DRAWS
    np.testing.assert_array_equal(spent["iteration"].values, np.arange(1, TUNE + DRAWS + 1))
    mu = float(trace.sample_stats["dp_mu"].values[0, 0])
    assert spent.values[0, 0] == pytest.approx(gaussian_epsilon(mu, step.delta), rel=1e-9)
    released = pymc_dp.release(trace, model=model)
    report = pymc_dp.privacy_report(released)  # recomputed from the trace
    assert "trace" in report.source
    assert spent.values[0, -1] == pytest.approx(report.epsilon, rel=1e-9)
    assert epsilon_by_draw(released).values[0, -1] == pytest.approx(report.epsilon, rel=1e-9)
    with pytest.warns(NotReleasableWarning):
        assert pymc_dp.privacy_report(trace).epsilon == pytest.approx(report.epsilon, rel=1e-9)


def test_what_it_refuses_says_what_it_needs_and_no_data():
    with pytest.raises(TypeError, match="DataTree"):
        epsilon_by_draw({"sample_stats": None})
    with _model():
        nuts = pm.sample(draws=5, tune=5, chains=1, **SAMPLE)
    with pytest.raises(ValueError) as found:
        epsilon_by_draw(nuts)
    assert str(Y[0])[:6] not in str(found.value)
    posterior_only = xr.DataTree.from_dict({"posterior": nuts.posterior.to_dataset()})
    with pytest.raises(ValueError, match="no privacy stats"):
        epsilon_by_draw(posterior_only)
    idata, _ = RUNS["DPPenalty"]()
    with pytest.raises(ValueError, match="at least 2"):
        epsilon_by_draw(idata, points=1)


def test_the_progress_bar_reads_the_same_numbers():
    # one home: the bar's value is the step's epsilon_from_stats (exact for Gaussian steps)
    idata, step = RUNS["DPPenalty shared warm-up"]()
    stats = idata.sample_stats
    last = {k: stats[k].values[1, -1].item() for k in stats.data_vars if k.startswith("dp_")}
    assert step._draw_epsilon(last) == epsilon_by_draw(idata).values[1, -1]
