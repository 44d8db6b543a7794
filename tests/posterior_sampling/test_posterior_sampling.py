"""The posterior sampling mechanism: calibration, tempered posterior, release, budget, audit."""

import json
import math

import numpy as np
import pymc as pm
import pytest
import scipy.stats as st

from scipy.special import logit

import pymc_dp

from pymc_dp.testing.auditing import epsilon_lower_bound
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.posterior_sampling.lipschitz import bernoulli
from pymc_dp.posterior_sampling import (
    TEMPERED_POTENTIAL,
    NotConvergedError,
    PosteriorSampling,
    tempered_model,
)

RUN = dict(chains=2, tune=500, progressbar=False, cores=1)
A, B = 0.05, 0.95  # trimmed support of the Bernoulli probability


def beta_bernoulli(y, a=A, b=B, alpha=2.0, beta=3.0):
    with pm.Model() as m:
        p = pm.Truncated("p", pm.Beta.dist(alpha, beta), lower=a, upper=b)
        pm.Deterministic("odds", p / (1 - p))
        pm.Bernoulli("y", p, observed=y)
    return m


def truncated_beta(alpha, beta, a, b):
    """Frozen-like helpers of Beta(alpha, beta) restricted to [a, b]."""
    Fa, Fb = st.beta.cdf([a, b], alpha, beta)
    return lambda x: (st.beta.cdf(np.clip(x, a, b), alpha, beta) - Fa) / (Fb - Fa)


@pytest.fixture(scope="module")
def bernoulli_data():
    return np.random.default_rng(3).binomial(1, 0.3, size=60)


# ---------------------------------------------------------------------- calibration
def test_temperature_is_eps_over_2NL_and_never_reads_the_data(bernoulli_data):
    eps, N = 1.0, 20
    L = (logit(B) - logit(A)) / 2
    mechs = [
        PosteriorSampling(eps=eps, draws=N, model=beta_bernoulli(y))
        for y in (bernoulli_data, 1 - bernoulli_data, np.zeros(60, dtype=int))
    ]
    for mech in mechs:
        assert mech.lipschitz.L == pytest.approx(L, rel=1e-12)
        assert mech.temperature == pytest.approx(eps / (2 * N * L), rel=1e-12)
        assert mech.temperature <= eps / (2 * N * L)
        assert N * mech.epsilon_per_draw <= eps
    assert len({m.temperature for m in mechs}) == 1  # a function of (ε, N, bounds) only
    # A budget that the untempered posterior already meets: T = 1, and the cost is less.
    big = PosteriorSampling(eps=1e3, draws=2, model=beta_bernoulli(bernoulli_data))
    assert big.temperature == 1.0 and big.epsilon_per_draw == pytest.approx(2 * L)


def test_tempered_model_is_prior_plus_T_times_the_likelihood(bernoulli_data):
    m = beta_bernoulli(bernoulli_data)
    T = 0.137
    t = tempered_model(m, T)
    assert t.observed_RVs == [] and [p.name for p in t.potentials] == [TEMPERED_POTENTIAL]
    f_t = t.compile_logp()
    f_prior = m.compile_logp(vars=m.free_RVs)
    f_lik = m.compile_logp(vars=m.observed_RVs, jacobian=False)
    for z in np.linspace(-4, 4, 9):
        point = {"p_interval__": np.array(z)}
        assert f_t(point) == pytest.approx(f_prior(point) + T * f_lik(point), rel=1e-12)
    with pytest.raises(ValueError, match="temperature"):
        tempered_model(m, 1.5)


