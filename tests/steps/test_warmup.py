"""The private warm-up of DPPenalty and DPHMC (pymc_dp.steps.warmup): only eps needed.

What it must do: run with only ``eps``, recover the exact posterior when ε is large, spend
exactly what its ledger events say (the warm-up included) and never more than the budget,
and let every setting the user gives win.
"""

import dataclasses
import json
import re
import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.accounting.events import event_from_dict
import pymc_dp.kernels.warmup as warmup_kernel

from pymc_dp.accounting.gaussian import max_gaussian_mu
from pymc_dp.testing.evaluation import posterior_distance
from pymc_dp.steps.warmup import DEFAULT_WARMUP

SAMPLE = dict(progressbar=False, random_seed=3)
STEPS = [pymc_dp.DPPenalty, pymc_dp.DPHMC]


def regression(n=4000, seed=0):
    """Logistic regression with covariates on different scales (sd 1 and 5)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)) * [1.0, 5.0]
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-(-0.5 + x @ [1.0, 0.3])))
    with pm.Model() as model:
        a = pm.Normal("a", 0, 10)
        b = pm.Normal("b", 0, 10, shape=2)
        pm.Bernoulli("y", logit_p=a + x @ b, observed=y)
    return model


@pytest.fixture(scope="module")
def regression_reference():
    model = regression()
    with model:
        ref = pm.sample(500, tune=500, chains=2, random_seed=1, progressbar=False,
                        compute_convergence_checks=False)
    return {v: ref.posterior[v].values.reshape(1000, -1) for v in ("a", "b")}


@pytest.mark.parametrize("step_class", STEPS)
def test_only_eps_recovers_the_exact_posterior_at_large_eps(step_class, regression_reference):
    # Covariates on different scales: the warm-up's metric must suit all coordinates.
    # Without the warm-up this model does not even run (no clip bound is given).
    model = regression()
    with model:
        idata = pymc_dp.sample(step=step_class(eps=1e5, chains=2), draws=300, tune=100,
                               chains=2, **SAMPLE)
    for name, ref in regression_reference.items():
        draws = idata.posterior[name].values.reshape(600, -1)
        error = np.abs(draws.mean(0) - ref.mean(0)) / ref.std(0)
        ratio = draws.std(0) / ref.std(0)
        assert np.all(error < 1.0), (name, error)
        assert np.all((ratio > 0.4) & (ratio < 2.0)), (name, ratio)


def _spy_on_warmup_releases(monkeypatch):
    """Record μ = 1/(2z²) of every release the warm-up kernel makes."""
    spent = []
    histogram, noisy_sum, matrix_sum = (
        warmup_kernel.noisy_histogram, warmup_kernel._noisy_sum, warmup_kernel.noisy_matrix_sum
    )

    def spy_histogram(rng, values, *, noise_multiplier, **kw):
        spent.append(1 / (2 * noise_multiplier**2))
        return histogram(rng, values, noise_multiplier=noise_multiplier, **kw)

    def spy_sum(rng, clipped, clip, noise_multiplier):
        spent.append(1 / (2 * noise_multiplier**2))
        return noisy_sum(rng, clipped, clip, noise_multiplier)

    def spy_matrix_sum(rng, column, d, *, noise_multiplier, **kw):
        spent.append(1 / (2 * noise_multiplier**2))
        return matrix_sum(rng, column, d, noise_multiplier=noise_multiplier, **kw)

    monkeypatch.setattr(warmup_kernel, "noisy_histogram", spy_histogram)
    monkeypatch.setattr(warmup_kernel, "_noisy_sum", spy_sum)
    monkeypatch.setattr(warmup_kernel, "noisy_matrix_sum", spy_matrix_sum)
    return spent


@pytest.mark.parametrize("step_class", STEPS)
def test_the_warmup_spends_what_the_ledger_reserved_and_the_run_its_budget(
    step_class, monkeypatch, make_conjugate
):
    # Every noise multiplier the warm-up kernel draws with, summed as μ = 1/(2z²) (d
    # coordinate histograms of one release count 1/d each), must equal the warm-up events
    # of the ledger, which are the plan's share of the chain: a release made twice, or with
    # less noise than planned, breaks the equality. The run as a whole costs exactly ε.
    spent = _spy_on_warmup_releases(monkeypatch)
    model, *_ = make_conjugate(n=3000)  # (at n = 500 method="mcmc" would refuse: frozen)
    eps, delta = 1.0, 1e-4
    with model:
        step = step_class(eps=eps, delta=delta, chains=1, method="mcmc")
        idata = pymc_dp.sample(step=step, draws=30, tune=0, chains=1, **SAMPLE)
    report = json.loads(idata.attrs["dp_report"])
    text = json.dumps(report)
    assert "warm-up clipped Hessian" in text and "warm-up Hessian-norm histogram" in text
    chain_mu = max_gaussian_mu(eps, delta)
    planned = DEFAULT_WARMUP.share * chain_mu
    assert sum(spent) == pytest.approx(planned, rel=1e-6)
    assert idata.attrs["dp_epsilon"] == pytest.approx(eps, rel=1e-6)
    assert idata.attrs["dp_epsilon"] <= eps
    # pymc_dp.sample ran the warm-up once, before the chain: the ledger holds it as the
    # run's warm-up, the trace the chain's sampling, and together they are the budget
    warmups = [r for r in step.guard.reservations() if r.get("kind") == "warm-up"]
    assert len(warmups) == 1
    assert sum(event_from_dict(e).mu for e in warmups[0]["events"]) == pytest.approx(planned)
    mu = idata.sample_stats["dp_mu"].values[0]
    assert mu.sum() == pytest.approx(chain_mu - planned, rel=1e-9)
    assert report["spent"]["from_trace"]["mu_shared_warmup"] == pytest.approx(planned)


def test_a_warmup_with_group_parameters_spends_what_the_ledger_reserved(monkeypatch):
    # With group intercepts the norms' histogram is one per block of coordinates (shared,
    # each table of groups), with √k more noise each: together what one histogram costs.
    import pymc_dp.kernels.warmup as kernel

    spent = _spy_on_warmup_releases(monkeypatch)
    blocks = []
    original = kernel.noisy_block_quantiles

    def spy_blocks(rng, norms, **kw):
        # (the first metric's per-coordinate scales are block quantiles too, one column per
        # coordinate, with their own noise allowance)
        blocks.append("scales" if "noise_allowance" in kw else norms.shape[1])
        return original(rng, norms, **kw)

    monkeypatch.setattr(kernel, "noisy_block_quantiles", spy_blocks)
    eps, delta = 1.0, 1e-4
    with _six_regions(2000):
        step = pymc_dp.DPPenalty(eps=eps, delta=delta, chains=1, method="laplace")
        idata = pymc_dp.sample(step=step, draws=30, tune=0, chains=1, **SAMPLE)
    assert blocks.count("scales") == 1  # (once, the first iteration's)
    assert set(blocks) == {"scales", 2}  # (then: b and log σ; the six intercepts)
    warmups = [r for r in step.guard.reservations() if r.get("kind") == "warm-up"]
    reserved = sum(event_from_dict(e).mu for r in warmups for e in r["events"])
    # (the approximation's draws cost nothing: the warm-up has the whole budget)
    assert sum(spent) == pytest.approx(reserved, rel=1e-6)
    assert reserved == pytest.approx(max_gaussian_mu(eps, delta), rel=1e-6)
    assert idata.attrs["dp_epsilon"] <= eps * (1 + 1e-9)


def test_settings_the_user_gives_win(make_conjugate):
    model, *_ = make_conjugate(n=500)
    with model:
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=1.5, S=[0.3], scaling=0.5, chains=1)
        idata = pymc_dp.sample(step=step, draws=10, tune=0, chains=1, **SAMPLE)
    stats = idata.sample_stats
    np.testing.assert_array_equal(stats["clip_bound"].values, 1.5)
    np.testing.assert_array_equal(stats["scaling"].values, 0.5)
    np.testing.assert_array_equal(step.S, [0.3])
    # the warm-up still ran (start point), and is in the ledger
    assert "warm-up clipped gradient" in idata.attrs["dp_report"]


def test_without_a_warmup_the_sampler_gets_the_whole_budget(make_conjugate):
    model, *_ = make_conjugate(n=500)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.5, warmup=False, chains=1)
        idata = pymc_dp.sample(step=step, draws=10, tune=0, chains=1, **SAMPLE)
    assert "warm-up" not in idata.attrs["dp_report"]
    assert idata.attrs["dp_epsilon"] == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs", [dict(warmup=False), dict(S=[1.0]), dict(warmup="yes")]
)
def test_missing_or_contradictory_settings_fail_before_the_model_is_read(
    kwargs, monkeypatch, make_conjugate
):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    model, *_ = make_conjugate(n=50)
    with model, pytest.raises(ValueError, match="clip_bound|warmup"):
        pymc_dp.DPPenalty(eps=1.0, **kwargs)


def _no_data_reads(monkeypatch):
    from pymc_dp.model import PrivateModel

    def must_not_run(*args, **kw):
        raise AssertionError("data was read")

    for name in ("loglik", "loglik_rows", "gradient_rows", "clipped_gradient"):
        monkeypatch.setattr(PrivateModel, name, must_not_run)


@pytest.mark.parametrize("step_class", STEPS + [pymc_dp.MinibatchDPPenalty])
def test_plan_shows_the_price_of_a_run_without_reading_data(
    step_class, monkeypatch, make_conjugate
):
    model, *_ = make_conjugate(n=2000)
    with model:
        step = step_class(eps=2.0)
    _no_data_reads(monkeypatch)
    plan = step.plan(chains=3, draws=300, tune=100)
    text = str(plan)
    assert "3 chain(s) of 100 tune + 300 draws" in text
    assert f"warm-up clipped gradient: {DEFAULT_WARMUP.iterations}" in text
    # the plan's releases cost the whole budget, no more (calibrated to it)
    assert plan.cost == pytest.approx(2.0, rel=1e-3) and plan.cost <= 2.0
    assert step.planned_chains == 3


def test_laplace_draws_follow_the_private_approximation(make_conjugate):
    # method="laplace": the whole budget on the warm-up, then free draws from N(θ̂, Ĥ⁻¹);
    # at a comfortable ε it is close to the exact posterior N(mean, sd²) of this model.
    model, mean, sd = make_conjugate(n=2000, prior_sd=10.0)
    with model:
        step = pymc_dp.DPPenalty(eps=20.0, chains=2, method="laplace")
        idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    draws = idata.posterior["mu"].values
    assert draws.shape == (2, 1000)  # the default length: 1000 free draws
    assert abs(draws.mean() - mean) < 0.5 * sd
    assert 0.8 < draws.std() / sd < 1.25
    report = idata.attrs["dp_report"]
    assert "warm-up" in report and "log-likelihood ratio" not in report
    assert idata.attrs["dp_epsilon"] == pytest.approx(20.0, rel=1e-6)


def test_auto_switches_to_the_laplace_approximation_when_mcmc_cannot_move(make_conjugate):
    from pymc_dp.steps.warmup import expected_moves

    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=0.3, chains=2)
        assert expected_moves(step._chain_mu_allotment(2) / 2, 2000, 1) < 1  # the regime
        with pytest.warns(pymc_dp.LaplaceApproximationWarning, match="Laplace") as caught:
            idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    assert "log-likelihood ratio" not in idata.attrs["dp_report"]
    assert idata.attrs["dp_epsilon"] <= 0.3
    # The advice says how far the budget is from MCMC (the draws it buys grow as μ·n), not
    # only "a larger budget" (a new user's trial: 700 times too small).
    laplace = pymc_dp.LaplaceApproximationWarning
    message = str(next(w.message for w in caught if w.category is laplace))
    bought = float(re.search(r"buys about ([0-9.e+-]+) independent", message).group(1))
    factor = float(re.search(r"need about ([0-9.e+-]+) times this budget's μ", message).group(1))
    assert factor == pytest.approx(step._min_moves() / bought, rel=0.05)
    with model:  # with budget enough to move, MCMC
        step = pymc_dp.DPPenalty(eps=500.0, chains=2)
        assert not step._will_use_laplace(2)


def test_a_step_whose_mcmc_cannot_mix_at_any_budget_says_why(make_conjugate):
    # From a new user's trial: untempered DP Barker expects no moves at all (its fixed clip
    # flattens the target for every batch), and the advice read "MCMC would need about
    # 1e+303 times this budget's μ". It now says what would let its MCMC run.
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPBarker(eps=2.0, chains=2)
        assert step._expected_moves(2) == 0.0
        with pytest.warns(pymc_dp.LaplaceApproximationWarning) as caught:
            step.plan(chains=2)
    given = next(w for w in caught if w.category is pymc_dp.LaplaceApproximationWarning)
    message = str(given.message)
    assert "tempering=T ≤ 0.2" in message and "times this budget" not in message
    assert not re.search(r"e\+\d\d", message), message
    # (and it points at the line of the user's code that gave rise to it, not the library's)
    assert given.filename == __file__


def test_auto_runs_mcmc_only_when_the_budget_lets_chains_mix(make_conjugate):
    # Between "frozen" (< 1 expected move) and MCMC_MIN_MOVES, auto takes the Laplace
    # approximation, while method="mcmc" still runs MCMC (it is not frozen).
    from pymc_dp.steps.warmup import MCMC_MIN_MOVES

    model, *_ = make_conjugate(n=2000)
    with model:
        for eps in (2.0, 5.0):
            auto = pymc_dp.DPPenalty(eps=eps, chains=2)
            assert 1.0 < auto._expected_moves(2) < MCMC_MIN_MOVES
            assert auto._will_use_laplace(2)
            mcmc = pymc_dp.DPPenalty(eps=eps, chains=2, method="mcmc")
            mcmc.plan(chains=2, draws=50, tune=10)  # no refusal
            assert not mcmc._laplace and not mcmc._will_use_laplace(2)


def _counting_warmups(monkeypatch):
    import pymc_dp.steps.warmup as warmup_module

    calls = []
    real = warmup_module.laplace_warmup

    def counting(rng, *args, **kwargs):
        calls.append(rng)
        return real(rng, *args, **kwargs)

    monkeypatch.setattr(warmup_module, "laplace_warmup", counting)
    return calls


def test_under_pm_sample_every_chain_runs_its_own_warmup_also_one_after_another(
    monkeypatch, make_conjugate
):
    # Each chain reserves its warm-up; with PyMC running chains in one process (cores=1)
    # the second must not reuse the first one's result, so that a run is the same whatever
    # the number of processes, and what the ledger counts is what ran.
    calls = _counting_warmups(monkeypatch)
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=2.0, chains=2, method="laplace")
        idata = pm.sample(step=step, draws=200, tune=0, chains=2, cores=1, progressbar=False,
                          random_seed=3)
    assert len(calls) == 2 and calls[0] is not calls[1]
    means = idata.posterior["mu"].mean("draw").values
    assert means[0] != means[1]
    assert all(r.get("kind") != "warm-up" for r in step.guard.reservations())


def test_pymc_dp_sample_runs_one_warmup_for_all_chains_with_the_whole_warmup_budget(
    monkeypatch, make_conjugate
):
    # One warm-up, its releases the run's whole warm-up share (here, method="laplace", the
    # whole budget: 2 chains would each have had half), reserved once; both chains draw
    # from the same approximation, so their means differ by Monte Carlo error only.
    calls = _counting_warmups(monkeypatch)
    spent = _spy_on_warmup_releases(monkeypatch)
    model, mean, sd = make_conjugate(n=2000)
    eps = 2.0
    with model:
        step = pymc_dp.DPPenalty(eps=eps, chains=2, method="laplace")
        idata = pymc_dp.sample(step=step, chains=2, cores=1, **SAMPLE)
    assert len(calls) == 1
    assert sum(spent) == pytest.approx(max_gaussian_mu(eps, step.delta), rel=1e-9)
    kinds = [r.get("kind") for r in step.guard.reservations()]
    assert kinds.count("warm-up") == 1 and len(kinds) == 3
    draws = idata.posterior["mu"].values
    assert abs(draws[0].mean() - draws[1].mean()) < 5 * draws.std() / np.sqrt(draws.shape[1])
    report = json.loads(idata.attrs["dp_report"])
    assert len(report["shared_warmup"]) == 1 and len(report["chains"]) == 2
    assert "warm-up for all chains step=DPPenalty, epsilon=2" in str(pymc_dp.privacy_report(idata))
    assert idata.attrs["dp_epsilon"] == pytest.approx(eps, rel=1e-6)
    assert idata.attrs["dp_epsilon"] <= eps


def test_a_run_that_does_not_fit_is_refused_before_its_shared_warmup(
    monkeypatch, make_conjugate
):
    # The budget of the step was spent by a first run: a second one must be refused before
    # its warm-up reserves or reads anything.
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=2.0, chains=1, method="laplace")
        pymc_dp.sample(step=step, chains=1, cores=1, **SAMPLE)
        before = step.guard.reservations()
        _no_data_reads(monkeypatch)
        with pytest.raises(pymc_dp.PrivacyBudgetExceeded):
            pymc_dp.sample(step=step, chains=1, cores=1, **SAMPLE)
    assert step.guard.reservations() == before


def test_mcmc_refuses_a_run_that_would_freeze_before_reading_data(
    monkeypatch, make_conjugate
):
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=0.3, chains=2, method="mcmc")
        _no_data_reads(monkeypatch)
        with pytest.raises(pymc_dp.PrivacyBudgetExceeded, match="frozen"):
            pm.sample(step=step, draws=100, tune=100, chains=2, progressbar=False,
                      random_seed=1, cores=1)
    assert step.guard.reservations() == []


def test_sample_picks_the_length_from_the_budget(make_conjugate):
    # DPHMC's MCMC: as long as its gradients stay informative, so longer with more budget
    model, *_ = make_conjugate(n=5000)
    with model:
        short = pymc_dp.DPHMC(eps=30.0, chains=2)._mcmc_length(2)
        long = pymc_dp.DPHMC(eps=100.0, chains=2)._mcmc_length(2)
        assert sum(long) > sum(short)
        step = pymc_dp.DPHMC(eps=100.0, chains=2, method="mcmc")
        assert step.default_length(2) == long
        idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    assert idata.posterior.sizes["draw"] == long[0]


def test_auto_runs_mcmc_only_in_a_chain_long_enough_for_the_draws_its_budget_buys(make_conjugate):
    # However little noise the budget leaves, a random walk of k iterations makes at most
    # about 0.33 k / d independent draws: the default chain is made that long, and a
    # shorter chain asked for is not enough for auto's MCMC.
    from pymc_dp.steps.warmup import MCMC_MIN_MOVES, RANDOM_WALK_EFFICIENCY

    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=500.0, chains=2)
        assert step._expected_moves(2, 700) >= MCMC_MIN_MOVES  # (the regime)
        draws, tune = step.default_length(2)
        assert RANDOM_WALK_EFFICIENCY * (draws + tune) >= MCMC_MIN_MOVES
        assert not step._will_use_laplace(2)
        short = pymc_dp.DPPenalty(eps=500.0, chains=2)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning,
                          match="a chain of 700 iterations can make at most"):
            short.plan(chains=2, draws=500, tune=200)
        assert short._laplace
        # DPHMC: 0.65 draws per iteration at best. Its default Laplace run (1000 free draws,
        # no tuning) is not taken for a chain long enough: the choice stays the same.
        from pymc_dp.steps.dp_hmc import HMC_EFFICIENCY

        hmc = pymc_dp.DPHMC(eps=500.0, chains=2)
        assert hmc._expected_moves(2, 223) >= MCMC_MIN_MOVES
        assert hmc._mixing_moves(2, 223) == pytest.approx(HMC_EFFICIENCY * 223)
        assert hmc._will_use_laplace(2) and hmc.default_length(2) == (1000, 0)
        # (no length given: the warning names the default MCMC chain's, not the 1000 free
        # draws nobody asked for)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning) as said:
            hmc.plan(chains=2)
        text = str(said[0].message)
        assert "a chain of the default MCMC length" in text and "1000 iterations" not in text
        assert hmc._laplace
        # with budget enough for a chain of 1539 iterations (its longest), HMC
        far = pymc_dp.DPHMC(eps=10_000.0, chains=2)
        assert not far._will_use_laplace(2)
        assert HMC_EFFICIENCY * sum(far.default_length(2)) >= MCMC_MIN_MOVES


def test_the_expected_draws_count_the_clip_bound_the_warmup_will_set(make_conjugate):
    # A penalty release costs in proportion to b², the clip the warm-up sets: its plan's
    # margin times its quantile of norms whose square is about χ²_d / n. Twice the margin,
    # a quarter of the draws; at d = 1 the 0.999 quantile with margin 1.5 is 24.4 / n, six
    # times the old constant's 4 d / n.
    import dataclasses

    from scipy.stats import chi2

    from pymc_dp.steps.warmup import DEFAULT_WARMUP, expected_moves

    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=20.0, chains=2)
        wide = pymc_dp.DPPenalty(
            eps=20.0, chains=2, warmup=dataclasses.replace(DEFAULT_WARMUP, clip_margin=3.0)
        )
        assert step._clip_squared() == pytest.approx(1.5**2 * chi2.ppf(0.999, 1))
        mu = step._sampling_mu_equivalent(700, 2)
        assert step._expected_moves(2, 700) == pytest.approx(
            expected_moves(mu, 2000, 1) * 4.0 / step._clip_squared()
        )
        assert wide._expected_moves(2, 700) == pytest.approx(step._expected_moves(2, 700) / 4)


@pytest.mark.parametrize("step_name", ["DPPenalty", "MinibatchDPPenalty"])
def test_a_noise_multiplier_given_by_hand_keeps_the_default_length_its_budget_pays_for(
    make_conjugate, step_name
):
    # Noise fixed by hand: the budget bounds the iterations, so the default chain must not
    # grow with the budget's expected draws (which assume calibrated noise): a multiplier
    # that pays for 700 iterations plans without a refusal.
    model, *_ = make_conjugate(n=2000)
    cls = getattr(pymc_dp, step_name)
    with model:
        calibrated = cls(eps=50.0, chains=2, method="mcmc")
        calibrated.plan(chains=2, draws=500, tune=200)
        fixed = cls(eps=50.0, chains=2, noise_multiplier=1.05 * calibrated.noise_multiplier)
        assert sum(fixed.default_length(2)) == 700
        assert fixed.plan(chains=2).cost <= 50.0


def test_dpbarker_chooses_the_largest_batch_its_budget_pays_for(make_conjugate):
    from pymc_dp.accounting.barker import barker_max_iterations

    model, *_ = make_conjugate(n=20_000)
    with model:
        step = pymc_dp.DPBarker(eps=2.0, chains=2, method="mcmc")
        draws, tune = step.default_length(2)
        idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    b, k = step.batch_size, draws + tune
    assert idata.posterior.sizes["draw"] == draws
    assert barker_max_iterations(2.0, step.delta, 20_000, b) // 2 >= k
    assert barker_max_iterations(2.0, step.delta, 20_000, int(b * 1.05) + 1) // 2 < k
    assert idata.attrs["dp_epsilon"] <= 2.0


def test_a_plain_pm_sample_trace_of_the_minibatch_warmup_gives_its_cost(make_conjugate):
    # The minibatch step's cost is recomputed from the trace (its per-draw stats): the
    # warm-up's releases must be in it, or the report would say less than was spent.
    model, *_ = make_conjugate(n=3000)
    with model:
        step = pymc_dp.MinibatchDPPenalty(eps=2.0, chains=2)
        idata = pm.sample(draws=30, tune=10, chains=2, step=step, random_seed=3,
                          progressbar=False)
    report = pymc_dp.privacy_report(pymc_dp.release(idata, model=model))
    spent = pymc_dp.privacy_report(step).epsilon
    assert report.epsilon == pytest.approx(spent, rel=1e-9) and spent <= 2.0
    assert float(idata.sample_stats["dp_warmup_mu"].values.min()) > 0


SUBSAMPLED = [pymc_dp.MinibatchDPPenalty, pymc_dp.DPBarker]


@pytest.mark.parametrize("step_class", SUBSAMPLED)
def test_minibatch_steps_with_only_eps_draw_from_the_private_approximation(
    step_class, make_conjugate
):
    # At ε = 1 neither minibatch chain could mix: "auto" spends the whole budget on the
    # private Laplace approximation, one warm-up for both chains, and releases no batch.
    model, mean, sd = make_conjugate(n=5000, prior_sd=10.0)
    with model:
        step = step_class(eps=1.0, chains=2)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning, match="Laplace"):
            idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    draws = idata.posterior["mu"].values
    assert abs(draws.mean() - mean) < 1.0 * sd
    assert 0.5 < draws.std() / sd < 2.0
    reservations = step.guard.reservations()
    assert [r.get("kind") for r in reservations].count("warm-up") == 1
    names = {e["name"] for r in reservations for e in r["events"]}
    assert names and all(name.startswith("warm-up") for name in names)
    assert np.all(idata.sample_stats["dp_releases_chain"].values == 0)
    report = pymc_dp.privacy_report(idata)
    assert report.epsilon == idata.attrs["dp_epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert idata.attrs["dp_epsilon"] <= 1.0
    assert report.details["spent"]["from_trace"]["epsilon"] == pytest.approx(report.epsilon, rel=1e-9)


@pytest.mark.parametrize("step_class", SUBSAMPLED)
def test_a_plain_pm_sample_trace_of_a_laplace_minibatch_step_gives_its_cost(
    step_class, make_conjugate
):
    # Per-chain warm-ups under pm.sample: the trace's stats alone must give what the
    # ledger holds (the warm-up's μ per chain, no batch releases).
    model, *_ = make_conjugate(n=3000)
    with model:
        step = step_class(eps=1.0, chains=2)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning):
            idata = pm.sample(draws=30, tune=0, chains=2, step=step, cores=1, progressbar=False,
                              random_seed=3, compute_convergence_checks=False)
    report = pymc_dp.privacy_report(pymc_dp.release(idata, model=model))
    spent = pymc_dp.privacy_report(step).epsilon
    assert report.epsilon == pytest.approx(spent, rel=1e-9)
    assert spent == pytest.approx(1.0, rel=1e-6) and spent <= 1.0


def test_minibatch_mcmc_after_a_shared_warmup_costs_what_per_chain_warmups_would(
    make_conjugate,
):
    # MCMC: the run's warm-up is reserved once, and the batch releases are calibrated
    # with it composed in. Their noise must be what per-chain warm-ups give (the same
    # RDP), and the whole run must cost the budget, never more.
    model, *_ = make_conjugate(n=2000)
    eps = 50.0
    with model:
        step = pymc_dp.MinibatchDPPenalty(eps=eps, chains=2, method="mcmc")
        idata = pymc_dp.sample(step=step, draws=100, tune=50, chains=2, **SAMPLE)
    per_chain, shared = step._calibrations[(150, 2, False)], step._calibrations[(150, 2, True)]
    assert shared == pytest.approx(per_chain, rel=1e-6)
    kinds = [r.get("kind") for r in step.guard.reservations()]
    assert kinds.count("warm-up") == 1 and len(kinds) == 3
    chain_events = {e["name"] for r in step.guard.reservations() if r.get("kind") != "warm-up"
                    for e in r["events"]}
    assert chain_events == {"minibatch log-likelihood ratio"}
    spent = pymc_dp.privacy_report(step).epsilon
    assert 0.99 * eps < spent <= eps
    report = pymc_dp.privacy_report(idata)
    assert report.details["spent"]["from_trace"]["epsilon"] == pytest.approx(spent, rel=1e-9)


def test_dpbarker_auto_never_runs_a_chain_whose_clip_flattens_its_target(make_conjugate):
    # Untempered, DP Barker's clip √b/n binds on every batch: however many iterations a
    # huge budget buys, its chain would follow a flattened target, so "auto" draws from
    # the Laplace approximation.
    model, *_ = make_conjugate(n=5000)
    with model:
        step = pymc_dp.DPBarker(eps=1e4, chains=2)
        assert step._most_iterations(2) > 1e5
        assert step._expected_moves(2) == 0 and step._will_use_laplace(2)


def test_settings_only_mcmc_uses_make_auto_run_mcmc(make_conjugate):
    # A batch size given by hand is a setting of DP Barker's MCMC: it wins over "auto".
    model, *_ = make_conjugate(n=5000)
    with model:
        assert pymc_dp.DPBarker(eps=1.0, chains=2)._will_use_laplace(2)
        step = pymc_dp.DPBarker(eps=1.0, chains=2, batch_size=100)
        assert not step._will_use_laplace(2)
        step.plan(chains=2, draws=10, tune=0)
        assert not step._laplace and step.batch_size == 100
        # (even where MCMC buys under one independent draw: the user asked for this chain)
        step = pymc_dp.DPBarker(eps=0.7, chains=2, batch_size=100)
        assert step._expected_moves(2) < 1 and not step._will_use_laplace(2)


def _failed_after_its_shared_warmup(monkeypatch, step_class):
    """A step (ε = 1, two chains, Laplace) whose pymc_dp.sample failed in pm.sample, after
    its shared warm-up was reserved and run."""
    import pymc_dp.results.sampling as sampling

    real = sampling.pm.sample
    step = step_class(eps=1.0, chains=2, method="laplace")
    monkeypatch.setattr(sampling.pm, "sample", lambda **kw: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        pymc_dp.sample(step=step, chains=2, **SAMPLE)
    monkeypatch.setattr(sampling.pm, "sample", real)
    return step


@pytest.mark.parametrize("step_class", [pymc_dp.DPPenalty, pymc_dp.MinibatchDPPenalty])
def test_after_a_failed_run_its_paid_warmup_is_reported_by_the_run_that_uses_it(
    monkeypatch, step_class, make_conjugate
):
    # pm.sample fails after the run's warm-up was paid for: calling pymc_dp.sample again
    # runs the chains on that warm-up, and the published cost must include it; a plain
    # pm.sample is refused before it reserves anything.
    model, *_ = make_conjugate(n=2000)
    with model:
        step = _failed_after_its_shared_warmup(monkeypatch, step_class)
        before = step.guard.reservations()
        assert [r.get("kind") for r in before] == ["warm-up"]
        with pytest.raises(pymc_dp.PrivacyBudgetExceeded, match="pymc_dp.sample"):
            pm.sample(step=step, draws=20, tune=0, chains=2, cores=1, progressbar=False)
        assert step.guard.reservations() == before
        idata = pymc_dp.sample(step=step, chains=2, **SAMPLE)
    spent = pymc_dp.privacy_report(step).epsilon
    assert spent == pytest.approx(1.0, rel=1e-6)
    assert idata.attrs["dp_epsilon"] == pytest.approx(spent, rel=1e-9)
    assert pymc_dp.privacy_report(idata).epsilon == pytest.approx(spent, rel=1e-9)


def test_unknown_var_names_are_refused_before_the_warmup(make_conjugate):
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, chains=2)
        with pytest.raises(ValueError, match="not variables of the model"):
            pymc_dp.sample(step=step, chains=2, var_names=["nope"], **SAMPLE)
    assert step.guard.reservations() == []


def test_laplace_warning_is_given_once_and_never_advises_what_would_be_refused(make_conjugate):
    # A batch size given asks for MCMC; where MCMC would freeze, "auto" draws from the
    # approximation and must say that the setting is unused, not advise method="mcmc"
    # (which refuses a frozen run).
    model, *_ = make_conjugate(n=5000)
    with model:
        step = pymc_dp.MinibatchDPPenalty(eps=0.5, chains=2, batch_size=50)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning) as caught:
            step.plan(chains=2)
            idata = pymc_dp.sample(step=step, chains=2, draws=50, **SAMPLE)
    messages = [str(w.message) for w in caught if w.category is pymc_dp.LaplaceApproximationWarning]
    assert len(messages) == 1
    assert "not used" in messages[0] and "method='mcmc'" not in messages[0]
    assert "every row" in messages[0]
    assert np.all(idata.sample_stats["dp_batch_size"].values == 0)  # no batch was read


def test_a_spent_step_says_so_and_suggests_a_new_step(make_conjugate):
    model, *_ = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, chains=1, method="laplace")
        pymc_dp.sample(step=step, chains=1, draws=20, **SAMPLE)
        with pytest.raises(pymc_dp.PrivacyBudgetExceeded, match="budget is spent.*new step"):
            pymc_dp.sample(step=step, chains=1, draws=20, **SAMPLE)


def test_the_approximation_carries_the_noise_of_its_own_mean(make_conjugate):
    # The private mode is off the posterior's by the release noise; its covariance, from
    # public numbers, must describe that error (a noise sd wrong by 2 would give E z² of
    # about 0.2 or 3), and the draws' spread must include it.
    model, mean, sd = make_conjugate(n=2000)
    with model:
        step = pymc_dp.DPPenalty(eps=1.0, chains=1, method="laplace")
    step.plan(chains=1, draws=10, tune=0)
    pmodel = step.private_model
    z2, noise_var = [], []
    for seed in range(40):
        found = step._run_warmup(np.random.default_rng(seed), pmodel.ravel(pmodel._initial_point),
                                 step._shared_warmup_mu())
        noise_var.append(float(found.noise_cov[0, 0]))
        z2.append(float(found.mean[0] - mean) ** 2 / noise_var[-1])
        assert found.covariance()[0, 0] == pytest.approx(
            1.0 / found.hessian[0, 0] + noise_var[-1], rel=1e-9
        )
    assert 0.4 < np.mean(z2) < 1.6
    assert 0.1 < np.mean(noise_var) / sd**2 < 3.0  # the regime: noise comparable to sd


def test_dpbarker_mcmc_on_a_flattened_target_says_its_draws_are_too_wide(make_conjugate):
    # Untempered, DP Barker's clip bound √b/n clips every move's ratios: its chains move
    # freely on a flattened target (R̂ looks fine), so the warning must not say "hardly mix"
    # but that the draws are too wide, and what to change.
    model, _, post_sd = make_conjugate(n=5000)
    with model:
        step = pymc_dp.DPBarker(eps=2.0, chains=2, method="mcmc")
        assert step._expected_moves(2) == 0.0
        with pytest.warns(UserWarning, match="flattening the target") as said:
            step.plan(chains=2)
        text = " ".join(str(w.message) for w in said)
        assert "hardly mix" not in text and "tempering=T" in text
        idata = pymc_dp.sample(step=step, chains=2, random_seed=3, progressbar=False)
    assert float(idata.posterior["mu"].std()) > 5 * post_sd


def test_dpbarker_mcmc_that_can_hardly_mix_says_so(make_conjugate):
    model, *_ = make_conjugate(n=5000)
    with model:
        step = pymc_dp.DPBarker(eps=0.5, chains=2, method="mcmc", tempering=0.05)
        assert 0.0 < step._expected_moves(2) < 1
        with pytest.warns(UserWarning, match="hardly mix"):
            step.plan(chains=2)


def test_a_warmup_that_did_not_settle_says_so(make_conjugate):
    # Data a thousand prior-initial-point units away and two iterations: the Newton steps
    # are still long at the end, and the step must say its approximation may be off.
    from pymc_dp.accounting.plan import WarmupPlan

    y = np.random.default_rng(0).normal(1000.0, 1.0, 2000)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1e4)
        pm.Normal("y", mu, 1.0, observed=y)
        short = pymc_dp.DPPenalty(eps=1.0, chains=1, method="laplace",
                                  warmup=WarmupPlan(iterations=2))
        with pytest.warns(pymc_dp.WarmupNotConvergedWarning, match="did not settle"):
            pymc_dp.sample(step=short, chains=1, draws=20, **SAMPLE)
    model, *_ = make_conjugate(n=2000)
    with model:
        settled = pymc_dp.DPPenalty(eps=4.0, chains=1, method="laplace")
        with warnings.catch_warnings():
            warnings.simplefilter("error", pymc_dp.WarmupNotConvergedWarning)
            pymc_dp.sample(step=settled, chains=1, draws=20, **SAMPLE)


@pytest.mark.parametrize("step_class", [pymc_dp.DPPenalty, pymc_dp.MinibatchDPPenalty])
def test_a_plain_trace_that_draws_on_a_shared_warmup_reports_it(
    monkeypatch, step_class, make_conjugate
):
    # Even if a chain ran outside pymc_dp.sample on a run's shared warm-up (here forced by
    # setting the flag pymc_dp.sample sets), the trace's own stats count that warm-up.
    model, *_ = make_conjugate(n=2000)
    with model:
        step = _failed_after_its_shared_warmup(monkeypatch, step_class)
        step._in_run_with_shared_warmup = True
        trace = pm.sample(step=step, draws=20, tune=0, chains=2, cores=1, progressbar=False,
                          random_seed=1, compute_convergence_checks=False)
    spent = pymc_dp.privacy_report(step).epsilon
    released = pymc_dp.release(trace, model=model)
    assert pymc_dp.privacy_report(released).epsilon == pytest.approx(spent, rel=1e-9)
    assert spent == pytest.approx(1.0, rel=1e-6)


def test_a_retry_keeps_the_route_its_paid_warmup_was_chosen_for(monkeypatch, make_conjugate):
    # "auto" chose the Laplace route (and paid the whole budget for its warm-up) before the
    # run failed; a retry of another length must not switch to MCMC, which that budget no
    # longer pays for.
    import pymc_dp.results.sampling as sampling

    model, *_ = make_conjugate(n=2000)
    real = sampling.pm.sample
    with model:
        # (a batch size asks for MCMC unless it would freeze: here under one expected draw
        # for 100 iterations, just over one for 1000)
        step = pymc_dp.MinibatchDPPenalty(eps=1.2, chains=2, batch_size=200)
        assert step._expected_moves(2, 100) < 1 < step._expected_moves(2, 1000)
        monkeypatch.setattr(sampling.pm, "sample", lambda **kw: 1 / 0)
        with pytest.warns(pymc_dp.LaplaceApproximationWarning), pytest.raises(ZeroDivisionError):
            pymc_dp.sample(step=step, chains=2, draws=100, tune=0, **SAMPLE)
        monkeypatch.setattr(sampling.pm, "sample", real)
        assert step._laplace
        idata = pymc_dp.sample(step=step, chains=2, draws=1000, tune=0, **SAMPLE)
    assert step._laplace
    assert idata.attrs["dp_epsilon"] == pytest.approx(pymc_dp.privacy_report(step).epsilon)
    assert pymc_dp.privacy_report(step).epsilon <= 1.2


def _blood_pressure_model(n, seed=0, **mu_kwargs):
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, 0.6], [0.6, 1.0]]) * np.outer([15.0, 10.0], [15.0, 10.0])
    y = rng.multivariate_normal([120.0, 80.0], cov, n)
    with pm.Model() as model:
        mu = pm.Normal("mu", 100.0, 50.0, shape=2, **mu_kwargs)
        chol, _, _ = pm.LKJCholeskyCov(
            "chol", n=2, eta=2.0, sd_dist=pm.HalfNormal.dist(30.0), compute_corr=True
        )
        pm.MvNormal("y", mu=mu, chol=chol, observed=y)
    return model


def test_a_default_start_the_prior_finds_implausible_moves_to_the_prior_median():
    # PyMC starts LKJCholeskyCov at the identity (sds of 1) whatever its sd_dist; the
    # prior HalfNormal(30) puts sds of 1 below its 5 % quantile. Only those coordinates
    # move (to log of the prior's median sd, about log 20); μ (at its prior mean) and the
    # correlation stay, and a start the user gave is kept.
    model = _blood_pressure_model(50)
    pmodel = pymc_dp.DPPenalty(eps=1.0, model=model).private_model
    default = pmodel.ravel(pmodel._initial_point)
    start = pmodel.plausible_start(default)
    names = pmodel.unravel(start)
    np.testing.assert_array_equal(names["mu"], [100.0, 100.0])
    packed = names["chol_cholesky-cov-packed__"]  # log sd₁, L₂₁, log sd₂
    np.testing.assert_allclose(packed[[0, 2]], np.log(30.0 * 0.674), atol=0.15)
    assert packed[1] == 0.0
    np.testing.assert_array_equal(pmodel.plausible_start(start), start)  # the same each time
    mine = default.copy()
    mine[2] = 0.5  # a user's start (pm.sample(initvals=…)) of the first log sd
    assert pmodel.plausible_start(mine)[2] == 0.5
    # an initval in the model is the prior draws' value too: never moved
    with_initval = _blood_pressure_model(50, initval=np.array([0.0, 0.0]))
    pm_initval = pymc_dp.DPPenalty(eps=1.0, model=with_initval).private_model
    q = pm_initval.ravel(pm_initval._initial_point)
    np.testing.assert_array_equal(pm_initval.plausible_start(q)[:2], [0.0, 0.0])


def test_mvnormal_rows_from_pymcs_default_start_reach_the_posterior():
    # Blood pressures (means 120/80, sds 15/10) with PyMC's default start (sds of 1: about
    # 400 posterior sds off in the log sds, 130 in the means): the warm-up used to end
    # there. Now both the per-chain warm-ups of pm.sample and pymc_dp.sample's shared one
    # come within a few posterior sds of the mode at ε = 4, n = 2000.
    model = _blood_pressure_model(2000, seed=1)
    with model:
        mode = pm.find_MAP(progressbar=False, return_inferencedata=False, jitter=False)
    for run in (pm.sample, pymc_dp.sample):
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = run(
                step=pymc_dp.DPPenalty(eps=4.0), draws=200, tune=0, chains=1,
                random_seed=3, progressbar=False, compute_convergence_checks=False,
            )
        post = idata["posterior"]
        np.testing.assert_allclose(post["mu"].mean(("chain", "draw")), mode["mu"], atol=1.5)
        packed = post["chol"].mean(("chain", "draw")).values  # L₁₁, L₂₁, L₂₂
        sds = [packed[0], np.hypot(packed[1], packed[2])]
        np.testing.assert_allclose(sds, mode["chol_stds"], rtol=0.1)


def test_a_prior_pymc_cannot_draw_keeps_its_start_and_the_others_still_move():
    y = np.random.default_rng(0).multivariate_normal([120.0, 80.0], np.diag([225.0, 100.0]), 100)
    with pm.Model() as model:
        mu = pm.Flat("mu", shape=2)  # no draws: its start stays PyMC's
        chol, _, _ = pm.LKJCholeskyCov(
            "chol", n=2, eta=2.0, sd_dist=pm.HalfNormal.dist(30.0), compute_corr=True
        )
        pm.MvNormal("y", mu=mu, chol=chol, observed=y)
    pmodel = pymc_dp.DPPenalty(eps=1.0, model=model).private_model
    start = pmodel.unravel(pmodel.plausible_start(pmodel.ravel(pmodel._initial_point)))
    np.testing.assert_array_equal(start["mu"], [0.0, 0.0])
    np.testing.assert_allclose(start["chol_cholesky-cov-packed__"][[0, 2]], np.log(20.2), atol=0.15)


def test_a_vague_skewed_prior_keeps_pymcs_start():
    # PyMC starts Gamma(0.01, 0.01) at its mean 1, above its 95 % quantile; its median is
    # about 1e-28, where its density (value space) is no higher: moving there would start
    # the warm-up 63 units of log τ away. Only a move that makes the start more probable
    # under the prior is made.
    y = np.random.default_rng(0).normal(3.0, 2.0, 200)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 100.0)
        tau = pm.Gamma("tau", 0.01, 0.01)
        pm.Normal("y", mu, 1.0 / pm.math.sqrt(tau), observed=y)
    pmodel = pymc_dp.DPPenalty(eps=1.0, model=model).private_model
    default = pmodel.ravel(pmodel._initial_point)
    lo, _, hi = pmodel._prior_value_quantiles()
    assert default[1] > hi[1]  # outside the central 90 %, and still kept:
    np.testing.assert_array_equal(pmodel.plausible_start(default), default)


def _six_regions(n, seed=0):
    """Non-centred varying intercepts for six regions, written per row as users do."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 6, n)
    x = rng.normal(size=n)
    y = (2.0 + 0.8 * rng.normal(size=6))[g] + 0.6 * x + rng.normal(size=n)
    return _varying_intercepts(g, x, y, list("ABCDEF"), prior_sds=(5.0, 2.0, 2.0, 2.0))


