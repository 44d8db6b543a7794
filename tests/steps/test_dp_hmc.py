import math

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import gaussian_epsilon, max_gaussian_mu, max_iterations
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.steps.dp_hmc import DEFAULT_BUDGET_SPLIT, DPHMC, mass_matrix_windows

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)
# Clip bounds that never bind on the conjugate fixture (|y_j − μ| < 6 there).
# Hand-set clip bounds and no warm-up: these tests are about the sampler's own releases.
LOOSE = dict(grad_clip=20.0, loglik_clip=20.0, warmup=False)


def _assert_matches_posterior(idata, mean, sd, min_ess=300):
    draws = idata.posterior["mu"]
    ess = float(az.ess(draws.values))
    assert ess > min_ess, f"too few effective draws ({ess:.0f}) for the check"
    assert float(draws.mean()) == pytest.approx(mean, abs=4 * sd / np.sqrt(ess))
    assert float(draws.std()) == pytest.approx(sd, abs=4 * sd / np.sqrt(2 * ess))


# ---------------------------------------------------------------------- correctness
def test_huge_epsilon_recovers_the_exact_posterior(conjugate):
    model, mean, sd = conjugate
    with model:
        step = DPHMC(eps=1e6, n_steps=5, step_size=0.05, chains=2, **LOOSE)
        idata = pymc_dp.sample(step=step, draws=1500, tune=300, chains=2, random_seed=3, **SAMPLE)
    _assert_matches_posterior(idata, mean, sd)
    stats = idata.sample_stats
    # the step size was adapted toward the target acceptance during tuning
    assert 0.45 < float(stats["accept"].mean()) < 0.85
    assert not bool(stats["diverging"].any())


def test_real_gradient_and_ratio_noise_keep_the_posterior_exact(conjugate):
    # Fixed noise with non-binding clips: gradient noise sd 2·20·0.1 = 4 (the gradient's
    # own scale near the mode is ~√50 ≈ 7), ratio noise sd ≈ 0.5 per iteration. Only the
    # cached-gradient bookkeeping and the −σ²/2 correction keep the chain exact.
    model, mean, sd = conjugate
    with model:
        step = DPHMC(
            eps=1e7, n_steps=4, step_size=0.06, grad_noise_multiplier=0.1,
            loglik_noise_multiplier=0.05, adapt_step_size=False, chains=2, **LOOSE,
        )
        # tune only discards the walk from the initial point (14 sds away): nothing adapts
        idata = pymc_dp.sample(step=step, draws=2500, tune=200, chains=2, random_seed=4, **SAMPLE)
    accepted = float(idata.sample_stats["accepted"].mean())
    assert 0.2 < accepted < 0.95
    _assert_matches_posterior(idata, mean, sd)


def test_tuning_reads_nothing_beyond_the_releases(conjugate, monkeypatch):
    # With step-size and mass-matrix adaptation on, a chain of k iterations evaluates the
    # clipped gradients exactly kL + 1 times (its releases) and the per-datum
    # log-likelihoods k + 1 times (the cached start and one ratio per iteration).
    model, *_ = conjugate
    calls = _count_data_reads(monkeypatch)
    with model:
        step = DPHMC(eps=2.0, n_steps=3, step_size=0.05, adapt_mass_matrix=True, chains=1, **LOOSE)
        pm.sample(draws=40, tune=60, chains=1, step=step, random_seed=0, **SAMPLE)
    assert calls == {"loglik": 101, "gradient": 100 * 3 + 1}


def test_mass_matrix_adapts_from_the_chains_draws():
    # Two parameters whose posterior variances are 0.01 and 8.2: the adapted M⁻¹ follows.
    rng = np.random.default_rng(0)
    with pm.Model():
        a = pm.Normal("a", 0, 10)
        b = pm.Normal("b", 0, 10)
        pm.Normal("ya", a, 1.0, observed=rng.normal(size=100))
        pm.Normal("yb", b, 30.0, observed=rng.normal(size=100) * 30)
        step = DPHMC(eps=1e8, n_steps=5, step_size=0.1, adapt_mass_matrix=True, chains=1,
                     grad_clip=5.0, loglik_clip=5.0)
        pm.sample(draws=10, tune=600, chains=1, step=step, random_seed=1, **SAMPLE)
    variances = np.array([1 / (0.01 + 100), 1 / (0.01 + 100 / 900)])
    ratio = (step.inv_mass / variances)
    assert np.all((ratio > 1 / 3) & (ratio < 3)), step.inv_mass


