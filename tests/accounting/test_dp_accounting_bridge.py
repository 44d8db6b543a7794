"""Tests of the bridge to dp-accounting (pymc_dp.accounting.dp_accounting_bridge)."""

import math

import dp_accounting
import numpy as np
import pytest

from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.special import comb

from pymc_dp.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
    UnsupportedEventError,
    gaussian_delta,
    gaussian_epsilon,
    pld_delta,
    pld_epsilon,
    rdp_delta,
    rdp_epsilon,
    to_dp_event,
)
from pymc_dp.accounting.dp_accounting_bridge import (
    common_neighbouring,
    make_pld_accountant,
    make_rdp_accountant,
)

DELTAS = (1e-8, 1e-5, 1e-2)


def gauss(mu, neighbouring="replace_one", name="g"):
    """A GaussianEvent of total ``mu`` (count 4)."""
    return GaussianEvent(
        name=name, count=4, noise_multiplier=math.sqrt(4 / (2 * mu)), neighbouring=neighbouring
    )


# ------------------------------------------------------------- PLD vs the closed form
@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
@pytest.mark.parametrize("mu", [0.02, 0.5, 2.0])
def test_pld_accountant_agrees_with_gaussian_epsilon(mu, neighbouring):
    # With dp-accounting's default discretisation (1e-4, connect-the-dots, pessimistic) the
    # PLD ε is an upper bound within ~1e-8 of the exact one.
    acc = make_pld_accountant([gauss(mu, neighbouring)])
    for delta in DELTAS:
        exact = gaussian_epsilon(mu, delta)
        got = float(acc.get_epsilon(delta))
        assert exact - 1e-9 <= got <= exact + 1e-6
    for eps in (0.1, 1.0, 3.0):
        exact = gaussian_delta(eps, mu)
        got = float(acc.get_delta(eps))
        assert got >= exact * (1 - 1e-9)
        assert got == pytest.approx(exact, rel=1e-5, abs=1e-12)


def test_mixed_gaussians_compose_through_summed_mu():
    events = [
        GaussianEvent(name="a", count=3, noise_multiplier=2.0),
        GaussianEvent(name="b", count=10, noise_multiplier=5.0),
        GaussianEvent(name="unused", count=0, noise_multiplier=0.01),
    ]
    mu = sum(e.mu for e in events)
    assert pld_epsilon(events, 1e-6) == pytest.approx(gaussian_epsilon(mu, 1e-6), abs=1e-6)
    assert pld_delta(events, 1.0) == pytest.approx(gaussian_delta(1.0, mu), rel=1e-5)


def test_replace_one_noise_multiplier_convention_of_dp_accounting():
    # dp-accounting's PLD accountant under REPLACE_ONE moves a Gaussian's mean by twice the
    # sensitivity: passing z unchanged would report the ε of 4μ. The bridge passes 2z.
    z, delta = 2.0, 1e-5
    mu = 1 / (2 * z**2)
    naive = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    naive.compose(dp_accounting.GaussianDpEvent(z))
    four_mu = gaussian_epsilon(4 * mu, delta)
    assert float(naive.get_epsilon(delta)) == pytest.approx(four_mu, abs=1e-6)
    ev = GaussianEvent(name="g", noise_multiplier=z)
    assert to_dp_event(ev, "pld").event.noise_multiplier == 2 * z
    assert to_dp_event(ev, "rdp").event.noise_multiplier == z
    add_remove = GaussianEvent(name="g", noise_multiplier=z, neighbouring="add_remove")
    assert to_dp_event(add_remove, "pld").event.noise_multiplier == z
    assert pld_epsilon([ev], delta) == pytest.approx(gaussian_epsilon(mu, delta), abs=1e-6)


@pytest.mark.parametrize("neighbouring", ["replace_one", "add_remove"])
def test_rdp_gaussian_is_valid_but_looser(neighbouring):
    events = [gauss(0.5, neighbouring)]
    for delta in DELTAS:
        assert rdp_epsilon(events, delta) >= gaussian_epsilon(0.5, delta)
    assert rdp_delta(events, 1.0) >= gaussian_delta(1.0, 0.5)


# ------------------------------------------------------------- subsampled events
def poisson(q, z=3.0, count=50, neighbouring="add_remove", name="batch"):
    return SubsampledGaussianEvent(
        name=name, count=count, noise_multiplier=z, sampling_rate=q, sampling="poisson",
        neighbouring=neighbouring,
    )


def wor(q, z=1.0, count=200, neighbouring="replace_one", name="batch"):
    return SubsampledGaussianEvent(
        name=name, count=count, noise_multiplier=z, sampling_rate=q,
        sampling="without_replacement", neighbouring=neighbouring,
    )


def test_poisson_add_remove_pld_is_tighter_than_rdp_and_amplifies():
    events = [poisson(0.05)]
    pld = pld_epsilon(events, 1e-5)
    rdp = rdp_epsilon(events, 1e-5)
    assert 0 < pld <= rdp
    # subsampling only helps: below the unsampled composition of the same releases
    unsampled = GaussianEvent(name="g", count=50, noise_multiplier=3.0, neighbouring="add_remove")
    assert pld < gaussian_epsilon(unsampled.mu, 1e-5)
    # q = 1 is the plain Gaussian mechanism
    full = [poisson(1.0, z=10.0, count=20)]
    assert pld_epsilon(full, 1e-5) == pytest.approx(
        gaussian_epsilon(20 / (2 * 10.0**2), 1e-5), abs=1e-6
    )


