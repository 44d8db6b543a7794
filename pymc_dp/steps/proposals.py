"""The tuned Metropolis proposal of the DP penalty and minibatch steps.

:class:`~pymc_dp.DPPenalty`, :class:`~pymc_dp.MinibatchDPPenalty` and
:class:`~pymc_dp.DPBarker` propose the same way (:func:`pymc_dp.kernels.penalty.propose`:
random walk, one-component or guided walk with per-coordinate sds ``S · scaling``) and tune
``scaling`` the same way, as ``pm.Metropolis`` does: every ``tune_interval`` tuning
iterations, from the fraction of accepted proposals. Accept decisions are computed from
released (noisy) values, so the tuning is post-processing and costs no privacy. This module
holds that shared part once; the steps add their release and its accounting.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.metropolis import tune as metropolis_tune
from pymc.step_methods.state import dataclass_state

from pymc_dp.kernels.penalty import PROPOSALS, Proposal, guided_directions_after, propose
from pymc_dp.validation import check_int, check_positive

__all__ = ["TunedProposal", "TunedProposalState"]


@dataclass_state
class TunedProposalState(StepMethodState):
    # Public values only: this state may be stored with a trace (ZarrTrace).
    scaling: np.ndarray
    tune: bool
    steps_until_tune: int
    accepted_sum: int
    directions: np.ndarray
    proposal: str = field(metadata={"frozen": True})


class TunedProposal:
    """Mixin for a private step with a tuned Metropolis proposal (see the module docs).

    A step calls :meth:`_check_proposal_args` before it touches the model,
    :meth:`_init_proposal` once the dimension is known, :meth:`_start_proposal_chain` at the
    start of every chain, and per iteration :meth:`_propose` then :meth:`_record_decision`.
    The attributes listed in
    :class:`TunedProposalState` live on the step, where PyMC's ``sampling_state`` finds them.
    """

    _state_class = TunedProposalState

    def _check_proposal_args(self, proposal: str, scaling: float, tune_interval: int) -> None:
        if not (isinstance(proposal, str) and proposal in PROPOSALS):
            raise ValueError(f"proposal must be one of {PROPOSALS}, got {proposal!r}")
        self.tune_interval = check_int(tune_interval, "tune_interval")
        self.proposal = proposal
        # scaling=None: the step chooses the first scale itself (from its warm-up)
        self._scaling_given = scaling is not None
        scaling = 1.0 if scaling is None else check_positive(scaling, "scaling")
        self.scaling = np.atleast_1d(scaling).astype(float)

    def _init_proposal(self, S, dim: int) -> None:
        S = np.ones(dim) if S is None else np.asarray(S, dtype=float)
        if S.shape != (dim,) or not np.all(np.isfinite(S) & (S > 0)):
            raise ValueError(f"S must be {dim} positive per-coordinate proposal sds")
        self.S = S
        self.tune = True
        self.steps_until_tune = self.tune_interval
        self.accepted_sum = 0
        self.directions = np.ones(dim)
        self._untuned_scaling = self.scaling.copy()

    def reset_tuning(self):
        """Reset the proposal scale to its initial value (PyMC's sequential sampler calls this
        between chains; parallel workers each start from a fresh copy of the step)."""
        self.scaling = self._untuned_scaling.copy()
        self.steps_until_tune = self.tune_interval
        self.accepted_sum = 0

    def _set_proposal_shape(self, S: np.ndarray | None, scaling: float | None) -> None:
        """Set the proposal sds and first scale chosen for this chain (public values)."""
        if S is not None:
            self.S = np.asarray(S, dtype=float)
        if scaling is not None and not self._scaling_given:
            self.scaling = np.atleast_1d(float(scaling))

    def _start_proposal_chain(self) -> None:
        # The guided walk's initial directions come from the chain's generator.
        self.directions = self.rng.choice([-1.0, 1.0], size=self.S.size)

    def _propose(self, q: np.ndarray) -> Proposal:
        """Tune the scale if a tuning interval is complete, then draw θ' from θ = ``q``."""
        if self.tune and self.steps_until_tune == 0:
            self.scaling = metropolis_tune(self.scaling, self.accepted_sum / self.tune_interval)
            self.steps_until_tune = self.tune_interval
            self.accepted_sum = 0
        return propose(self.rng, q, self.S * self.scaling, self.proposal, self.directions)

    def _record_decision(self, proposal: Proposal, accepted: bool) -> None:
        """Feed the (public) accept decision to the guided walk and the tuning counters."""
        if self.proposal == "guided":
            self.directions = guided_directions_after(
                self.directions, proposal.coordinate, accepted
            )
        self.accepted_sum += bool(accepted)
        self.steps_until_tune -= 1
