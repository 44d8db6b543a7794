"""Accounting of the minibatch steps: subsampled Gaussian (thesis Thm 8) and DP Barker (Thm 7)."""

import math

import numpy as np
import pytest

from dp_accounting.rdp import rdp_privacy_accountant

from pymc_dp.accounting import (
    GaussianEvent,
    PrivacyLedger,
    PureDPEvent,
    SubsampledGaussianEvent,
    UnsupportedEventError,
    event_from_dict,
)
from pymc_dp.accounting.dp_accounting_bridge import make_rdp_accountant
from pymc_dp.accounting.barker import (
    BarkerEvent,
    barker_base_rdp,
    barker_epsilon,
    barker_max_iterations,
    barker_orders,
    barker_rdp,
)
from pymc_dp.accounting.rdp import rdp_to_epsilon, thesis_subsampled_gaussian_rdp, wbk_subsampled_rdp
from pymc_dp.accounting.subsampling import CALIBRATION_ORDERS, subsampled_noise_multiplier


# ---------------------------------------------------------------------- independent formulas
def _thm8_direct(alpha, q, z):
    """Thesis Thm 8 written out in plain floats (no logs): valid for moderate α and z ≥ 2."""
    eps_prime = lambda j: j / (2 * z * z)  # noqa: E731
    inner = 1 + q**2 * math.comb(alpha, 2) * min(
        4 * (math.exp(eps_prime(2)) - 1), 2 * math.exp(eps_prime(2))
    )
    inner += 2 * sum(
        q**j * math.comb(alpha, j) * math.exp((j - 1) * eps_prime(j)) for j in range(3, alpha + 1)
    )
    return math.log(inner) / (alpha - 1)


def _thm7_base_direct(alpha, b):
    return 5 / (2 * b) + math.log(2 * b / (b - 5 * alpha)) / (2 * (alpha - 1)) + 2 * alpha / (b - 5 * alpha)


def _renyi_gaussians(alpha, mu1, var1, mu2, var2):
    """D_α(N(μ1, v1) ‖ N(μ2, v2)) in closed form (Gil, Alajaji & Hashemi 2013)."""
    var_a = alpha * var2 + (1 - alpha) * var1
    return (
        0.5 * math.log(var2 / var1)
        + math.log(var2 / var_a) / (2 * (alpha - 1))
        + alpha * (mu1 - mu2) ** 2 / (2 * var_a)
    )


POINTS = [(2, 0.01, 2.0), (5, 0.01, 2.0), (12, 0.05, 3.0), (20, 0.1, 4.0), (30, 0.001, 2.5)]


@pytest.mark.parametrize("alpha, q, z", POINTS)
def test_thesis_thm8_matches_its_direct_formula(alpha, q, z):
    assert thesis_subsampled_gaussian_rdp(alpha, q, z) == pytest.approx(_thm8_direct(alpha, q, z), rel=1e-10)


@pytest.mark.parametrize("alpha, q, z", POINTS)
def test_dp_accounting_without_replacement_rdp_is_within_thesis_thm8(alpha, q, z):
    # dp-accounting's bound (WBK Thm 27) is the one the ledger uses; it must never exceed
    # the thesis' Theorem 8 (WBK Thm 9) and be of the same size.
    event = SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=q, count=1)
    (ours,) = make_rdp_accountant([event], orders=[alpha]).rdp
    thesis = _thm8_direct(alpha, q, z)
    assert ours <= thesis * (1 + 1e-9)
    assert ours >= 0.2 * thesis


def test_without_replacement_at_rate_one_is_the_plain_gaussian():
    ev = SubsampledGaussianEvent(name="all rows", noise_multiplier=1.5, sampling_rate=1.0, count=7)
    plain = GaussianEvent(name="plain", noise_multiplier=1.5, count=7)
    from pymc_dp.accounting import rdp_epsilon
    from pymc_dp.accounting.gaussian import gaussian_epsilon

    # Pinned before to the RDP accountant's ε of the plain Gaussian (9.2100 at δ = 1e-5).
    # The ledger now charges the smaller of the valid bounds: at rate 1 that is the exact
    # Gaussian composition, computed here independently from μ = 7/(2·1.5²), and no larger.
    rdp = rdp_epsilon([plain], 1e-5)
    assert rdp == pytest.approx(9.209958991683896, rel=1e-9)
    exact = gaussian_epsilon(7 / (2 * 1.5**2), 1e-5)
    ledger = PrivacyLedger([ev])
    assert ledger.epsilon(1e-5) == pytest.approx(exact, rel=1e-12)
    assert ledger.epsilon(1e-5) <= rdp
    assert ledger.epsilon(1e-5) == PrivacyLedger([plain]).epsilon(1e-5)
    assert ledger.bound(1e-5) == "gaussian_without_subsampling"


