"""DP Barker (docs/algorithms.md "DP Barker"; thesis 3.3, Algorithm 3; Heikkilä et al. 2019).

Small functions of arrays and a generator; nothing here knows PyMC. One iteration from θ,
after the step has proposed θ' (:func:`pymc_dp.kernels.penalty.propose`):

1. draw a batch B of ``b`` rows without replacement;
2. ``r_j = clip(ℓ_j(θ') − ℓ_j(θ))`` at ``√b / n0`` (``n0 = nT``, T the tempering), so every
   scaled term ``t_j = (nT/b) r_j`` has ``|t_j| ≤ 1/√b``;
3. ``λ = Σ_B t_j`` and ``s² = Σ_B t_j² − (Σ_B t_j)²/b ≤ 1`` (the batch estimate of λ's
   variance);
4. release ``λ + N(0, σ² − s²)`` with ``σ² = 2``: the total noise, subsampling error
   included, is then ≈ N(0, 2);
5. accept iff ``release + log prior ratio + V > 0`` with ``V ~ V_corr``, the correction
   distribution of :class:`VCorr`: ``N(0, 2) + V_corr ≈ Logistic(0, 1)``, so this is
   Barker's test ``λ + Logistic > 0`` (acceptance probability ``1/(1 + e^{−λ})``).

The privacy of step 4 is the subject of :mod:`pymc_dp.accounting.barker` (thesis
Theorem 7); step 5 is post-processing.

``V_corr`` has no closed form (the characteristic function of Logistic(0, 1) over that of
N(0, 2) grows without bound, so no exact correction exists); it is approximated by a
Gaussian mixture fitted by ``scripts/fit_vcorr.py`` to minimise the Kolmogorov–Smirnov
distance ``sup_x |P(N(0, 2) + V ≤ x) − 1/(1 + e^{−x})|`` and shipped as
``pymc_dp/data/vcorr.json``.
"""

from __future__ import annotations

import json
import math

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from scipy import optimize, special

from pymc_dp.kernels.clipping import clipped_scalars
from pymc_dp.kernels.minibatch_penalty import (
    batch_estimate,
    draw_batch,
    fresh_batch_clipped_count,
)
from pymc_dp.kernels.penalty import _finite_or_reject

__all__ = [
    "BARKER_NOISE_VARIANCE",
    "BarkerInfo",
    "VCorr",
    "barker_transition",
    "load_vcorr",
]

VCORR_RESOURCE = "vcorr.json"
#: Total noise variance σ² of DP Barker (thesis Theorem 7 and the shipped V_corr are for
#: σ² = 2). Defined here, with the mechanism; the accounting imports it from this module.
BARKER_NOISE_VARIANCE = 2.0


@dataclass(frozen=True, eq=False)
class VCorr:
    """A Gaussian mixture ``Σ_k w_k N(m_k, s_k²)`` standing in for the correction distribution.

    Components with ``s_k = 0`` are point masses. ``noise_variance`` is the σ² of the
    Gaussian it corrects: ``N(0, σ²) + V_corr ≈ Logistic(0, 1)``.

    Examples
    --------
    >>> v = load_vcorr()
    >>> v.noise_variance
    2.0
    >>> v.sample(np.random.default_rng(0), 3).shape
    (3,)
    >>> bool(v.ks_distance() < 2.4e-3)
    True
    """

    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray
    noise_variance: float

    def __post_init__(self):
        w, m, s = (np.asarray(a, dtype=float) for a in (self.weights, self.means, self.sds))
        if not (w.ndim == 1 and w.shape == m.shape == s.shape and w.size >= 1):
            raise ValueError("weights, means and sds must be 1-d arrays of equal length")
        if np.any(w < 0) or not math.isclose(w.sum(), 1.0, abs_tol=1e-9):
            raise ValueError("weights must be >= 0 and sum to 1")
        if np.any(s < 0) or not np.all(np.isfinite(m)):
            raise ValueError("sds must be >= 0 and means finite")
        if not 0 < self.noise_variance < math.pi**2 / 3:
            raise ValueError("noise_variance must be in (0, π²/3)")
        object.__setattr__(self, "weights", w / w.sum())
        object.__setattr__(self, "means", m)
        object.__setattr__(self, "sds", s)

    def sample(self, rng: np.random.Generator, size=None):
        """Draws of V_corr (vectorised: one component choice and one normal per draw)."""
        shape = () if size is None else tuple(np.atleast_1d(size))
        count = int(np.prod(shape, dtype=int))
        k = rng.choice(self.weights.size, size=count, p=self.weights)
        draws = self.means[k] + self.sds[k] * rng.standard_normal(count)
        return float(draws[0]) if size is None else draws.reshape(shape)

    def cdf(self, x):
        """CDF of V_corr itself."""
        return self._mixture_cdf(x, 0.0)

    def sum_cdf(self, x):
        """Exact CDF of ``N(0, noise_variance) + V_corr``: ``Σ_k w_k Φ((x − m_k)/√(σ² + s_k²))``."""
        return self._mixture_cdf(x, self.noise_variance)

    def _mixture_cdf(self, x, extra_variance):
        x = np.asarray(x, dtype=float)
        sd = np.sqrt(self.sds**2 + extra_variance)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (x[..., None] - self.means) / sd
        # a point mass (sd 0): step function, right-continuous
        z = np.where(sd > 0, z, np.where(x[..., None] >= self.means, np.inf, -np.inf))
        return np.sum(self.weights * special.ndtr(z), axis=-1)

    def ks_distance(self, *, grid_step: float = 1e-3, tail: float = 60.0) -> float:
        """``sup_x |P(N(0, σ²) + V_corr ≤ x) − 1/(1 + e^{−x})|``, computed, not sampled.

        Evaluated exactly on a grid of step ``grid_step`` over ``[−tail, tail]`` and refined
        by a local maximisation around the largest grid values (the difference is smooth).
        Beyond the grid both CDFs are monotone, so there the difference is bounded by the
        larger of the two tail masses at ``±tail``, which is added to the result's candidates.
        """
        return logistic_sup_distance(self.sum_cdf, grid_step=grid_step, tail=tail)

    def to_dict(self) -> dict:
        return {
            "noise_variance": self.noise_variance,
            "weights": self.weights.tolist(),
            "means": self.means.tolist(),
            "sds": self.sds.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> VCorr:
        return cls(
            weights=np.asarray(data["weights"], dtype=float),
            means=np.asarray(data["means"], dtype=float),
            sds=np.asarray(data["sds"], dtype=float),
            noise_variance=float(data["noise_variance"]),
        )


def logistic_sup_distance(cdf: Callable, *, grid_step: float = 1e-3, tail: float = 60.0) -> float:
    """``sup_x |cdf(x) − 1/(1 + e^{−x})|`` for a continuous CDF (see :meth:`VCorr.ks_distance`)."""
    x = np.arange(-tail, tail + grid_step / 2, grid_step)
    diff = np.abs(cdf(x) - special.expit(x))
    best = float(diff.max())
    for i in np.argsort(diff)[-20:]:
        lo, hi = x[max(i - 1, 0)], x[min(i + 1, x.size - 1)]
        res = optimize.minimize_scalar(
            lambda t: -abs(float(cdf(np.array([t]))[0]) - float(special.expit(t))),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-10},
        )
        best = max(best, -float(res.fun))
    # tails: both CDFs are monotone, so beyond ±tail the gap is at most the larger tail mass
    lower = max(float(cdf(np.array([-tail]))[0]), float(special.expit(-tail)))
    upper = max(1 - float(cdf(np.array([tail]))[0]), 1 - float(special.expit(tail)))
    return max(best, lower, upper)


