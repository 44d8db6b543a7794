"""Tests of pymc_dp.testing.evaluation: the MMD of thesis 5.5 and the posterior distance."""

import numpy as np
import pytest
import xarray as xr

import pymc_dp.testing.evaluation as ev

from pymc_dp.testing.evaluation import median_heuristic_bandwidth, mmd, posterior_distance


def _population_mmd2(shift, s, bandwidth, d):
    """Exact MMD² between N(0, s² I_d) and N(shift, s² I_d) for the RBF kernel.

    E exp(-||Z||² / (2h²)) for Z ~ N(δ, 2s² I) is (h²/(h²+2s²))^{d/2} exp(-||δ||²/(2(h²+2s²))).
    """
    h2 = bandwidth**2
    c = (h2 / (h2 + 2 * s**2)) ** (d / 2)
    return 2 * c * (1 - np.exp(-np.sum(np.square(shift)) / (2 * (h2 + 2 * s**2))))


def _naive_mmd2(x, y, h):
    def k(a, b):
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-d2 / (2 * h * h))

    n, m = len(x), len(y)
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    return (
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2 * kxy.mean()
    )


def test_same_distribution_is_near_zero_and_shift_is_not():
    rng = np.random.default_rng(0)
    same = [mmd(rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)), rng=i) for i in range(5)]
    shifted = [
        mmd(rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)) + [0.5, 0.0], rng=i) for i in range(5)
    ]
    # sqrt(|MMD²_u|) for equal laws is of order (2/n)^{1/2}·(kernel scale) ≈ 0.03.
    assert max(same) < 0.06
    assert min(shifted) > 0.1
    assert min(shifted) > 2.5 * max(same)


def test_unbiased_estimate_matches_population_value():
    # The squared estimate is unbiased: its mean over replications is the population MMD².
    rng = np.random.default_rng(1)
    h, s, d = 1.5, 1.0, 2
    for shift in ([0.0, 0.0], [0.7, 0.0]):
        reps = np.array(
            [
                mmd(rng.normal(0, s, (200, d)), rng.normal(shift, s, (300, d)), bandwidth=h, squared=True)
                for _ in range(60)
            ]
        )
        truth = _population_mmd2(np.array(shift), s, h, d)
        se = reps.std(ddof=1) / np.sqrt(reps.size)
        assert abs(reps.mean() - truth) < 4 * se + 1e-12, (shift, reps.mean(), truth, se)
    # The unsquared value is sqrt(|MMD²_u|) (what the thesis' figures plot).
    x, y = rng.normal(size=(100, 2)), rng.normal(size=(120, 2))
    assert mmd(x, y, bandwidth=h) == pytest.approx(np.sqrt(abs(mmd(x, y, bandwidth=h, squared=True))))


def test_blocked_sums_match_dense_computation(monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(137, 3)) * [1.0, 2.0, 0.5] + 100.0  # far from the origin on purpose
    y = rng.normal(size=(89, 3)) + 100.2
    dense = _naive_mmd2(x, y, 0.9)
    monkeypatch.setattr(ev, "_BLOCK_ENTRIES", 500)  # forces many row blocks
    assert mmd(x, y, bandwidth=0.9, squared=True, max_points=None) == pytest.approx(dense, rel=1e-9, abs=1e-12)


def test_symmetric():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(300, 2)), rng.normal(0.3, 1.2, size=(500, 2))
    assert mmd(x, y, bandwidth=0.8) == pytest.approx(mmd(y, x, bandwidth=0.8), rel=1e-12)
    # With the (random) median heuristic the bandwidth differs slightly between calls, the
    # value barely.
    assert mmd(x, y, rng=4) == pytest.approx(mmd(y, x, rng=4), rel=0.1)


def test_median_heuristic_bandwidth():
    # For N(0, I_2) the distance of two independent points is sqrt(2)·Rayleigh(1), whose
    # median is sqrt(4 ln 2) ≈ 1.665.
    rng = np.random.default_rng(5)
    hs = [median_heuristic_bandwidth(rng.normal(size=(5000, 2)), rng.normal(size=(5000, 2)), rng=i) for i in range(20)]
    assert np.mean(hs) == pytest.approx(np.sqrt(4 * np.log(2)), rel=0.05)
    # The subsampling weighs both samples equally whatever their sizes: a tiny sample far
    # away still doubles the typical distance.
    near = rng.normal(size=(20000, 1))
    far = rng.normal(size=(10, 1)) + 10.0
    assert median_heuristic_bandwidth(near, far, rng=0) > 3.0
    # Degenerate samples fall back to 1.
    assert median_heuristic_bandwidth(np.zeros((5, 2)), np.zeros((5, 2)), rng=0) == 1.0


def test_bandwidth_behaviour():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(800, 2)), rng.normal(size=(800, 2)) + [0.5, 0.0]
    # The default bandwidth is the median heuristic: same value as passing it explicitly.
    h = median_heuristic_bandwidth(x, y, rng=np.random.default_rng(7))
    assert mmd(x, y, rng=7) == pytest.approx(mmd(x, y, bandwidth=h))
    # Scale equivariance: the heuristic rescales with the data, so MMD is scale invariant.
    assert mmd(1e-3 * x, 1e-3 * y, rng=7) == pytest.approx(mmd(x, y, rng=7), rel=1e-9)
    # A shift is invisible to very wide or very narrow kernels and seen by the heuristic one.
    at_median = mmd(x, y, bandwidth=h)
    assert mmd(x, y, bandwidth=1e3 * h) < 0.01 * at_median
    assert mmd(x, y, bandwidth=1e-3 * h) < 0.05 * at_median
    # Population MMD for this shift peaks near the median-heuristic scale.
    grid = h * np.array([0.1, 0.3, 1.0, 3.0, 10.0])
    pop = [_population_mmd2(np.array([0.5, 0.0]), 1.0, b, 2) for b in grid]
    assert np.argmax(pop) in (1, 2, 3)


