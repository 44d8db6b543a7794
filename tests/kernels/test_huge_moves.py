"""A huge but finite move is a rejection, never an exception (issue 12, item 10c).

Python's float power raises ``OverflowError`` where NumPy returns inf: a proposal at
distance ~1e160 made ``σ²`` of the released ratio overflow (DPHMC once died with
``OverflowError: (34, 'Numerical result out of range')`` under ``pm.sample``). Every kernel
must reject such a proposal (DPHMC: as a divergence), without reading the data when
public values already decide it.
"""

import numpy as np
import pytest

from pymc_dp.kernels.barker import barker_transition, load_vcorr
from pymc_dp.kernels.hmc import HMCState, hmc_transition
from pymc_dp.kernels.minibatch_penalty import minibatch_penalty_transition
from pymc_dp.kernels.penalty import PenaltyState, clipped_ratio_from, penalty_transition

Y = np.linspace(-1.0, 1.0, 40)
HUGE = 1e160  # finite; its square is not


class Data:
    """Per-datum log-likelihoods of N(θ, 1) that count how often the data is read."""

    def __init__(self):
        self.reads = 0

    def loglik(self, q):
        self.reads += 1
        with np.errstate(over="ignore"):
            return -0.5 * (Y - q[0]) ** 2

    def loglik_rows(self, q, rows):
        return self.loglik(q)[rows]


def logprior(q):
    with np.errstate(over="ignore"):
        return float(-0.5 * np.sum(q * q))


def test_dphmc_rejects_a_huge_trajectory_as_divergent_without_reading_the_data():
    data = Data()
    q0 = np.zeros(1)
    state = HMCState(q=q0, loglik=data.loglik(q0), logprior=0.0, grad=np.zeros(1))
    data.reads = 0
    new, info = hmc_transition(
        np.random.default_rng(0), state, ratio_fn=clipped_ratio_from(data.loglik), logprior_fn=logprior,
        grad_fn=lambda q: np.zeros_like(q),  # a flat released gradient: q_L = η p0, finite
        step_size=HUGE, n_steps=1, inv_mass=np.ones(1), loglik_clip=1.0,
        loglik_noise_multiplier=1.0,
    )
    assert np.all(np.isfinite(new.q)) and new is state
    assert not info.accepted and info.diverging
    assert data.reads == 0


def test_dphmc_rejects_an_overflowing_acceptance_as_divergent():
    # A moderate move whose log prior overflows at θ_L: the acceptance is −inf or NaN.
    data = Data()
    q0 = np.zeros(1)
    state = HMCState(q=q0, loglik=data.loglik(q0), logprior=0.0, grad=np.zeros(1))
    new, info = hmc_transition(
        np.random.default_rng(0), state, ratio_fn=clipped_ratio_from(data.loglik),
        logprior_fn=lambda q: float(np.sum(q) - np.inf),
        grad_fn=lambda q: np.zeros_like(q), step_size=0.5, n_steps=1, inv_mass=np.ones(1),
        loglik_clip=1.0, loglik_noise_multiplier=1.0,
    )
    assert new is state and not info.accepted and info.diverging


def test_dp_penalty_rejects_a_huge_move_without_reading_the_data():
    data = Data()
    q0 = np.zeros(1)
    state = PenaltyState(q=q0, loglik=data.loglik(q0), logprior=0.0)
    data.reads = 0
    new, info = penalty_transition(
        np.random.default_rng(0), state, np.array([HUGE]), clipped_ratio_from(data.loglik), logprior,
        clip_bound=1.0, noise_multiplier=1.0,
    )
    assert new is state and not info.accepted and info.log_accept == -np.inf
    assert data.reads == 0


def test_minibatch_penalty_rejects_a_huge_move_without_reading_the_data():
    data = Data()
    q0 = np.zeros(1)
    q_new, logprior_new, info = minibatch_penalty_transition(
        np.random.default_rng(0), q0, 0.0, np.array([HUGE]), data.loglik_rows, logprior,
        n_data=Y.size, batch_size=10, tempering=1.0, clip_bound=1.0, noise_multiplier=1.0,
    )
    assert q_new is q0 and logprior_new == 0.0 and not info.accepted
    assert data.reads == 0


@pytest.mark.parametrize("proposal", [np.inf, np.nan])
def test_dp_barker_rejects_a_non_finite_proposal_with_acceptance_zero(proposal):
    # A tuned-up scale can overflow to inf; the transformed log prior q − e^q is then NaN.
    data = Data()
    q0 = np.zeros(1)
    q_new, _, info = barker_transition(
        np.random.default_rng(0), q0, -1.0, np.array([proposal]), data.loglik_rows,
        lambda q: float(np.sum(q - np.exp(q))),
        n_data=Y.size, batch_size=20, tempering=1.0, vcorr=load_vcorr(),
    )
    assert q_new is q0 and not info.accepted
    assert info.accept_prob == 0.0
    assert data.reads == 0