def _varying_intercepts(g, x, y, regions, prior_sds):
    """y ~ N(μ + σ_a·z[g] + b·x, σ), non-centred; ``prior_sds`` of (μ, σ_a, b, σ)."""
    mu_sd, sigma_a_sd, b_sd, sigma_sd = prior_sds
    with pm.Model(coords={"region": regions}) as model:
        idx = pm.Data("g", g)
        xd = pm.Data("x", x)
        mu_a = pm.Normal("mu_a", 0.0, mu_sd)
        sigma_a = pm.HalfNormal("sigma_a", sigma_a_sd)
        z = pm.Normal("z", 0.0, 1.0, dims="region")
        b = pm.Normal("b", 0.0, b_sd)
        sigma = pm.HalfNormal("sigma", sigma_sd)
        pm.Normal("y", mu_a + sigma_a * z[idx] + b * xd, sigma, observed=y)
    return model


def test_a_hierarchical_posterior_is_recovered_through_the_likelihoods_own_parameters():
    # The likelihood reads the six intercepts μ + σ_a·z, b and log σ (8 numbers; θ has 10)
    # and is near-Gaussian in them, while the posterior on θ is not (six groups say little
    # about σ_a, and z trades off against σ_a along a curved ridge). The Gaussian
    # approximation on θ missed even without noise (1.3 posterior sds, sds twice too wide);
    # its Newton steps left the ridge and, at ε = 10⁵, ended 20 units off. With the
    # releases on the intercepts and the exact prior, at ε = 1000 the posterior is NUTS's
    # (seeds 2–9 on 2026-11-29: largest errors 0.14–0.21 sds, widths 0.78–1.16; at ε = 50
    # the noise alone put one seed in eight 1 sd off and three in eight had r̂ > 1.05).
    model = _six_regions(3000)
    with model:
        reference = pm.sample(draws=1000, tune=1000, chains=2, random_seed=1, progressbar=False,
                              compute_convergence_checks=False)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        private = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=1000.0, method="laplace"),
                                 chains=2, random_seed=2, progressbar=False)
    found = posterior_distance(private, reference)
    assert found.mean_error_max < 0.5
    assert found.sd_ratio_max < 1.4 and found.rhat_max < 1.1  # (1.005–1.067 over the seeds)
    # Every width within [0.75, 1.4] but σ_a's, which six groups inform: its ratio was
    # 0.68–0.72 when the test ran alone, before and after the warm-up weighed group
    # parameters apart (2026-11-26), and above 0.75 only after some other tests had run.
    narrow = [label for label, r in zip(found.labels, found.sd_ratio) if r <= 0.75]
    assert narrow in ([], ["sigma_a"]) and found.sd_ratio_min > 0.6, found


