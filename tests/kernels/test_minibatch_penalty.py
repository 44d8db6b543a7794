"""The minibatch DP penalty kernel: batches, sensitivity (thesis Lemma 1), noise, audit."""

import itertools

import numpy as np
import pytest

from pymc_dp.accounting import PrivacyLedger, SubsampledGaussianEvent, gaussian_epsilon
from pymc_dp.testing.auditing import epsilon_lower_bound
from pymc_dp.kernels.minibatch_penalty import (
    batch_estimate,
    draw_batch,
    minibatch_penalty_transition,
    minibatch_sensitivity,
)


def test_batches_are_drawn_without_replacement_from_the_generator():
    a = draw_batch(np.random.default_rng(5), 1000, 100)
    b = draw_batch(np.random.default_rng(5), 1000, 100)
    np.testing.assert_array_equal(a, b)  # only the generator decides
    assert len(set(a.tolist())) == 100 and a.min() >= 0 and a.max() < 1000
    # every row equally likely: inclusion frequencies of 20 rows in batches of 5
    rng = np.random.default_rng(0)
    counts = np.bincount(np.concatenate([draw_batch(rng, 20, 5) for _ in range(4000)]), minlength=20)
    assert np.allclose(counts / 4000, 5 / 20, atol=0.03)


def test_batch_estimate_is_the_scaled_sum_and_b_times_the_sample_variance():
    r = np.random.default_rng(1).normal(size=37)
    est, var = batch_estimate(r, 3.0)
    assert est == pytest.approx(3.0 * r.sum())
    assert var == pytest.approx(37 * np.var(3.0 * r), rel=1e-12)  # ddof = 0


@pytest.mark.parametrize("b", [2, 3, 5, 8])
@pytest.mark.parametrize("d", [1e-4, 0.05])  # λ's part of c dominates; σ_b²'s part dominates
def test_lemma1_sensitivity_bounds_every_replacement_of_one_batch_row(b, d):
    # f(B) = λ − σ_b²/2 on clipped ratios in [−ℓ, ℓ]; replace one row, any values.
    n, T, L = 1000, 0.3, 2.0
    ell = L * d
    scale = n * T / b
    c = minibatch_sensitivity(d, n_data=n, batch_size=b, tempering=T, clip_bound=L)

    def f(r):
        est, var = batch_estimate(np.asarray(r, dtype=float), scale)
        return est - 0.5 * var

    worst = 0.0
    grid = np.linspace(-ell, ell, 5)
    for others in itertools.product(grid, repeat=min(b - 1, 3)):
        others = list(others) + [others[-1]] * (b - 1 - len(others))
        for old, new in itertools.product(grid, grid):
            worst = max(worst, abs(f(others + [old]) - f(others + [new])))
    rng = np.random.default_rng(b)
    for _ in range(2000):
        r = rng.uniform(-ell, ell, size=b)
        r2 = r.copy()
        r2[rng.integers(b)] = rng.uniform(-ell, ell)
        worst = max(worst, abs(f(r) - f(r2)))
    assert worst <= c * (1 + 1e-12)
    # not vacuous: the λ part alone is reached, and c is at most twice the worst change
    assert worst >= 2 * scale * ell * 0.99
    assert worst >= 0.5 * c


def test_noise_sd_is_the_multiplier_times_the_sensitivity():
    n, b, T, L, z = 500, 50, 0.2, 3.0, 0.8
    q0, q1 = np.array([0.0, 0.0]), np.array([0.03, -0.04])  # ‖Δθ‖ = 0.05
    zeros = lambda q, rows: np.zeros(rows.size)  # noqa: E731  ratios 0: no data signal
    rng = np.random.default_rng(3)
    out = np.array(
        [
            minibatch_penalty_transition(
                rng, q0, 0.0, q1, zeros, lambda q: 0.0,
                n_data=n, batch_size=b, tempering=T, clip_bound=L, noise_multiplier=z,
            )[2].log_accept
            for _ in range(4000)
        ]
    )
    sd = z * minibatch_sensitivity(0.05, n_data=n, batch_size=b, tempering=T, clip_bound=L)
    assert np.std(out) == pytest.approx(sd, rel=0.05)
    assert np.mean(out) == pytest.approx(-0.5 * sd**2, abs=4 * sd / np.sqrt(4000))


