"""Clip diagnostics on every clipping step (issue 17, item 4): the released counts, their
cost, the table users read, and that nothing changes when they are off."""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.kernels import clip_diagnostics
from pymc_dp.kernels.clipping import clipped_count, clipped_row_count
from pymc_dp.model import PrivateModel
from pymc_dp.results import clipped_fractions

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
N = 200
RUN = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)


@pytest.fixture(autouse=True)
def _quiet():
    logging.getLogger("pymc").setLevel(logging.ERROR)


def normal_model(n=N, scale=1.5):
    y = np.random.default_rng(0).normal(1.0, scale, size=n)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 3.0)
        sigma = pm.HalfNormal("sigma", 3.0)
        pm.Normal("y", mu, sigma, observed=y)
    return model


HAND = dict(warmup=False, chains=1)
def _make(cls, **settings):
    return lambda **k: cls(**{**settings, **HAND, **k})


PENALTY = dict(eps=20.0, clip_bound=3.0, scaling=0.1)
STEPS = {
    "DPPenalty": _make(pymc_dp.DPPenalty, **PENALTY),
    "DPPenalty-one_component": _make(pymc_dp.DPPenalty, proposal="one_component", **PENALTY),
    "DPPenalty-guided": _make(pymc_dp.DPPenalty, proposal="guided", **PENALTY),
    "MinibatchDPPenalty": _make(pymc_dp.MinibatchDPPenalty, batch_size=20, **PENALTY),
    "DPBarker": _make(pymc_dp.DPBarker, eps=50.0, batch_size=20, scaling=0.1, method="mcmc"),
    "DPHMC": _make(pymc_dp.DPHMC, eps=20.0, grad_clip=3.0, loglik_clip=3.0, n_steps=2,
                   step_size=0.05),
}
# Clip bounds that clip some terms of the tiny runs (so the counts checked are not all 0)
TIGHT = {"DPHMC": dict(grad_clip=1.0)}
TIGHT.update({k: dict(clip_bound=0.3) for k in STEPS if "Penalty" in k})


def _sample(make, seed=7, draws=15, tune=5, **kwargs):
    with normal_model():
        step = make(**kwargs)
        idata = pymc_dp.sample(step=step, draws=draws, tune=tune, random_seed=seed, **RUN)
    return step, idata


# ---------------------------------------------------------------------- off by default
# Draws of `mu` with random_seed=7 (draws=15, tune=5) recorded on main before the clip
# diagnostics existed: turning them off must leave the chain exactly as it was.
MAIN = {
    "DPPenalty": [0.1779744395, 0.1779744395, 0.2062598878, 0.2329808501, 0.2329808501,
                  0.2329808501, 0.2566144063, 0.3802055179, 0.3802055179, 0.3802055179,
                  0.3802055179, 0.3802055179, 0.3802055179, 0.3802055179, 0.3802055179],
    "DPHMC": [0.0963807089, 0.0963807089, 0.0963807089, 0.1479458615, 0.1479458615,
              0.1479458615, 0.1786746699, 0.2946992267, 0.345739439, 0.3827986605,
              0.3827986605, 0.3827986605, 0.3827986605, 0.4492186359, 0.5116063895],
}


# The same for the steps as most users make them (the default warm-up), and for the
# minibatch steps (recorded on main 03e7093, as above; the two warm-up rows again when the
# warm-up began pooling its curvature releases, and when its gradient release began taking out
# the clipping bias: each moved its result)
OFF = {
    **STEPS,
    "DPPenalty-warmup": lambda **k: pymc_dp.DPPenalty(eps=20.0, method="mcmc", chains=1, **k),
    "DPHMC-warmup": lambda **k: pymc_dp.DPHMC(
        eps=200.0, method="mcmc", chains=1, n_steps=3, step_size=0.05, **k),
}
MAIN.update({
    "DPPenalty-warmup": [0.9045837648, 0.9045837648, 0.8756498138, 0.8756498138, 0.8756498138,
        0.8756498138, 0.9672651057, 0.9672651057, 0.9672651057, 0.9672651057, 0.9768311803,
        0.9953088837, 1.0389959243, 1.0372212521, 1.0251474639],
    "DPHMC-warmup": [1.2259889135, 1.2259889135, 1.2259889135, 1.2259889135, 0.8990555054,
        0.8990555054, 1.0252133973, 1.0778115839, 0.8727890155, 1.112516678, 0.9835248747,
        0.9835248747, 0.9835248747, 0.9974161819, 0.9974161819],
    "MinibatchDPPenalty": [0.0, 0.0037269494, 0.0037269494, 0.0037269494, 0.0037269494,
        0.0037269494, 0.0037269494, 0.0037269494, 0.0037269494, 0.0037269494,
        0.0037269494, 0.0037269494, 0.0037269494, 0.0037269494, 0.0131796626],
    "DPBarker": [-0.0867394784, -0.0897140926, -0.0897140926, -0.0897140926, -0.0897140926,
        -0.2097406078, -0.1191456418, -0.1191456418, -0.1191456418, 0.0851725245,
        0.0851725245, 0.0851725245, 0.1923159969, 0.1923159969, 0.1923159969],
})