def test_the_surrogate_draws_are_reproducible_and_vary():
    model = _six_regions(500, seed=4)
    draws = []
    for _ in range(2):
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=4.0, method="laplace"), draws=50,
                                   chains=1, random_seed=9, progressbar=False)
        draws.append(idata["posterior"]["z"].values)
    np.testing.assert_array_equal(draws[0], draws[1])
    assert np.all(np.std(draws[0], axis=(0, 1)) > 0)


def test_surrogate_draws_are_the_same_in_one_process_or_two():
    # From a privacy review: after a shared warm-up, chains run one after another in one
    # process reused the first chain's sampler (seeded from its generator).
    draws = {}
    for cores in (1, 2):
        with _six_regions(500, seed=4), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=4.0, method="laplace"), draws=30,
                                   chains=2, cores=cores, random_seed=9, progressbar=False)
        draws[cores] = idata["posterior"]["z"].values
    np.testing.assert_array_equal(draws[1], draws[2])


def test_a_warmup_whose_curvature_is_mostly_noise_says_so():
    # From a new user's trial: 30 counties of very unequal size, ε = 4. The rows of the
    # smallest counties set the clip bounds; the noise then drowned the slope and the
    # residual scale, which stayed at their start with widths 30 times too small, and no
    # warning was given. The warm-up now says its curvature was mostly noise.
    rng = np.random.default_rng(1)
    n, groups = 10_000, 30
    county = rng.choice(groups, size=n, p=rng.dirichlet(np.full(groups, 0.7)))
    floor = rng.binomial(1, 0.3, size=n).astype(float)
    y = rng.normal(1.4, 0.35, size=groups)[county] - 0.65 * floor + rng.normal(0, 0.75, size=n)
    with pm.Model() as model:
        idx = pm.Data("county", county)
        mu_a = pm.Normal("mu_a", 0.0, 5.0)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        a = pm.Normal("a", mu_a, sigma_a, shape=groups)
        b = pm.Normal("b", 0.0, 1.0)
        sigma_y = pm.HalfNormal("sigma_y", 1.0)
        pm.Normal("y", a[idx] + b * pm.Data("floor", floor), sigma_y, observed=y)
    with model, pytest.warns(pymc_dp.steps.warmup.WarmupNotConvergedWarning, match="noisier"):
        pymc_dp.sample(step=pymc_dp.DPPenalty(eps=4.0), draws=10, chains=1, random_seed=3,
                       progressbar=False)


