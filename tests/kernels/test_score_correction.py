"""The debiased clipped score (pymc_dp.kernels.score_correction): bounded rows, an audit of
the release made from them, and the bias it removes."""

import numpy as np
import pytest
from scipy.optimize import brentq

from pymc_dp.kernels.clipping import clipped_rows
from pymc_dp.kernels.score_correction import MAX_CORRECTION, debiased_rows
from pymc_dp.kernels.warmup import noisy_clipped_sum
from pymc_dp.testing.auditing import epsilon_lower_bound


def test_every_row_has_norm_at_most_the_bound_whatever_the_inputs():
    rng = np.random.default_rng(0)
    grads = rng.standard_cauchy((500, 3)) * 10.0
    grads[:5] = [[np.inf, 0, 0], [np.nan, 1, 1], [1e200, 1e200, 0], [-1e300, 0, 0], [0, 0, 0]]
    replicates = [rng.standard_cauchy((500, 3)) * 1e3 for _ in range(4)]
    replicates[0][7] = [np.inf, 0.0, 0.0]
    replicates[1][8] = [1e200, 1e200, 1e200]
    rows = debiased_rows(grads, replicates, 2.0)
    assert np.all(np.isfinite(rows))
    assert np.all(np.linalg.norm(rows, axis=1) <= 2.0 * (1 + 1e-12))
    # without replicates the rows are the plain clipped ones
    np.testing.assert_array_equal(debiased_rows(grads, [], 2.0), clipped_rows(grads, 2.0))


def test_a_person_whose_estimated_bias_is_large_keeps_the_plain_clipped_gradient():
    # (the outer clip would cut most of the correction, by how the outcome fell)
    g = np.array([[0.5, 0.0], [0.5, 0.0]])
    reps = [np.array([[1.0 + 2 * MAX_CORRECTION * 0.99, 0.0], [1.0 + 2 * MAX_CORRECTION * 1.01, 0.0]]),
            np.zeros((2, 2))]
    rows = debiased_rows(g, reps, 1.0)
    np.testing.assert_allclose(rows[0], [0.5 + MAX_CORRECTION * 0.99, 0.0])
    np.testing.assert_allclose(rows[1], [0.5, 0.0])


def test_row_j_reads_person_js_gradient_and_replicates_only():
    rng = np.random.default_rng(1)
    grads, reps = rng.normal(size=(50, 2)) * 3, [rng.normal(size=(50, 2)) * 3 for _ in range(4)]
    base = debiased_rows(grads, reps, 1.0)
    grads[7] *= -5.0
    for r in reps:
        r[7] = rng.normal(size=2) * 100
    moved = debiased_rows(grads, reps, 1.0)
    changed = np.flatnonzero(np.any(moved != base, axis=1))
    assert changed.tolist() == [7]


def test_the_debiased_release_has_noise_sd_2cz_and_passes_an_audit():
    # Neighbours differ in one person's record, gradient and replicates alike, chosen so
    # that the person's term moves as far as it can: from (+C, 0) to (−C, 0). With z = 1
    # the release is μ = 1/2, (ε ≈ 2.7, δ = 1e-3)-DP: the audit stays below, and a noise
    # scale halved would fail the sd check.
    n = 20
    g, g_prime = np.zeros((n, 2)), np.zeros((n, 2))
    reps, reps_prime = [np.zeros((n, 2)) for _ in range(2)], [np.zeros((n, 2)) for _ in range(2)]
    g[0] = [5.0, 0.0]  # clipped to (1, 0), no bias estimated
    g_prime[0] = [-0.8, 0.0]
    reps_prime[0][0] = [-1.4, 0.0]  # b̂ = (0.4 + 0)/2 = 0.2 takes the term to (−1, 0)
    rows, rows_prime = debiased_rows(g, reps, 1.0), debiased_rows(g_prime, reps_prime, 1.0)
    assert np.allclose(rows.sum(0) - rows_prime.sum(0), [2.0, 0.0])
    out = np.array([noisy_clipped_sum(np.random.default_rng(s), rows, clip=1.0,
                                      noise_multiplier=1.0)[0] for s in range(20_000)])
    out_prime = np.array([noisy_clipped_sum(np.random.default_rng(s), rows_prime, clip=1.0,
                                            noise_multiplier=1.0)[0]
                          for s in range(20_000, 40_000)])
    assert abs(np.std(out) - 2.0) < 0.05  # σ = 2 C z
    assert abs(np.mean(out) - np.mean(out_prime) - 2.0) < 0.1
    assert epsilon_lower_bound(out, out_prime, delta=1e-3) < 2.7


@pytest.mark.parametrize("quantile", [0.98, 0.99])
def test_the_debiased_score_has_its_root_at_the_mle_where_the_clipped_one_does_not(quantile):
    # A normal scale, noise-free: the root in log σ of Σ clip_C(g_j) sits several posterior
    # sds below the MLE (the clip cuts the long upper tail of (r/σ)² − 1), the debiased
    # sum's within the simulation's noise of it. (At a clip as low as the 0.9 quantile the
    # outer clip, which keeps the sensitivity, cuts the correction itself: 3.3 sds left.)
    n, draws = 10_000, 16
    rng = np.random.default_rng(2)
    y = rng.normal(0.0, 1.3, n)
    mle, sd = np.log(np.sqrt(np.mean(y**2))), 1.0 / np.sqrt(2 * n)
    half = rng.normal(size=(draws // 2, n))
    z = np.concatenate([half, -half])

    def rows(s, values):
        return ((values * np.exp(-s)) ** 2 - 1.0)[:, None]

    bound = float(np.quantile(np.abs(rows(mle, y)), quantile))

    def plain(s):
        return clipped_rows(rows(s, y), bound).sum()

    def debiased(s):
        reps = [rows(s, np.exp(s) * zk) for zk in z]
        return debiased_rows(rows(s, y), reps, bound).sum()

    plain_error = (brentq(plain, mle - 1, mle + 1) - mle) / sd
    debiased_error = (brentq(debiased, mle - 1, mle + 1) - mle) / sd
    assert plain_error < -1.0
    assert abs(debiased_error) < 0.4