@pytest.mark.parametrize("name", sorted(MAIN))
def test_off_by_default_gives_the_draws_of_before(name):
    _, omitted = _sample(OFF[name])
    _, explicit = _sample(OFF[name], clip_diagnostics=None)
    np.testing.assert_array_equal(omitted.posterior["mu"], explicit.posterior["mu"])
    np.testing.assert_allclose(omitted.posterior["mu"].values[0], MAIN[name], atol=1e-9)
    clip_stats = {k for k in omitted.sample_stats.data_vars if k.startswith("dp_clip")}
    # (the minibatch steps record their diagnostics' μ always: 0 when off)
    assert clip_stats == ({"dp_clip_mu_chain"} if name in ("DPBarker", "MinibatchDPPenalty")
                          else set())
    assert all((omitted.sample_stats[k].values == 0).all() for k in clip_stats)
    with pytest.warns(UserWarning, match="holds no clip diagnostics"):
        assert clipped_fractions(omitted).empty


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_bad_clip_diagnostics_are_refused_before_the_model_is_read(bad, monkeypatch):
    def no_read(*args, **kwargs):
        raise AssertionError("the model was read")

    monkeypatch.setattr(PrivateModel, "__init__", no_read)
    with normal_model(), pytest.raises(ValueError, match="clip_diagnostics"):
        STEPS["DPPenalty"](clip_diagnostics=bad)


def test_more_windows_than_draws_is_refused_before_reserving_or_reading(monkeypatch):
    with normal_model():
        step = STEPS["DPPenalty"](clip_diagnostics=20)
        with pytest.raises(ValueError, match="more than its 15 draws"):
            step.plan(draws=15, tune=5)
        read = []
        monkeypatch.setattr(PrivateModel, "clipped_ratio", lambda *a, **k: read.append(1))
        with pytest.raises(ValueError, match="more than its 15 draws"):
            pymc_dp.sample(step=step, draws=15, tune=5, random_seed=1, **RUN)
    assert step.guard.reservations() == [] and read == []


def test_a_step_that_declares_no_counts_refuses_them_before_the_model_is_read(monkeypatch):
    # (the base class's refusal: a step whose class declares no clip diagnostic stats)
    class NoCounts(pymc_dp.DPPenalty):
        optional_stats_dtypes_shapes = {}

    def no_read(*args, **kwargs):
        raise AssertionError("the model was read")

    monkeypatch.setattr(PrivateModel, "__init__", no_read)
    with normal_model(), pytest.raises(ValueError, match="NoCounts clips nothing"):
        NoCounts(**PENALTY, **HAND, clip_diagnostics=2)


