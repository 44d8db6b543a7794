"""The PLD of Gaussian releases on batches drawn without replacement (issue 17 item 3).

Checked against what it must bound and what bounds it:

* the real mechanism, brute force: every pair of neighbouring data sets of a tiny data set,
  one and two releases, δ by numerical integration (it must never be above ours, and for one
  release the worst pair reaches ours);
* the closed-form profile against numerical integration of the two distributions;
* the plain Gaussian at q = 1 (closed form);
* from below, dp-accounting's exact composition for the worst pair of data sets (both orders);
  from above, dp-accounting's RDP bound and an independent discretisation of the same pair
  (losses rounded up instead of dp-accounting's "connect the dots").
"""

import itertools
import math

import numpy as np
import pytest

from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import integrate, optimize, special, stats

from pymc_dp.accounting import GaussianEvent, PrivacyLedger, SubsampledGaussianEvent, rdp_epsilon
from pymc_dp.accounting.gaussian import gaussian_delta, gaussian_epsilon
from pymc_dp.accounting.without_replacement import (
    wor_gaussian_pld,
    wor_pld_delta,
    wor_pld_epsilon,
    wor_privacy_profile,
)

DELTA = 1e-5


def wor(z, q, count):
    return SubsampledGaussianEvent(name="mb", noise_multiplier=z, sampling_rate=q, count=count)


# ---------------------------------------------------------------------- the real mechanism
def _mechanism_density(data, b, z, grid):
    """Density of Σ_{j∈B} x_j + N(0, z²), B a uniform b-subset of the rows (brute force)."""
    batches = list(itertools.combinations(range(len(data)), b))
    sums = [sum(data[j] for j in batch) for batch in batches]
    return np.mean([stats.norm.pdf(grid, s, z) for s in sums], axis=0)


def _neighbouring_pairs(n, values=(0.0, 1.0)):
    """Every ordered pair of data sets over ``values`` that differ in exactly one row."""
    for data in itertools.product(values, repeat=n):
        for i, v in itertools.product(range(n), values):
            if v != data[i]:
                yield data, data[:i] + (v,) + data[i + 1:]


def _true_deltas(n, b, z, eps, releases):
    """max over neighbouring pairs of δ(ε) of ``releases`` independent releases (numerical)."""
    x = np.linspace(-9 * z, b + 9 * z, 4001 if releases == 1 else 1201)
    dx = x[1] - x[0]
    worst = np.zeros(len(eps))
    for d, d2 in _neighbouring_pairs(n):
        p, p2 = _mechanism_density(d, b, z, x), _mechanism_density(d2, b, z, x)
        if releases == 2:
            p, p2 = np.outer(p, p).ravel(), np.outer(p2, p2).ravel()
        area = dx**releases
        deltas = [np.maximum(p - math.exp(e) * p2, 0.0).sum() * area for e in eps]
        worst = np.maximum(worst, deltas)
    return worst


@pytest.mark.parametrize("releases", [1, 2])
def test_brute_force_never_above_ours_and_one_release_reaches_it(releases):
    n, b, z = 3, 2, 0.8  # rows in {0, 1}: replacing one moves the batch sum by ≤ 1
    eps = [-0.5, 0.0, 0.3, 1.0, 2.0]
    truth = _true_deltas(n, b, z, eps, releases)
    ours = wor_gaussian_pld(z, b / n).self_compose(releases).get_delta_for_epsilon(eps)
    assert np.all(truth <= ours + 1e-6), (truth, ours)
    if releases == 1:  # attained: all other rows like the new one
        assert ours == pytest.approx(truth, abs=2e-4)
    # A noise scale taken twice too large would claim less than the real mechanism leaks.
    wrong = wor_gaussian_pld(2 * z, b / n).self_compose(releases).get_delta_for_epsilon(eps)
    assert np.any(truth > wrong + 1e-3)


# ---------------------------------------------------------------------- the profile
@pytest.mark.parametrize("z, q", [(0.7, 0.3), (1.5, 0.05), (3.0, 0.9)])
def test_profile_is_the_hockey_stick_of_the_mixture_against_the_gaussian(z, q):
    def upper(x):
        return q * stats.norm.pdf(x, 1.0, z) + (1 - q) * stats.norm.pdf(x, 0.0, z)

    def lower(x):
        return stats.norm.pdf(x, 0.0, z)

    for e in (-1.0, -0.1, 0.0, 0.2, 1.0, 3.0):
        a, b = (upper, lower) if e >= 0 else (lower, upper)  # the order the profile takes
        alpha = math.exp(e)
        h, _ = integrate.quad(lambda x: max(a(x) - alpha * b(x), 0.0), -12 * z, 1 + 12 * z,
                              points=[0.5], limit=400, epsabs=1e-13)
        assert wor_privacy_profile([e], z, q)[0] == pytest.approx(h, rel=1e-6, abs=1e-12)


def test_at_rate_one_it_is_the_plain_gaussian():
    for z, k in [(1.0, 1), (1.0, 10), (4.0, 300)]:
        mu = k / (2 * z * z)
        ours = wor_gaussian_pld(z, 1.0).self_compose(k).get_epsilon_for_delta(DELTA)
        assert gaussian_epsilon(mu, DELTA) - 1e-9 <= ours <= gaussian_epsilon(mu, DELTA) + 1e-3
        assert wor_privacy_profile([0.5], z, 1.0)[0] == pytest.approx(
            gaussian_delta(0.5, 1 / (2 * z * z)), rel=1e-12)


