"""The tuned proposal shared by DPPenalty, MinibatchDPPenalty and DPBarker."""

import numpy as np
import pytest

import pymc_dp

from pymc_dp.steps.proposals import TunedProposal, TunedProposalState

SAMPLE = dict(progressbar=False, compute_convergence_checks=False)

STEPS = {
    "DPPenalty": lambda **kw: pymc_dp.DPPenalty(eps=1e6, clip_bound=20.0, **kw),
    "MinibatchDPPenalty": lambda **kw: pymc_dp.MinibatchDPPenalty(
        eps=1e6, clip_bound=20.0, batch_size=50, **kw
    ),
    "DPBarker": lambda **kw: pymc_dp.DPBarker(eps=1e6, batch_size=50, **kw),
}


@pytest.mark.parametrize("name", list(STEPS))
def test_every_metropolis_type_step_shares_the_proposal_state(name, conjugate):
    model, _, _ = conjugate
    with model:
        step = STEPS[name](proposal="guided", scaling=0.3, tune_interval=7, chains=1)
    assert isinstance(step, TunedProposal)
    state = step.sampling_state
    assert isinstance(state, TunedProposalState)
    assert state.proposal == "guided" and state.steps_until_tune == 7
    np.testing.assert_array_equal(state.scaling, [0.3])


def test_scaling_is_tuned_from_accept_decisions_and_reset_per_chain(conjugate):
    model, _, _ = conjugate
    with model:
        # A tiny scale: nearly every proposal is accepted, so tuning must grow it.
        step = pymc_dp.DPPenalty(eps=1e6, clip_bound=20.0, scaling=1e-4, tune_interval=10,
                                 chains=1)
        idata = pymc_dp.sample(step=step, draws=5, tune=60, chains=1, random_seed=3,
                               discard_tuned_samples=False, **SAMPLE)
    scaling = idata.warmup_sample_stats["scaling"].values.ravel()
    assert scaling[0] == pytest.approx(1e-4)
    assert scaling[-1] > 10 * scaling[0]  # pm.Metropolis' rule: x10 above 95 % accepted
    step.reset_tuning()
    np.testing.assert_array_equal(step.scaling, [1e-4])
    assert step.steps_until_tune == 10 and step.accepted_sum == 0


def test_guided_directions_flip_only_on_reject():
    class Probe(TunedProposal):
        rng = np.random.default_rng(0)

    probe = Probe()
    probe._check_proposal_args("guided", 0.5, 5)
    probe._init_proposal(None, 3)
    probe._start_proposal_chain()
    start = probe.directions.copy()
    proposal = probe._propose(np.zeros(3))
    i = proposal.coordinate
    assert np.sign(proposal.q[i]) == start[i]  # moved along its direction
    probe._record_decision(proposal, accepted=True)
    np.testing.assert_array_equal(probe.directions, start)
    probe._record_decision(proposal, accepted=False)
    flipped = start.copy()
    flipped[i] *= -1
    np.testing.assert_array_equal(probe.directions, flipped)
    assert probe.accepted_sum == 1 and probe.steps_until_tune == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(proposal="hamiltonian"), "proposal must be one of"),
        (dict(scaling=0.0), "scaling"),
        (dict(tune_interval=0), "tune_interval"),
        (dict(tune_interval=True), "tune_interval"),
        (dict(tune_interval=2.5), "tune_interval"),
    ],
)
def test_bad_proposal_arguments_are_refused(kwargs, match):
    class Probe(TunedProposal):
        pass

    args = dict(proposal="random_walk", scaling=1.0, tune_interval=100) | kwargs
    with pytest.raises(ValueError, match=match):
        Probe()._check_proposal_args(**args)


def test_numpy_integers_are_fine_for_the_tuning_interval():
    class Probe(TunedProposal):
        pass

    probe = Probe()
    probe._check_proposal_args("one_component", 0.5, np.int64(25))
    assert probe.tune_interval == 25 and type(probe.tune_interval) is int


def test_per_coordinate_sds_must_match_the_dimension():
    class Probe(TunedProposal):
        pass

    probe = Probe()
    probe._check_proposal_args("random_walk", 1.0, 100)
    with pytest.raises(ValueError, match="positive per-coordinate"):
        probe._init_proposal(np.ones(2), 3)
    with pytest.raises(ValueError, match="positive per-coordinate"):
        probe._init_proposal(np.array([1.0, -1.0, 1.0]), 3)