def _student_t_regression(n, seed):
    """Robust regression with unknown degrees of freedom; PyMC's start is far off
    (intercept 0 against 10: about 200 posterior sds)."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.uniform(0.0, 4.0, n), rng.normal(size=n)])
    y = 10.0 + x @ np.array([1.5, -0.7]) + 2.0 * rng.standard_t(4.0, n)
    with pm.Model() as model:
        x_data = pm.Data("X", x)
        alpha = pm.Normal("alpha", 0.0, 20.0)
        beta = pm.Normal("beta", 0.0, 5.0, shape=2)
        sigma = pm.HalfNormal("sigma", 5.0)
        nu = pm.Gamma("nu", 2.0, 0.1)
        pm.StudentT("y", nu=nu, mu=alpha + x_data @ beta, sigma=sigma, observed=y)
    return model


@pytest.mark.parametrize("take_back", [True, False])
def test_a_newton_step_that_lands_further_from_the_mode_is_taken_back(take_back, monkeypatch):
    # Without taking steps back this warm-up (ε = 4, n = 10⁴, seed 2, PyMC's start some
    # 200 posterior sds off) ended with log ν 4.2 too high (ν ≈ 280 against 4: about 40
    # posterior sds). A noisy Newton step took it further from the mode, where the Newton
    # decrement (a squared distance to the mode, from released values) was more than four
    # times the one before: that step is taken back and retried shorter, and the warm-up
    # ends near the mode. (Twelve iterations, the default when this was found: with the
    # sixteen of today's default this start settles without the step that is taken back;
    # and without the clipping bias taken out of the gradient, as then: with it, this
    # start settles too.)
    model = _student_t_regression(10_000, 0)
    with model:
        mode = pm.find_MAP(progressbar=False, return_inferencedata=False, jitter=False)
        step = pymc_dp.DPPenalty(
            eps=4.0, chains=1, method="laplace",
            warmup=dataclasses.replace(DEFAULT_WARMUP, iterations=12, replicates=0),
        )
    step.plan(chains=1, draws=10, tune=0)
    if not take_back:
        monkeypatch.setattr(warmup_kernel, "_REJECT_RATIO", np.inf)
        monkeypatch.setattr(warmup_kernel, "_DOWNHILL_SDS", np.inf)
    pmodel = step.private_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = step._run_warmup(
            np.random.default_rng(2), pmodel.plausible_start(pmodel.ravel(pmodel._initial_point)),
            step._shared_warmup_mu(),
        )
    error = np.max(np.abs(found.mean - pmodel.ravel(mode)))
    assert (error < 0.2) == take_back, error  # (without: shows the test can fail)


def test_a_banana_posterior_is_drawn_in_its_own_shape_at_eps_1():
    # The thesis' flat banana (n = 10⁵): the likelihood reads φ = (θ₁, θ₂ + 20θ₁²), as many
    # numbers as θ but curved in it. Releasing on θ, the warm-up's Newton steps crawled
    # along the curve and did not settle at ε = 1, and the draws (a Gaussian on θ) scored
    # an MMD of about 0.96 against exact draws; on φ, the draws are the exact prior times a
    # Gaussian likelihood on φ, which is the banana's own shape (thesis Fig 6.3, tuned by
    # hand: about 0.33).
    from pymc_dp.testing.benchmark_models import banana
    from pymc_dp.testing.evaluation import mmd

    bm = banana(n=100_000, d=2, seed=0)
    exact = bm.posterior_draws(1000, np.random.default_rng(5))
    with bm.model:
        step = pymc_dp.DPPenalty(eps=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pymc_dp.LaplaceApproximationWarning)
        warnings.simplefilter("error", pymc_dp.WarmupNotConvergedWarning)
        idata = pymc_dp.sample(step=step, model=bm.model, chains=2, draws=1000, **SAMPLE)
    draws = idata["posterior"]["theta"].values.reshape(-1, 2)
    assert mmd(draws[::2], exact, rng=0) < 0.3


def _counties(n, k=12, seed=0):
    """Log radon by county, counties of very unequal size (Dirichlet(0.7) shares), a
    floor effect and a residual sd of 0.75 that PyMC's start puts at 5."""
    rng = np.random.default_rng(seed)
    county = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.7)))
    floor = rng.binomial(1, 0.3, n).astype(float)
    y = rng.normal(1.3, 0.35, k)[county] - 0.65 * floor + rng.normal(0.0, 0.75, n)
    return _varying_intercepts(county, floor, y, list(range(k)), prior_sds=(10.0, 5.0, 10.0, 5.0))


