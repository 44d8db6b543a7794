"""Release functions: noise of the documented scale, recorded cost, clear errors."""

import doctest

import numpy as np
import pytest

from scipy import stats

import pymc_dp
import pymc_dp.mechanisms.likelihood
import pymc_dp.mechanisms.release
import pymc_dp.mechanisms.routes
import pymc_dp.mechanisms.statistics

from pymc_dp.accounting.events import GaussianEvent, LaplaceEvent, PureDPEvent
from pymc_dp.accounting.gaussian import gaussian_epsilon, noise_multiplier_for
from pymc_dp.mechanisms import (
    clamp,
    gaussian_release,
    infection_curve_release,
    laplace_release,
    ledger_of,
    linear_regression_records,
    linear_regression_release,
    linear_regression_sensitivity,
    unpack_linear_regression,
)

M = 40_000  # noise draws per statistical test: the scale is estimated to about 1%


# ---- noise of the documented scale -----------------------------------------------------


def test_laplace_noise_has_scale_sensitivity_over_epsilon():
    value = np.linspace(-5, 5, M)
    rel = laplace_release(value, sensitivity=3.0, epsilon=1.5, rng=1)
    noise = rel.value - value
    assert rel.noise_scale == 2.0
    # Mean absolute deviation of Lap(b) is b; its sd is b, so the estimate has sd b/√M.
    assert abs(np.mean(np.abs(noise)) / 2.0 - 1.0) < 0.02
    assert abs(np.mean(noise)) < 4 * np.sqrt(2) * 2.0 / np.sqrt(M)
    assert stats.kstest(noise, stats.laplace(scale=2.0).cdf).pvalue > 1e-3
    # The same test rejects a scale off by a factor of 2 in either direction.
    assert stats.kstest(noise, stats.laplace(scale=4.0).cdf).pvalue < 1e-10
    assert stats.kstest(noise, stats.laplace(scale=1.0).cdf).pvalue < 1e-10


def test_gaussian_noise_has_sd_sigma_and_calibration_is_exact():
    rel = gaussian_release(np.zeros(M), sensitivity=0.5, sigma=1.5, rng=2)
    assert abs(np.std(rel.value) / 1.5 - 1.0) < 0.02
    assert stats.kstest(rel.value, stats.norm(scale=1.5).cdf).pvalue > 1e-3
    assert stats.kstest(rel.value, stats.norm(scale=3.0).cdf).pvalue < 1e-10
    # (ε, δ) calibration: the smallest σ for which one release is (ε, δ)-DP.
    rel = gaussian_release(np.zeros(M), sensitivity=0.5, epsilon=1.0, delta=1e-5, rng=3)
    z = noise_multiplier_for(1.0, 1e-5, 1)
    assert rel.noise_scale == pytest.approx(0.5 * z)
    assert abs(np.std(rel.value) / rel.noise_scale - 1.0) < 0.02
    assert gaussian_epsilon(rel.event.mu, 1e-5) <= 1.0
    rel = gaussian_release(1.0, sensitivity=2.0, noise_multiplier=3.0, rng=0)
    assert rel.noise_scale == 6.0


def test_infection_curve_counts_are_binomial_with_documented_probability():
    infected = np.array([0, 250, 1000])
    population, n_trials, m = 1000, 200, 50.0
    draws = np.array([
        infection_curve_release(
            infected, population=population, n_trials=n_trials, m=m, rng=s
        ).value
        for s in range(3000)
    ])
    p = (infected + m) / (population + 2 * m)
    assert np.allclose(draws.mean(0), n_trials * p, atol=4 * np.sqrt(n_trials * 0.25 / 3000))
    assert np.allclose(draws.var(0) / (n_trials * p * (1 - p)), 1.0, atol=0.1)


# ---- recorded cost --------------------------------------------------------------------


