"""The minibatch accountant charges the smaller of the bounds that hold (issue 17 item 3).

Releases on batches drawn without replacement (replace-one neighbours) are charged
min(their own PLD, dp-accounting's RDP bound, the exact Gaussian composition of the same
releases without subsampling); dp-accounting's PLD accountant does not support this sampling
scheme, so the PLD is built by :mod:`pymc_dp.accounting.without_replacement` (checked on its
own in test_without_replacement.py). Checked here against dp-accounting itself (accountants
built by hand, not through the bridge), against closed forms, for monotonicity in n at a fixed
batch, and for calibration = charge.
"""

import math

import pytest

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant

import pymc_dp

from pymc_dp.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    SubsampledGaussianEvent,
    UnsupportedEventError,
    rdp_delta,
    rdp_epsilon,
)
from pymc_dp.accounting.composition import UNSAMPLED_GAUSSIAN
from pymc_dp.accounting.gaussian import gaussian_delta, gaussian_epsilon, max_gaussian_mu
from pymc_dp.accounting.subsampling import subsampled_noise_multiplier
from pymc_dp.accounting.without_replacement import wor_pld_delta, wor_pld_epsilon

DELTA = 1e-5


def wor(z, q, count, **kw):
    return SubsampledGaussianEvent(name="mb", noise_multiplier=z, sampling_rate=q, count=count, **kw)


# ---------------------------------------------------------------------- independent figures
def their_rdp(n, b, z, count, delta=DELTA):
    """dp-accounting's RDP accountant on the released events, built by hand."""
    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    event = dp_event.SampledWithoutReplacementDpEvent(
        source_dataset_size=n, sample_size=b, event=dp_event.GaussianDpEvent(z)
    )
    acc.compose(event, count)
    return float(acc.get_epsilon(delta))


def their_unsampled_pld(z, count, delta=DELTA):
    """dp-accounting's PLD accountant on the same releases without subsampling.

    Add/remove with noise multiplier z: a mean shift of one noise-multiplier unit, the
    replace-one shift of our normalised releases (z = σ/Δ, Δ the replace-one sensitivity).
    ``count`` Gaussian releases compose exactly into one of multiplier z/√count (composed
    so, the PLD is fast).
    """
    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dp_event.GaussianDpEvent(z / math.sqrt(count)))
    return float(acc.get_epsilon(delta))


# A small rate (the thesis' setting), rates near 1, and the whole data set (the unsampled
# Gaussian binds). (n, b, z, count, expected bound)
CASES = [
    (1000, 10, 1.0, 1000, "pld_without_replacement"),
    (100_000, 1000, 1.2247, 300, "pld_without_replacement"),
    (17, 16, 2.0, 48, "pld_without_replacement"),
    (20, 16, 1.5, 10, "pld_without_replacement"),
    (16, 16, 2.0, 48, "gaussian_without_subsampling"),
]


def unsampled(z, count, delta=DELTA):
    """The exact Gaussian composition's ε (closed form, thesis Thm 4) of the releases."""
    return gaussian_epsilon(count / (2 * z * z), delta)


@pytest.mark.parametrize("n, b, z, count, bound", CASES)
def test_the_charge_is_dp_accountings_figure_for_the_released_events(n, b, z, count, bound):
    ledger = PrivacyLedger([wor(z, b / n, count)])
    if bound == "gaussian_without_subsampling":
        # dp-accounting's PLD agrees with the closed form (its PLD is slow where ε is in
        # the hundreds, as it is in the RDP cases: there the closed form alone is used)
        assert their_unsampled_pld(z, count) == pytest.approx(unsampled(z, count), rel=1e-6)
    theirs = min(their_rdp(n, b, z, count), unsampled(z, count))
    pld = wor_pld_epsilon([wor(z, b / n, count)], DELTA)
    assert ledger.epsilon(DELTA) == pytest.approx(min(theirs, pld), rel=1e-9)
    assert ledger.epsilon(DELTA) <= theirs
    assert ledger.bound(DELTA) == bound
    # A factor 2 in the noise (σ vs 2σ, or a replace-one shift of 2Δ) would move ε far
    # beyond that precision: the figure above pins the noise convention.
    for wrong in (z / 2, 2 * z):
        other = min(their_rdp(n, b, wrong, count), unsampled(wrong, count),
                    wor_pld_epsilon([wor(wrong, b / n, count)], DELTA))
        assert abs(other - min(theirs, pld)) > 0.2 * min(theirs, pld)


