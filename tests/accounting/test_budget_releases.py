"""Mechanism releases and PosteriorSampling drawing from a shared pymc_dp.Budget."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import Budget, PrivacyLedger
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.mechanisms.release import gaussian_release, laplace_release

DELTA = 1e-6


class Unreadable:
    """A statistic that must not be read (a refused release reads nothing)."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the release read its value")


@pytest.fixture
def budget(tmp_path):
    return Budget("survey", epsilon=1.0, delta=DELTA, store=str(tmp_path / "b.db"), create=True)


def test_releases_reserve_their_event_before_reading_the_value(budget):
    a = laplace_release([3.0, 4.0], sensitivity=1.0, epsilon=0.5, rng=0, budget=budget,
                        name="counts")
    b = gaussian_release(2.0, sensitivity=1.0, noise_multiplier=10.0, rng=0, budget=budget)
    records = budget.records()
    assert [r["owner"] for r in records] == ["laplace_release", "gaussian_release"]
    assert budget.spent() == PrivacyLedger([a.event, b.event])  # what was released
    with pytest.raises(PrivacyBudgetExceeded, match="budget 'survey'"):
        laplace_release(Unreadable(), sensitivity=1.0, epsilon=0.5, rng=0, budget=budget)
    assert len(budget.records()) == 2
    # the same release without a budget: the same noise for a seed
    again = laplace_release([3.0, 4.0], sensitivity=1.0, epsilon=0.5, rng=0, name="counts")
    np.testing.assert_array_equal(a.value, again.value)


def test_posterior_sampling_draws_from_a_budget(budget):
    y = np.random.default_rng(3).binomial(1, 0.3, size=60)
    with pm.Model() as model:
        p = pm.Truncated("p", pm.Beta.dist(2.0, 3.0), lower=0.05, upper=0.95)
        pm.Bernoulli("y", p, observed=y)
    with pytest.raises(ValueError, match="more than the whole budget"):
        pymc_dp.PosteriorSampling(eps=2.0, draws=5, model=model, budget=budget)
    mech = pymc_dp.PosteriorSampling(eps=0.5, draws=5, model=model, budget=budget)
    mech.sample(random_seed=1, chains=2, tune=300, progressbar=False, cores=1)
    (record,) = budget.records()
    assert record["owner"] == "PosteriorSampling" and record["cap"] == [0.5, 0.0]
    assert budget.spent().epsilon(DELTA) == pytest.approx(0.5)
