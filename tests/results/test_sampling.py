import json
import warnings

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_dp

from pymc_dp.accounting import GaussianEvent, PrivacyLedger, gaussian_epsilon
from pymc_dp.results import NotReleasableWarning, declared_stats

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False)


@pytest.fixture(scope="module")
def regression_model():
    rng = np.random.default_rng(0)
    n = 300
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -0.5] + rng.normal(size=n)
    with pm.Model() as m:
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0, 5, shape=2)
        pm.Deterministic("fit", Xd @ beta)  # computed from data: must never be released
        pm.Deterministic("beta_sum", beta.sum())  # public
        pm.Normal("y", Xd @ beta, 1.0, observed=y)
    return m


@pytest.fixture(scope="module")
def released(regression_model):
    with regression_model:
        with pytest.warns(UserWarning, match="may hold data"):
            step = pymc_dp.DPPenalty(eps=3.0, clip_bound=3.0, chains=2, scaling=0.05)
        idata = pymc_dp.sample(step=step, draws=100, tune=100, chains=2, random_seed=3, **SAMPLE)
    return idata, step


def test_result_carries_no_private_data(released):
    idata, _ = released
    assert set(idata.children) == {"posterior", "sample_stats"}
    assert all("sampling_time" not in idata[g].attrs for g in idata.children)  # a timing
    assert "fit" not in idata.posterior and "beta_sum" in idata.posterior
    stats = set(idata.sample_stats.data_vars)
    assert {"accept", "accepted", "dp_mu", "dp_mu_chain", "dp_delta"} <= stats
    assert not stats & {"lp", "model_logp", "clip_fraction", "log_likelihood"}


def test_the_data_is_never_copied_into_a_result_and_pymcs_checks_still_run(
    regression_model, monkeypatch, caplog
):
    """pm.sample's own result copies the data into observed_data and constant_data (at
    n = 10⁶ that doubled a run's peak memory): pymc_dp.sample converts only the draws and
    stats, and PyMC's convergence checks still run on them."""
    from pymc.backends.arviz import DataTreeConverter

    def refuse(self):
        raise AssertionError("the data was copied into a result")

    monkeypatch.setattr(DataTreeConverter, "observed_data_to_xarray", refuse)
    monkeypatch.setattr(DataTreeConverter, "constant_data_to_xarray", refuse)
    args = dict(draws=100, tune=30, chains=2, random_seed=3, progressbar=False, cores=1)
    with regression_model, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        step = pymc_dp.DPPenalty(eps=3.0, clip_bound=3.0, chains=2, scaling=0.05)
        with pytest.raises(ValueError, match=r"idata_kwargs \['log_lik'\]"):
            pymc_dp.sample(step=step, idata_kwargs={"log_lik": True}, **args)
        with caplog.at_level("INFO", logger="pymc"):  # (the same step: nothing was spent)
            idata = pymc_dp.sample(step=step, discard_tuned_samples=False, **args)
    assert not [w for w in seen if "Tuning samples" in str(w.message)]  # (a MultiTrace's)
    assert not [w for w in seen if issubclass(w.category, FutureWarning)]
    assert set(idata.children) == {"posterior", "sample_stats", "warmup_posterior",
                                   "warmup_sample_stats"}
    assert idata.posterior.sizes["draw"] == 100 and idata.warmup_posterior.sizes["draw"] == 30
    assert "We recommend running at least 4 chains" in caplog.text  # (PyMC's own check)
    caplog.clear()
    with regression_model, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        step = pymc_dp.DPPenalty(eps=3.0, clip_bound=3.0, chains=2, scaling=0.05)
        with caplog.at_level("INFO", logger="pymc"):
            pymc_dp.sample(step=step, compute_convergence_checks=False, **args)
    assert "We recommend running at least 4 chains" not in caplog.text
    with regression_model, warnings.catch_warnings():  # (idata_kwargs override, as in pm.sample)
        warnings.simplefilter("ignore", UserWarning)
        step = pymc_dp.DPPenalty(eps=3.0, clip_bound=3.0, chains=2, scaling=0.05)
        idata = pymc_dp.sample(step=step, idata_kwargs={"model": regression_model,
                                                        "save_warmup": True}, **args)
    assert idata.posterior.sizes["draw"] == 100  # (tuning draws discarded: none to save)


