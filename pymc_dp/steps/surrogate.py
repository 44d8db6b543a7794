"""Sampling the private approximation ``p(θ) · L̃(θ)``: the exact public prior times the
Gaussian likelihood the warm-up's releases give (:mod:`pymc_dp.kernels.surrogate`).

The target reads no data: its only inputs are θ, the prior's public graph and released
numbers. So any sampler may explore it without spending privacy (post-processing); this
module runs PyMC's own NUTS on it, one NUTS transition per iteration of the private step,
seeded from the chain's generator.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc.blocking import RaveledVars
from pymc.exceptions import SamplingError
from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt
from pytensor.graph.replace import graph_replace

from pymc_dp.kernels.surrogate import GaussianLikelihood, gaussian_likelihood, independent_rows

__all__ = [
    "SurrogatePosterior", "SurrogateTarget", "surrogate_likelihood", "surrogate_posterior",
    "surrogate_target",
]

#: What a sampler of a public target may raise; the caller falls back on the Gaussian.
_SAMPLER_ERRORS = (SamplingError, ValueError, FloatingPointError, np.linalg.LinAlgError)

#: NUTS transitions spent adapting step size and mass matrix before the first draw (cheap:
#: the target reads no data).
TUNE = 1000


def surrogate_likelihood(pmodel, found, tempering: float = 1.0) -> GaussianLikelihood | None:
    """The Gaussian likelihood on the likelihood's parameters from a warm-up's result
    (:class:`~pymc_dp.kernels.warmup.LaplaceWarmup`), raised to ``tempering``, or ``None``
    when the model's graph or the result does not give one (then the Gaussian
    approximation on θ is used). Post-processing: the released mode and curvature, and
    public graphs."""
    params = pmodel.likelihood_parameters()
    if params is None or found.loglik_hessian is None:
        return None
    mean = np.asarray(found.mean, dtype=float)
    try:
        with np.errstate(all="ignore"):
            prior_grad = pmodel.prior_gradient(mean)
            if not np.all(np.isfinite(prior_grad)):
                return None
            jac = params.jacobian(mean)
            if not found.converged:
                if independent_rows(jac).size >= mean.size:
                    # (φ is θ rearranged: without a mode the surrogate has no better
                    # centre than the Gaussian's, the last iterate; keep the Gaussian)
                    return None
                # θ̂ is no mode, so its prior gradient says nothing of the likelihood's:
                # centre the likelihood at φ(θ̂) itself, as the Gaussian centres at θ̂.
                prior_grad = np.zeros_like(prior_grad)
            return gaussian_likelihood(
                params(mean), jac, found.loglik_hessian, prior_grad,
                lambda w: params.curvature(mean, w), found.noise_cov, tempering,
            )
    except (ValueError, np.linalg.LinAlgError):
        return None


def surrogate_target(pmodel, found, tempering: float = 1.0) -> SurrogateTarget | None:
    """The compiled target ``log p(θ) + T log L̃(θ)`` for a warm-up's result, or ``None``
    when there is no surrogate likelihood or its target cannot be built (the caller then
    draws from the Gaussian approximation). ``tempering`` T: the minibatch steps' tempered
    target (L̃^T: the same centre, the likelihood's own covariance 1/T times larger).
    Public: the chains of a run share it."""
    likelihood = surrogate_likelihood(pmodel, found, tempering)
    if likelihood is None:
        return None
    try:
        return SurrogateTarget(pmodel, likelihood)
    except _SAMPLER_ERRORS:
        return None


def surrogate_posterior(target, start, cov, rng) -> SurrogatePosterior | None:
    """A sampler of ``target`` (a :class:`SurrogateTarget`, or ``None``) started at ``start``
    (a draw from the Gaussian approximation, whose covariance ``cov`` is NUTS's first mass
    matrix), or ``None`` when there is no target or its sampler cannot start."""
    if target is None:
        return None
    try:
        return SurrogatePosterior(target, start, cov, rng)
    except _SAMPLER_ERRORS:
        return None


class SurrogateTarget:
    """``log p(θ) + log L̃(θ)`` on the value space of a private model, compiled once.

    Parameters
    ----------
    pmodel : PrivateModel
        Gives the prior's graph and the likelihood's parameters φ(θ) (public graphs).
    likelihood : GaussianLikelihood
        Released: centre and precision on φ.
    """

    def __init__(self, pmodel, likelihood: GaussianLikelihood):
        q, prior = pmodel.prior_graph()
        params = pmodel.likelihood_parameters()
        self.dim = dim = pmodel.dim
        with pm.Model(model=None) as model:  # (not a child of the user's model in context)
            theta = pm.Flat("theta", shape=(dim,))
            prior_t, phi_t = graph_replace([prior, params.graph], {q: theta}, strict=False)
            diff = phi_t[likelihood.rows] - likelihood.center
            target = prior_t - 0.5 * pt.dot(diff, pt.dot(likelihood.precision, diff))
            if pmodel.reads_data(target):  # (fail closed; both graphs were checked apart)
                raise ValueError("the surrogate target reads data")
            pm.Potential("target", target)
        self.model, self.theta = model, theta
        self.logp_dlogp = model.logp_dlogp_function([theta], ravel_inputs=True)
        self.logp_dlogp.trust_input = True


class SurrogatePosterior:
    """NUTS on a :class:`SurrogateTarget`, one chain.

    Parameters
    ----------
    target : SurrogateTarget
        The public target (its compiled function is shared with other chains).
    start : ndarray
        Where the chain starts (a draw from the Gaussian approximation).
    cov : ndarray
        The Gaussian approximation's covariance: NUTS's first mass matrix.
    rng : numpy.random.Generator
        The chain's generator (a child is spawned from it).
    """

    def __init__(self, target: SurrogateTarget, start, cov, rng, tune=TUNE):
        dim = target.dim
        seed = int(rng.integers(2**63))
        start = np.asarray(start, dtype=float)
        child = np.random.default_rng(seed)
        with warnings.catch_warnings():  # (PyMC calls its dense adaptation experimental)
            warnings.filterwarnings("ignore", "QuadPotentialFullAdapt", UserWarning)
            potential = QuadPotentialFullAdapt(
                dim, start, np.asarray(cov, dtype=float), 10,
                rng=np.random.default_rng(child.integers(2**63)),
            )
        self._nuts = pm.NUTS(
            vars=[target.theta], model=target.model, potential=potential, target_accept=0.9,
            rng=child, initial_point={"theta": start}, logp_dlogp_func=target.logp_dlogp,
        )
        self._info = (("theta", (dim,), dim, np.dtype("float64")),)
        self._point = start
        self._nuts.tune = True
        for _ in range(int(tune)):
            self._step()
        self._nuts.stop_tuning()

    def _step(self) -> float:
        out, stats = self._nuts.astep(RaveledVars(self._point, self._info))
        point = np.asarray(out.data, dtype=float)
        if not np.all(np.isfinite(point)):
            raise FloatingPointError("the surrogate's chain left the reals")
        self._point = point
        return float(stats[0]["mean_tree_accept"])

    def draw(self) -> tuple[np.ndarray, float] | None:
        """The next state of the chain and NUTS's mean acceptance in that transition, or
        ``None`` once the chain has failed (it stays failed)."""
        if self._nuts is None:
            return None
        try:
            accept = self._step()
        except _SAMPLER_ERRORS:
            self._nuts = None
            return None
        return self._point.copy(), accept