# ---------------------------------------------------------------------- tempered posterior
@pytest.fixture(scope="module")
def beta_bernoulli_release(bernoulli_data, tmp_path_factory, request):
    """300 released draws of a Beta–Bernoulli model with T ≈ 0.25."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path_factory.mktemp("ledgers")))
    request.addfinalizer(mp.undo)
    N = 300
    L = (logit(B) - logit(A)) / 2
    eps = 2 * N * L * 0.25
    model = beta_bernoulli(bernoulli_data)
    mech = PosteriorSampling(eps=eps, draws=N, model=model)
    idata = mech.sample(random_seed=7, **RUN)
    return mech, idata, model


def test_tempered_beta_bernoulli_matches_its_closed_form(beta_bernoulli_release, bernoulli_data):
    mech, idata, _ = beta_bernoulli_release
    T, s, n = mech.temperature, bernoulli_data.sum(), bernoulli_data.size
    cdf = truncated_beta(2.0 + T * s, 3.0 + T * (n - s), A, B)
    draws = idata.posterior["p"].values.ravel()
    assert draws.size == 300
    assert st.kstest(draws, cdf).pvalue > 1e-3
    # The spread is the tempered one (T twice too large would shrink it by ≈ 1/√2).
    alpha, beta = 2.0 + T * s, 3.0 + T * (n - s)
    grid = np.linspace(A, B, 20001)
    dens = st.beta.pdf(grid, alpha, beta)
    mean = np.sum(grid * dens) / dens.sum()
    sd = math.sqrt(np.sum((grid - mean) ** 2 * dens) / dens.sum())
    assert draws.std() == pytest.approx(sd, rel=0.12)
    # ... and not the untempered posterior, which is far narrower.
    untempered = truncated_beta(2.0 + s, 3.0 + n - s, A, B)
    assert st.kstest(draws, untempered).pvalue < 1e-6


def test_tempered_normal_mean_matches_its_closed_form():
    rng = np.random.default_rng(11)
    y = np.clip(rng.normal(0.4, 0.5, size=100), -1, 1)
    N, lo, hi = 200, -2.0, 2.0
    L = (1 - (-1)) * (hi - lo) / 2  # (data range)(mean range)/(2σ²), σ = 1
    eps = 2 * N * L * 0.3
    with pm.Model():
        mu = pm.Uniform("mu", lo, hi)
        pm.Normal("y", mu, 1.0, observed=y)
        mech = PosteriorSampling(eps=eps, draws=N, data_bounds=(-1, 1))
    assert mech.lipschitz.L == pytest.approx(L)
    idata = mech.sample(random_seed=3, **RUN)
    T = mech.temperature
    sd = 1 / math.sqrt(T * y.size)
    closed = st.truncnorm((lo - y.mean()) / sd, (hi - y.mean()) / sd, y.mean(), sd)
    draws = idata.posterior["mu"].values.ravel()
    assert st.kstest(draws, closed.cdf).pvalue > 1e-3
    assert draws.std() == pytest.approx(closed.std(), rel=0.15)


# ---------------------------------------------------------------------- release
def test_release_is_safe_and_states_its_guarantee(beta_bernoulli_release, bernoulli_data):
    mech, idata, model = beta_bernoulli_release
    assert list(idata.children) == ["posterior"]
    assert dict(idata.posterior.sizes) == {"chain": 1, "draw": 300}
    assert set(idata.posterior.data_vars) == {"p", "odds"}
    assert not idata.posterior.attrs  # no timings or sampler metadata
    assert idata.attrs["dp_delta"] == 0.0
    assert idata.attrs["dp_epsilon"] <= mech.epsilon
    assert idata.attrs["dp_epsilon"] == pytest.approx(mech.epsilon, rel=1e-9)

    report = pymc_dp.privacy_report(idata)
    assert report.delta == 0.0 and report.epsilon == idata.attrs["dp_epsilon"]
    d = report.details
    assert "exact" in d["guarantee"] and "MCMC" in d["not_covered"]
    assert "R-hat" in d["convergence"]["check"] and "ESS" in d["convergence"]["check"]
    assert "tempered chains only" in d["convergence"]["check"]
    assert "not released" in d["convergence"]["values"]
    assert d["temperature"] == mech.temperature
    [event] = d["ledger"]
    assert event["kind"] == "pure" and event["count"] == 300
    assert event["epsilon_per_release"] == pytest.approx(
        2 * mech.temperature * mech.lipschitz.L, rel=1e-12
    )
    assert d["lipschitz"]["terms"][0]["family"] == "bernoulli"
    # Nothing about the data or the unreleased chain: no sampler stats, no diagnostics values.
    text = idata.attrs["dp_report"]
    for key in ("max_rhat", "min_ess_bulk", "ess", "divergen", "step_size", "lp"):
        assert f'"{key}"' not in text
    assert str(int(bernoulli_data.sum())) not in json.dumps(d["sampler"])


def test_results_made_before_the_module_moved_are_still_released(beta_bernoulli_release):
    # Reports written before PosteriorSampling moved into its package name it at its old
    # path; another name is still refused.
    _, idata, model = beta_bernoulli_release
    for made_by, accepted in (("pymc_dp.posterior_sampling.PosteriorSampling", True),
                              ("mypackage.PosteriorSampling", False)):
        old = idata.copy()
        report = json.loads(old.attrs["dp_report"])
        report["made_by"] = [made_by]
        old.attrs["dp_report"] = json.dumps(report)
        if accepted:
            assert set(pymc_dp.release(old, model=model).posterior.data_vars) == {"p", "odds"}
        else:
            with pytest.raises(ValueError, match="made_by"):
                pymc_dp.release(old, model=model)


def test_deterministics_that_read_data_are_not_released():
    # (50 people: at 5, the odds' few operations measure as much as the data)
    y = np.tile([0, 1, 1, 0, 1], 10)
    with pm.Model():
        p = pm.Uniform("p", 0.1, 0.9)
        pm.Deterministic("leak", p + pm.math.sum(pm.Data("summary", np.array([3.0, 1.0]))))
        pm.Bernoulli("y", p, observed=y)
        # an array constant in a deterministic may hold data too: pymc_dp.release drops it,
        # and (one rule for every release) the draws never record it
        pm.Deterministic("scaled", p * np.array([0.5, 2.0]))
        pm.Deterministic("odds", p / (1 - p))
        with pytest.warns(UserWarning, match="may hold data"):
            mech = PosteriorSampling(eps=1.0, draws=2)
    assert mech._released_names() == ["p", "odds"]


# ---------------------------------------------------------------------- budget and errors
def test_more_draws_than_planned_is_refused_before_reading_data(bernoulli_data, monkeypatch):
    mech = PosteriorSampling(eps=1.0, draws=5, model=beta_bernoulli(bernoulli_data))

    def no_sampling(*args, **kwargs):
        raise AssertionError("the data must not be read")

    monkeypatch.setattr(pm, "sample", no_sampling)
    with pytest.raises(PrivacyBudgetExceeded, match="at most 5"):
        mech.sample(draws=6, **RUN)
    assert mech.guard.reservations() == []


def test_one_release_per_object_and_fewer_draws_cost_less(bernoulli_data):
    mech = PosteriorSampling(eps=1.0, draws=10, model=beta_bernoulli(bernoulli_data))
    idata = mech.sample(draws=4, mcmc_draws=600, random_seed=1, **RUN)
    assert idata.posterior.sizes["draw"] == 4
    assert idata.attrs["dp_epsilon"] == pytest.approx(0.4, rel=1e-9)
    assert mech.lifetime_privacy_report().epsilon == pytest.approx(0.4, rel=1e-9)
    with pytest.raises(PrivacyBudgetExceeded, match="already released"):
        mech.sample(draws=4, **RUN)
    # A copy in another process shares the ledger file: it is refused too.
    import copy

    clone = copy.copy(mech)
    with pytest.raises(PrivacyBudgetExceeded):
        clone.sample(**RUN)


def test_failed_convergence_releases_nothing_shows_no_values_and_spends_the_budget(
    bernoulli_data,
):
    mech = PosteriorSampling(eps=1.0, draws=3, min_ess=1e9, model=beta_bernoulli(bernoulli_data))
    with pytest.raises(NotConvergedError) as info:
        mech.sample(mcmc_draws=200, random_seed=2, return_diagnostics=True, **RUN)
    message = str(info.value)
    assert "Nothing was released" in message
    diag = info.value.private_diagnostics
    assert diag["NOT_PRIVATE"]
    for key in ("max_rhat", "min_ess_bulk", "min_ess_tail"):
        assert f"{diag[key]:.6g}" not in message
    with pytest.raises(PrivacyBudgetExceeded):
        mech.sample(**RUN)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon_is_refused_before_the_model_is_touched(eps):
    # No model in context: the ε check must come first.
    with pytest.raises(ValueError, match="eps"):
        PosteriorSampling(eps=eps, draws=1)


def test_clear_errors(bernoulli_data):
    with pytest.raises(ValueError, match="draws"):
        PosteriorSampling(eps=1.0, draws=0)
    # (the shared validators: a bool is not a count, a string not a number)
    with pytest.raises(ValueError, match="draws must be an integer >= 1 .not a bool., got True"):
        PosteriorSampling(eps=1.0, draws=True)
    with pytest.raises(ValueError, match="min_ess must be a finite number > 0, got a str"):
        PosteriorSampling(eps=1.0, draws=1, min_ess="50")
    with pm.Model():
        pm.Bernoulli("y", pm.Beta("p", 1, 1), observed=bernoulli_data)
        with pytest.raises(UnsupportedModelError, match="not trimmed"):
            PosteriorSampling(eps=1.0, draws=1)
    with pm.Model():
        pm.Normal("y", pm.Uniform("mu", -1, 1), 1.0, observed=np.array([0.2, 3.5]))
        with pytest.raises(UnsupportedModelError, match="data_bounds"):
            PosteriorSampling(eps=1.0, draws=1)
        with pytest.raises(ValueError, match="outside the declared data bounds") as info:
            PosteriorSampling(eps=1.0, draws=1, data_bounds=(-1, 1))
        assert "3.5" not in str(info.value)
    mech = PosteriorSampling(eps=1.0, draws=1, model=beta_bernoulli(bernoulli_data))
    with pytest.raises(ValueError, match="chains"):
        mech.sample(chains=1)
    with pytest.raises(ValueError, match="idata_kwargs"):
        mech.sample(idata_kwargs={"log_likelihood": True}, **RUN)
    assert mech.guard.reservations() == []


@pytest.fixture(scope="module")
def unspent(bernoulli_data, tmp_path_factory):
    """One object for every refusal: each must leave its budget untouched."""
    return PosteriorSampling(eps=1.0, draws=1, model=beta_bernoulli(bernoulli_data),
                             ledger_dir=tmp_path_factory.mktemp("ledgers"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"callback": lambda trace, draw: None},  # would see every tempered draw
        {"trace": "zarr"},
        {"backend": "zarr"},
        {"discard_tuned_samples": False},
        {"return_inferencedata": False},
        {"idata_kwargs": {"attrs": {}}},
        {"compute_convergence_checks": True},
        {"keep_warning_stat": True},
        {"step": "nuts"},
        {"nuts_sampler": "numpyro"},
        {"nuts_sampler_kwargs": {}},
        {"var_names": ["p"]},
        {"model": None},
        {"n_init": 10},
        {"compile_kwargs": {}},
        {"progressbar_theme": None},
        {"progressbar": True},  # step sizes and divergences of the tempered chain
        {"progressbar": "combined"},
        {"init": "advi+adapt_diag"},  # ADVI's loss
        {"init": "map"},
        {"initvals": {"p": 0.37}},  # a start that cannot be shown public (review 26)
    ],
    ids=lambda kw: "-".join(f"{k}={v!r}"[:30] for k, v in kw.items()),
)
def test_sample_arguments_that_show_the_tempered_chain_are_refused(unspent, kwargs):
    mech = unspent
    with pytest.raises(ValueError, match="does not pass|refuses this"):
        mech.sample(chains=2, tune=10, mcmc_draws=10, **kwargs)
    assert mech.guard.reservations() == []  # refused before the budget or the data


# ---------------------------------------------------------------------- audit
def _exact_tempered_draws(rng, size, alpha, beta, a, b):
    """Exact draws of Beta(alpha, beta) restricted to [a, b], by rejection."""
    out = np.empty(0)
    while out.size < size:
        x = rng.beta(alpha, beta, size=4 * size)
        out = np.concatenate([out, x[(x >= a) & (x <= b)]])
    return out[:size]


def test_empirical_audit_of_a_one_draw_release():
    """Neighbouring datasets D = (0,0,0,0) and D' = (0,0,0,1), one exact draw each.

    The prior Beta(0.05, 0.05) truncated to [0.1, 0.9] puts mass near both ends, so one
    draw's privacy loss comes close to its bound. With the library's T the audit's lower
    bound stays below ε; with T twice as large (tempering twice too weak) it exceeds ε.
    """
    a, b, alpha, eps = 0.1, 0.9, 0.05, 1.0
    D, D_prime = np.zeros(4, dtype=int), np.array([0, 0, 0, 1])
    temps = []
    for y in (D, D_prime):
        with pm.Model():
            p = pm.Truncated("p", pm.Beta.dist(alpha, alpha), lower=a, upper=b)
            pm.Bernoulli("y", p, observed=y)
            temps.append(PosteriorSampling(eps=eps, draws=1).temperature)
    T = temps[0]
    assert temps[1] == T
    assert T == pytest.approx(eps / (2 * bernoulli((a, b)).L))

    rng = np.random.default_rng(2024)
    size = 1_000_000

    def audit(temperature):
        x = _exact_tempered_draws(rng, size, alpha, alpha + 4 * temperature, a, b)
        y = _exact_tempered_draws(rng, size, alpha + temperature, alpha + 3 * temperature, a, b)
        return epsilon_lower_bound(x, y, delta=0.0, n_thresholds=100)

    assert audit(T) <= eps
    assert audit(2 * T) > eps


def test_discrete_bayesian_network_end_to_end():
    """x1 → x2 with a trimmed-Dirichlet CPT chosen by the parent's data (Lemma 24)."""
    from pymc_dp.posterior_sampling.lipschitz import discrete_bayesian_network, trimmed_dirichlet

    rng = np.random.default_rng(0)
    x1 = rng.binomial(1, 0.4, 200)
    x2 = np.array([rng.choice(3, p=[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]][a]) for a in x1])
    with pm.Model(coords={"parent": [0, 1], "state": [0, 1, 2]}):
        p1 = pm.Uniform("p1", 0.05, 0.95)
        cpt = trimmed_dirichlet("cpt", np.ones((2, 3)), min_prob=0.05, dims=("parent", "state"))
        parent = pm.Data("x1_parent", x1)
        pm.Bernoulli("x1", p1, observed=x1)
        pm.Categorical("x2", p=cpt[parent], observed=x2)
        mech = PosteriorSampling(eps=2.0, draws=3)
    assert mech.lipschitz.L == pytest.approx(discrete_bayesian_network(0.05, [2, 3]).L)
    idata = mech.sample(random_seed=4, **RUN)
    assert dict(idata.posterior["cpt"].sizes) == {"chain": 1, "draw": 3, "parent": 2, "state": 3}
    assert np.all(idata.posterior["cpt"].values >= 0.05)
    assert idata.attrs["dp_epsilon"] <= 2.0 and idata.attrs["dp_delta"] == 0.0