def test_max_points_subsamples_and_inputs():
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(5000, 2)), rng.normal(size=(5000, 2))
    v = mmd(x, y, max_points=500, rng=1)
    assert 0 <= v < 0.15
    assert mmd(x, y, max_points=500, rng=1) == v  # reproducible from rng
    # 1-d samples are points on the line.
    a, b = rng.normal(size=400), rng.normal(size=400)
    assert mmd(a, b, bandwidth=1.0) == pytest.approx(mmd(a[:, None], b[:, None], bandwidth=1.0))
    with pytest.raises(ValueError):
        mmd(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError):
        mmd(np.zeros((5, 2)), np.zeros((5, 2)), bandwidth=0.0)
    with pytest.raises(ValueError):
        mmd(np.array([[np.nan, 0.0], [0.0, 0.0]]), np.zeros((5, 2)))


def _standardised(rng, shape):
    """Draws of shape (chain, draw, k) whose pooled mean is 0 and sd (ddof=1) is 1 exactly."""
    z = rng.normal(size=shape).reshape(-1, shape[-1])
    z = (z - z.mean(axis=0)) / z.std(axis=0, ddof=1)
    return z.reshape(shape)


def _result(variables, coords=None, group="posterior"):
    return xr.DataTree.from_dict({group: xr.Dataset(variables, coords=coords)})


def test_posterior_distance_is_in_reference_sds():
    rng = np.random.default_rng(9)
    shape = (2, 500, 3)
    ref_mean, ref_sd = np.array([1.0, -2.0, 0.0]), np.array([2.0, 0.5, 1.0])
    priv_mean, priv_sd = np.array([4.0, -2.5, 0.0]), np.array([0.5, 1.0, 3.0])
    dims = ("chain", "draw", "k")
    coords = {"k": ["a", "b", "c"]}
    reference = _result(
        {
            "beta": (dims, ref_mean + ref_sd * _standardised(rng, shape)),
            "sigma": (dims[:2], 3.0 + 0.2 * _standardised(rng, (2, 500, 1))[..., 0]),
            "only_in_reference": (dims[:2], rng.normal(size=(2, 500))),
        },
        coords,
    )
    private = _result(
        {
            "beta": (dims, priv_mean + priv_sd * _standardised(rng, shape)),
            "sigma": (dims[:2], 2.9 + 0.1 * _standardised(rng, (2, 500, 1))[..., 0]),
        },
        coords,
    )
    d = posterior_distance(private, reference)
    # Variables in both posteriors, in the reference's order; components labelled by coords.
    assert d.labels == ("beta[a]", "beta[b]", "beta[c]", "sigma")
    # |Δmean| / sd_ref: (1.5, 1, 0) for beta, 0.5 for sigma. Normalising by the private sd
    # would give (6, 0.5, 0, 1); swapping mean and sd would give other numbers again.
    np.testing.assert_allclose(d.mean_error, [1.5, 1.0, 0.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(d.sd_ratio, [0.25, 2.0, 3.0, 0.5], rtol=1e-12)
    assert d.mean_error_median == pytest.approx(0.75)
    assert d.mean_error_max == pytest.approx(1.5)
    assert (d.sd_ratio_min, d.sd_ratio_median, d.sd_ratio_max) == pytest.approx((0.25, 1.25, 3.0))
    # Independent normal draws mix: R̂ near 1.
    assert d.rhat.shape == (4,) and d.rhat_max < 1.02
    only_sigma = posterior_distance(private, reference, var_names=["sigma"])
    assert only_sigma.labels == ("sigma",) and only_sigma.mean_error_max == pytest.approx(0.5)


def test_posterior_distance_rhat_and_refusals():
    rng = np.random.default_rng(10)
    dims = ("chain", "draw")
    reference = _result({"mu": (dims, rng.normal(size=(2, 400)))})
    # Two chains that never met: pooled they are far from the reference and R̂ sees it.
    apart = _result({"mu": (dims, rng.normal(size=(2, 400)) + [[-3.0], [3.0]])})
    d = posterior_distance(apart, reference)
    assert d.rhat_max > 1.5
    assert d.mean_error_max < 0.2 < 2.0 < d.sd_ratio_max
    mixed = posterior_distance(_result({"mu": (dims, rng.normal(size=(2, 400)))}), reference)
    assert mixed.rhat_max < 1.02

    with pytest.raises(ValueError, match="'nu' is not in the posterior of private"):
        posterior_distance(apart, reference, var_names=["nu"])
    with pytest.raises(ValueError, match="no variable in common"):
        posterior_distance(_result({"tau": (dims, np.zeros((2, 4)))}), reference)
    with pytest.raises(ValueError, match="shape or coordinates"):
        posterior_distance(
            _result({"mu": (("chain", "draw", "k"), np.zeros((2, 4, 2)))}, {"k": [0, 1]}), reference
        )
    with pytest.raises(ValueError, match="no posterior group"):
        posterior_distance(_result({"mu": (dims, np.zeros((1, 3)))}, group="prior"), reference)