def test_result_attrs_and_report(released):
    idata, step = released
    assert idata.attrs["dp_epsilon"] == pytest.approx(3.0, rel=1e-6)
    assert idata.attrs["dp_delta"] == pytest.approx(0.1 / 300)
    report = json.loads(idata.attrs["dp_report"])
    assert report["budget"]["epsilon"] == 3.0 and report["budget"]["planned_chains"] == 2
    assert len(report["chains"]) == 2
    assert all(c["tune"] == 100 and c["draws"] == 100 for c in report["chains"])
    assert report["spent"]["from_trace"]["epsilon"] == pytest.approx(3.0, rel=1e-6)
    assert report["ledger"][0]["kind"] == "gaussian"
    text = str(pymc_dp.privacy_report(idata))
    assert "budget" in text and "chain" in text


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
def test_attrs_survive_saving(released, tmp_path, fmt):
    idata, _ = released
    path = tmp_path / f"result.{fmt}"
    if fmt == "netcdf":
        idata.to_netcdf(path)
        back = xr.open_datatree(path)
    else:
        idata.to_zarr(path)
        back = xr.open_datatree(path, engine="zarr")
    assert back.attrs["dp_epsilon"] == idata.attrs["dp_epsilon"]
    assert json.loads(back.attrs["dp_report"]) == json.loads(idata.attrs["dp_report"])
    assert pymc_dp.privacy_report(back).epsilon == pytest.approx(3.0, rel=1e-6)
    assert pymc_dp.privacy_report(back).safe_to_share  # the release record survives too
    assert set(pymc_dp.release(back).children) == {"posterior", "sample_stats"}


def test_privacy_report_of_plain_pm_sample_is_recomputed_from_the_trace(regression_model):
    with regression_model:
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=3.0, chains=2)
        idata = pm.sample(draws=50, tune=30, chains=2, step=step, random_seed=0, **SAMPLE)
    with pytest.warns(NotReleasableWarning, match="observed_data"):
        report = pymc_dp.privacy_report(idata)
    assert report.epsilon == pytest.approx(2.0, rel=1e-6)
    assert "trace" in report.source
    assert not report.safe_to_share and str(report).startswith("NOT SAFE TO SHARE")
    # plain pm.sample keeps the private groups; release strips them
    assert "observed_data" in idata.children and "fit" in idata.posterior
    clean = pymc_dp.release(idata, model=regression_model)
    assert "observed_data" not in clean.children and "constant_data" not in clean.children
    assert "fit" not in clean.posterior


def test_non_private_steps_are_refused(regression_model):
    with regression_model:
        dp = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0)
        with pytest.raises(pymc_dp.UnsupportedModelError, match="Metropolis"):
            pymc_dp.sample(step=[dp, pm.Metropolis()], draws=10, tune=0, chains=1)
        with pytest.raises(ValueError, match="never released"):
            pymc_dp.sample(step=dp, draws=10, idata_kwargs={"log_likelihood": True})
        with pytest.raises(ValueError, match="computed from data"):
            pymc_dp.sample(step=dp, draws=10, var_names=["beta", "fit"])
    assert dp.guard.reservations() == []  # nothing ran


def test_privacy_report_of_a_ledger_and_of_nothing():
    ledger = PrivacyLedger([GaussianEvent(name="mean", count=4, noise_multiplier=3.0)])
    report = pymc_dp.privacy_report(ledger, delta=1e-6)
    assert report.epsilon == pytest.approx(gaussian_epsilon(4 / 18, 1e-6))
    with pytest.raises(ValueError, match="no privacy information"):
        pymc_dp.privacy_report(xr.DataTree.from_dict({"posterior": xr.Dataset()}))