# ---------------------------------------------------------------------- what the run shows
def _funnel(y):
    """A model whose prior has a funnel: NUTS diverges on the tempered posterior."""
    with pm.Model() as m:
        p = pm.Uniform("p", 0.05, 0.95)
        v = pm.Normal("v", 0, 3)
        pm.Normal("x", 0, pm.math.exp(v / 2))
        pm.Bernoulli("y", p, observed=y)
    return m


def test_the_tempered_run_logs_and_warns_nothing(bernoulli_data, monkeypatch):
    # An outside review turned on the 'pymc' logger: every divergence of the tempered chain
    # was logged with its energy change, and the run's wall time too.
    import logging
    import warnings

    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    watched = {"pymc": logging.DEBUG, "pymc.stats.convergence": logging.DEBUG,
               "pymc.sampling.mcmc": logging.INFO}
    before = {name: logging.getLogger(name).level for name in watched}
    real_sample = pm.sample

    def sample_that_warns(*args, **kwargs):  # as a PyMC that warned about the chain would
        warnings.warn("energy change 12345.678 at a tempered draw", RuntimeWarning, stacklevel=2)
        return real_sample(*args, **kwargs)

    monkeypatch.setattr(pm, "sample", sample_that_warns)
    mech = PosteriorSampling(eps=1.0, draws=5, max_rhat=100.0, min_ess=1.0,
                             model=_funnel(bernoulli_data))
    logging.getLogger("pymc").addHandler(handler)
    try:
        for name, level in watched.items():
            logging.getLogger(name).setLevel(level)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mech.sample(chains=2, tune=50, mcmc_draws=50, random_seed=1, target_accept=0.5,
                        quiet=False, progressbar=False, cores=1)
        levels = {name: logging.getLogger(name).level for name in watched}
    finally:
        logging.getLogger("pymc").removeHandler(handler)
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)
    assert [r.getMessage() for r in records] == []
    assert [str(w.message) for w in caught] == []
    assert levels == watched  # the user's settings are back