@lru_cache(maxsize=1)
def load_vcorr() -> VCorr:
    """The shipped V_corr fit (``pymc_dp/data/vcorr.json``, made by ``scripts/fit_vcorr.py``)."""
    text = resources.files("pymc_dp.data").joinpath(VCORR_RESOURCE).read_text()
    vcorr = VCorr.from_dict(json.loads(text))
    if vcorr.noise_variance != BARKER_NOISE_VARIANCE:
        raise ValueError(f"{VCORR_RESOURCE} is for σ² = {vcorr.noise_variance}, not 2")
    return vcorr


@dataclass(frozen=True)
class BarkerInfo:
    accepted: bool
    statistic: float  # the release plus the public log prior ratio: public
    accept_prob: float  # P(statistic + V_corr > 0 | statistic): public


def barker_transition(
    rng: np.random.Generator,
    q: np.ndarray,
    logprior_q: float,
    q_proposed: np.ndarray,
    loglik_rows: Callable[[np.ndarray, np.ndarray], np.ndarray],
    logprior_fn: Callable[[np.ndarray], float],
    *,
    n_data: int,
    batch_size: int,
    tempering: float,
    vcorr: VCorr,
    count_clipped: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, float, BarkerInfo]:
    """One DP Barker test of ``q_proposed``: exactly one noisy release (see the module docs).

    ``count_clipped``, if given, is called with the number of terms clipped at this move on
    a batch of its own (:func:`~pymc_dp.kernels.minibatch_penalty.fresh_batch_clipped_count`;
    private: for the clip diagnostics, :mod:`pymc_dp.kernels.clip_diagnostics`).

    Returns the new point, its log prior and the public info of the iteration.
    """
    if not np.all(np.isfinite(q_proposed)):  # public: rejected before the batch is read
        return q, logprior_q, BarkerInfo(False, -math.inf, 0.0)
    n0 = n_data * tempering
    rows = draw_batch(rng, n_data, batch_size)
    # inf − inf between diverged log-likelihoods (clipped to 0), or an overflow (to ±bound)
    with np.errstate(over="ignore", invalid="ignore"):
        differences = loglik_rows(q_proposed, rows) - loglik_rows(q, rows)
    ratios = clipped_scalars(differences, math.sqrt(batch_size) / n0)
    if count_clipped is not None:
        count_clipped(fresh_batch_clipped_count(
            rng, loglik_rows, q_proposed, q, n_data=n_data, batch_size=batch_size,
            bound=math.sqrt(batch_size) / n0,
        ))
    estimate, variance = batch_estimate(ratios, n0 / batch_size)  # variance ≤ 1 by the clip
    noise_sd = math.sqrt(max(BARKER_NOISE_VARIANCE - variance, 0.0))
    release = estimate + noise_sd * rng.standard_normal()  # the release
    logprior_proposed = logprior_fn(q_proposed)
    # NaN or ±inf (an overflowed log prior) is a rejection, with acceptance probability 0.
    statistic = _finite_or_reject(release + (logprior_proposed - logprior_q))
    accepted = bool(statistic + vcorr.sample(rng) > 0)
    accept_prob = float(1.0 - vcorr.cdf(-statistic)) if math.isfinite(statistic) else 0.0
    info = BarkerInfo(accepted, statistic, accept_prob)
    if accepted:
        return q_proposed, logprior_proposed, info
    return q, logprior_q, info