def test_mass_matrix_windows():
    assert mass_matrix_windows(10) == []
    for tune in (20, 57, 300, 1000, 5000):
        ends = mass_matrix_windows(tune)
        assert ends and ends == sorted(ends)
        assert ends[0] > int(0.15 * tune) and ends[-1] == tune - int(0.1 * tune)


# ---------------------------------------------------------------------- accounting
N_THESIS, DELTA_THESIS, L_THESIS = 100_000, 1e-6, 10
Z_G = 0.4 * math.sqrt(N_THESIS)
Z_L = 0.1 * math.sqrt(N_THESIS)
# kL + 1 gradients (the cached start gradient of Algorithm 4 / Theorem 12)
THESIS_KL_PLUS_1 = [34, 123, 258, 431, 640, 880]
# k(L + 1) gradients (a fresh start gradient every iteration), the issue's numbers
ISSUE_K_L_PLUS_1 = [33, 119, 248, 416, 616, 848]


@pytest.mark.parametrize("eps", [1, 2, 3, 4, 5, 6])
def test_thesis_iteration_counts_are_what_the_step_lets_a_chain_run(conjugate, eps):
    model, *_ = conjugate
    expected = THESIS_KL_PLUS_1[eps - 1]
    per = L_THESIS / (2 * Z_G**2) + 1 / (2 * Z_L**2)
    assert max_iterations(eps, DELTA_THESIS, per, mu_initial=1 / (2 * Z_G**2)) == expected
    # The convention of the issue, one more gradient per iteration, allows fewer:
    per_fresh = (L_THESIS + 1) / (2 * Z_G**2) + 1 / (2 * Z_L**2)
    assert max_iterations(eps, DELTA_THESIS, per_fresh) == ISSUE_K_L_PLUS_1[eps - 1]

    def step():
        return DPHMC(
            eps=eps, delta=DELTA_THESIS, n_steps=L_THESIS, grad_noise_multiplier=Z_G,
            loglik_noise_multiplier=Z_L, chains=1, **LOOSE,
        )

    with model:
        ok = step()
        ok.setup_chain(np.random.default_rng(0), 0, expected)  # reserves, reads no data
        assert pymc_dp.privacy_report(ok).epsilon <= eps
        too_long = step()
        with pytest.raises(PrivacyBudgetExceeded):
            too_long.setup_chain(np.random.default_rng(0), 0, expected + 1)


def test_a_run_costs_its_reservation_and_the_trace_says_so(conjugate):
    model, *_ = conjugate
    eps, k = 1.0, THESIS_KL_PLUS_1[0]
    with model:
        step = DPHMC(
            eps=eps, delta=DELTA_THESIS, n_steps=L_THESIS, grad_noise_multiplier=Z_G,
            loglik_noise_multiplier=Z_L, step_size=0.01, chains=1, **LOOSE,
        )
        idata = pymc_dp.sample(step=step, draws=k - 10, tune=10, chains=1, random_seed=0, **SAMPLE)
    mu = (k * L_THESIS + 1) / (2 * Z_G**2) + k / (2 * Z_L**2)
    stats = idata.sample_stats
    assert float(stats["dp_mu_chain"].isel(draw=-1).sum()) == pytest.approx(mu, rel=1e-12)
    # The first kept draw is iteration 11: 11 iterations and the start gradient so far.
    per = L_THESIS / (2 * Z_G**2) + 1 / (2 * Z_L**2)
    np.testing.assert_allclose(stats["dp_mu"], per, rtol=1e-12)
    first = float(stats["dp_mu_chain"].isel(chain=0, draw=0))
    assert first == pytest.approx(11 * per + 1 / (2 * Z_G**2), rel=1e-12)
    assert idata.attrs["dp_epsilon"] == pytest.approx(gaussian_epsilon(mu, DELTA_THESIS), rel=1e-9)
    assert idata.attrs["dp_epsilon"] <= eps