@pytest.mark.parametrize("name", ["DPPenalty", "DPHMC", "MinibatchDPPenalty", "DPBarker"])
def test_a_share_that_leaves_the_sampler_nothing_is_refused_up_front(name, monkeypatch):
    # (review LOW6: with the default warm-up's share 0.5, 0.99 left the sampler μ < 0)
    def no_read(*args, **kwargs):
        raise AssertionError("the model was read")

    monkeypatch.setattr(PrivateModel, "__init__", no_read)
    cls = getattr(pymc_dp, name)
    settings = {"MinibatchDPPenalty": dict(batch_size=20), "DPBarker": dict(warmup=False)}
    diag = pymc_dp.ClipDiagnostics(windows=2, share=0.99 if name != "DPBarker" else 1 - 1e-9)
    with normal_model():
        if name == "DPBarker":  # (its MCMC has no warm-up: any share < 1 leaves room)
            with pytest.raises(AssertionError, match="the model was read"):
                cls(eps=30.0, chains=2, clip_diagnostics=diag, **settings[name])
            return
        with pytest.raises(ValueError, match=r"share 0\.99 with the warm-up's share 0\.5 "
                           "leaves"):
            cls(eps=30.0, chains=2, clip_diagnostics=diag, **settings.get(name, {}))


@pytest.mark.parametrize("name, settings", [
    ("DPPenalty", dict(method="laplace")),
    ("DPHMC", dict(eps=0.05)),  # method="auto" falls back to the approximation
])
def test_the_laplace_route_says_the_diagnostics_are_unused(name, settings):
    # (review LOW5: they were dropped silently)
    import warnings

    with normal_model():
        step = getattr(pymc_dp, name)(**{"eps": 5.0, "chains": 1, "clip_diagnostics": 2,
                                         **settings})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = step.plan(draws=20, tune=0)
            idata = pymc_dp.sample(step=step, draws=20, tune=0, random_seed=1, **RUN)
    assert step._laplace
    unused = [w for w in caught if issubclass(w.category, pymc_dp.ClipDiagnosticsUnusedWarning)]
    assert len(unused) == 1 and "clips nothing" in str(unused[0].message)
    assert any("clip diagnostics: none" in note for note in plan.notes)
    assert not any(e.name == "clip diagnostics" for e in plan.events)
    reserved = [e["name"] for r in step.guard.reservations() for e in r["events"]]
    assert "clip diagnostics" not in reserved
    with pytest.warns(pymc_dp.ClipDiagnosticsUnusedWarning, match="Laplace approximation"):
        assert clipped_fractions(idata).empty


def test_a_step_that_clips_nothing_refuses_them():
    def sim(rng, mu, size=None):
        return rng.normal(mu, 1.0, size=size)

    with pm.Model():
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Simulator("y", sim, mu, observed=np.zeros(20))
        with pytest.raises(TypeError):
            pymc_dp.ABCDP(eps=1.0, threshold=0.3, clip_diagnostics=2)


# ---------------------------------------------------------------------- the count
def _exact_noise(monkeypatch):
    """Noise ~0 in the windows' releases (a test hook: the accounting is unchanged)."""
    real = clip_diagnostics.WindowedClipCounts.__init__

    def exact(self, *args, noise_multiplier, **kwargs):
        real(self, *args, noise_multiplier=1e-12, **kwargs)

    monkeypatch.setattr(clip_diagnostics.WindowedClipCounts, "__init__", exact)


def _record_reference(monkeypatch, name, windows):
    """Recompute every release's count with NumPy at the states the chain visits, and
    attribute it to the running window (the compiled counts are what is checked)."""
    ref, live = [], {"window": None}
    real_begin = clip_diagnostics.WindowedClipCounts.begin

    def begin(self, iteration):
        real_begin(self, iteration)
        live["window"] = self._current

    monkeypatch.setattr(clip_diagnostics.WindowedClipCounts, "begin", begin)

    def add(count):
        if live["window"] is not None:
            ref.append((live["window"], count))

    if name.startswith("DPPenalty"):
        real = PrivateModel.clipped_ratio

        def ratio(self, q, current, bound, count=False):
            with np.errstate(invalid="ignore"):
                add(clipped_count(self.loglik(q) - current, bound))
            return real(self, q, current, bound, count=count)

        monkeypatch.setattr(PrivateModel, "clipped_ratio", ratio)
    elif name == "DPHMC":
        real = PrivateModel.clipped_gradient

        def gradient(self, q, bound, basis=None, count=False):
            rows = self.gradient_rows(q)[0]
            add(clipped_row_count(rows if basis is None else rows @ basis, bound))
            return real(self, q, bound, basis, count=count)

        monkeypatch.setattr(PrivateModel, "clipped_gradient", gradient)
    else:  # the minibatch steps: per release in a window, two row evaluations on the
        # release's batch, then two on the count's own batch (fresh_batch_clipped_count)
        real = PrivateModel.loglik_rows
        pending, batches = [], []
        live["batches"] = []

        def rows(self, q, which):
            out = real(self, q, which)
            pending.append((np.array(q), np.array(which), out))
            if len(pending) == 2:
                (q_new, rows_new, new), (q_old, rows_old, old) = pending
                pending.clear()
                assert np.array_equal(rows_new, rows_old)
                if live["window"] is None:
                    return out  # outside the windows nothing is counted
                batches.append(rows_new)
                if len(batches) % 2:
                    return out  # the release's own batch: not what the count reads
                live["batches"].append((batches[-2], batches[-1]))
                step = live["step"]
                if name == "DPBarker":
                    bound = np.sqrt(step.batch_size) / (step.private_model.n_data * step.tempering)
                else:
                    bound = step.clip_bound * float(np.linalg.norm(q_new - q_old))
                add(clipped_count(new - old, bound))
            return out

        monkeypatch.setattr(PrivateModel, "loglik_rows", rows)
    return ref, live