def test_releases_record_their_cost_and_compose_in_a_ledger():
    lap = laplace_release([1.0, 2.0], sensitivity=2.0, epsilon=0.5, rng=0, name="mean")
    gau = gaussian_release(3.0, sensitivity=1.0, sigma=4.0, rng=0, name="total")
    sir = infection_curve_release([3, 50], population=100, n_trials=10, m=20, rng=0, name="sir")
    assert lap.event == LaplaceEvent(name="mean", epsilon=0.5, sensitivity=2.0)
    assert gau.event == GaussianEvent(name="total", noise_multiplier=4.0, sensitivity=1.0)
    assert isinstance(sir.event, PureDPEvent) and sir.event.epsilon == 10 * 2 / 20
    ledger = ledger_of({"a": lap, "b": sir})
    assert ledger.epsilon(0.0) == pytest.approx(0.5 + 1.0)
    ledger = ledger_of([lap, gau])
    assert ledger.epsilon(1e-6) == pytest.approx(0.5 + gaussian_epsilon(1 / 32, 1e-6))
    assert ledger_of(lap).epsilon(0.0) == 0.5
    report = pymc_dp.privacy_report(ledger_of([lap, sir]), delta=0.0)
    assert report.epsilon == pytest.approx(1.5) and "infection-curve" in str(report)


def test_infection_curve_epsilon_and_m_are_two_views_of_one_parameter():
    # The paper's setting: n_s = m = 1000, L = 10 gives ε = 10 (Prop 4).
    rel = infection_curve_release(np.arange(10), population=1000, n_trials=1000, m=1000, rng=0)
    assert rel.epsilon == 10.0
    rel = infection_curve_release(np.arange(10), population=1000, n_trials=1000, epsilon=0.1, rng=0)
    assert rel.m == pytest.approx(1e5)


def test_release_is_frozen_and_serialisable():
    rel = laplace_release([1.0, 2.0], sensitivity=1.0, epsilon=1.0, rng=0)
    with pytest.raises(ValueError):
        rel.value[0] = 0.0
    with pytest.raises(AttributeError):
        rel.epsilon = 2.0
    d = rel.to_dict()
    assert d["kind"] == "laplace" and d["noise_scale"] == 1.0 and len(d["value"]) == 2


# ---- clamping and statistics with known sensitivity ------------------------------------


def test_clamp_clips_or_refuses_out_of_bounds_data_without_echoing_it():
    assert np.array_equal(clamp([-3.0, 0.5, 12.0], lower=-1, upper=1), [-1.0, 0.5, 1.0])
    secret = 123.456789
    with pytest.raises(ValueError, match="outside the declared bounds") as err:
        clamp([0.1, secret], lower=0, upper=1, clip=False)
    assert "123" not in str(err.value)
    with pytest.raises(ValueError, match="required"):
        clamp([0.1], lower=None, upper=1)
    with pytest.raises(ValueError, match="smaller"):
        clamp([0.1], lower=1, upper=1)
    with pytest.raises(ValueError, match="NaN"):
        clamp([np.nan], lower=0, upper=1)


def test_regression_statistics_bad_bounds_and_outside_data():
    x, y = np.zeros((3, 2)), np.array([0.0, 15.0, 1.0])
    with pytest.raises(TypeError):
        linear_regression_records(x, y, y_bounds=(-10, 10))  # x_bounds missing
    with pytest.raises(ValueError, match="x_bounds are required"):
        linear_regression_records(x, y, x_bounds=None, y_bounds=(-10, 10))
    with pytest.raises(ValueError, match="outside the declared bounds") as err:
        linear_regression_release(x, y, x_bounds=(-10, 10), y_bounds=(-10, 10), epsilon=1.0,
                                  rng=0, clip=False)
    assert "15" not in str(err.value)


def test_regression_sensitivity_bounds_the_l1_change_of_one_record():
    rng = np.random.default_rng(0)
    for p in (1, 2, 3):
        a = rng.uniform(-1, 1, size=(20_000, p + 1))
        b = rng.uniform(-1, 1, size=(20_000, p + 1))
        # Include the vertices of the box, where the change is largest.
        a[:1000] = np.sign(a[:1000])
        b[:1000] = np.sign(b[:1000])
        ta = linear_regression_records(a[:, :p], a[:, p], x_bounds=(-1, 1), y_bounds=(-1, 1))
        tb = linear_regression_records(b[:, :p], b[:, p], x_bounds=(-1, 1), y_bounds=(-1, 1))
        assert ta.shape[1] == (p + 1) + 1 + (p + 1) * (p + 2) // 2 - 1
        assert np.abs(ta - tb).sum(axis=1).max() <= linear_regression_sensitivity(p)