@pytest.mark.parametrize("split", [None, 0.2, 0.7])
def test_calibration_spends_the_whole_budget_in_the_requested_split(conjugate, split):
    model, *_ = conjugate
    eps, delta, chains, tune, draws, L = 0.8, 1e-4, 2, 20, 30, 4
    with model:
        step = DPHMC(eps=eps, delta=delta, n_steps=L, budget_split=split, step_size=0.05,
                     chains=chains, **LOOSE)
        idata = pymc_dp.sample(step=step, draws=draws, tune=tune, chains=chains, random_seed=1,
                               **SAMPLE)
    s = DEFAULT_BUDGET_SPLIT if split is None else split
    k = tune + draws
    mu_chain = max_gaussian_mu(eps, delta) / chains
    z_g = float(idata.sample_stats["grad_noise_multiplier"].values.ravel()[0])
    z_l = float(idata.sample_stats["loglik_noise_multiplier"].values.ravel()[0])
    assert z_g == pytest.approx(math.sqrt((k * L + 1) / (2 * s * mu_chain)), rel=1e-9)
    assert z_l == pytest.approx(math.sqrt(k / (2 * (1 - s) * mu_chain)), rel=1e-9)
    assert idata.attrs["dp_epsilon"] <= eps
    assert idata.attrs["dp_epsilon"] == pytest.approx(eps, rel=1e-6)


def test_the_step_hands_its_calibrated_noise_to_the_kernel(conjugate, monkeypatch):
    import pymc_dp.steps.dp_hmc as module

    seen = {"gradient": [], "ratio": []}
    original_gradient, original_transition = module.noisy_gradient, module.hmc_transition

    def spy_gradient(*args, **kwargs):
        seen["gradient"].append((kwargs["noise_multiplier"], kwargs["clip_bound"]))
        return original_gradient(*args, **kwargs)

    def spy_transition(*args, **kwargs):
        seen["ratio"].append((kwargs["loglik_noise_multiplier"], kwargs["loglik_clip"]))
        return original_transition(*args, **kwargs)

    monkeypatch.setattr(module, "noisy_gradient", spy_gradient)
    monkeypatch.setattr(module, "hmc_transition", spy_transition)
    model, *_ = conjugate
    eps, delta, k, L = 1.0, 1e-5, 50, 3
    with model:
        step = DPHMC(eps=eps, delta=delta, n_steps=L, step_size=0.05, chains=1,
                     grad_clip=2.0, loglik_clip=3.0, warmup=False)
        pm.sample(draws=25, tune=25, chains=1, step=step, random_seed=0, **SAMPLE)
    mu = max_gaussian_mu(eps, delta)
    z_g = math.sqrt((k * L + 1) / (2 * DEFAULT_BUDGET_SPLIT * mu))
    z_l = math.sqrt(k / (2 * (1 - DEFAULT_BUDGET_SPLIT) * mu))
    assert len(seen["gradient"]) == k * L + 1 and len(seen["ratio"]) == k
    np.testing.assert_allclose([z for z, _ in seen["gradient"]], z_g, rtol=1e-9)
    np.testing.assert_allclose([b for _, b in seen["gradient"]], 2.0)
    np.testing.assert_allclose([z for z, _ in seen["ratio"]], z_l, rtol=1e-9)
    np.testing.assert_allclose([b for _, b in seen["ratio"]], 3.0)


def test_path_length_fixes_the_number_of_leapfrog_steps_once(conjugate):
    model, *_ = conjugate
    with model:
        step = DPHMC(eps=1.0, path_length=0.5, step_size=0.04, chains=1, **LOOSE)
        assert step.n_steps == 12  # round(0.5 / 0.04), fixed for the run
        idata = pm.sample(draws=20, tune=20, chains=1, step=step, random_seed=0, **SAMPLE)
    assert np.all(idata.sample_stats["n_steps"] == 12)