@pytest.mark.parametrize("name", sorted(STEPS))
def test_the_released_count_is_the_numpy_count_at_the_same_states(name, monkeypatch):
    _exact_noise(monkeypatch)
    ref, live = _record_reference(monkeypatch, name, 3)
    with normal_model():
        step = STEPS[name](clip_diagnostics=3, **TIGHT.get(name, {}))
        live["step"] = step
        idata = pymc_dp.sample(step=step, draws=15, tune=5, random_seed=3, **RUN)
    table = clipped_fractions(idata)
    assert table["window"].tolist() == [0, 1, 2]
    assert table["iterations"].tolist() == [5, 5, 5]
    expected = [sum(c for w, c in ref if w == window) for window in range(3)]
    np.testing.assert_allclose(table["clipped"], expected, atol=1e-6)
    releases = [sum(1 for w, _ in ref if w == window) for window in range(3)]
    per_release = step.batch_size if name in ("DPBarker", "MinibatchDPPenalty") else N
    assert table["terms"].tolist() == [r * per_release for r in releases]
    assert sum(expected) > 0 or name == "DPBarker"  # (the counts are not all trivially 0)
    if name in ("DPBarker", "MinibatchDPPenalty"):
        # the count reads a batch of its own, never the one its release read (review: a
        # count of the release's secret batch would undo its amplification by subsampling)
        pairs = live["batches"]
        assert len(pairs) == sum(releases)
        assert not any(np.array_equal(np.sort(a), np.sort(b)) for a, b in pairs)


# ---------------------------------------------------------------------- the budget
@pytest.mark.parametrize("name", sorted(STEPS))
def test_the_budget_holds_and_the_trace_recomputes_the_reservation(name):
    with normal_model():
        step = STEPS[name](clip_diagnostics=3)
        plan = str(step.plan(draws=15, tune=5))
        idata = pymc_dp.sample(step=step, draws=15, tune=5, random_seed=5, **RUN)
    assert "clip diagnostics: 3, noise multiplier" in plan
    report = pymc_dp.privacy_report(idata)
    reserved = [r for r in step.guard.reservations()]
    events = [e for r in reserved for e in r["events"]]
    assert [e["count"] for e in events if e["name"] == "clip diagnostics"] == [3]
    assert any(e.name == "clip diagnostics" for e in report.ledger())
    assert "clip diagnostics" in str(report)
    assert idata.attrs["dp_epsilon"] <= step.epsilon * (1 + 1e-12)
    # ε from the trace alone (the step's own stats) is the ε the ledger reserved
    trace = pymc_dp.privacy_report(pymc_dp.release(idata))
    assert trace.epsilon == pytest.approx(idata.attrs["dp_epsilon"], rel=1e-9)
    last = {k: v.values[0, -1] for k, v in idata.sample_stats.data_vars.items()
            if k.startswith("dp_")}
    assert type(step).epsilon_from_stats(last) == pytest.approx(report.epsilon, rel=1e-9)