def test_one_release_is_the_closed_form_root():
    z, q = 1.3, 0.02
    exact = optimize.brentq(lambda e: wor_privacy_profile([e], z, q)[0] - DELTA, 0.0, 20.0)
    ours = wor_pld_epsilon([wor(z, q, 1)], DELTA)
    assert exact <= ours <= exact + 2e-4


# ---------------------------------------------------------------------- compositions
def _rounded_up_pld(z, q, d=1e-4):
    """The same symmetric pair discretised independently: each loss of U against Q rounded
    up to the grid (positive part), its mirror image below 0, the rest at 0."""
    def x_of(loss):
        return z * z * (np.log(np.expm1(loss) + q) - math.log(q)) + 0.5

    top = math.log1p(q * math.expm1(min(700.0, 9 / z + 1 / (2 * z * z))))  # ℓ at x = 1 + 9z
    k_max = int(math.ceil(min(60.0, top) / d))
    x = x_of(np.arange(k_max + 1) * d)
    x[0] = 0.5
    su = q * special.ndtr((1 - x) / z) + (1 - q) * special.ndtr(-x / z)
    sq = special.ndtr(-x / z)
    probs = np.zeros(2 * k_max + 1)
    probs[k_max + 1:] = su[:-1] - su[1:]
    probs[k_max - np.arange(k_max)] += sq[:-1] - sq[1:]
    probs[0] += sq[-1]
    probs[k_max] += 1 - su[0] - sq[0]
    pmf = pld_pmf.DensePLDPmf(d, -k_max, probs, float(su[-1]), True)
    return pld_lib.PrivacyLossDistribution(pmf)


@pytest.mark.parametrize("z, q, k", [(2.0, 0.01, 1000), (1.2247, 0.01, 336), (1.5, 0.1, 48),
                                     (0.9, 0.5, 20)])
def test_compositions_sit_between_the_worst_pair_and_looser_bounds(z, q, k):
    ours = wor_pld_epsilon([wor(z, q, k)], DELTA)
    # the worst pair of data sets, exactly: Poisson's add/remove pair at the same rate (U
    # against Q, and Q against U), composed by dp-accounting
    worst_pair = pld_lib.from_gaussian_mechanism(z, 1.0, sampling_prob=q).self_compose(k)
    assert ours >= worst_pair.get_epsilon_for_delta(DELTA) - 1e-9
    assert ours <= rdp_epsilon([wor(z, q, k)], DELTA)
    rounded = _rounded_up_pld(z, q).self_compose(k).get_epsilon_for_delta(DELTA)
    assert ours <= rounded + 1e-9 and rounded - ours < k * 1e-4


def test_mixed_with_plain_gaussians_it_composes_both():
    warm = GaussianEvent(name="warm-up", noise_multiplier=5.0, count=20)
    both = wor_pld_epsilon([wor(1.5, 0.05, 200), warm], DELTA)
    assert both > wor_pld_epsilon([wor(1.5, 0.05, 200)], DELTA)
    assert both > gaussian_epsilon(warm.mu, DELTA)
    assert wor_pld_epsilon([warm], DELTA) == pytest.approx(gaussian_epsilon(warm.mu, DELTA),
                                                            abs=1e-3)
    assert wor_pld_delta([wor(1.5, 0.05, 200), warm], both) <= DELTA * (1 + 1e-6)


def test_cost_falls_with_the_rate_and_the_ledger_charges_it():
    costs = [wor_pld_epsilon([wor(1.5, 16 / n, 20)], DELTA) for n in (16, 17, 18, 20, 32, 64)]
    assert all(b < a for a, b in zip(costs, costs[1:]))
    # the thesis' tempered banana (n = 10⁵, b = 1000, z = √1.5, δ = 0.1/n): 336 releases fit
    # ε = 1, where the RDP bound let 48 fit
    ledger = PrivacyLedger([wor(math.sqrt(1.5), 0.01, 336)])
    assert ledger.epsilon(1e-6) <= 1.0 and ledger.bound(1e-6) == "pld_without_replacement"
    assert rdp_epsilon([wor(math.sqrt(1.5), 0.01, 49)], 1e-6) > 1.0


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="noise_multiplier"):
        wor_gaussian_pld(0.0, 0.5)
    with pytest.raises(ValueError, match="sampling_rate"):
        wor_gaussian_pld(1.0, 1.5)
    assert wor_pld_epsilon([wor(1.0, 0.5, 0)], DELTA) == 0.0


def test_the_ffts_rounding_never_lowers_a_small_delta_or_epsilon():
    # (from the privacy review: at δ ≲ 1e-10 the composition's rounding had put ε below the
    # exact Gaussian one at q = 1, and δ below 0)
    z, k = 100.0, 100_000
    for delta in (1e-9, 1e-11, 1e-12):
        exact = gaussian_epsilon(k / (2 * z * z), delta)
        assert wor_pld_epsilon([wor(z, 1.0, k)], delta) >= exact
        assert PrivacyLedger([wor(z, 1.0, k)]).epsilon(delta) >= exact - 1e-12
    for z, q, k, eps in [(1.0, 0.001, 10_000, 1.5), (10.0, 0.05, 100_000, 12.9)]:
        assert wor_pld_delta([wor(z, q, k)], eps) > 0
        assert PrivacyLedger([wor(z, q, k)]).delta(eps) > 0


def test_what_it_cannot_compose_it_leaves_to_the_other_bounds():
    loud = [GaussianEvent(name="g", noise_multiplier=0.01, count=2), wor(1.0, 0.5, 3)]
    assert wor_pld_epsilon(loud, DELTA) == math.inf and wor_pld_delta(loud, 1.0) == 1.0
    assert wor_pld_epsilon([wor(1e100, 0.1, 10**9)], DELTA) == math.inf
