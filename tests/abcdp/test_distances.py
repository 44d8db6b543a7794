"""Distances of known sensitivity for ABCDP: values, sensitivity on neighbouring datasets,
equal set sizes, bandwidth from simulated data only, declared-sensitivity wrapper."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

from pymc_dp.abcdp.distances import (
    MMD,
    BoundDistance,
    ClippedDistance,
    Distance,
    RandomFeatureMMD,
    median_heuristic,
    mmd_gaussian,
)


def _rho(distance, x, y):
    return float(distance.bind(x)([distance.summarize(y)])[0])


def _naive_mmd(x, y, length):
    x = x.reshape(len(x), -1)
    y = y.reshape(len(y), -1)

    def k(a, b):
        sq = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-sq / (2 * length * length))

    return math.sqrt(max(k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean(), 0.0))


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("dim", [1, 3])
def test_exact_mmd_matches_kernel_formula(dim):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, dim)).squeeze()
    y = rng.normal(0.5, 1.2, size=(40, dim)).squeeze()
    assert mmd_gaussian(x, y, 0.8) == pytest.approx(_naive_mmd(x, y, 0.8), rel=1e-12)
    assert _rho(MMD(bandwidth=0.8), x, y) == pytest.approx(_naive_mmd(x, y, 0.8), rel=1e-12)


def test_random_features_approximate_the_exact_mmd():
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    y = rng.normal(0.7, 1.0, size=300)
    exact = mmd_gaussian(x, y, 1.0)
    rff = RandomFeatureMMD(bandwidth=1.0, n_features=4000).fit([y], rng)
    assert _rho(rff, x, y) == pytest.approx(exact, abs=0.02)
    assert _rho(rff, x, x) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_random_feature_map_has_norm_one(precision):
    rng = np.random.default_rng(2)
    rff = RandomFeatureMMD(bandwidth=0.1, n_features=64, precision=precision).fit(
        [rng.normal(size=(10, 2))], rng
    )
    rows = np.concatenate([rng.normal(size=(2000, 2)), rng.normal(0, 1e3, size=(2000, 2))])
    norms = np.linalg.norm(rff.feature_map(rows), axis=1)
    # the float allowance in the declared sensitivity (1e-5 for float32) has 10× headroom
    assert np.max(np.abs(norms - 1.0)) < (1e-6 if precision == "float32" else 1e-12)



@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("value", [1e36, 1e300, -1e308])
def test_random_features_of_overflowing_rows_keep_norm_one(precision, value):
    # A phase ω·x that overflows counts as 0, so every row still maps to a unit vector: one
    # huge row moves the distance by at most Δ = 2/N (before: NaN features, a distance NaN for
    # every simulation, i.e. one row decided whether anything could be accepted).
    rng = np.random.default_rng(6)
    n = 30
    rff = RandomFeatureMMD(bandwidth=1e-3, n_features=16, precision=precision).fit(
        [rng.normal(size=n)], rng
    )
    x = rng.normal(size=n)
    x2 = x.copy()
    x2[0] = value
    norms = np.linalg.norm(rff.feature_map(x2), axis=1)
    assert np.all(np.abs(norms - 1.0) < 1e-6)
    y = rng.normal(size=n)
    rho, rho2 = _rho(rff, x, y), _rho(rff, x2, y)
    assert math.isfinite(rho2)
    assert abs(rho - rho2) <= rff.sensitivity(n)


def test_distances_declare_the_range_they_compute_in():
    assert RandomFeatureMMD().max_abs_value == 1e30
    assert RandomFeatureMMD(precision="float64").max_abs_value == 1e150
    assert MMD().max_abs_value == 1e150
    assert ClippedDistance(lambda a, b: 0.0, clip=1.0, sensitivity=1.0).max_abs_value == 1e150


# ---------------------------------------------------------------- sensitivity
def _neighbours(rng, n, dim, spread):
    x = rng.normal(size=(n, dim))
    x2 = x.copy()
    x2[rng.integers(n)] = rng.normal(0, spread, size=dim)
    return x, x2


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: MMD(bandwidth=float(rng.uniform(0.2, 3))),
        lambda rng: RandomFeatureMMD(bandwidth=float(rng.uniform(0.2, 3)), n_features=20),
    ],
    ids=["exact", "random_features"],
)
def test_sensitivity_holds_on_random_neighbours(make):
    rng = np.random.default_rng(3)
    n, worst = 12, 0.0
    for _ in range(300):
        dist = make(rng).fit([rng.normal(size=(n, 2))], rng)
        x, x2 = _neighbours(rng, n, 2, spread=float(rng.choice([0.5, 3.0, 30.0])))
        y = rng.normal(rng.normal(), rng.uniform(0.2, 2), size=(n, 2))
        if rng.random() < 0.3:
            y = x.copy()  # simulated data equal to the private data: the aligned case
        gap = abs(_rho(dist, x, y) - _rho(dist, x2, y))
        worst = max(worst, gap / (2.0 / n))
        assert gap <= dist.sensitivity(n)
    assert worst > 0.3  # the random search reaches a sizeable part of Δ


def test_exact_mmd_sensitivity_is_reached_up_to_sqrt2():
    # Adversarial neighbour: Y = Y*, and the replaced row far away. Then
    # |ρ(Y*, Y) − ρ(Y*', Y)| = ‖φ(x) − φ(x')‖/N = √(2 − 2k(x, x'))/N → √2/N: for the
    # non-negative Gaussian kernel Lemma 4.1's Δ = 2/N is conservative by exactly √2.
    rng = np.random.default_rng(4)
    n = 50
    x = rng.normal(size=n)
    x2 = x.copy()
    x2[0] = 1e3
    dist = MMD(bandwidth=1.0)
    gap = abs(_rho(dist, x, x) - _rho(dist, x2, x))
    assert gap == pytest.approx(math.sqrt(2) / n, rel=1e-9)
    assert gap <= dist.sensitivity(n)


def test_random_feature_sensitivity_is_reached():
    # With one frequency ω, moving a row by π/ω flips its feature vector: ‖φ(x) − φ(x')‖ = 2,
    # so the gap reaches Δ = 2/N — the bound cannot be lowered for random features.
    rng = np.random.default_rng(5)
    n = 50
    rff = RandomFeatureMMD(bandwidth=1.0, n_features=1, precision="float64").fit(
        [rng.normal(size=n)], rng
    )
    omega = float(rff.frequencies[0, 0])
    x = rng.normal(size=n)
    x2 = x.copy()
    x2[0] = x[0] + math.pi / omega
    gap = abs(_rho(rff, x, x) - _rho(rff, x2, x))
    assert gap == pytest.approx(2.0 / n, rel=1e-9)
    assert gap <= rff.sensitivity(n)


def test_declared_sensitivities():
    for dist in (MMD(bandwidth=1.0), RandomFeatureMMD(bandwidth=1.0)):
        # Lemma 4.1 (B_k = 1) plus a float allowance below 0.1 % at N = 5000
        assert 2 / 5000 <= dist.sensitivity(5000) <= 2 / 5000 * 1.001
    with pytest.raises(ValueError):
        MMD(bandwidth=1.0).sensitivity(0)


# ---------------------------------------------------------------- set sizes
@pytest.mark.parametrize(
    "dist",
    [MMD(bandwidth=1.0), RandomFeatureMMD(bandwidth=1.0, n_features=8)],
    ids=["exact", "random_features"],
)
def test_equal_set_sizes_are_enforced(dist):
    rng = np.random.default_rng(6)
    dist = dist.fit([rng.normal(size=10)], rng)
    bound = dist.bind(rng.normal(size=10))
    with pytest.raises(ValueError, match="same size"):
        bound([dist.summarize(rng.normal(size=11))])


# ---------------------------------------------------------------- bandwidth
def test_median_heuristic():
    rng = np.random.default_rng(7)
    pts = np.array([0.0, 1.0, 3.0])  # pairwise distances 1, 2, 3
    assert median_heuristic(pts, rng) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        median_heuristic(np.zeros(5), rng)


def test_bandwidth_comes_from_simulations_only():
    rng = np.random.default_rng(8)
    sims = [rng.normal(0, 2.0, size=200) for _ in range(3)]
    for dist in (MMD(), RandomFeatureMMD(n_features=16)):
        with pytest.raises(RuntimeError, match="fitted"):
            dist.bind(np.zeros(200))  # no bandwidth yet: binding private data is refused
        fitted = dist.fit(sims, np.random.default_rng(0))
        assert fitted.bandwidth == median_heuristic(sims, np.random.default_rng(0))
        # binding wildly different private data does not move the bandwidth
        before = pickle.dumps(fitted)
        fitted.bind(rng.normal(0, 100.0, size=200))
        assert pickle.dumps(fitted) == before
    assert MMD(bandwidth=0.5).fit(sims, rng).bandwidth == 0.5


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, "mean", None])
def test_bad_bandwidth_is_rejected(bad):
    with pytest.raises((ValueError, TypeError)):
        MMD(bandwidth=bad)
    with pytest.raises((ValueError, TypeError)):
        RandomFeatureMMD(bandwidth=bad)


def test_fitted_distances_pickle():
    # Summaries of simulations may be computed on a process pool or a dask cluster.
    rng = np.random.default_rng(9)
    rff = RandomFeatureMMD(n_features=8).fit([rng.normal(size=20)], rng)
    clone = pickle.loads(pickle.dumps(rff))
    y = rng.normal(size=20)
    np.testing.assert_array_equal(clone.summarize(y).mean, rff.summarize(y).mean)


# ---------------------------------------------------------------- other distances
def _mean_gap(observed, simulated):
    return abs(float(np.mean(observed)) - float(np.mean(simulated)))


def test_clipped_distance():
    dist = ClippedDistance(_mean_gap, clip=1.0, sensitivity=lambda n: 2.0 / n)
    x = np.zeros(10)
    assert _rho(dist, x, np.full(10, 0.5)) == pytest.approx(0.5)
    assert _rho(dist, x, np.full(10, 7.0)) == 1.0  # min(ρ, C)
    assert dist.sensitivity(10) == pytest.approx(0.2)
    # the clamp bounds the sensitivity by C whatever is declared
    assert ClippedDistance(_mean_gap, clip=0.1, sensitivity=5.0).sensitivity(10) == 0.1
    negative = ClippedDistance(lambda a, b: -3.0, clip=1.0, sensitivity=1.0)
    assert _rho(negative, x, x) == 0.0
    nan = ClippedDistance(lambda a, b: math.nan, clip=1.0, sensitivity=1.0)
    assert _rho(nan, x, x) == 1.0
    with pytest.raises(ValueError, match="same size"):
        dist.bind(x)([dist.summarize(np.zeros(11))])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(clip=0.0, sensitivity=1.0),
        dict(clip=math.inf, sensitivity=1.0),
        dict(clip=1.0, sensitivity=None),
        dict(clip=1.0, sensitivity=0.0),
        dict(clip=1.0, sensitivity=-1.0),
    ],
)
def test_clipped_distance_needs_clip_and_sensitivity(kwargs):
    with pytest.raises((ValueError, TypeError)):
        ClippedDistance(_mean_gap, **kwargs)


# ---------------------------------------------------------------- failures on the private data
def test_an_error_of_the_distance_function_counts_as_clip():
    # Before: the error propagated, so whether fn fails on the data was visible.
    def picky(observed, simulated):
        if observed[0] > 0:
            raise ArithmeticError(f"{observed[0]}")
        return 0.25

    dist = ClippedDistance(picky, clip=1.0, sensitivity=0.1)
    assert _rho(dist, -np.ones(10), np.zeros(10)) == 0.25
    assert _rho(dist, np.ones(10), np.zeros(10)) == 1.0
    with pytest.raises(ArithmeticError):  # public stand-in data: the error as computed
        dist.bind(np.ones(10)).evaluate(dist.summarize(np.zeros(10)))


def test_floating_point_traps_and_warnings_stay_silent_on_private_data():
    # Under np.seterr(all="raise") the kernel's underflow raised, for far-apart data only.
    x, y = np.zeros(20), np.full(20, 1e3)
    expected = _rho(MMD(bandwidth=1.0), x, y)

    def warns(observed, simulated):
        warnings.warn("about the data", RuntimeWarning, stacklevel=2)
        return 0.5

    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _rho(MMD(bandwidth=1.0), x, y) == expected
        assert _rho(ClippedDistance(warns, clip=1.0, sensitivity=0.1), x, y) == 0.5


class _Picky(Distance):
    max_value = 3.0

    def sensitivity(self, n_rows):
        return 0.5

    def _bind(self, observed):
        if observed[0, 0] > 0:
            raise ArithmeticError("person 0")
        n, d = observed.shape
        return BoundDistance(lambda s: 0.25, 0.5, n, d, max_value=3.0)


def test_bind_quietly_makes_every_distance_the_largest_when_bind_fails():
    dist = _Picky()
    summaries = [dist.summarize(np.zeros(10))] * 3
    np.testing.assert_array_equal(dist.bind_quietly(-np.ones(10))(summaries), 0.25)
    bound = dist.bind_quietly(np.ones(10))
    np.testing.assert_array_equal(bound(summaries), 3.0)
    assert (bound.sensitivity, bound.n_rows, bound.row_dim) == (0.5, 10, 1)
    with pytest.raises(ArithmeticError):
        dist.bind(np.ones(10))


def test_clipped_distance_is_fixed_and_pickles():
    dist = ClippedDistance(_mean_gap, clip=1.0, sensitivity=0.2)
    with pytest.raises(AttributeError):
        dist.clip = 5.0
    clone = pickle.loads(pickle.dumps(dist))
    assert (clone.clip, clone.sensitivity(10), clone.max_value) == (1.0, 0.2, 1.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ClippedDistance(_mean_gap, clip="SECRET-123456789", sensitivity=1.0),
        lambda: ClippedDistance(_mean_gap, clip=1.0, sensitivity=[123456789]),
        lambda: MMD(bandwidth="SECRET"),
        lambda: RandomFeatureMMD(bandwidth=1.0, n_features="SECRET"),
        lambda: RandomFeatureMMD(bandwidth=1.0, precision="SECRET"),
        lambda: MMD(bandwidth=1.0).sensitivity("SECRET"),
    ],
)
def test_messages_show_numbers_or_types_only(make):
    with pytest.raises((ValueError, TypeError)) as err:
        make()
    assert "SECRET" not in str(err.value) and "123456789" not in str(err.value)


@pytest.mark.parametrize(
    "dist",
    [MMD(bandwidth=1.0), RandomFeatureMMD(bandwidth=1.0, n_features=8),
     ClippedDistance(_mean_gap, clip=1.0, sensitivity=0.1)],
    ids=["exact", "random_features", "clipped"],
)
def test_a_simulation_of_another_row_dimension_is_refused(dist):
    # public, so it raises (it does not count as the largest distance)
    rng = np.random.default_rng(6)
    dist = dist.fit([rng.normal(size=(10, 2))], rng)
    bound = dist.bind(rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="dimension"):  # random features: at summarize
        bound([dist.summarize(rng.normal(size=(10, 3)))])