def test_a_residual_scale_started_far_above_its_mode_reaches_it():
    # The first curvature release is the noisiest (its metric a guess) and, where group
    # parameters barely inform, its noise's |λ| made the residual sd's metric a thousand
    # times too narrow: every later release was made in it and could not see σ's
    # curvature, and steps of a few of those sds left σ at PyMC's start (σ = 5 against
    # 0.75, 800 posterior sds; benchmarks/realistic_models.py's hier_radon at ε = 1).
    # Noise may now widen a direction it hides, never narrow it. Thirty counties, n = 10⁴,
    # ε = 1: σ came out at 4.1–4.2 on two data sets before, 0.84–0.86 now (still about
    # ten posterior sds high: at this budget the warm-up's gradient noise is several
    # posterior sds per iteration, and what is left is what 16 iterations could do).
    with _counties(10_000, k=30), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=1.0, method="laplace"),
                               draws=200, chains=1, **SAMPLE)
    sigma = idata["posterior"]["sigma"].values
    assert abs(np.mean(sigma) - 0.75) < 0.25


def _fixed_prior_groups(sizes, seed=0):
    """Intercepts of groups of ``sizes`` people with a fixed N(0, 1) prior and a known
    residual sd (the posterior is Gaussian: its mean and sds in closed form)."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.normal(size=len(sizes))[g] + rng.normal(size=g.size)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=len(sizes))
        pm.Normal("y", a[pm.Data("g", g)], 1.0, observed=y)
    precision = np.asarray(sizes, dtype=float) + 1.0
    return model, np.bincount(g, weights=y) / precision, precision**-0.5


def test_group_intercepts_with_a_fixed_prior_weigh_every_person_alike():
    # θ is the intercepts themselves (no hyperparameters): the warm-up still releases in
    # coordinates that weigh each person alike (_group_scale). On θ's own chart the
    # smallest groups' rows set the clip bounds, their Hessians were clipped at the
    # others' scale, and their intercepts ended 20–86 posterior sds off at ε = 4.
    model, exact, sds = _fixed_prior_groups([20, 60, 200, 2720])
    for mode in _warmup_modes(model, eps=4.0, seeds=2):
        assert np.all(np.abs(mode - exact) / sds < 6.0)


def _warmup_modes(model, eps, seeds):
    """The modes of ``seeds`` shared warm-ups of ``DPPenalty(eps=eps)`` for two chains."""
    modes = []
    for seed in range(seeds):
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step = pymc_dp.DPPenalty(eps=eps)
            step.plan(chains=2)
            modes.append(step.warm_up_for_run(np.random.default_rng(seed), 2, 1000).mean)
    return modes


def test_the_plan_says_how_far_the_mode_lies_for_a_parameter_m_people_inform():
    # The plan's figure A/√m, reading no data, against the warm-up's mode on a linear
    # regression whose posterior is known (every coefficient informed by all n): the rms
    # error over a few warm-ups is within a factor of two of A/√n (the figure is a guide;
    # a noise twice or half as large as it says would show).
    rng = np.random.default_rng(5)
    n = 3000
    x = np.c_[np.ones(n), rng.normal(size=(n, 2))]
    y = x @ np.array([0.5, 1.0, -1.0]) + rng.normal(size=n)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 10.0, shape=3)
        pm.Normal("y", pm.Data("x", x) @ b, 1.0, observed=y)
    cov = np.linalg.inv(x.T @ x + np.eye(3) / 100.0)
    exact, sds = cov @ (x.T @ y), np.sqrt(np.diag(cov))
    errors = []
    for seed in range(6):
        with model:
            step = pymc_dp.DPPenalty(eps=2.0)
            text = str(step.plan(chains=2))
            found = step.warm_up_for_run(np.random.default_rng(seed), 2, 1000)
        errors.append((found.mean - exact) / sds)
    said = re.search(r"the warm-up's mode: about ([0-9.e+-]+)/√m posterior sds", text)
    figure = float(said.group(1)) / np.sqrt(n)
    rms = float(np.sqrt(np.mean(np.square(errors))))
    assert 0.5 * figure < rms < 2.0 * figure


@pytest.mark.parametrize("n, eps, wanders", [(2000, 1.0, True), (10_000, 1.0, False),
                                               (2000, 4.0, False)])
def test_the_plan_says_when_the_warm_ups_iterates_can_wander(n, eps, wanders):
    # At n = 2000 and ε = 1 most warm-ups of ordinary models ended many posterior sds off
    # (docs/private-mcmc.md, "Small data sets"): the plan, reading no data, says so where
    # its own figure for the mode exceeds one posterior sd with every person informing.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4))
    with pm.Model():
        b = pm.Normal("b", 0.0, 5.0, shape=4)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", pm.Data("x", x) @ b, sigma, observed=rng.normal(size=n))
        text = str(pymc_dp.DPPenalty(eps=eps).plan(chains=2))
    assert ("more than 1 posterior sd off even where every person informs" in text) is wanders


def test_group_intercepts_and_slopes_with_a_fixed_prior_end_near_the_mode():
    # Intercepts and slopes per group on a covariate far from zero (weekly hours, mean 4),
    # under a fixed prior: on θ's own chart (no release coordinates per group) they ended
    # up to 26 posterior sds off at ε = 4.
    rng = np.random.default_rng(0)
    groups, n = 6, 6000
    g, hours = rng.integers(0, groups, n), rng.gamma(2.0, 2.0, n)
    y = rng.normal(size=groups)[g] + rng.normal(0.0, 0.3, groups)[g] * hours + rng.normal(size=n)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=groups)
        b = pm.Normal("b", 0.0, 1.0, shape=groups)
        g_data, hours_data = pm.Data("g", g), pm.Data("hours", hours)
        pm.Normal("y", a[g_data] + b[g_data] * hours_data, 1.0, observed=y)
    exact, sds = np.zeros(2 * groups), np.zeros(2 * groups)
    for c in range(groups):  # (each group's posterior: a Bayesian linear regression)
        x = np.c_[np.ones(np.sum(g == c)), hours[g == c]]
        cov = np.linalg.inv(x.T @ x + np.eye(2))
        exact[[c, groups + c]] = cov @ x.T @ y[g == c]
        sds[[c, groups + c]] = np.sqrt(np.diag(cov))
    for mode in _warmup_modes(model, eps=4.0, seeds=2):
        assert np.all(np.abs(mode - exact) / sds < 5.0)


def _quantile_regression(n=3000, seed=0):
    """The 0.75 quantile of y on x (``pm.AsymmetricLaplace``, fixed scale), and the exact
    posterior means and sds of (a, b) on a grid."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 1.0 + 0.5 * x + rng.gumbel(size=n)
    with pm.Model() as model:
        a, b = pm.Normal("a", 0, 5), pm.Normal("b", 0, 5)
        pm.AsymmetricLaplace("y", mu=a + b * pm.Data("x", x), b=1.0, q=0.75, observed=y)
    ga, gb = np.meshgrid(np.linspace(1.9, 2.6, 141), np.linspace(0.2, 0.8, 121), indexing="ij")
    kappa = np.sqrt(0.75 / 0.25)  # (PyMC: κ² = q / (1 − q))
    logpost = -(ga**2 + gb**2) / 50.0
    for xj, yj in zip(x, y):
        r = yj - ga - gb * xj
        logpost -= np.where(r >= 0, r * kappa, -r / kappa)
    p = np.exp(logpost - logpost.max())
    p /= p.sum()
    means = np.array([np.sum(p * ga), np.sum(p * gb)])
    sds = np.sqrt(np.array([np.sum(p * ga**2), np.sum(p * gb**2)]) - means**2)
    return model, means, sds