@pytest.mark.parametrize("q", [0.9, 0.94, 1.0])
@pytest.mark.parametrize("z, count", [(1.0, 1), (2.0, 48)])
def test_near_rate_one_the_charge_is_never_above_the_unsampled_gaussian(q, z, count):
    unsampled = gaussian_epsilon(count / (2 * z * z), DELTA)  # closed form, thesis Thm 4
    ledger = PrivacyLedger([wor(z, q, count)])
    assert ledger.epsilon(DELTA) <= unsampled
    if q == 1.0:  # (the PLD is the same Gaussian there, discretised: a hair above)
        assert ledger.epsilon(DELTA) == pytest.approx(unsampled, rel=1e-12)
        assert ledger.bound(DELTA) == "gaussian_without_subsampling"
    else:  # sampling helps a little even at these rates
        assert ledger.epsilon(DELTA) < 0.99 * unsampled
        assert ledger.bound(DELTA) == "pld_without_replacement"
    # the RDP bound alone charged more here (the issue's 2.0 vs 1.46 at q = 0.94)
    assert rdp_epsilon([wor(z, q, count)], DELTA) > unsampled


def test_the_issues_rdp_figure_at_q_094_was_above_the_unsampled_cost():
    # At q = 0.94 the RDP bound for sampling without replacement is looser than no
    # amplification at all; the ledger charges no more than the latter.
    ev = wor(1.0, 0.94, 1)
    assert rdp_epsilon([ev], DELTA) > 1.1 * gaussian_epsilon(0.5, DELTA)
    assert PrivacyLedger([ev]).epsilon(DELTA) <= gaussian_epsilon(0.5, DELTA)


def test_delta_is_the_smallest_of_the_bounds_too():
    for ev in (wor(1.0, 0.94, 5), wor(1.0, 0.01, 500), wor(1.0, 1.0, 5)):
        expected = min(rdp_delta([ev], 1.0), gaussian_delta(1.0, ev.count / 2),
                       wor_pld_delta([ev], 1.0))
        assert PrivacyLedger([ev]).delta(1.0) == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------- monotone in n
def test_the_cost_does_not_grow_with_n_at_a_fixed_batch():
    b, z, count = 16, 1.5, 20
    ns = [*range(16, 25), 28, 32, 40, 48, 64, 80]
    costs = [PrivacyLedger([wor(z, b / n, count)]).epsilon(DELTA) for n in ns]
    assert all(later <= earlier for earlier, later in zip(costs, costs[1:]))
    assert costs[-1] < costs[0]  # and subsampling helps in the end


# The issue's figures: b = 16 gave z = 1.357 at n = 16, 1.522 at n = 17 and 1.430 at n = 20.
@pytest.mark.parametrize(
    "eps, delta, releases, ns",
    [(1.0, 1e-5, 48, [16, 17, 18, 20, 24, 32, 36, 37, 40, 64, 100]),
     (4.0, 0.1 / 16, 10, [16, 17, 20, 40])],
)
def test_calibrated_noise_does_not_grow_with_n_at_a_fixed_batch(eps, delta, releases, ns):
    zs = [subsampled_noise_multiplier(eps, delta, 16 / n, releases)[0] for n in ns]
    assert all(later < earlier for earlier, later in zip(zs, zs[1:])), list(zip(ns, zs))
    assert zs[-1] < 0.95 * zs[0]  # and subsampling helps once the batch is a small part
    # with the whole data set (n = b), z is the unsampled Gaussian's closed form
    closed_form = math.sqrt(releases / (2 * max_gaussian_mu(eps, delta)))
    assert zs[0] == pytest.approx(closed_form, rel=1e-12)


# ---------------------------------------------------------------------- planned = charged
@pytest.mark.parametrize(
    "eps, q, releases, bound",
    [(1.0, 16 / 17, 48, "pld_without_replacement"), (1.0, 0.01, 1000, "pld_without_replacement"),
     (4.0, 0.5, 30, "pld_without_replacement"), (2.0, 0.1, 200, "pld_without_replacement"),
     (1.0, 1.0, 48, "gaussian_without_subsampling")],
)
def test_calibration_plans_what_the_ledger_charges(eps, q, releases, bound):
    z, _ = subsampled_noise_multiplier(eps, DELTA, q, releases)
    cost = lambda zz: PrivacyLedger([wor(zz, q, releases)])  # noqa: E731
    assert cost(z).epsilon(DELTA) <= eps
    assert cost(0.999 * z).epsilon(DELTA) > eps  # tight: 0.1 % less noise overspends
    assert cost(z).bound(DELTA) == bound