def test_poisson_replace_one_goes_through_pld_only_and_is_conservative():
    events = [poisson(0.05, neighbouring="replace_one")]
    with pytest.raises(UnsupportedEventError, match="Poisson"):
        rdp_epsilon(events, 1e-5)
    replace = pld_epsilon(events, 1e-5)
    add_remove = pld_epsilon([poisson(0.05)], 1e-5)
    assert replace > add_remove


def thesis_theorem_8_rdp(alpha, q, tau):
    """The RDP of one subsampled (without replacement) Gaussian, thesis Thm 8, integer α."""

    def eps_prime(a):
        return a / (2 * tau)

    total = 1 + q**2 * comb(alpha, 2, exact=True) * min(
        4 * (math.exp(eps_prime(2)) - 1), 2 * math.exp(eps_prime(2))
    )
    for j in range(3, alpha + 1):
        total += 2 * q**j * comb(alpha, j, exact=True) * math.exp((j - 1) * eps_prime(j))
    return math.log(total) / (alpha - 1)


@pytest.mark.parametrize("q, z", [(0.01, 1.0), (0.05, 2.0), (0.2, 3.0)])
def test_without_replacement_rdp_matches_thesis_theorem_8(q, z):
    # dp-accounting uses WBK19 Thm 27, a strengthening of the Thm 9 bound the thesis states,
    # with the same α = 2 term: with noise multiplier √τ = z the two agree exactly at α = 2
    # (which pins the noise-multiplier convention) and dp-accounting is never above.
    acc = make_rdp_accountant([wor(q, z=z, count=1)])
    checked = 0
    for alpha, value in zip(acc.orders, acc.rdp, strict=True):
        if float(alpha).is_integer() and 2 <= alpha <= 32:
            ref = thesis_theorem_8_rdp(int(alpha), q, z**2)
            assert value <= ref * (1 + 1e-9)
            if alpha == 2:
                assert value == pytest.approx(ref, rel=1e-9)
            checked += 1
    assert checked > 10


def test_without_replacement_is_rdp_only_and_replace_one_only():
    with pytest.raises(UnsupportedEventError, match="without replacement"):
        pld_epsilon([wor(0.01)], 1e-5)
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        rdp_epsilon([wor(0.01, neighbouring="add_remove")], 1e-5)
    eps = rdp_epsilon([wor(0.01)], 1e-5)
    assert 0 < eps < rdp_epsilon([GaussianEvent(name="g", count=200, noise_multiplier=1.0)], 1e-5)


def test_without_replacement_sampling_rate_is_passed_exactly():
    for q in (0.01, 1 / 3, 0.123456789, 1.0):
        ev = to_dp_event(wor(q), "rdp")
        assert ev.count == 200
        assert ev.event.sample_size / ev.event.source_dataset_size == q


def test_merging_and_grouping_match_separate_composition():
    # Grouping equal subsampled events (counts summed) is what composing them one by one does.
    events = [poisson(0.02, count=50), poisson(0.02, count=150), gauss(0.1, "add_remove")]
    acc = rdp_privacy_accountant.RdpAccountant()
    for e in events:
        acc.compose(to_dp_event(e, "rdp"))
    assert rdp_epsilon(events, 1e-6) == pytest.approx(float(acc.get_epsilon(1e-6)), rel=1e-12)


# ------------------------------------------------------------- errors and edge cases
def test_pure_events_are_not_converted():
    for ev in (LaplaceEvent(name="l", epsilon=0.1), PureDPEvent(name="p", epsilon=0.1)):
        with pytest.raises(UnsupportedEventError, match="basic composition"):
            pld_epsilon([ev], 1e-5)
        with pytest.raises(UnsupportedEventError):
            to_dp_event(ev, "rdp")


def test_mixed_neighbouring_relations_are_refused():
    events = [gauss(0.1, "replace_one"), gauss(0.1, "add_remove")]
    with pytest.raises(ValueError, match="neighbouring"):
        pld_epsilon(events, 1e-5)
    with pytest.raises(ValueError, match="neighbouring"):
        common_neighbouring(events)


def test_unsupported_error_is_a_value_error():
    assert issubclass(UnsupportedEventError, ValueError)


def test_empty_and_zero_count_cost_nothing():
    assert pld_epsilon([], 1e-5) == 0.0
    assert rdp_epsilon([], 1e-5) == 0.0
    assert pld_delta([], 1.0) == 0.0
    unused = [
        GaussianEvent(name="g", count=0, noise_multiplier=1.0, neighbouring="add_remove"),
        poisson(0.1, count=0),
    ]
    assert pld_epsilon(unused, 1e-5) == 0.0
    assert rdp_delta(unused, 0.5) == 0.0


@pytest.mark.parametrize("bad", [0.0, 1.0, math.nan, -1e-3])
def test_bad_delta_raises(bad):
    with pytest.raises(ValueError, match="delta"):
        pld_epsilon([gauss(0.1)], bad)
    with pytest.raises(ValueError, match="delta"):
        rdp_epsilon([gauss(0.1)], bad)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, None])
def test_bad_epsilon_raises(bad):
    with pytest.raises(ValueError, match="epsilon"):
        pld_delta([gauss(0.1)], bad)
    with pytest.raises(ValueError, match="epsilon"):
        rdp_delta([gauss(0.1)], bad)


def test_bad_accountant_name():
    with pytest.raises(ValueError, match="accountant"):
        to_dp_event(gauss(0.1), "fourier")


def test_returns_plain_floats():
    assert type(pld_epsilon([gauss(0.1)], 1e-5)) is float
    assert type(rdp_epsilon([gauss(0.1)], 1e-5)) is float
    assert np.isfinite(pld_delta([gauss(0.1)], 0.5))