@pytest.mark.parametrize("step_class", [pymc_dp.DPPenalty, pymc_dp.DPBarker])
def test_a_likelihood_with_a_kink_in_every_row_recovers_the_exact_posterior(step_class):
    # Every row's log-likelihood bends where its residual is 0, so its Hessian is zero
    # but there: the per-datum Hessians' quantile said nothing and the run ended 25 sds off
    # with sds 12-18 times too wide, silently (a new user's trial, at any ε). Now the step
    # sees the kink in the graph, plans no Hessian-norm release and says so in its plan.
    model, means, sds = _quantile_regression()
    with model:
        step = step_class(eps=1e4)
    assert step.warmup == DEFAULT_WARMUP.without_hessian_norms()
    assert "bends in every row (Sign" in str(step.plan())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pymc_dp.sample(step=step, model=model, chains=2, **SAMPLE)
    got = np.array([idata.posterior[v].values.ravel() for v in ("a", "b")])
    assert np.all(np.abs(got.mean(axis=1) - means) < 0.5 * sds)
    assert np.all(np.abs(np.log(got.std(axis=1) / sds)) < np.log(1.3))


@pytest.mark.parametrize("step_class", ["DPPenalty", "DPHMC", "DPBarker", "MinibatchDPPenalty"])
def test_a_free_variable_with_one_entry_per_person_is_refused_before_the_warm_up(step_class):
    # (a new user's trial) an observation-level effect: the warm-up's per-datum gradients
    # in n + 3 coordinates took minutes to compile at n = 100 and gigabytes at n = 10⁴
    n = 60
    rng = np.random.default_rng(27)
    with pm.Model(coords={"obs": np.arange(n)}):
        a, b = pm.Normal("a", 0, 2), pm.Normal("b", 0, 2)
        z = pm.Normal("z", 0, 1, dims="obs")
        x = pm.Data("x", rng.normal(size=n), dims="obs")
        pm.Poisson("y", pm.math.exp(a + b * x + 0.5 * z), observed=rng.poisson(2.0, n))
        # (the same reason from every step, before gradients or batches are compiled)
        with pytest.raises(
            pymc_dp.UnsupportedModelError,
            match=rf"^{step_class}: the free variables \['z'\] have, together, about one",
        ):
            getattr(pymc_dp, step_class)(eps=1.0)
        # (settings by hand, no warm-up: the user's choice)
        pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, warmup=False)
        # (a minibatch step cannot follow z over a batch of rows: refused as before)
        with pytest.raises(pymc_dp.UnsupportedModelError, match="batch of rows"):
            pymc_dp.MinibatchDPPenalty(eps=1.0, clip_bound=1.0, warmup=False)


def test_the_simulation_is_compiled_when_the_step_is_built(monkeypatch):
    # A backend that cannot compile the warm-up's simulated outcomes (with an error other
    # than a missing op, which falls back to the default backend) fails when the step is
    # built, before any release, not in the middle of the warm-up.
    import pymc_dp.model.replicates as replicates

    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    counts = rng.poisson(np.exp(0.3 + 0.2 * x))

    def model():
        with pm.Model() as m:
            xd = pm.Data("x", x)
            a, b = pm.Normal("a", 0.0, 2.0), pm.Normal("b", 0.0, 2.0)
            pm.Poisson("y", pm.math.exp(a + b * xd), observed=counts)
        return m

    with model():
        step = pymc_dp.DPPenalty(eps=1.0)
    assert step.private_model._replicate_fn is not None

    def broken(*args, **kwargs):
        raise RuntimeError("the backend could not compile this")

    monkeypatch.setattr(replicates, "compile_function", broken)
    with model(), pytest.raises(RuntimeError, match="could not compile"):
        pymc_dp.DPPenalty(eps=1.0)