def test_calibration_composes_the_fixed_events_in_both_bounds():
    warmup = [GaussianEvent(name="warm-up", noise_multiplier=6.0, count=4)]
    room = max_gaussian_mu(eps := 2.0, DELTA) - 4 / (2 * 36.0)
    for q, bound in [(1.0, "gaussian_without_subsampling"), (0.9, "pld_without_replacement")]:
        k = 30
        z, _ = subsampled_noise_multiplier(eps, DELTA, q, k, fixed=tuple(warmup))
        ledger = PrivacyLedger([wor(z, q, k), *warmup])
        assert ledger.epsilon(DELTA) <= eps and ledger.bound(DELTA) == bound
        assert PrivacyLedger([wor(0.999 * z, q, k), *warmup]).epsilon(DELTA) > eps
        assert z <= math.sqrt(k / (2 * room)) * (1 + 1e-12)  # at q = 1 the closed form
        if q == 1.0:
            assert z == pytest.approx(math.sqrt(k / (2 * room)), rel=1e-12)


# ---------------------------------------------------------------------- where it applies
def test_the_unsampled_bound_applies_only_to_sampling_without_replacement_under_replace_one():
    assert UNSAMPLED_GAUSSIAN.applies([wor(1.0, 0.5, 1), GaussianEvent(name="g", noise_multiplier=1.0)])
    assert not UNSAMPLED_GAUSSIAN.applies([wor(1.0, 0.5, 1, sampling="poisson")])
    assert not UNSAMPLED_GAUSSIAN.applies([LaplaceEvent(name="l", epsilon=0.1)])
    # Poisson sampling keeps its PLD route; the mix with sampling without replacement is
    # still refused (the RDP accountant has no Poisson replace-one bound), whatever the
    # unsampled bound would say
    with pytest.raises(UnsupportedEventError):
        PrivacyLedger([wor(1.0, 0.94, 1), wor(1.0, 0.94, 1, sampling="poisson")]).epsilon(DELTA)
    assert PrivacyLedger([wor(1.0, 0.5, 1, sampling="poisson")]).bound(DELTA) == "pld"


def test_pure_events_add_to_either_bound():
    for q in (0.94, 1.0):
        events = [wor(1.0, q, 3), LaplaceEvent(name="l", epsilon=0.25)]
        rest = min(gaussian_epsilon(3 / 2, DELTA), wor_pld_epsilon(events[:1], DELTA))
        assert PrivacyLedger(events).epsilon(DELTA) == pytest.approx(0.25 + rest, rel=1e-12)


def test_reports_say_which_bound_gave_epsilon():
    ledger = PrivacyLedger([wor(1.0, 1.0, 3)])
    report = pymc_dp.privacy_report(ledger, delta=DELTA)
    assert report.details["bound"] == "gaussian_without_subsampling"
    assert "bound: gaussian_without_subsampling" in str(report)
    assert report.details["ledger"][0]["kind"] == "subsampled_gaussian"
    small = pymc_dp.privacy_report(PrivacyLedger([wor(1.0, 0.01, 3)]), delta=DELTA)
    assert small.details["bound"] == "pld_without_replacement"
    assert "bound: pld_without_replacement" in str(small)


@pytest.mark.parametrize("rate", [0.5, 0.01])
def test_pure_fixed_events_are_calibrated_on_top_of_the_rest(rate):
    # (the ledger adds a pure event's ε to the rest's: calibration leaves it room the same way)
    pure = LaplaceEvent(name="published count", epsilon=0.1)
    warmup = GaussianEvent(name="warm-up", noise_multiplier=20.0, count=3)
    z, _ = subsampled_noise_multiplier(1.0, 1e-5, rate, 100, fixed=(pure, warmup))

    def cost(z):
        ev = SubsampledGaussianEvent(name="s", noise_multiplier=z, sampling_rate=rate, count=100)
        return PrivacyLedger([ev, pure, warmup]).epsilon(1e-5)

    assert 0.999 < cost(z) <= 1.0 < cost(0.999 * z)
    with pytest.raises(ValueError, match="pure"):
        subsampled_noise_multiplier(1.0, 1e-5, rate, 100,
                                    fixed=(LaplaceEvent(name="all of it", epsilon=1.0),))