def test_ledger_epsilon_is_at_most_thesis_thm8_with_thm1():
    from pymc_dp.accounting import rdp_epsilon

    q, z, k, delta = 0.01, 1.2, 2000, 1e-6
    events = [SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=q, count=k)]
    ledger = PrivacyLedger(events).epsilon(delta)
    orders = range(2, 33)  # the optimum is near α = 6 here; plain floats overflow beyond 32
    thesis = rdp_to_epsilon(orders, [k * _thm8_direct(a, q, z) for a in orders], delta)
    assert ledger <= rdp_epsilon(events, delta) <= thesis
    # same bound family: close, not a different mechanism
    assert rdp_epsilon(events, delta) > 0.7 * thesis


# ---------------------------------------------------------------------- calibration
@pytest.mark.parametrize("eps, q, releases", [(1.0, 0.01, 2000), (4.0, 0.1, 300), (0.5, 0.02, 50)])
def test_calibration_spends_the_budget_in_a_few_accountant_queries(eps, q, releases):
    delta = 1e-5
    z, queries = subsampled_noise_multiplier(eps, delta, q, releases)
    cost = lambda zz: PrivacyLedger(  # noqa: E731
        [SubsampledGaussianEvent(name="r", noise_multiplier=zz, sampling_rate=q, count=releases)]
    ).epsilon(delta)
    assert cost(z) <= eps
    assert cost(0.995 * z) > eps  # tight: 0.5 % less noise would overspend
    assert queries <= 20


def test_calibration_reaches_a_budget_below_the_rdp_floor_with_the_unsampled_bound():
    # At q = 0.5 the RDP bound for sampling without replacement has a floor above ε = 0.05
    # (its binomial terms do not fall with the noise): this budget used to be refused. The
    # same releases without subsampling cost the exact Gaussian ε of μ = k/(2z²), which falls
    # to 0, and so does the PLD of sampling without replacement (below it): the calibration
    # returns a z no larger than the unsampled bound's closed form.
    from pymc_dp.accounting import rdp_epsilon
    from pymc_dp.accounting.gaussian import max_gaussian_mu

    eps, delta, q, k = 0.05, 1e-5, 0.5, 100
    z, _ = subsampled_noise_multiplier(eps, delta, q, k)
    closed_form = math.sqrt(k / (2 * max_gaussian_mu(eps, delta)))
    assert 0.5 * closed_form <= z <= closed_form
    ev = SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=q, count=k)
    assert PrivacyLedger([ev]).epsilon(delta) <= eps
    assert PrivacyLedger([ev]).bound(delta) in ("pld_without_replacement",
                                                 "gaussian_without_subsampling")
    assert rdp_epsilon([ev], delta) > 3 * eps  # the RDP bound alone: three times the budget


def test_calibration_orders_are_a_subset_of_the_ledgers():
    assert set(CALIBRATION_ORDERS) <= set(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)


# ---------------------------------------------------------------------- DP Barker (Thm 7)
@pytest.mark.parametrize("alpha, b", [(3, 100), (10, 1000), (50, 1300), (199, 1000)])
def test_thm7_base_rdp_matches_its_formula(alpha, b):
    assert barker_base_rdp(alpha, b) == pytest.approx(_thm7_base_direct(alpha, b), rel=1e-12)


@pytest.mark.parametrize("alpha, b", [(3, 100), (8, 200), (20, 1000)])
def test_thm7_base_rdp_bounds_the_renyi_divergence_of_every_neighbouring_release(alpha, b):
    # Independent check of the mechanism-level claim: on neighbouring batches the mean of
    # N(λ, 2 − s²) moves by ≤ 2/√b and s² ∈ [0, 1] by ≤ 5/b. Maximise D_α over that box.
    bound = barker_base_rdp(alpha, b)
    worst = 0.0
    for shift in np.linspace(-2 / math.sqrt(b), 2 / math.sqrt(b), 9):
        for s1 in np.linspace(0, 1, 41):
            for ds in np.linspace(-5 / b, 5 / b, 11):
                s2 = s1 + ds
                if not 0 <= s2 <= 1:
                    continue
                worst = max(worst, _renyi_gaussians(alpha, 0.0, 2 - s1, shift, 2 - s2))
    assert worst <= bound
    assert worst > 0.2 * bound  # not vacuous


def test_renyi_divergence_formula_against_numerical_integration():
    from scipy import integrate, stats

    alpha, (m1, v1), (m2, v2) = 4, (0.0, 1.7), (0.3, 1.9)
    p, q = stats.norm(m1, math.sqrt(v1)), stats.norm(m2, math.sqrt(v2))
    integrand = lambda x: math.exp(alpha * p.logpdf(x) + (1 - alpha) * q.logpdf(x))  # noqa: E731
    integral, _ = integrate.quad(integrand, -20, 20, epsabs=0, epsrel=1e-12)
    assert _renyi_gaussians(alpha, m1, v1, m2, v2) == pytest.approx(math.log(integral) / (alpha - 1), rel=1e-8)


