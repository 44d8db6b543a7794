"""The warm-up plan (pymc_dp.accounting.plan): what it spends, from public values only."""

import dataclasses

import numpy as np
import pytest

from pymc_dp.accounting import PrivacyLedger
from pymc_dp.accounting.plan import WarmupPlan


@pytest.mark.parametrize("plan", [WarmupPlan(), WarmupPlan(share=0.3, iterations=8, growth=1.0)])
def test_the_warmup_spends_exactly_its_share_of_the_chain(plan):
    chain_mu = 0.02
    zs = plan.noise_multipliers(chain_mu)
    assert zs.shape == (plan.iterations, 4)
    assert np.isclose(np.sum(1.0 / (2.0 * zs**2)), plan.share * chain_mu)
    events = plan.events(chain_mu)
    assert np.isclose(sum(e.mu for e in events), plan.share * chain_mu)
    # the ledger composes them like any other Gaussian releases
    assert PrivacyLedger(events).epsilon(1e-5) > 0


def test_without_the_hessian_norms_the_hessian_gets_their_share_and_nothing_else_moves():
    # (for a likelihood with a kink in every row: its Hessian-norm histogram is not made)
    plan = WarmupPlan()
    kinked = plan.without_hessian_norms()
    assert plan.hessian_norms and not kinked.hessian_norms
    zs, kinked_zs = plan.noise_multipliers(0.02), kinked.noise_multipliers(0.02)
    assert np.all(np.isinf(kinked_zs[:, 2]))
    np.testing.assert_allclose(kinked_zs[:, :2], zs[:, :2])
    # the Hessian's release: its own μ and the histogram's, together (1/z² adds)
    np.testing.assert_allclose(kinked_zs[:, 3] ** -2, zs[:, 2] ** -2 + zs[:, 3] ** -2)
    events = kinked.events(0.02)
    assert "warm-up Hessian-norm histogram" not in {e.name for e in events}
    assert len(events) == 3 * plan.iterations
    assert np.isclose(sum(e.mu for e in events), plan.share * 0.02)
    assert PrivacyLedger(events).epsilon(1e-5) == pytest.approx(
        PrivacyLedger(plan.events(0.02)).epsilon(1e-5)
    )


def test_later_iterations_get_more_of_the_budget():
    zs = WarmupPlan(growth=2.0).noise_multipliers(0.02)
    assert np.all(np.diff(zs[1:, 1]) < 0)  # less noise on the gradient as the mode nears
    np.testing.assert_allclose(zs[0], zs[-1])  # the first sets the metric: as much as the last


@pytest.mark.parametrize(
    "kwargs",
    [{"share": 0.0}, {"share": 1.0}, {"iterations": 0}, {"iterations": True},
     {"quantile": 1.0}, {"growth": 0.5}, {"clip_margin": 0.5}, {"clip_margin": float("nan")}, {"split": (0.1, 0.9)}, {"split": (0.1, 0.6, 0.3)},
     {"split": (0.0, 0.6, 0.1, 0.3)}, {"split": (0.1, 0.6, 0.1, 0.0)},
     {"split": (0.1, 0.6, -0.1, 0.3)}, {"split": (0.1, 0.6, float("nan"), 0.3)}],
)
def test_bad_plans_are_refused(kwargs):
    with pytest.raises(ValueError):
        WarmupPlan(**kwargs)


def test_a_plan_given_one_setting_keeps_the_librarys_other_defaults():
    # (a new user's trial: WarmupPlan(iterations=32) had also changed the quantile from
    # 0.999 to 0.99 and the growth from 1.3 to 2, silently)
    from pymc_dp.steps.warmup import DEFAULT_WARMUP

    assert WarmupPlan() == DEFAULT_WARMUP
    assert WarmupPlan(iterations=32) == dataclasses.replace(DEFAULT_WARMUP, iterations=32)


@pytest.mark.parametrize("dim", [1, 3, 12])
def test_the_modes_noise_is_the_later_gradient_releases_through_a_persons_clip(dim):
    # Equal iterations: each of the later K − ⌊K/2⌋ gradient releases spends the share
    # s·μ/K · split_g of μ, z = 1/√(2 μ_t); the mode averages them; one person's clip is
    # margin·√χ²_dim(q) over √m; the release's noise is 2Cz.
    from scipy.stats import chi2

    plan = WarmupPlan(share=0.4, iterations=9, growth=1.0, clip_margin=1.5, quantile=0.99)
    chain_mu = 0.3
    per_release = plan.share * chain_mu / plan.iterations * plan.split[1] / sum(plan.split)
    z = 1.0 / np.sqrt((plan.iterations - plan.iterations // 2) * 2.0 * per_release)
    expected = 2.0 * 1.5 * np.sqrt(chi2.ppf(0.99, dim)) * z
    assert plan.mode_noise(chain_mu, dim) == pytest.approx(expected, rel=1e-12)
    # four times the budget, half the noise
    assert plan.mode_noise(4 * chain_mu, dim) == pytest.approx(expected / 2, rel=1e-12)