def test_release_keeps_draws_and_public_stats_only(regression_model):
    with regression_model:
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=3.0, chains=1)
        idata = pm.sample(draws=20, tune=10, chains=1, step=step, random_seed=0,
                          discard_tuned_samples=False, **SAMPLE)
        pm.sample_posterior_predictive(idata, progressbar=False, extend_inferencedata=True)
    assert "posterior_predictive" in idata.children
    with pytest.raises(ValueError, match="needs the model"):
        pymc_dp.release(idata)
    clean = pymc_dp.release(idata, model=regression_model)
    assert set(clean.children) <= {"posterior", "sample_stats", "warmup_posterior",
                                   "warmup_sample_stats"}
    assert set(clean.posterior.data_vars) == {"beta", "beta_sum"}


def test_deterministics_reading_array_constants_are_not_released_by_default():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(50, 2))
    with pm.Model():
        beta = pm.Normal("beta", 0, 5, shape=2)
        pm.Deterministic("fit", pm.math.dot(X, beta))  # X as a NumPy constant
        pm.Normal("y", pm.math.dot(X, beta), 1.0, observed=rng.normal(size=50))
        step = pymc_dp.DPPenalty(eps=2.0, clip_bound=3.0, chains=1)
        idata = pymc_dp.sample(step=step, draws=10, tune=5, chains=1, random_seed=0, **SAMPLE)
    assert list(idata.posterior.data_vars) == ["beta"]


def test_pymc_dp_sample_runs_exactly_one_private_step(regression_model):
    with regression_model:
        a = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0)
        b = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0)
        with pytest.raises(pymc_dp.UnsupportedModelError, match="2 private steps in one run"):
            pymc_dp.sample(step=[a, b], draws=10)


# ---------------------------------------------------------------------- release whitelist
def test_release_keeps_exactly_the_stats_the_steps_declare():
    steps = (pymc_dp.DPPenalty, pymc_dp.DPHMC, pymc_dp.MinibatchDPPenalty, pymc_dp.DPBarker,
             pymc_dp.ABCDP)
    # (and the stats recorded only when asked for: the clip diagnostics')
    assert declared_stats() == {
        s.__name__: {**s.stats_dtypes_shapes, **s.optional_stats_dtypes_shapes} for s in steps
    }
    assert not pymc_dp.ABCDP.optional_stats_dtypes_shapes


@pytest.fixture(scope="module")
def small_model():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 5)
        pm.Normal("y", mu, 1.0, observed=np.random.default_rng(1).normal(size=40))
    return m


def test_a_trace_with_another_samplers_stats_is_refused(small_model, monkeypatch):
    # A Metropolis step that never moves leaves the private step's guard quiet, but records
    # its exact acceptance ratio, a function of the data. (pm.sample refuses the pair when it
    # sets the steps up; here as if it had combined them where the step could not see.)
    with small_model:
        dp = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        monkeypatch.setattr(dp, "_refuse_non_private_company", lambda: None)
        frozen = pm.Metropolis([small_model["mu"]], scaling=1e12, tune=False)
        mixed = pm.sample(draws=5, tune=0, chains=1, step=[dp, frozen], random_seed=0, **SAMPLE)
    for refuse in (pymc_dp.release, pymc_dp.privacy_report):
        with pytest.raises(ValueError, match="another sampler ran"):
            refuse(mixed)
    # Stats of a sampler pymc_dp does not know, next to a private step's.
    with small_model:
        dp = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
        idata = pm.sample(draws=5, tune=0, chains=1, step=dp, random_seed=0, **SAMPLE)
    idata["sample_stats"] = idata["sample_stats"].to_dataset().assign(
        energy=idata.sample_stats["accept"]
    )
    with pytest.raises(ValueError, match=r"no pymc_dp step declares \(\['energy'\]\)"):
        pymc_dp.release(idata, model=small_model)
    # A non-private sampler alone: its stats are a subset of DPPenalty's, but no privacy stats.
    with small_model:
        plain = pm.sample(draws=5, tune=0, chains=1, step=pm.Metropolis(), random_seed=0,
                          **SAMPLE)
    with pytest.raises(ValueError, match="Nothing shows that a pymc_dp step"):
        pymc_dp.release(plain, model=small_model)