def test_the_diagnostics_cost_their_share_and_the_sampler_the_rest():
    with normal_model():
        off = STEPS["DPPenalty"]()
        on = STEPS["DPPenalty"](clip_diagnostics=pymc_dp.ClipDiagnostics(windows=4, share=0.1))
        p_off, p_on = off.plan(draws=100, tune=50), on.plan(draws=100, tune=50)
    mu = {e.name: e.mu for e in p_on.events}
    total = sum(e.mu for e in p_off.events)
    assert mu["clip diagnostics"] == pytest.approx(0.1 * total, rel=1e-9)
    assert mu["log-likelihood ratio"] == pytest.approx(0.9 * total, rel=1e-9)
    assert p_on.cost <= p_on.epsilon and p_on.cost == pytest.approx(p_off.cost, rel=1e-6)


# ---------------------------------------------------------------------- usefulness
@pytest.mark.parametrize("bound, low, high", [(0.01, 0.9, 1.1), (50.0, -0.1, 0.1)])
def test_the_fraction_says_how_much_was_clipped(bound, low, high):
    y = np.random.default_rng(2).normal(1.0, 1.0, size=2000)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=y)
        step = pymc_dp.DPPenalty(eps=50.0, clip_bound=bound, scaling=0.05, warmup=False,
                                 chains=1, clip_diagnostics=2)
        idata = pymc_dp.sample(step=step, draws=60, tune=20, random_seed=1, **RUN)
    table = clipped_fractions(idata)
    assert len(table) == 2
    assert ((table["fraction"] > low) & (table["fraction"] < high)).all(), table
    assert (table["fraction_sd"] < 0.05).all()
    # The released table survives pymc_dp.release
    assert clipped_fractions(pymc_dp.release(idata)).equals(table)


# ---------------------------------------------------------------------- reviewed cases
def test_minibatch_run_of_fewer_chains_than_the_step_was_made_for_fits(recwarn):
    # The calibration cached for the planned chains must not be reused with diagnostic
    # events sized for another number of chains (review M2): a step made for 4 chains, run
    # as 1 chain of the default length, plans within its budget and runs.
    y = np.random.default_rng(0).normal(1.0, 1.5, size=2000)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 3.0)
        sigma = pm.HalfNormal("sigma", 3.0)
        pm.Normal("y", mu, sigma, observed=y)
        step = pymc_dp.MinibatchDPPenalty(eps=30.0, batch_size=200, chains=4,
                                          clip_diagnostics=2)
        draws, tune = step.default_length(1)
        plan = step.plan(1, draws=draws, tune=tune)
        assert plan.cost <= step.epsilon * (1 + 1e-12)
        idata = pymc_dp.sample(step=step, chains=1, cores=1, random_seed=1, progressbar=False,
                               compute_convergence_checks=False)
    assert [r.get("kind", "chain") for r in step.guard.reservations()][-1] == "chain"
    assert idata.attrs["dp_epsilon"] <= step.epsilon * (1 + 1e-12)
    assert len(clipped_fractions(idata)) == 2


@pytest.mark.parametrize("eps", [2.0, 5.0, 10.0])
def test_dp_barker_default_length_leaves_room_for_the_diagnostics(eps):
    # (review LOW1: the default length was the budget's without the diagnostics' μ)
    with normal_model(n=2000):
        step = pymc_dp.DPBarker(eps=eps, method="mcmc", chains=4, clip_diagnostics=4)
        plan = step.plan()
    assert plan.cost <= eps * (1 + 1e-12)
    assert any(e.name == "clip diagnostics" for e in plan.events)


