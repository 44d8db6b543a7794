"""The clip diagnostics' release (issue 17, item 4): windows, counts, noise, an audit."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_dp import ClipDiagnostics
from pymc_dp.accounting import PrivacyLedger
from pymc_dp.kernels import clip_diagnostics
from pymc_dp.kernels.clip_diagnostics import (
    WindowedClipCounts,
    check_windows,
    diagnostic_windows,
    window_sensitivity,
)
from pymc_dp.kernels.clipping import (
    clipped_count,
    clipped_row_count,
    clipped_scalars,
    clipped_vector_sum,
)
from pymc_dp.testing.auditing import epsilon_lower_bound


def test_windows_split_the_draws_contiguously_from_public_numbers():
    assert diagnostic_windows(5, 10, 3) == ((5, 9), (9, 12), (12, 15))
    assert diagnostic_windows(0, 4, 4) == ((0, 1), (1, 2), (2, 3), (3, 4))
    assert window_sensitivity(0, 10, 3, releases_at_start=1) == 31
    assert window_sensitivity(10, 20, 3, releases_at_start=1) == 30


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "3", None])
def test_bad_window_counts_are_refused(bad):
    with pytest.raises(ValueError, match="clip_diagnostics"):
        check_windows(bad)
    with pytest.raises(ValueError, match="clip_diagnostics"):
        ClipDiagnostics(windows=bad)


def test_more_windows_than_draws_is_refused():
    with pytest.raises(ValueError, match="more than its 3 draws"):
        diagnostic_windows(10, 3, 4)


@pytest.mark.parametrize("share", [0.0, 1.0, -0.1, True, "0.1"])
def test_bad_share_is_refused(share):
    with pytest.raises(ValueError, match="share"):
        ClipDiagnostics(windows=2, share=share)


def test_counts_agree_with_the_clipping_rules():
    """A term is counted clipped exactly when clipping changes it (or it is not finite)."""
    rng = np.random.default_rng(3)
    values = rng.standard_t(2, size=500)
    values[:4] = [np.inf, -np.inf, np.nan, 1.0]
    changed = ~(clipped_scalars(values, 1.0) == values)
    assert clipped_count(values, 1.0) == int(np.sum(changed | ~np.isfinite(values)))
    rows = rng.standard_t(2, size=(300, 3))
    rows[0, 1] = np.nan
    norms = np.linalg.norm(rows, axis=1)
    assert clipped_row_count(rows, 2.0) == int(np.sum(~(norms <= 2.0)))
    # rows under the bound are kept whole by the clipped sum
    kept = np.isfinite(norms) & (norms <= 2.0)
    inside = clipped_vector_sum(rows[kept], 2.0)
    np.testing.assert_allclose(inside, rows[kept].sum(axis=0))


def test_a_window_releases_its_total_count_at_its_last_iteration_only():
    counts = WindowedClipCounts(diagnostic_windows(2, 4, 2), noise_multiplier=1e-12,
                                releases_per_iteration=1, terms_per_release=10)
    rng = np.random.default_rng(0)
    out = []
    for t, c in enumerate([7, 7, 1, 2, 3, 4]):  # the tuning counts (7) are not counted
        counts.begin(t)
        counts.add(c)
        out.append(counts.end(t, rng))
    assert [o is None for o in out] == [True, True, True, False, True, False]
    assert round(out[3].count, 9) == 3 and out[3].terms == 20 and out[3].window == 0
    assert round(out[5].count, 9) == 7 and out[5].iterations == 2
    assert "7" not in repr(counts)  # the running count is never shown


def _releases(counts_per_iteration, *, z, windows, runs, seed):
    """``runs`` diagnostic releases of one chain, each window's count over its sensitivity,
    summed (the likelihood-ratio statistic of shifted Gaussians)."""
    rng = np.random.default_rng(seed)
    draws = len(counts_per_iteration)
    out = np.empty(runs)
    diag_windows = diagnostic_windows(0, draws, windows)
    for r in range(runs):
        diag = clip_diagnostics.WindowedClipCounts(diagnostic_windows(0, draws, windows), noise_multiplier=z,
                                  releases_per_iteration=1, terms_per_release=50)
        total = 0.0
        for t, c in enumerate(counts_per_iteration):
            diag.begin(t)
            diag.add(c)
            released = diag.end(t, rng)
            if released is not None:
                total += released.count / window_sensitivity(
                    *diag_windows[released.window], 1)
        out[r] = total
    return out


def _neighbour_counts(draws, flip):
    """Per-iteration counts on D and D′ (n = 50 terms, bound 1): D′ replaces row 0, whose
    term is clipped in every release, by one that never is (if ``flip``)."""
    rng = np.random.default_rng(11)
    d, d_prime = [], []
    for _ in range(draws):
        terms = rng.normal(0.0, 0.8, size=50)
        terms[0] = 5.0
        d.append(clipped_count(terms, 1.0))
        terms[0] = 0.0 if flip else 5.0
        d_prime.append(clipped_count(terms, 1.0))
    return d, d_prime


def _audit(monkeypatch=None, halve=False):
    windows, draws, delta = 2, 6, 1e-3
    settings = ClipDiagnostics(windows=windows)
    chain_mu = 20.0  # its 5 %, μ = 1 over two windows: z = 1
    (event,) = settings.events(chain_mu)
    claimed = PrivacyLedger([event]).epsilon(delta)
    if halve:  # a bug that halves the noise the accountant was told about
        real = clip_diagnostics.WindowedClipCounts.__init__

        def half_noise(self, *args, noise_multiplier, **kwargs):
            real(self, *args, noise_multiplier=noise_multiplier / 2, **kwargs)

        monkeypatch.setattr(clip_diagnostics.WindowedClipCounts, "__init__", half_noise)
    d, d_prime = _neighbour_counts(draws, flip=True)
    a = _releases(d, z=event.noise_multiplier, windows=windows, runs=40_000, seed=1)
    b = _releases(d_prime, z=event.noise_multiplier, windows=windows, runs=40_000, seed=2)
    return claimed, epsilon_lower_bound(a, b, delta=delta)


def test_audit_neighbouring_data_stays_within_the_claimed_epsilon():
    claimed, found = _audit()
    assert found <= claimed, (found, claimed)
    assert found > 0.5 * claimed  # the test has power: the release does leak


def test_audit_catches_the_noise_halved(monkeypatch):
    claimed, found = _audit(monkeypatch, halve=True)
    assert found > claimed, (found, claimed)


def test_a_window_refuses_more_releases_than_its_sensitivity(monkeypatch):
    """Halving the sensitivity (and with it the noise) is caught before anything is
    released: the window's releases exceed the bound the noise was set for."""
    real = clip_diagnostics.window_sensitivity
    monkeypatch.setattr(clip_diagnostics, "window_sensitivity",
                        lambda *a, **k: real(*a, **k) / 2)
    counts = WindowedClipCounts(diagnostic_windows(0, 4, 1), noise_multiplier=1.0,
                                releases_per_iteration=1, terms_per_release=10)
    for t in range(4):
        counts.begin(t)
        counts.add(1)
        if t < 3:
            assert counts.end(t, np.random.default_rng(0)) is None
    with pytest.raises(RuntimeError, match="nothing was released"):
        counts.end(3, np.random.default_rng(0))