def test_release_drops_coordinates_no_released_variable_uses(tmp_path):
    y = np.random.default_rng(2).normal(size=30)
    labels = [f"person-{v:.9f}" for v in y]  # a coordinate built from the data
    with pm.Model(coords={"obs_id": labels}) as m:
        x = pm.Data("x", np.ones(30), dims="obs_id")
        mu = pm.Normal("mu", 0, 5)
        pm.Deterministic("fit", mu * x, dims="obs_id")  # computed from data: left out
        pm.Normal("y", mu, 1.0, observed=y, dims="obs_id")
        with pytest.warns(UserWarning, match="may hold data"):
            steps = [pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1) for _ in range(2)]
        raw = pm.sample(draws=5, tune=0, chains=1, random_seed=0, step=steps[0], **SAMPLE)
        result = pymc_dp.sample(step=steps[1], draws=5, tune=0, chains=1, random_seed=0,
                                **SAMPLE)
    for idata in (pymc_dp.release(raw, model=m), result):
        assert all("obs_id" not in idata[g].dims and "obs_id" not in idata[g].coords
                   for g in idata.children)
        path = tmp_path / "result.nc"
        idata.to_netcdf(path)
        assert b"person-" not in path.read_bytes()


def test_a_released_result_extended_by_pymc_is_no_longer_releasable(released, regression_model):
    idata, _ = released
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pymc_dp.privacy_report(idata).safe_to_share
    with regression_model:
        extended = {
            "log_likelihood": pm.compute_log_likelihood(idata.copy(), progressbar=False),
            "posterior_predictive": pm.sample_posterior_predictive(
                idata.copy(), extend_inferencedata=True, progressbar=False
            ),
        }
    added = idata.copy()
    added["posterior"] = added["posterior"].to_dataset().assign(
        fit=added.posterior["beta"].sum("beta_dim_0")
    )
    extended["fit"] = added
    for what, tree in extended.items():
        with pytest.warns(NotReleasableWarning, match=what):
            report = pymc_dp.privacy_report(tree)
        assert not report.safe_to_share and str(report).startswith("NOT SAFE TO SHARE")
        assert report.epsilon == pytest.approx(idata.attrs["dp_epsilon"])
        with pytest.raises(ValueError, match=f"then extended with .*{what}"):
            pymc_dp.release(tree, model=regression_model)
    # what was released is still releasable
    assert set(pymc_dp.release(idata).children) == {"posterior", "sample_stats"}


# ---------------------------------------------------------------------- coordinates
N_PEOPLE = 30


@pytest.fixture(scope="module")
def per_person():
    """A per-person effect labelled with the people's identifiers, as PyMC users write it."""
    rng = np.random.default_rng(4)
    ids = [f"SSN-{rng.integers(10**8, 10**9)}" for _ in range(N_PEOPLE)]
    y = rng.normal(size=N_PEOPLE)
    with pm.Model(coords={"patient": ids, "arm": ["control", "treated"]}) as m:
        mu = pm.Normal("mu", 0, 10, dims="arm")
        z = pm.Normal("z", 0, 1, dims="patient")
        pm.Normal("y", mu[0] + z, 1, observed=y, dims="patient")
    return m, ids


def _sample_per_person(model, sampler=None):
    with model:
        # (labels are what is tested: no warm-up, whose releases take most of the time)
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, chains=1, proposal="one_component",
                                 warmup=False)
        run = sampler or pymc_dp.sample
        return run(step=step, draws=5, tune=5, chains=1, random_seed=0, **SAMPLE)