def test_barker_orders_follow_thm7_range():
    assert barker_orders(16).tolist() == [3]
    assert barker_orders(1000)[[0, -1]].tolist() == [3, 199]
    with pytest.raises(ValueError, match="16"):
        BarkerEvent(name="b", n_data=1000, batch_size=15)
    with pytest.raises(ValueError, match="exceed"):
        BarkerEvent(name="b", n_data=100, batch_size=200)
    with pytest.raises(ValueError, match="replace-one"):
        BarkerEvent(name="b", n_data=1000, batch_size=100, neighbouring="add_remove")
    with pytest.raises(ValueError, match="noise_variance"):
        BarkerEvent(name="b", n_data=1000, batch_size=100, noise_variance=1.5)


def test_barker_rdp_is_thm7_with_subsampling_amplification():
    n, b, alpha = 100_000, 1300, 12
    base = [0, 0] + [barker_base_rdp(j, b) for j in range(2, alpha + 1)]
    q = b / n
    direct = 1 + q**2 * math.comb(alpha, 2) * min(4 * (math.exp(base[2]) - 1), 2 * math.exp(base[2]))
    direct += 2 * sum(q**j * math.comb(alpha, j) * math.exp((j - 1) * base[j]) for j in range(3, alpha + 1))
    assert barker_rdp(alpha, n, b) == pytest.approx(math.log(direct) / (alpha - 1), rel=1e-10)
    assert barker_rdp(alpha, n, b) == pytest.approx(wbk_subsampled_rdp(alpha, q, base.__getitem__))


def test_barker_epsilon_is_thm1_over_the_admissible_orders():
    n, b, k, delta = 100_000, 1300, 500, 1e-6
    ev = BarkerEvent(name="b", n_data=n, batch_size=b, count=k)
    orders = range(3, math.ceil(b / 5))
    expected = min(k * barker_rdp(a, n, b) + math.log(1 / delta) / (a - 1) for a in orders)
    assert PrivacyLedger([ev]).epsilon(delta) == pytest.approx(expected, rel=1e-12)
    assert barker_epsilon([ev], delta) == pytest.approx(expected, rel=1e-12)
    # δ(ε) inverts it
    assert PrivacyLedger([ev]).delta(expected) == pytest.approx(delta, rel=1e-6)


def test_barker_max_iterations_is_the_largest_plan_that_fits():
    eps, delta, n, b = 2.0, 1e-6, 100_000, 1300
    k = barker_max_iterations(eps, delta, n, b)
    fits = lambda c: PrivacyLedger([BarkerEvent(name="b", n_data=n, batch_size=b, count=c)]).epsilon(delta)  # noqa: E731
    assert fits(k) <= eps < fits(k + 1)
    # chains compose: two chains of k/2 cost what one chain of k does
    two = PrivacyLedger([BarkerEvent(name="b", n_data=n, batch_size=b, count=k // 2)] * 2)
    assert two.epsilon(delta) == pytest.approx(fits(2 * (k // 2)), rel=1e-12)


def test_barker_events_compose_with_pure_and_gaussian_events_and_refuse_the_rest():
    delta = 1e-6
    barker = BarkerEvent(name="b", n_data=100_000, batch_size=1000, count=300)
    alone = PrivacyLedger([barker]).epsilon(delta)
    # pure events: basic composition
    assert PrivacyLedger([barker, PureDPEvent(name="svt", epsilon=0.3)]).epsilon(delta) == pytest.approx(
        alone + 0.3, rel=1e-12
    )
    # Gaussian events: RDP added at each order, then one conversion
    gauss = GaussianEvent(name="g", noise_multiplier=5.0, count=4)
    both = PrivacyLedger([barker, gauss]).epsilon(delta)
    orders = barker_orders(1000)
    expected = rdp_to_epsilon(
        orders, [300 * barker_rdp(int(a), 100_000, 1000) + a * 4 / (2 * 25.0) for a in orders], delta
    )
    assert both == pytest.approx(expected, rel=1e-9)
    assert alone < both < alone + PrivacyLedger([gauss]).epsilon(delta) + 1.0
    # without-replacement subsampled Gaussians compose too; Poisson under replace-one cannot
    wor = SubsampledGaussianEvent(name="s", noise_multiplier=2.0, sampling_rate=0.01, count=10)
    assert PrivacyLedger([barker, wor]).epsilon(delta) > alone
    poisson = SubsampledGaussianEvent(
        name="p", noise_multiplier=2.0, sampling_rate=0.01, count=10, sampling="poisson"
    )
    with pytest.raises(UnsupportedEventError, match="Poisson"):
        PrivacyLedger([barker, poisson]).epsilon(delta)


def test_barker_event_round_trips_and_reports():
    ev = BarkerEvent(name="b", n_data=5000, batch_size=100, count=12)
    assert event_from_dict(ev.to_dict()) == ev
    ledger = PrivacyLedger([ev])
    assert PrivacyLedger.from_dict(ledger.to_dict()) == ledger
    (row,) = ledger.summary(delta=1e-5)
    assert row["kind"] == "dp_barker" and row["batch_size"] == 100 and row["epsilon"] > 0