def test_regression_statistics_are_the_same_code_for_data_and_model():
    import pytensor
    import pytensor.tensor as pt

    rng = np.random.default_rng(1)
    x, y = rng.normal(0, 8, size=(50, 2)), rng.normal(0, 8, size=50)
    rows = linear_regression_records(x, y, x_bounds=(-10, 10), y_bounds=(-10, 10))
    xs, ys = pt.tensor("x", shape=(None, 2)), pt.dvector("y")
    sym = linear_regression_records(xs, ys, x_bounds=(-10, 10), y_bounds=(-10, 10))
    fn = pytensor.function([xs, ys], sym, mode="FAST_COMPILE")
    assert np.allclose(fn(x, y), rows)
    # Rows are the paper's s~_vec entries; unpacking gives the rescaled X'y/n, y'y/n, X'X/n.
    xt, yt = np.clip(x, -10, 10) / 10, np.clip(y, -10, 10) / 10
    design = np.column_stack([np.ones(50), xt])
    xty, yty, xtx = unpack_linear_regression(rows.mean(0), 2)
    assert np.allclose(xty, design.T @ yt / 50)
    assert np.isclose(yty, yt @ yt / 50)
    assert np.allclose(xtx, design.T @ design / 50)
    rel = linear_regression_release(x, y, x_bounds=(-10, 10), y_bounds=(-10, 10), epsilon=1.0,
                                    rng=0)
    assert rel.sensitivity == pytest.approx(13 / 50) and rel.epsilon == 1.0


# ---- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, -1.0, np.inf, np.nan, None, "1"])
def test_release_refuses_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        laplace_release(1.0, sensitivity=1.0, epsilon=eps, rng=0)


def test_release_refuses_bad_inputs_without_echoing_data():
    with pytest.raises(ValueError, match="sensitivity"):
        laplace_release(1.0, sensitivity=0.0, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="rng is required"):
        laplace_release(1.0, sensitivity=1.0, epsilon=1.0, rng=None)
    with pytest.raises(ValueError, match="NaN or infinite") as err:
        laplace_release([98.7654, np.inf], sensitivity=1.0, epsilon=1.0, rng=0)
    assert "98.7" not in str(err.value)
    with pytest.raises(ValueError, match="exactly one"):
        gaussian_release(1.0, sensitivity=1.0, sigma=1.0, epsilon=1.0, delta=1e-5, rng=0)
    with pytest.raises(ValueError, match="delta"):
        gaussian_release(1.0, sensitivity=1.0, epsilon=1.0, delta=0.0, rng=0)
    with pytest.raises(ValueError, match=r"not integers in \[0, population\]") as err:
        infection_curve_release([5, 4321], population=1000, n_trials=10, m=10, rng=0)
    assert "4321" not in str(err.value)
    with pytest.raises(ValueError, match="exactly one of m or epsilon"):
        infection_curve_release([5], population=1000, n_trials=10, rng=0)
    with pytest.raises(ValueError, match="epsilon"):
        infection_curve_release([5], population=1000, n_trials=10, epsilon=0, rng=0)