def _no_identifiers(idata, ids, tmp_path):
    path = tmp_path / "result.nc"
    idata.to_netcdf(path)
    return not any(i.encode() in path.read_bytes() for i in ids)


def test_labels_of_individuals_are_released_as_positions(per_person, tmp_path):
    # An outside review: coords={"patient": ids} put the participants' identifiers into the
    # released result (membership disclosure), by pymc_dp.sample and by release.
    model, ids = per_person
    with pytest.warns(UserWarning, match=r"\['patient'\] were replaced by positions"):
        result = _sample_per_person(model)
    raw = _sample_per_person(model, sampler=pm.sample)
    with pytest.warns(UserWarning, match=r"\['patient'\] were replaced by positions"):
        released = pymc_dp.release(raw, model=model)
    for idata in (result, released):
        assert list(idata.posterior["patient"].values) == list(range(N_PEOPLE))
        assert list(idata.posterior["arm"].values) == ["control", "treated"]  # not per-person
        assert _no_identifiers(idata, ids, tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert pymc_dp.privacy_report(idata).safe_to_share
    assert json.loads(result.attrs["dp_report"])["n_data"] == N_PEOPLE


def test_a_data_column_as_labels_is_not_released():
    # Labels taken from a data column (here the observed values themselves) are per-person.
    y = np.random.default_rng(6).normal(size=20).round(6)
    with pm.Model(coords={"person": y}) as m:
        z = pm.Normal("z", 0, 1, dims="person")
        pm.Normal("y", z, 1, observed=y, dims="person")
    with pytest.warns(UserWarning, match="replaced by positions"):
        idata = _sample_per_person(m)
    assert not set(idata.posterior["person"].values) & set(y)


def test_labels_of_a_dimension_with_several_entries_per_person_are_positions(tmp_path):
    # (a review) two effects per person laid out on one dimension of length 2n kept their
    # labels, the participants' identifiers among them
    ids = [f"patient-{i:04d}" for i in range(N_PEOPLE)]
    effects = [f"{p}/{k}" for p in ids for k in ("a", "b")]
    y = np.random.default_rng(7).normal(size=N_PEOPLE)
    with pm.Model(coords={"person": ids, "person_effect": effects}) as m:
        z = pm.Normal("z", 0, 1, dims="person_effect")
        pm.Normal("y", z.reshape((N_PEOPLE, 2)).sum(1), 1, observed=y, dims="person")
    with pytest.warns(UserWarning, match=r"\['person_effect'\] were replaced by positions"):
        idata = _sample_per_person(m)
    assert list(idata.posterior["person_effect"].values) == list(range(2 * N_PEOPLE))
    assert _no_identifiers(idata, ids, tmp_path)


def test_release_keeps_no_coordinate_laid_along_a_dimension(per_person):
    # release compared dimension names only: a non-index coordinate along 'patient' (a data
    # column attached to the trace) was kept.
    model, _ = per_person
    raw = _sample_per_person(model, sampler=pm.sample)
    age = np.random.default_rng(7).integers(20, 90, N_PEOPLE)
    raw["posterior"] = raw["posterior"].to_dataset().assign_coords(
        age=("patient", age), arm_name=("arm", ["c", "t"]), label=((), "x")
    )
    with pytest.warns(UserWarning, match="replaced by positions"):
        out = pymc_dp.release(raw, model=model)
    assert set(out.posterior.coords) == {"chain", "draw", "patient", "arm"}


def test_coordinates_added_after_the_release_make_it_unsafe(per_person):
    model, ids = per_person
    with pytest.warns(UserWarning, match="replaced by positions"):
        result = _sample_per_person(model)
    tampered = {
        "coordinate 'age'": result["posterior"].to_dataset().assign_coords(
            age=("patient", np.arange(N_PEOPLE) + 20)
        ),
        "labels of the per-person dimension 'patient'": result["posterior"]
        .to_dataset()
        .assign_coords(patient=ids),
    }
    for what, posterior in tampered.items():
        tree = result.copy()
        tree["posterior"] = posterior
        with pytest.warns(NotReleasableWarning, match=what):
            assert not pymc_dp.privacy_report(tree).safe_to_share
        with pytest.raises(ValueError, match=f"then extended with {what}"):
            pymc_dp.release(tree)


def test_without_n_every_dimension_is_treated_as_per_person(per_person):
    model, _ = per_person
    with pytest.warns(UserWarning, match="replaced by positions"):
        result = _sample_per_person(model)
    report = json.loads(result.attrs["dp_report"])
    report["n_data"] = None
    unknown = xr.DataTree.from_dict({"posterior": result["posterior"].to_dataset()})
    unknown.attrs["dp_report"] = json.dumps(report)
    with pytest.warns(UserWarning, match=r"\['arm'\] were replaced .* n is unknown"):
        out = pymc_dp.release(unknown)
    assert list(out.posterior["arm"].values) == [0, 1]


# ---------------------------------------------------------------------- the run's own stats
def test_a_run_whose_stats_report_more_than_it_reserved_is_withheld(small_model, monkeypatch):
    # Defence in depth: settings are fixed once a step is built, but if a chain still ran
    # with more μ than its reservation paid for, its draws are not returned.
    from pymc_dp.steps.gaussian import GaussianPrivateStep

    honest = GaussianPrivateStep._iteration_privacy_stats

    def overspending(self):
        stats = honest(self)
        return {**stats, "dp_mu_chain": 4 * stats["dp_mu_chain"]}

    monkeypatch.setattr(GaussianPrivateStep, "_iteration_privacy_stats", overspending)
    with small_model:
        # (no warm-up: all of the chain's μ is in its trace)
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, chains=1)
        with pytest.raises(pymc_dp.PrivacyBudgetExceeded, match="more than the ε = 1 reserved"):
            pymc_dp.sample(step=step, draws=5, tune=0, chains=1, random_seed=0, **SAMPLE)