def test_settings_that_define_the_mechanism_are_fixed(bernoulli_data):
    # An outside review lowered epsilon_per_draw after construction: the ledger charged
    # 5e-12 for a run that cost 1.
    mech = PosteriorSampling(eps=1.0, draws=5, min_ess=50.0, model=beta_bernoulli(bernoulli_data))
    other = tempered_model(beta_bernoulli(bernoulli_data), 1.0)
    for name, value in {"epsilon_per_draw": 1e-12, "tempered": other, "temperature": 1.0,
                        "lipschitz": None, "epsilon": 1e9, "draws": 1000, "guard": None,
                        "model": None, "min_ess": 1.0}.items():
        before = getattr(mech, name)
        with pytest.raises(AttributeError, match="fixed once the object is built"):
            setattr(mech, name, value)
        with pytest.raises(AttributeError, match="fixed once the object is built"):
            delattr(mech, name)
        assert getattr(mech, name) is before
    idata = mech.sample(mcmc_draws=200, random_seed=1, **RUN)
    assert idata.attrs["dp_epsilon"] == pytest.approx(1.0, rel=1e-9)  # the honest cost


def test_a_subclass_is_refused_before_the_data_is_read(bernoulli_data):
    class Leaky(PosteriorSampling):
        pass

    with pytest.raises(UnsupportedModelError, match="defined outside pymc_dp"):
        Leaky(eps=1.0, draws=5, model=beta_bernoulli(bernoulli_data))