def test_the_kernel_reads_only_its_batch():
    seen = []

    def loglik_rows(q, rows):
        seen.append(rows.copy())
        return np.zeros(rows.size)

    minibatch_penalty_transition(
        np.random.default_rng(0), np.zeros(1), 0.0, np.ones(1), loglik_rows, lambda q: 0.0,
        n_data=10_000, batch_size=64, tempering=1.0, clip_bound=1.0, noise_multiplier=1.0,
    )
    assert len(seen) == 2 and all(r.size == 64 for r in seen)
    np.testing.assert_array_equal(seen[0], seen[1])  # θ and θ' on the same batch


# ---------------------------------------------------------------------- empirical audit
# Neighbours differ in the last row, at +100 or −100: its clipped ratio sits at ±L‖Δθ‖.
def _released(x, z, runs, seed, batch_size, clip_bound=0.2):
    rng = np.random.default_rng(seed)
    loglik_rows = lambda q, rows: -0.5 * (x[rows] - q[0]) ** 2  # noqa: E731
    q0, q1 = np.array([0.0]), np.array([0.1])
    out = np.empty(runs)
    for i in range(runs):
        out[i] = minibatch_penalty_transition(
            rng, q0, 0.0, q1, loglik_rows, lambda q: 0.0,
            n_data=x.size, batch_size=batch_size, tempering=1.0, clip_bound=clip_bound,
            noise_multiplier=z,
        )[2].log_accept
    return out


def _neighbours(n):
    d = np.zeros(n)
    d[-1] = 100.0
    d_prime = d.copy()
    d_prime[-1] = -100.0
    return d, d_prime


def test_audit_of_one_subsampled_iteration_stays_below_the_ledgers_claim():
    z, delta, n, b = 0.5, 1e-3, 4, 2  # q = 1/2: the differing row is in half the batches
    claimed = PrivacyLedger(
        [SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=b / n)]
    ).epsilon(delta)
    d, d_prime = _neighbours(n)
    found = epsilon_lower_bound(
        _released(d, z, 20_000, 1, b), _released(d_prime, z, 20_000, 2, b), delta=delta
    )
    assert 0.5 < found <= claimed  # the audit sees the leak, and no more than claimed


@pytest.mark.parametrize("noise_factor, caught", [(1.0, False), (0.5, True)])
def test_audit_of_one_full_batch_iteration_catches_noise_half_as_large(noise_factor, caught):
    # b = n: the release is a Gaussian mechanism of multiplier z on sensitivity c, whose exact
    # cost is known; with half the noise the audit must find more than that.
    z, delta, n = 1.0, 1e-3, 2
    claimed = gaussian_epsilon(1 / (2 * z**2), delta)
    d, d_prime = _neighbours(n)
    zz = z * noise_factor
    found = epsilon_lower_bound(
        _released(d, zz, 20_000, 3, n), _released(d_prime, zz, 20_000, 4, n), delta=delta
    )
    assert (found > claimed) is caught


@pytest.mark.parametrize("worst", [-np.inf, 1e308])
def test_diverged_batch_rows_raise_no_data_dependent_warning(worst):
    # A row whose log-likelihood is -inf at both points (inf − inf: NaN, clipped to 0), or
    # a difference that overflows: NumPy must not warn, as whether it warns would depend
    # on which rows the batch holds (a side channel beside the noisy release).
    n, b = 50, 10

    def loglik_rows(theta, rows):
        out = np.full(len(rows), -1.0) * float(theta[0])
        if worst < 0:
            out[rows < 25] = -np.inf  # diverged at every θ
        else:
            out[rows < 25] = worst if theta[0] > 0.5 else -worst  # the difference overflows
        return out

    import warnings

    for seed in range(5):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            counted = []
            minibatch_penalty_transition(
                np.random.default_rng(seed), np.array([0.0]), 0.0, np.array([1.0]),
                loglik_rows, lambda q: 0.0, n_data=n, batch_size=b, tempering=1.0,
                clip_bound=1.0, noise_multiplier=1.0, count_clipped=counted.append,
            )
        assert counted and counted[0] >= 1  # (the batch held diverged rows: all clipped)