def _uniforms(rng, theta, size):
    return theta[0] + rng.random(size)


def test_a_pure_dp_steps_cost_is_recomputed_from_the_trace_too():
    # The check above needs the trace's own cost: ABCDP (pure ε-DP) now gives it as well.
    with pm.Model():
        theta = pm.Uniform("theta", 0, 1, shape=1)
        pm.Simulator("y", _uniforms, theta, observed=np.random.default_rng(0).random(40))
        step = pymc_dp.ABCDP(eps=1.0, threshold=0.5, chains=1)
        idata = pymc_dp.sample(step=step, draws=3, chains=1, random_seed=0, **SAMPLE)
    spent = json.loads(idata.attrs["dp_report"])["spent"]
    assert spent["from_trace"]["epsilon"] == pytest.approx(spent["epsilon"], rel=1e-9)


# ---------------------------------------------------------------------- custom steps
def test_steps_defined_outside_pymc_dp_are_refused(small_model, released):
    # A subclass can record values computed from the data under the names pymc_dp's steps
    # declare: release checks stats by name only, so such steps are refused up front.
    class MyPenalty(pymc_dp.DPPenalty):
        pass

    with small_model:
        step = MyPenalty(eps=1.0, clip_bound=2.0, chains=1)
        with pytest.raises(pymc_dp.UnsupportedModelError, match="defined outside pymc_dp"):
            pymc_dp.sample(step=step, draws=5, tune=0, chains=1, **SAMPLE)
    assert step.guard.reservations() == []
    # A report that names another class, or none, is not released.
    idata, _ = released
    for made_by in (["tests.MyPenalty"], None):
        report = json.loads(idata.attrs["dp_report"])
        report["made_by"] = made_by
        tree = idata.copy()
        tree.attrs["dp_report"] = json.dumps(report)
        with pytest.raises(ValueError, match="does not say it was made by pymc_dp"):
            pymc_dp.release(tree)