def test_same_seed_same_draws(conjugate):
    model, *_ = conjugate
    runs = []
    for seed in (42, 42, 43):
        with model:
            step = DPHMC(eps=2.0, n_steps=3, step_size=0.05, chains=2, **LOOSE)
            runs.append(
                pymc_dp.sample(step=step, draws=60, tune=30, chains=2, random_seed=seed, **SAMPLE)
            )
    np.testing.assert_array_equal(runs[0].posterior["mu"], runs[1].posterior["mu"])
    assert not np.array_equal(runs[0].posterior["mu"], runs[2].posterior["mu"])


def _banana(d):
    from pymc_dp.testing.benchmark_models import banana

    bm = banana(n=500, d=d, seed=1)
    return bm.model, {"theta": bm.true_theta}, "theta"


def _regression_with_groups():
    # X @ β and a[g]: reverse mode through per-row copies of both outputs (issue 14)
    rng = np.random.default_rng(5)
    n, groups = 500, 4
    X, g = rng.normal(size=(n, 3)), rng.integers(0, groups, n)
    y = X @ np.array([0.5, -1.0, 0.2]) + np.array([0.3, -0.2, 0.0, 0.1])[g] + rng.normal(size=n)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=3)
        a = pm.Normal("a", 0, 1, shape=groups)
        pm.Normal("y", pm.Data("X", X) @ beta + a[pm.Data("g", g)], 1.0, observed=y)
    return model, {"beta": np.array([0.5, -1.0, 0.2]), "a": np.zeros(groups)}, "beta"


@pytest.mark.parametrize(
    "build", [lambda: _banana(3), lambda: _banana(8), _regression_with_groups],
    ids=["banana-3", "banana-8", "regression-groups"],
)
def test_the_gradient_method_does_not_change_the_chain(build):
    # Reverse mode (per-row copies; d² products per row at d = 3, an (n, d) matrix at d = 8
    # and through X @ β and a[g]) and forward mode compute the same per-datum gradients up
    # to rounding: with one seed the chains agree to rounding, with binding clips and noise.
    draws = {}
    for method in ("reverse", "forward"):
        model, initvals, name = build()
        with model:
            step = DPHMC(
                eps=4.0, grad_clip=2.0, loglik_clip=2.0, n_steps=4, step_size=0.01, chains=1,
                initial_point={**model.initial_point(), **initvals},
            )
            step.private_model.compile_gradients(method)
            assert step.private_model.gradient_method == method
            idata = pymc_dp.sample(
                step=step, draws=80, tune=20, chains=1, random_seed=11,
                initvals=initvals, **SAMPLE,
            )
        draws[method] = idata.posterior[name].values
    assert np.ptp(draws["forward"][..., 0]) > 0  # the chain moved
    np.testing.assert_allclose(draws["reverse"], draws["forward"], rtol=0, atol=1e-9)


def test_results_carry_only_public_stats(conjugate):
    model, *_ = conjugate
    with model:
        step = DPHMC(eps=1.0, n_steps=3, step_size=0.05, chains=2, **LOOSE)
        idata = pymc_dp.sample(step=step, draws=20, tune=10, chains=2, random_seed=0, **SAMPLE)
    assert set(idata.sample_stats.data_vars) == set(DPHMC.stats_dtypes_shapes)
    assert sorted(idata.children) == ["posterior", "sample_stats"]
    settings = pymc_dp.privacy_report(idata).details["steps"][0]
    assert settings["grad_clip"] == 20.0 and settings["loglik_clip"] == 20.0
    assert settings["n_steps"] == 3 and settings["budget_split"] == DEFAULT_BUDGET_SPLIT


# ---------------------------------------------------------------------- budget guard
def _count_data_reads(monkeypatch):
    from pymc_dp.model import PrivateModel

    calls = {"loglik": 0, "gradient": 0}
    loglik, gradient = PrivateModel.loglik, PrivateModel.clipped_gradient
    ratio = PrivateModel.clipped_ratio

    def counting_loglik(self, q):
        calls["loglik"] += 1
        return loglik(self, q)

    def counting_ratio(self, q, current, bound):
        calls["loglik"] += 1
        return ratio(self, q, current, bound)

    def counting_gradient(self, q, bound, basis=None):
        calls["gradient"] += 1
        return gradient(self, q, bound, basis)

    monkeypatch.setattr(PrivateModel, "loglik", counting_loglik)
    monkeypatch.setattr(PrivateModel, "clipped_ratio", counting_ratio)
    monkeypatch.setattr(PrivateModel, "clipped_gradient", counting_gradient)
    return calls


