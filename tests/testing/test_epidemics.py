"""The papers' epidemic simulators (pymc_dp.testing.epidemics), and that the SIR example
releases its curve through the library's infection-curve mechanism with the paper's
parameters."""

import importlib.util

from pathlib import Path

import numpy as np
import pytest

from scipy.stats import binom

from pymc_dp.mechanisms import ledger_of
from pymc_dp.mechanisms.likelihood import mechanism_sample
from pymc_dp.testing.epidemics import (
    SIR_RECORD_DAYS,
    TB_SUMMARY_NAMES,
    simulate_sir,
    simulate_tb,
    sir_ode,
    tb_distance,
    tb_rates,
    tb_summaries,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- SIR ------------------------------------------------------------------------------


def test_sir_is_vectorised_and_reproducible():
    kw = dict(population=500, days=20, steps_per_day=4)
    a = simulate_sir(np.random.default_rng(3), [0.5, 0.9, 1.2], 0.1, size=(2, 3), **kw)
    b = simulate_sir(np.random.default_rng(3), [0.5, 0.9, 1.2], 0.1, size=(2, 3), **kw)
    c = simulate_sir(np.random.default_rng(4), [0.5, 0.9, 1.2], 0.1, size=(2, 3), **kw)
    assert a.shape == (2, 3, 21) and a.dtype == np.int64
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.all(a[..., 0] == 1) and np.all((a >= 0) & (a <= 500))
    # epidemics differ from one another (independent draws, not one copied)
    assert len({tuple(row) for row in a.reshape(6, -1)}) > 1
    # parameters broadcast: shape from beta and gamma when size is None
    assert simulate_sir(np.random.default_rng(0), [0.5, 0.6], [[0.1], [0.2]], **kw).shape == (
        2, 2, 21)


def test_sir_record_days_and_adaptive_steps():
    """Recording chosen days returns those columns of the daily curve (same draws: the same
    steps are taken); adaptive steps follow the ODE as fixed ones do."""
    kw = dict(population=10_000, days=40, steps_per_day=4, size=5)
    daily = simulate_sir(np.random.default_rng(8), 0.7, 0.1, **kw)
    some = simulate_sir(np.random.default_rng(8), 0.7, 0.1, record_days=[0, 17, 34], **kw)
    assert np.array_equal(some, daily[:, [0, 17, 34]])
    k, i0 = 1_000_000, 1000
    beta, gamma = np.exp(-0.5), np.exp(-3.0)
    curves = simulate_sir(np.random.default_rng(9), beta, gamma, population=k, days=153,
                          initial_infected=i0, max_step=0.25, record_days=SIR_RECORD_DAYS,
                          size=20)
    ode = sir_ode(beta, gamma, population=k, days=153, initial_infected=i0)[SIR_RECORD_DAYS]
    assert np.allclose(curves.mean(axis=0), ode, rtol=0.03, atol=0.005 * k)
    with pytest.raises(ValueError, match="increasing"):
        simulate_sir(np.random.default_rng(0), 0.5, 0.1, population=10, record_days=[3, 1])


def test_sir_without_infection_or_recovery():
    rng = np.random.default_rng(0)
    still = simulate_sir(rng, 0.0, 0.0, population=100, days=5, initial_infected=7, size=3)
    assert np.all(still == 7)
    # no recovery: everyone ends up infected; no infection: the count only falls
    assert np.all(simulate_sir(rng, 3.0, 0.0, population=50, days=40, size=4)[:, -1] == 50)
    falling = simulate_sir(rng, 0.0, 0.3, population=50, days=30, initial_infected=50, size=4)
    assert np.all(np.diff(falling, axis=1) <= 0)


@pytest.mark.parametrize("beta, gamma", [(np.exp(-0.5), np.exp(-3.0)), (0.4, 0.125)])
def test_sir_mean_follows_the_ode_in_a_large_population(beta, gamma):
    """K = 10⁶ from 1000 infected: the law of large numbers makes the chain binomial follow
    the ODE; at 5 steps a day the midpoint rule keeps the mean within 3 % of it while the
    curve rises at 0.56 a day, and within 0.5 % of K throughout."""
    k, i0 = 1_000_000, 1000
    curves = simulate_sir(np.random.default_rng(1), beta, gamma, population=k, days=160,
                          initial_infected=i0, steps_per_day=5, size=20)
    ode = sir_ode(beta, gamma, population=k, initial_infected=i0)
    mean = curves.mean(axis=0)
    big = ode > 0.01 * k
    assert np.max(np.abs(mean[big] / ode[big] - 1)) < 0.03
    assert np.max(np.abs(mean - ode)) / k < 0.005


def test_sir_early_phase_is_stochastic():
    """From one infected person, some epidemics die out (probability about 1/R0) and the
    others take off at random times: what the deterministic ODE leaves out."""
    curves = simulate_sir(np.random.default_rng(2), np.exp(-0.5), np.exp(-3.0),
                          population=100_000, days=25, steps_per_day=5, size=400)
    extinct = np.mean(curves[:, -1] == 0)
    assert 0.03 < extinct < 0.2                  # 1/R0 = 0.08
    alive = curves[curves[:, -1] > 0, 17]
    assert np.std(np.log(alive)) > 0.3           # timing spread of the take-off


def test_sir_example_releases_with_the_paper_mechanism():
    """The example's release is the library's infection-curve mechanism with the paper's
    n = m = 1000, L = 10, K = 10⁶ (ε = nL/m = 10), for the published curve and for one made
    here, and the SMC simulator applies that same mechanism. The exact privacy loss of
    these parameters — the largest log ratio of the release's probabilities when one
    person's status changes one count by 1 at every time point — is computed by brute force:
    it is ε up to ln(1 + 1/m)·m rounding, so a release with twice the noise scale (m twice
    too large) or half of it would fail."""
    ex = _example("sir_privatized")
    for rel in (ex.paper_release(), ex.own_release(0, {"max_step": 0.25})):
        assert rel.kind == "infection_curve"
        assert (rel.n_trials, rel.m, rel.population, rel.value.size) == (1000, 1000, 1e6, 10)
        assert rel.epsilon == 10.0 and ledger_of(rel).epsilon(0.0) == 10.0
        spec = ex.make_spec(rel, {"max_step": 0.25})
        assert spec.releases["infection_curve"] is rel
    assert np.array_equal(ex.paper_release().value, [1, 31, 614, 263, 123, 47, 18, 9, 5, 3])
    # exact privacy loss at one time point, over the counts I and neighbours I + 1
    rel = ex.paper_release()
    n, m, k = rel.n_trials, rel.m, rel.population
    infected = np.concatenate([np.arange(0, 50), np.linspace(50, k - 1, 200).round()])
    s = np.arange(n + 1)[:, None]
    p0, p1 = (infected + m) / (k + 2 * m), (infected + 1 + m) / (k + 2 * m)
    loss = np.max(np.abs(binom.logpmf(s, n, p0) - binom.logpmf(s, n, p1)))
    total = rel.value.size * loss                # independent points compose
    assert total <= rel.epsilon
    assert total > 0.99 * rel.epsilon            # the bound is tight: no slack to hide 2x
    # the simulator inside SMC-ABC draws from that mechanism: mean n (I + m) / (K + 2m)
    draws = mechanism_sample(rel, np.tile([0.0, 600_000.0], (20_000, 1)),
                             np.random.default_rng(0))
    expect = n * (np.array([0.0, 600_000.0]) + m) / (k + 2 * m)
    assert np.allclose(draws.mean(axis=0), expect, rtol=0.02)
    assert np.allclose(draws.var(axis=0), expect * (1 - expect / n), rtol=0.05)


def test_sir_record_days_are_the_authors():
    assert SIR_RECORD_DAYS.tolist() == [0, 17, 34, 51, 68, 85, 102, 119, 136, 153]


# ---- tuberculosis birth–death model ---------------------------------------------------


def test_tb_rates_follow_lintusaari():
    a2, d2, a1, d1 = tb_rates(5.88, 6.74, 0.09)
    assert d2 == 5.95 and a2 == pytest.approx(0.09 * 5.95)
    assert d1 == pytest.approx(6.74 / 4.88) and a1 - d1 == pytest.approx(6.74)
    assert a1 / d1 == pytest.approx(5.88)


def test_tb_simulator_shapes_seeds_and_counts():
    kw = dict(size=3, min_warmup=3.0)
    a = simulate_tb(np.random.default_rng(5), 192, 5.88, 6.74, 0.09, **kw)
    b = simulate_tb(np.random.default_rng(5), 192, 5.88, 6.74, 0.09, **kw)
    c = simulate_tb(np.random.default_rng(6), 192, 5.88, 6.74, 0.09, **kw)
    assert np.array_equal(a["clusters"], b["clusters"]) and not np.array_equal(
        a["clusters"], c["clusters"])
    assert not a["overflow"].any() and np.all(a["warmup"] >= 3.0)
    for r in range(3):
        n = a["n_obs"][r]
        assert np.all(a["clusters"][r, :n] >= 0) and np.all(a["clusters"][r, n:] == -1)
        t = a["times"][r, :n]
        assert np.all((t >= 0) & (t < 2.0)) and np.all(np.diff(t) >= 0)
    s = tb_summaries(a)
    assert s.shape == (3, len(TB_SUMMARY_NAMES))
    assert np.array_equal(s[:, 0], a["n_obs"])
    assert np.all(s[:, 1] <= s[:, 0]) and np.all(s[:, 2] >= 1)
    assert np.all(s[:, 4] + 2 * s[:, 5] <= 1) and np.all(s[:, 7] <= s[:, 6])
    assert np.all(s[:, 6] <= 24)


def test_tb_observed_mean_matches_the_balance_rate():
    """At balance, hosts die at n_c d2 + n_nc d1 a year, 80 % observed: Lintusaari et al.'s
    analytical mean, about 247 a year at their SF estimates (the SF data: 473 in 2 years)."""
    out = simulate_tb(np.random.default_rng(7), 192, 5.88, 6.74, 0.09, size=16)
    a2, d2, a1, d1 = tb_rates(5.88, 6.74, 0.09)
    q = 0.05
    n_nc = 192 * d2 * q / (d2 * d1 - a2 * d1 * 0.95 - a1 * d2 * q)
    n_c = (n_nc * (d1 - a1 * q) - 192 * q) / (a2 * q)
    expected = 2 * 0.8 * (n_c * d2 + n_nc * d1)
    assert out["n_obs"].mean() == pytest.approx(expected, rel=0.1)
    # clusters: many singletons, a few large ones (the non-compliant grow theirs)
    s = tb_summaries(out)
    assert 0.3 < np.median(s[:, 4]) < 0.9 and np.median(s[:, 2]) >= 5


def test_tb_distance_weights():
    o = np.array([[400, 300, 20, 3.0, 0.5, 0.05, 10, 8]])
    assert tb_distance(o, o)[0] == 0
    for col, weight in [(0, 1), (1, 1), (2, 2), (3, 10), (6, 10), (7, 10)]:
        s = o.copy()
        s[0, col] += 1
        assert tb_distance(o, s)[0] == pytest.approx(weight)
    s = o.copy()
    s[0, 4] = 0.55                               # 10 % relative error, weight 100
    assert tb_distance(o, s)[0] == pytest.approx(10.0)
    zero = o.copy()
    zero[0, 5] = 0.0
    assert np.isnan(tb_distance(zero, o)[0])


def test_tb_example_prior_and_distance_sensitivity():
    """The example's prior keeps the authors' constraints, and its averaged clipped distance
    moves by at most C/n when one private outbreak (one row) is replaced: the sensitivity it
    declares to ABCDP."""
    ex = _example("abcdp_tuberculosis")
    draws = ex.joint_prior(np.random.default_rng(0), size=500)
    assert draws.shape == (500, 4)
    assert np.all(ex._constrained(*draws.T))
    assert np.all((draws[:, 0] > 1.01) & (draws[:, 0] < 20) & (draws[:, 1] < 30))
    rng = np.random.default_rng(1)
    n = 6
    base = np.abs(rng.normal([400, 300, 20, 3, 0.5, 0.05, 10, 8], [50, 40, 8, 2, 0.1, 0.02, 5, 4],
                             size=(n, 8)))
    sim = np.abs(base + rng.normal(0, [30, 20, 5, 1, 0.05, 0.01, 3, 3], size=(n, 8)))
    d0 = ex.averaged_clipped_distance(base, sim)
    worst = 0.0
    for _ in range(200):
        other = base.copy()
        other[rng.integers(n)] = rng.choice([0.0, 1e6, np.nan]) * np.ones(8) if rng.random() < 0.3 \
            else np.abs(rng.normal(300, 300, size=8))
        worst = max(worst, abs(ex.averaged_clipped_distance(other, sim) - d0))
    assert worst <= ex.CLIP / n + 1e-12
    assert worst > 0.5 * ex.CLIP / n