@pytest.mark.parametrize(
    "module",
    [pymc_dp.mechanisms.release, pymc_dp.mechanisms.likelihood, pymc_dp.mechanisms.statistics,
     pymc_dp.mechanisms.routes],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


# ---- issue 12: nothing computed from the data in messages; noise rounding cannot erase -

SECRET = "Alice-4821"
RELEASES = {
    "clamp": lambda data: clamp(data, lower=0, upper=1),
    "clamp_checked": lambda data: clamp(data, lower=0, upper=1, clip=False),
    "laplace": lambda data: laplace_release(data, sensitivity=1.0, epsilon=1.0, rng=0),
    "gaussian": lambda data: gaussian_release(data, sensitivity=1.0, sigma=1.0, rng=0),
    "infection_curve": lambda data: infection_curve_release(
        data, population=10_000, n_trials=10, m=10, rng=0
    ),
    "regression": lambda data: linear_regression_records(
        np.array([[0.0, 1.0], [1.0, 0.0]]), data, x_bounds=(-1, 1), y_bounds=(-1, 1)
    ),
}
ENTRIES = {  # data with an entry that is no number; the message may name its type only
    "string": [0.5, SECRET],
    "bytes": np.array([SECRET.encode()]),
    "object": [0.5, {"name": SECRET}],
    "ragged": [[0.5], [0.25, SECRET]],
    "complex": np.array([0.5, 4821j]),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_entries_that_are_not_numbers_are_refused_by_type_never_echoed(release, entry):
    with pytest.raises(ValueError, match="must be an array of real numbers") as err:
        RELEASES[release](ENTRIES[entry])
    shown = str(err.value) + repr(err.value.__context__) + repr(err.value.__cause__)
    for piece in ("Alice", "4821", "shape", "(2,)"):
        assert piece not in shown


def test_counts_of_values_out_of_range_are_not_disclosed():
    with pytest.raises(ValueError) as err:
        clamp([0.1, 5.0, 7.0, 0.2], lower=0, upper=1, clip=False)
    assert not any(ch.isdigit() for ch in str(err.value))
    with pytest.raises(ValueError) as err:
        infection_curve_release([5, 1.5, 4000], population=1000, n_trials=10, m=10, rng=0)
    assert "2 of 3" not in str(err.value) and "2" not in str(err.value)


@pytest.mark.parametrize(
    "release, match",
    [
        # σ below the spacing of the statistic: value + noise == value (issue 12, item 9)
        (lambda v: gaussian_release(v, sensitivity=1.0, sigma=1e-300, rng=0), "rounding"),
        (lambda v: gaussian_release(v, sensitivity=1.0, noise_multiplier=1e-200, rng=0), "rounding"),
        # a declared bound sets the scale: σ = 1e-12 vanishes at 1e6
        (lambda v: gaussian_release(v, sensitivity=1.0, sigma=1e-12, bound=1e6, rng=0), "rounding"),
        (lambda v: laplace_release(v, sensitivity=1.0, epsilon=1e12, rng=0), "rounding"),
        # ε so small that Δ/ε overflows: the release was inf
        (lambda v: laplace_release(v, sensitivity=1e300, epsilon=1e-10, rng=0), "too large"),
        (lambda v: laplace_release(v, sensitivity=1.0, epsilon=1e-300, rng=0), "epsilon"),
        (lambda v: gaussian_release(v, sensitivity=1.0, epsilon=1e-300, delta=1e-5, rng=0), "epsilon"),
        (lambda v: gaussian_release(v, sensitivity=True, sigma=1.0, rng=0), "sensitivity"),
        (lambda v: laplace_release(v, sensitivity=1.0, epsilon=1.0, bound=True, rng=0), "bound"),
    ],
)
def test_releases_refuse_noise_that_rounding_erases_or_that_overflows(monkeypatch, release, match):
    import pymc_dp.mechanisms.release as module

    def must_not_read(*args, **kwargs):
        raise AssertionError("the statistic was read before the noise was checked")

    monkeypatch.setattr(module, "_as_statistic", must_not_read)
    with pytest.raises(ValueError, match=match) as err:
        release(np.array([0.5, 1.25]))
    assert "1.25" not in str(err.value)


def test_a_declared_bound_clamps_the_statistic_and_keeps_the_noise():
    rel = gaussian_release([5.0, -0.5], sensitivity=1.0, sigma=1e-3, bound=1.0, rng=0)
    assert np.all(np.abs(rel.value - [1.0, -0.5]) < 0.01)
    assert rel.noise_scale == 1e-3


@pytest.mark.parametrize("release", ["laplace", "gaussian"])
def test_a_statistic_that_rounding_would_release_exactly_is_refused(release):
    # An outside review released 2**60 with sensitivity 1 and got the exact value back
    # 1000 times out of 1000: the noise was below the spacing of the doubles there.
    kwargs = dict(sensitivity=1.0, rng=np.random.default_rng(0))
    fn = laplace_release if release == "laplace" else gaussian_release
    kwargs.update(epsilon=1.0) if release == "laplace" else kwargs.update(sigma=1.0)
    with pytest.raises(ValueError, match="2\\*\\*32 noise scales") as err:
        fn(np.array([2.0**60, 1.0]), **kwargs)
    assert "1152921504606846976" not in str(err.value) and "1.15" not in str(err.value)
    # a statistic within range, or declared with its bound, is released as before
    assert fn(np.array([1e6, 1.0]), **kwargs).value.shape == (2,)