def test_a_spent_step_refuses_a_second_run_before_reading_data(conjugate, monkeypatch):
    model, *_ = conjugate
    calls = _count_data_reads(monkeypatch)
    with model:
        step = DPHMC(eps=1.0, n_steps=2, step_size=0.05, chains=2, **LOOSE)
        pm.sample(draws=15, tune=5, chains=2, step=step, random_seed=0, **SAMPLE)
        reads = dict(calls)
        assert reads == {"loglik": 2 * 21, "gradient": 2 * (20 * 2 + 1)}
        with pytest.raises(PrivacyBudgetExceeded):
            pm.sample(draws=15, tune=5, chains=2, step=step, random_seed=1, **SAMPLE)
        with pytest.raises(PrivacyBudgetExceeded):
            pymc_dp.sample(step=step, draws=15, tune=5, chains=2, random_seed=1, **SAMPLE)
    assert calls == reads


def test_more_chains_than_planned_are_refused(conjugate, monkeypatch):
    model, *_ = conjugate
    calls = _count_data_reads(monkeypatch)
    with model:
        step = DPHMC(eps=1.0, n_steps=2, step_size=0.05, chains=2, **LOOSE)
        with pytest.raises(PrivacyBudgetExceeded):
            pm.sample(draws=10, tune=0, chains=3, step=step, random_seed=0, **SAMPLE)
    # Refused before the first chain: no chain read the data or spent its share.
    assert calls == {"loglik": 0, "gradient": 0}
    assert step.guard.reservations() == []


def test_budget_guard_holds_across_worker_processes(conjugate):
    model, *_ = conjugate
    with model:
        step = DPHMC(eps=1.0, n_steps=2, step_size=0.05, chains=2, **LOOSE)
        idata = pm.sample(draws=20, tune=10, chains=2, cores=2, step=step, random_seed=0,
                          progressbar=False, compute_convergence_checks=False)
        assert idata.posterior.sizes["chain"] == 2
        assert pymc_dp.privacy_report(step).epsilon == pytest.approx(1.0, rel=1e-6)
        with pytest.raises(Exception) as err:
            pm.sample(draws=20, tune=10, chains=2, cores=2, step=step, random_seed=1,
                      progressbar=False, compute_convergence_checks=False)
    assert "PrivacyBudgetExceeded" in repr(err.value) or "budget" in str(err.value)
    assert pymc_dp.privacy_report(step).epsilon <= 1.0


def test_step_outside_a_planned_chain_is_refused(conjugate):
    model, *_ = conjugate
    with model:
        step = DPHMC(eps=1.0, **LOOSE)
    with pytest.raises(PrivacyBudgetExceeded, match="setup_chain"):
        step.step(model.initial_point())


def test_budget_too_small_for_one_iteration(conjugate):
    model, *_ = conjugate
    with model, pytest.raises(ValueError, match="too small for even one iteration"):
        DPHMC(eps=0.01, delta=1e-6, grad_noise_multiplier=1.0, loglik_noise_multiplier=1.0, **LOOSE)


# ---------------------------------------------------------------------- mixing and models
def test_partial_coverage_and_non_private_steps_are_refused():
    with pm.Model():
        a = pm.Normal("a")
        b = pm.Normal("b")
        pm.Normal("y", a + b, 1, observed=np.zeros(4))
        with pytest.raises(UnsupportedModelError, match="NUTS"):
            DPHMC([a], eps=1.0, **LOOSE)
        with pytest.raises(ValueError, match="blocked"):
            DPHMC(eps=1.0, blocked=False, **LOOSE)
        step = DPHMC(eps=1.0, chains=1, **LOOSE)
        with pytest.raises(UnsupportedModelError, match="Non-private"):
            pymc_dp.sample(step=[step, pm.Metropolis([a])], draws=10, chains=1, **SAMPLE)