@pytest.mark.parametrize("name", ["MinibatchDPPenalty", "DPBarker"])
def test_a_subsampled_trace_without_the_diagnostics_mu_gives_no_cost(name):
    # The minibatch steps' diagnostic μ shows only in dp_clip_mu_chain (review LOW3): it is
    # a required privacy stat (0 when off), so a trace stripped of it is refused like one
    # stripped of any other, never reported at the sampler's cost alone.
    _, off = _sample(STEPS[name], draws=6, tune=2)
    assert (off.sample_stats["dp_clip_mu_chain"].values == 0).all()
    step, idata = _sample(STEPS[name], draws=6, tune=2,
                          clip_diagnostics=pymc_dp.ClipDiagnostics(windows=2, share=0.5))
    released = pymc_dp.release(idata)
    assert pymc_dp.privacy_report(released).epsilon == pytest.approx(
        idata.attrs["dp_epsilon"], rel=1e-9)
    stats = released["sample_stats"].to_dataset()
    for dropped in (["dp_clip_mu_chain"], [v for v in stats.data_vars if v.startswith("dp_clip")]):
        stripped = released.copy()
        stripped["sample_stats"] = stats.drop_vars(dropped)
        stripped.attrs = {}
        with pytest.raises(ValueError, match="no privacy information"):
            pymc_dp.privacy_report(stripped)
    last = {k: v.values[0, -1] for k, v in stats.data_vars.items() if k.startswith("dp_")}
    del last["dp_clip_mu_chain"]
    with pytest.raises(ValueError, match="dp_clip_mu_chain"):
        type(step).epsilon_from_stats(last)


# ---------------------------------------------------------------------- the noise added
def _released_minus_exact(monkeypatch, name, seed, chains=3, draws=40):
    """Run ``name`` with the real diagnostic noise, one window per draw, and return the
    released counts minus the NumPy counts at the states the chains visited (by chain and
    window), and the noise sd the plan paid for (z of the reserved event times T_w)."""
    ref, live = _record_reference(monkeypatch, name, draws)
    recorded_begin = clip_diagnostics.WindowedClipCounts.begin  # (the reference's)

    def begin(self, iteration):
        if iteration == 0:
            live["chain"] += 1
        recorded_begin(self, iteration)
        if live["window"] is not None:
            live["window"] = (live["chain"], live["window"])

    monkeypatch.setattr(clip_diagnostics.WindowedClipCounts, "begin", begin)
    live["chain"] = -1
    # (DP Barker: a budget for 3 chains of 45 iterations; its budget bounds them)
    extra = dict(eps=2000.0) if name == "DPBarker" else {}
    with normal_model(n=60):
        step = STEPS[name](chains=chains, clip_diagnostics=draws, **extra)
        live["step"] = step
        idata = pymc_dp.sample(step=step, draws=draws, tune=5, random_seed=seed,
                               **{**RUN, "chains": chains})
    monkeypatch.undo()
    table = clipped_fractions(idata)
    assert len(table) == chains * draws
    exact = np.zeros((chains, draws))
    for (chain, window), count in ref:
        exact[chain, window] += count
    released = table.pivot(index="chain", columns="window", values="clipped").to_numpy()
    (z,) = {e["noise_multiplier"] for r in step.guard.reservations() for e in r["events"]
            if e["name"] == "clip diagnostics"}
    per_window = step.n_steps if name == "DPHMC" else 1  # T_w: one iteration per window
    return released - exact, z * per_window, table


@pytest.mark.parametrize("name", ["DPPenalty", "MinibatchDPPenalty", "DPBarker", "DPHMC"])
def test_the_released_counts_carry_the_noise_the_plan_paid_for(name, monkeypatch):
    # The step's own noise, not the kernel's in isolation (review M1): released − exact
    # over 2 seeds × 3 chains × 40 windows = 240 residuals has variance (z·T_w)² (χ²_240/240
    # lies in [0.7, 1.4] but with probability ~1e-4; z·0.7 gives 0.49, z/2 0.25, an exact
    # count 0), the residuals are all different (fresh noise for every window, chain and
    # seed), and the same seed releases the same table.
    first, sd, table = _released_minus_exact(monkeypatch, name, seed=11)
    again, sd_again, table_again = _released_minus_exact(monkeypatch, name, seed=11)
    other, _, _ = _released_minus_exact(monkeypatch, name, seed=12)
    assert sd == sd_again
    np.testing.assert_array_equal(table_again.to_numpy(), table.to_numpy())
    np.testing.assert_array_equal(again, first)
    residuals = np.concatenate([first.ravel(), other.ravel()]) / sd
    ratio = float(np.mean(residuals**2))
    assert 0.7 < ratio < 1.4, ratio
    assert abs(float(np.mean(residuals))) < 4 / np.sqrt(residuals.size)
    assert len(np.unique(np.round(residuals, 9))) == residuals.size  # no noise reused
    assert not np.allclose(first, other)