# ------------------------------------------------------------------ warnings users act on
def _normal_mean_model(n=400, seed=0):
    y = np.random.default_rng(seed).normal(1.0, 1.0, size=n)
    model = pm.Model()
    with model:
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1, observed=y)
    return model


def test_a_tempered_target_is_labelled_where_users_look():
    model = _normal_mean_model()
    with model:
        step = pymc_dp.MinibatchDPPenalty(
            eps=4.0, clip_bound=2.0, batch_size=100, tempering=0.25, chains=1, warmup=False
        )
        with pytest.warns(pymc_dp.results.TemperedTargetWarning, match="T = 0.25"):
            idata = pymc_dp.sample(step=step, draws=20, tune=0, chains=1, random_seed=0,
                                   progressbar=False)
    assert "T = 0.25" in idata.attrs["dp_tempered"]
    assert "TEMPERED TARGET" in str(pymc_dp.privacy_report(idata))
    # a trace of plain pm.sample says it too, from its own stats
    with model:
        step = pymc_dp.MinibatchDPPenalty(
            eps=4.0, clip_bound=2.0, batch_size=100, tempering=0.25, chains=1, warmup=False
        )
        trace = pm.sample(step=step, draws=20, tune=0, chains=1, random_seed=0,
                          progressbar=False, compute_convergence_checks=False)
    with pytest.warns(NotReleasableWarning):
        assert "TEMPERED TARGET" in str(pymc_dp.privacy_report(trace))


def test_the_posterior_is_not_labelled_tempered():
    model = _normal_mean_model()
    with model:
        step = pymc_dp.MinibatchDPPenalty(eps=4.0, clip_bound=2.0, batch_size=100, chains=1)
        with warnings.catch_warnings():
            warnings.simplefilter("error", pymc_dp.results.TemperedTargetWarning)
            idata = pymc_dp.sample(step=step, draws=20, tune=0, chains=1, random_seed=0,
                                   progressbar=False)
    assert "dp_tempered" not in idata.attrs
    assert "TEMPERED" not in str(pymc_dp.privacy_report(idata))


def test_a_chain_that_never_moved_gets_a_warning_that_says_what_to_change():
    # ε = 0.05 over 300 iterations with a step of sd 1: the ratio noise has sd in the
    # hundreds, so every proposal is rejected. (Hand settings and no warm-up: with its
    # defaults the step would draw from its Laplace approximation instead.)
    model = _normal_mean_model()
    with model:
        step = pymc_dp.DPPenalty(eps=0.05, clip_bound=5.0, chains=2, warmup=False, scaling=1.0)
        with pytest.warns(pymc_dp.results.StuckChainWarning, match=r"Chain\(s\) \[0, 1\]"):
            idata = pymc_dp.sample(step=step, draws=200, tune=100, chains=2, random_seed=1,
                                   progressbar=False, cores=1)
    assert float(idata.sample_stats["accepted"].sum()) == 0.0
    # a chain that moves gets no such warning
    with model:
        step = pymc_dp.DPPenalty(eps=20.0, clip_bound=5.0, chains=1, scaling=0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("error", pymc_dp.results.StuckChainWarning)
            pymc_dp.sample(step=step, draws=100, tune=100, chains=1, random_seed=1,
                           progressbar=False)


def test_the_report_shows_one_line_per_kind_of_release_and_keeps_every_event():
    from pymc_dp.results.report import _grouped_events

    rows = [
        {"kind": "gaussian", "name": "a", "count": 1, "noise_multiplier": 2.0, "mu": 0.125},
        {"kind": "gaussian", "name": "b", "count": 1, "noise_multiplier": 1.0, "mu": 0.5},
        {"kind": "gaussian", "name": "a", "count": 1, "noise_multiplier": 1.0, "mu": 0.5},
    ]
    shown = _grouped_events(rows)
    assert [r["name"] for r in shown] == ["a", "b"]
    assert shown[0]["count"] == 2 and shown[0]["mu"] == 0.625
    assert shown[0]["noise_multiplier"] == "1 … 2"
    assert shown[1] == rows[1]