def test_discrete_variables_are_refused():
    with pm.Model():
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1, observed=np.zeros(4))
        with pytest.raises(UnsupportedModelError, match="discrete"):
            DPHMC(eps=1.0, **LOOSE)


def test_non_differentiable_models_are_refused_before_any_chain():
    import pytensor.tensor as pt

    # (A custom Op is refused by the row-locality proof already; PyTensor's Bessel
    # function is a known Op without a gradient in its order.)
    def logp(v, mu):
        return -0.5 * (v - mu) ** 2 + pt.log(pt.iv(mu, 1.0 + 0 * v))

    with pm.Model():
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=np.zeros(3))
        with pytest.raises(UnsupportedModelError, match="not differentiable"):
            DPHMC(eps=1.0, **LOOSE)


def test_non_finite_data_is_refused():
    with pm.Model():
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.array([0.0, np.nan, 1.0]))
        with pytest.raises(ValueError, match="non-finite"):
            DPHMC(eps=1.0, **LOOSE)


def test_bad_inv_mass(conjugate):
    model, *_ = conjugate
    with model:
        for bad in (np.ones(2), np.array([0.0]), np.array([np.nan])):
            with pytest.raises(ValueError, match="inv_mass"):
                DPHMC(eps=1.0, inv_mass=bad, **LOOSE)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=float("nan")), "eps"),
        (dict(eps=float("inf")), "eps"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(grad_clip=0.0), "grad_clip"),
        (dict(grad_clip=float("nan")), "grad_clip"),
        (dict(loglik_clip=-1.0), "loglik_clip"),
        (dict(loglik_clip=float("inf")), "loglik_clip"),
        (dict(n_steps=0), "n_steps"),
        (dict(n_steps=2.5), "n_steps"),
        (dict(n_steps=True), "n_steps"),
        (dict(n_steps=3, path_length=1.0), "not both"),
        (dict(path_length=0.0), "path_length"),
        (dict(step_size=-0.1), "step_size"),
        (dict(budget_split=0.0), "budget_split"),
        (dict(budget_split=1.0), "budget_split"),
        (dict(budget_split=float("nan")), "budget_split"),
        (dict(grad_noise_multiplier=2.0), "both"),
        (dict(loglik_noise_multiplier=2.0), "both"),
        (dict(grad_noise_multiplier=0.0, loglik_noise_multiplier=1.0), "grad_noise_multiplier"),
        (dict(grad_noise_multiplier=1.0, loglik_noise_multiplier=1.0, budget_split=0.5),
         "budget_split"),
        (dict(target_accept=1.0), "target_accept"),
        (dict(target_accept=0.0), "target_accept"),
        (dict(adapt_mass_matrix="yes"), "adapt_mass_matrix"),
        (dict(inv_mass=[1.0, -1.0]), "inv_mass"),
        (dict(inv_mass="big"), "inv_mass"),
        (dict(chains=0), "chains"),
    ],
)
def test_bad_arguments_fail_before_the_model_is_read(conjugate, monkeypatch, kwargs, match):
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    model, *_ = conjugate
    kwargs = {"eps": 1.0, **LOOSE, **kwargs}
    with model, pytest.raises(ValueError, match=match):
        DPHMC(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [dict(grad_clip=2.0), dict(loglik_clip=2.0), dict(inv_mass=[1.0]), dict(warmup=False)],
)
def test_partial_hand_settings_are_explained_before_the_model_is_read(
    conjugate, monkeypatch, kwargs
):
    # Only eps is needed; but one clip bound alone, a mass matrix without clip bounds, or no
    # warm-up without clip bounds leaves a setting nobody chose.
    import pymc_dp.steps.base as base

    def must_not_run(*args, **kw):
        raise AssertionError("the model was read before the arguments were checked")

    monkeypatch.setattr(base, "PrivateModel", must_not_run)
    model, *_ = conjugate
    with model, pytest.raises(ValueError, match="Give both clip bounds"):
        DPHMC(eps=1.0, **kwargs)
