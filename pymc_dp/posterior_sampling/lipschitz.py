r"""Lipschitz constants of per-datum log-likelihoods, for the posterior sampling mechanism.

Dimitrakakis et al. (2017), Assumption 1: the family is L-Lipschitz under a pseudo-metric ρ
on data if ``|ln p(x|θ) − ln p(y|θ)| ≤ L ρ(x, y)`` for every θ in the support of the prior.
Then one exact posterior draw is ``2L``-DP under ρ (Thm 8), N draws are ``2NL``-DP (Cor 10),
and tempering the likelihood by T (``p(x|θ)^T``) multiplies L by T (``docs/algorithms.md``,
"Posterior sampling mechanism").

What this module computes
-------------------------
For neighbouring datasets X, Y differing in one datum j (``x_j`` against ``y_j``), let
``r(θ) = ℓ(x_j, θ) − ℓ(y_j, θ)`` be the log-likelihood ratio of the changed datum. The
posterior ratio is::

    ln ξ(θ|X) − ln ξ(θ|Y) = r(θ) − ln E_{ξ(·|Y)}[exp r],

and ``ln E[exp r]`` lies between ``inf r`` and ``sup r``. So every exact draw is
``osc(r)``-DP, where ``osc(r) = sup_θ r − inf_θ r`` is the oscillation of r over the prior's
support. This module returns **L = ½ sup_{x, y} osc(r)** (per unit of ρ), so that the
statement "each exact draw is 2L-DP" of ``docs/algorithms.md`` holds verbatim. Two consequences:

* Assumption 1 with constant L' gives ``|r| ≤ L'``, hence ``osc(r) ≤ 2L'``: our L is never
  larger than the paper's, and Thm 8 holds with it (its proof bounds the likelihood ratio by
  ``e^{L'}`` and the marginal ratio by ``e^{L'}``; the oscillation bounds both at once).
* Terms of ``ln p(x|θ)`` that do not depend on θ (base measures ``h(x)``, binomial
  coefficients, ``−x²/2σ²``) shift r by a constant and leave ``osc(r)`` unchanged: they
  cancel in the posterior. The formulas below drop them; that is why some are tighter than
  the lemmas they come from. The tests check every formula against a brute-force maximum of
  ``osc(r)/2`` over a grid of data and parameters.

Metrics
-------
``"replace_one"`` (default, the library's convention): neighbours differ in one datum — one
row along the leading axis of every observed variable — replaced by any value within the
declared data bounds. L is then a per-datum constant and one exact draw is 2L-DP.

``"l1"``: ``ρ(X, Y) = Σ_j ‖x_j − y_j‖₁`` (the metric of Lemmas 19 and 21). L is per unit of
ρ; a release is ε-DP for datasets at ℓ1 distance ≤ 1 (e.g. one trial of a Binomial count).

Supported families
------------------
bounded-data Normal mean with known σ (:func:`normal_mean`), Normal with an unknown σ
bounded away from 0 (:func:`normal_variance`, Lemma 22), Laplace with a scale bounded away
from 0 and any location (:func:`laplace`, Lemma 20), Bernoulli (:func:`bernoulli`)
and Binomial (:func:`binomial`) with a probability trimmed away from 0 and 1, Exponential
with a trimmed rate (:func:`exponential`), Categorical observations and discrete Bayesian
networks with conditional probabilities bounded below (:func:`categorical`,
:func:`discrete_bayesian_network`). :func:`lipschitz_bound` finds the family of every
observed variable of a PyMC model and the range of its parameters from the priors' supports
(``pm.Uniform(a, b)``, ``pm.Truncated(..., lower, upper)``, interval transforms), and refuses
what it cannot bound.
"""

from __future__ import annotations

import itertools
import math

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pytensor.tensor as pt

from pymc.model import Model, modelcontext
from pytensor.compile.ops import DeepCopyOp, ViewOp
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.scalar import basic as ps
from pytensor.scalar.math import Sigmoid, Softplus
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    DirichletRV,
    ExponentialRV,
    GammaRV,
    HalfNormalRV,
    LaplaceRV,
    NormalRV,
    UniformRV,
)
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import AdvancedSubtensor, BaseSubtensor, Subtensor

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.validation import NO_OBSERVED_MESSAGE

__all__ = [
    "METRICS",
    "FamilyBound",
    "LipschitzBound",
    "bernoulli",
    "binomial",
    "categorical",
    "check_data_within_bounds",
    "discrete_bayesian_network",
    "exponential",
    "laplace",
    "lipschitz_bound",
    "normal_mean",
    "normal_variance",
    "trimmed_dirichlet",
]

METRICS = ("replace_one", "l1")
_REF = "Dimitrakakis et al. (2017)"


# ---------------------------------------------------------------------- results
@dataclass(frozen=True)
class FamilyBound:
    """The Lipschitz constant of one observed variable (one term of a datum's log-likelihood).

    Attributes
    ----------
    family : str
        ``"normal_mean"``, ``"normal_variance"``, ``"laplace"``, ``"bernoulli"``, ``"binomial"``,
        ``"exponential"``,
        ``"categorical"`` or ``"discrete_bayesian_network"``.
    L : float
        Half the largest oscillation over θ of the log-likelihood ratio of two values of
        one datum (``"replace_one"``), or of two values at ℓ1 distance 1 (``"l1"``).
    formula : str
        The formula that gave ``L``, with the lemma it comes from.
    metric : str
        ``"replace_one"`` or ``"l1"``.
    inputs : dict
        The public numbers the formula used (data bounds, parameter ranges, elements per
        datum). Never data values.
    variable : str, optional
        The observed variable, when computed from a model.
    """

    family: str
    L: float
    formula: str
    metric: str
    inputs: dict = field(default_factory=dict)
    variable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LipschitzBound:
    """The Lipschitz constant of a whole datum: the sum of its observed variables' terms.

    A datum's log-likelihood is the sum of its terms, and the oscillation of a sum is at
    most the sum of the oscillations, so ``L = Σ terms.L``.

    Examples
    --------
    >>> b = LipschitzBound(1.5, "replace_one", (bernoulli((0.2, 0.8)),))
    >>> b.epsilon_per_draw(temperature=0.1)
    0.30000000000000004
    >>> round(b.temperature_for(1.0, draws=10), 6)
    0.033333
    """

    L: float
    metric: str
    terms: tuple[FamilyBound, ...] = ()

    def epsilon_per_draw(self, temperature: float = 1.0) -> float:
        """ε of one exact draw of the posterior tempered by ``temperature``: ``2 T L``."""
        return 2.0 * float(temperature) * self.L

    def temperature_for(self, eps: float, draws: int) -> float:
        """The largest T ≤ 1 with ``draws · 2 T L ≤ eps`` (in floating point too)."""
        return temperature_for(eps, draws, self.L)

    def to_dict(self) -> dict[str, Any]:
        return {"L": self.L, "metric": self.metric, "terms": [t.to_dict() for t in self.terms]}


def temperature_for(eps: float, draws: int, L: float) -> float:
    """The largest T ≤ 1 such that ``draws`` exact draws cost at most ``eps``: T ≤ ε/(2NL).

    The result is nudged down by ulps until ``draws · (2 T L) ≤ eps`` holds in floating
    point, so that the accounted cost never exceeds the budget by rounding.

    Examples
    --------
    >>> temperature_for(1.0, 10, 2.5)
    0.02
    >>> temperature_for(100.0, 1, 0.5)  # the untempered posterior is already private enough
    1.0
    """
    eps, L = float(eps), float(L)
    if not (math.isfinite(L) and L > 0):
        raise ValueError(f"L must be finite and > 0, got {L!r}")
    T = min(1.0, eps / (2.0 * draws * L))
    while draws * (2.0 * T * L) > eps:
        T = math.nextafter(T, 0.0)
    return T


# ---------------------------------------------------------------------- checks
def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


def _interval(name: str, bounds, *, lower=-math.inf, upper=math.inf) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise UnsupportedModelError(
            f"{name} = {bounds!r} is unbounded: the log-likelihood ratio of two data is then "
            "unbounded and no tempering makes posterior draws private. Declare finite bounds "
            "(and trim the prior)."
        )
    if not lo <= hi:
        raise ValueError(f"{name} must satisfy low <= high, got {bounds!r}")
    if lo < lower or hi > upper:
        raise ValueError(f"{name} = {bounds!r} must lie within [{lower}, {upper}]")
    return lo, hi


def _positive_lower_interval(name: str, bounds) -> tuple[float, float]:
    """A range ``[lo, hi]`` with ``0 < lo`` and ``hi`` possibly infinite (a scale)."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and lo > 0):
        raise UnsupportedModelError(
            f"{name} = {bounds!r} is not bounded away from 0: as the scale approaches 0 the "
            "log-likelihood ratio of two data is unbounded. Trim the prior, e.g. "
            "pm.Uniform(name, a, b) or pm.Truncated(name, pm.HalfNormal.dist(...), lower=a) "
            "with a > 0."
        )
    if math.isnan(hi) or not lo <= hi:
        raise ValueError(f"{name} must satisfy 0 < low <= high, got {bounds!r}")
    return lo, hi


def _prob_interval(name: str, bounds) -> tuple[float, float]:
    lo, hi = (float(b) for b in bounds)
    if not (0.0 < lo and hi < 1.0):
        raise UnsupportedModelError(
            f"{name} ranges over [{lo:.6g}, {hi:.6g}]: a probability must be trimmed away from "
            "0 and 1 (the log-likelihood ratio of a 0 and a 1 is unbounded otherwise). Give "
            "it a trimmed prior, e.g. pm.Uniform(name, a, b) or pm.Truncated(name, "
            "pm.Beta.dist(...), lower=a, upper=b) with 0 < a < b < 1."
        )
    return _interval(name, (lo, hi), lower=0.0, upper=1.0)


def _elements(elements) -> int:
    if not (isinstance(elements, int | np.integer) and elements >= 1):
        raise ValueError(f"elements must be an int >= 1, got {elements!r}")
    return int(elements)


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def _indexed_factor_oscillation(a: float, b: float) -> float:
    """The largest oscillation of ln p or ln(1 − p) over p in [a, b]."""
    return max(math.log(b) - math.log(a), math.log1p(-a) - math.log1p(-b))


# ---------------------------------------------------------------------- families
def normal_mean(
    data_bounds, mean_bounds, sigma: float, *, metric: str = "replace_one", elements: int = 1
) -> FamilyBound:
    r"""Normal likelihood ``N(x; μ, σ²)`` with known σ, data in ``[lo, hi]``, μ in ``[m₁, m₂]``.

    ``r(μ) = (y² − x²)/(2σ²) + μ (x − y)/σ²``, so ``osc(r) = |x − y| (m₂ − m₁)/σ²`` and

    * ``"replace_one"``: ``L = e · (hi − lo)(m₂ − m₁) / (2σ²)`` for ``e`` elements per datum;
    * ``"l1"``: ``L = (m₂ − m₁) / (2σ²)`` per unit ``|x − y|``.

    Lemma 23 of Dimitrakakis et al. (multivariate normal, known precision ``A = σ⁻² I``)
    gives Assumption 1 with ``L₂₃ = ½ σ⁻² max{1, ‖μ‖} (‖xxᵀ − yyᵀ‖_F + 2‖x − y‖)``; dropping
    the θ-free ``x²`` term, as above, is never looser (``m₂ − m₁ ≤ 2 max{1, max|μ|}``).
    An unbounded mean (e.g. a ``pm.Normal`` prior) has no finite L: the Gaussian
    posterior's tails make the privacy loss unbounded.

    Examples
    --------
    >>> normal_mean((-1, 1), (-3, 3), 1.0).L
    6.0
    """
    metric = _check_metric(metric)
    lo, hi = _interval("data_bounds", data_bounds)
    m1, m2 = _interval("the range of the mean", mean_bounds)
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
    e = _elements(elements)
    if metric == "replace_one":
        L = e * (hi - lo) * (m2 - m1) / (2 * sigma**2)
        formula = "L = e·(hi − lo)·(m₂ − m₁)/(2σ²)"
    else:
        L = (m2 - m1) / (2 * sigma**2)
        formula = "L = (m₂ − m₁)/(2σ²) per unit |x − y|"
    return FamilyBound(
        "normal_mean",
        L,
        f"{formula}  [{_REF}, Lemma 23 with θ-free terms dropped]",
        metric,
        {"data_bounds": [lo, hi], "mean_bounds": [m1, m2], "sigma": sigma, "elements": e},
    )


def bernoulli(
    p_bounds, *, data_indexed: bool = False, elements: int = 1, metric: str = "replace_one"
) -> FamilyBound:
    r"""Bernoulli likelihood ``p^x (1 − p)^{1−x}`` with p trimmed to ``[a, b] ⊂ (0, 1)``.

    * Each datum uses the same p whatever its value: ``r(p) = ±logit p``, so
      ``L = e · (logit b − logit a) / 2``.
    * p chosen by data (``data_indexed``: a CPT row picked by a parent's value in a Bayesian
      network): ``r = ln P(x | p_i) − ln P(y | p_j)`` oscillates by at most the sum of the
      oscillations of its two factors, ``ln(b/a)`` for an outcome 1 and
      ``ln((1 − a)/(1 − b))`` for an outcome 0, so
      ``L = e · max(ln(b/a), ln((1 − a)/(1 − b)))`` (Lemma 24, per factor).

    Both are at most the paper's ``ln(1/ε)`` per factor with ``ε = min(a, 1 − b)``
    (Example 1, Lemmas 21 and 24). Data lie in {0, 1}, so ``"l1"`` and ``"replace_one"``
    coincide per element.

    Examples
    --------
    >>> round(bernoulli((0.1, 0.9)).L, 6)
    2.197225
    """
    _check_metric(metric)
    a, b = _prob_interval("the range of p", p_bounds)
    e = _elements(elements)
    if data_indexed:
        L = e * _indexed_factor_oscillation(a, b)
        formula = f"L = e·max(ln(b/a), ln((1 − a)/(1 − b)))  [{_REF}, Lemma 24]"
    else:
        L = e * (_logit(b) - _logit(a)) / 2
        formula = f"L = e·(logit b − logit a)/2  [{_REF}, Example 1 / Lemma 21 with n = 1]"
    return FamilyBound(
        "bernoulli",
        L,
        formula,
        metric,
        {"p_bounds": [a, b], "elements": e, "data_indexed": bool(data_indexed)},
    )


def binomial(
    p_bounds,
    n_trials: int,
    *,
    data_bounds=None,
    metric: str = "replace_one",
    data_indexed: bool = False,
    elements: int = 1,
) -> FamilyBound:
    r"""Binomial likelihood ``C(m, k) p^k (1 − p)^{m−k}``, p trimmed to ``[a, b] ⊂ (0, 1)``.

    ``r(p) = ln C(m, x) − ln C(m, y) + (x − y) logit p``; the binomial coefficients are
    θ-free, so ``osc(r) = |x − y| (logit b − logit a)``:

    * ``"replace_one"``: ``L = e · (hi − lo)(logit b − logit a)/2`` for counts in
      ``[lo, hi]`` (default ``[0, m]``);
    * ``"l1"``: ``L = (logit b − logit a)/2`` per unit ``|x − y|`` — one trial, the metric
      of Lemma 21 (whose ``ln n`` term is the θ-free coefficient, dropped here).

    With ``data_indexed`` p (Bayesian-network CPTs), the θ-dependent part
    ``k ln p + (m − k) ln(1 − p)`` oscillates by at most ``m · max(ln(b/a),
    ln((1 − a)/(1 − b)))``, so ``L`` is that times ``e`` (Lemma 24, one factor per trial;
    replace_one only).

    Examples
    --------
    >>> round(binomial((0.1, 0.9), 10).L, 5)
    21.97225
    >>> round(binomial((0.1, 0.9), 10, metric="l1").L, 5)
    2.19722
    """
    metric = _check_metric(metric)
    a, b = _prob_interval("the range of p", p_bounds)
    if not (isinstance(n_trials, int | np.integer) and n_trials >= 1):
        raise ValueError(f"n_trials must be an int >= 1, got {n_trials!r}")
    m = int(n_trials)
    lo, hi = (0.0, float(m)) if data_bounds is None else _interval(
        "data_bounds", data_bounds, lower=0.0, upper=float(m)
    )
    e = _elements(elements)
    inputs = {"p_bounds": [a, b], "n_trials": m, "data_bounds": [lo, hi], "elements": e}
    if data_indexed:
        if metric != "replace_one":
            raise UnsupportedModelError(
                "A Binomial probability chosen by data supports only metric='replace_one'."
            )
        L = e * m * _indexed_factor_oscillation(a, b)
        formula = f"L = e·m·max(ln(b/a), ln((1 − a)/(1 − b)))  [{_REF}, Lemma 24]"
    elif metric == "replace_one":
        L = e * (hi - lo) * (_logit(b) - _logit(a)) / 2
        formula = f"L = e·(hi − lo)·(logit b − logit a)/2  [{_REF}, Lemma 21, θ-free terms dropped]"
    else:
        L = (_logit(b) - _logit(a)) / 2
        formula = (
            f"L = (logit b − logit a)/2 per unit |x − y|  [{_REF}, Lemma 21, θ-free terms dropped]"
        )
    inputs["data_indexed"] = bool(data_indexed)
    return FamilyBound("binomial", L, formula, metric, inputs)


def exponential(
    rate_bounds, data_bounds, *, metric: str = "replace_one", elements: int = 1
) -> FamilyBound:
    r"""Exponential likelihood ``θ e^{−θx}``, rate θ in ``[c₁, c₂]``, data in ``[lo, hi] ⊂ [0, ∞)``.

    ``r(θ) = −θ (x − y)``, so ``osc(r) = |x − y| (c₂ − c₁)``:

    * ``"replace_one"``: ``L = e · (hi − lo)(c₂ − c₁)/2``;
    * ``"l1"``: ``L = (c₂ − c₁)/2`` per unit ``|x − y|``.

    Lemma 19 (trimmed exponential prior on ``[c₁, c₂]``, ``ρ = |x − y|``) bounds
    ``|ln p(x|θ) − ln p(y|θ)| = θ|x − y| ≤ c₂ |x − y|``, i.e. Assumption 1 with ``L = c₂``;
    the oscillation form is never larger. An untrimmed rate (no upper bound) is refused.

    Examples
    --------
    >>> exponential((0.5, 2.0), (0.0, 10.0)).L
    7.5
    """
    metric = _check_metric(metric)
    c1, c2 = _interval("the range of the rate", rate_bounds, lower=0.0)
    lo, hi = _interval("data_bounds", data_bounds, lower=0.0)
    e = _elements(elements)
    if metric == "replace_one":
        L = e * (hi - lo) * (c2 - c1) / 2
        formula = "L = e·(hi − lo)·(c₂ − c₁)/2"
    else:
        L = (c2 - c1) / 2
        formula = "L = (c₂ − c₁)/2 per unit |x − y|"
    return FamilyBound(
        "exponential",
        L,
        f"{formula}  [{_REF}, Lemma 19 (Assumption 1 part)]",
        metric,
        {"rate_bounds": [c1, c2], "data_bounds": [lo, hi], "elements": e},
    )


def _finite_or_none(bounds: list[float]) -> list[float | None]:
    """Bounds for a report: an infinite one as ``None`` (reports are strict JSON)."""
    return [b if math.isfinite(b) else None for b in bounds]


def _corner_pair_oscillation(corners, part, slope, points, lo: float, hi: float, metric: str):
    r"""½ the largest oscillation of r over a box of parameters, when r is separable.

    For the location–scale families below, r at a corner c of the parameter box is
    ``r_c(x, y) = part_c(y) − part_c(x)``, and the extremes of r over the box are at its
    corners. So for two corners ``r_c − r_c' = k(y) − k(x)`` with ``k = part_c − part_c'``,
    and

    * ``"replace_one"``: ``sup_{x,y} osc(r) = max_{c,c'} (max k − min k)`` over
      ``[lo, hi]``; ``points(c, c')`` must contain every extreme of k there;
    * ``"l1"``: per unit ``|x − y|`` the supremum is ``max_{c,c'} sup |k'|`` (mean value
      theorem); k' is linear or piecewise constant between the points, so it is evaluated
      at the points and at the midpoints between them.

    Returns half the oscillation: the L of the module docstring.
    """
    best = 0.0
    for c, d in itertools.product(corners, repeat=2):
        pts = sorted({min(max(t, lo), hi) for t in (lo, hi, *points(c, d))})
        if metric == "replace_one":
            k = [part(c, t) - part(d, t) for t in pts]
            best = max(best, max(k) - min(k))
        else:
            mids = [(a + b) / 2 for a, b in zip(pts[:-1], pts[1:])]
            best = max(best, *(abs(slope(c, t) - slope(d, t)) for t in pts + mids))
    return best / 2


def _corner_bound(elements: int, half_osc: float, metric: str, k: str) -> tuple[float, str]:
    """L and its formula from the corner pairs' half oscillation of ``k``: per element (times
    ``elements``) under replace-one, per unit of |x − y| under ``l1``."""
    if metric == "replace_one":
        return elements * half_osc, (
            f"L = e·max over corner pairs (c, c') of (max k − min k)/2, {k}")
    return half_osc, f"L = max over corner pairs (c, c') of sup|k'|/2 per unit |x − y|, {k}"


def laplace(
    data_bounds,
    scale_bounds,
    location_bounds=(-math.inf, math.inf),
    *,
    metric: str = "replace_one",
    elements: int = 1,
) -> FamilyBound:
    r"""Laplace likelihood ``e^{−|x − μ|/s} / (2s)``: scale s in ``[s₁, s₂]``, μ in ``[m₁, m₂]``.

    With ``τ = 1/s ∈ [τ₁, τ₂] = [1/s₂, 1/s₁]``, ``r(μ, τ) = τ (|y − μ| − |x − μ|)`` (the
    θ-dependent ``−ln 2s`` is x-free and cancels). For fixed data r is monotone in μ and
    linear in τ, so its extremes over the box are at the corners, and r separates in x and
    y (:func:`_corner_pair_oscillation`, with ``part_c(t) = τ_c |t − μ_c|``). The location may
    be unbounded: a location beyond the data bounds acts as the nearest bound. Two cases in
    closed form:

    * a location that can lie on either side of the data (e.g. untrimmed):
      ``L = e (hi − lo)/s₁`` (``"l1"``: ``1/s₁`` per unit ``|x − y|``);
    * a known location μ: ``L = e (1/s₁ − 1/s₂) max(|lo − μ|, |hi − μ|)/2``.

    Lemma 20 (trimmed prior on the inverse scale ``1/s ∈ [c₁, c₂]``, ``μ ∈ ℝ``,
    ``ρ = |x − y|``) states Assumption 1 with ``L₂₀ = c₂ = 1/s₁`` per unit ``|x − y|``, the
    first case; L here is never larger. The scale needs a positive lower bound (``s → 0``
    makes r unbounded).

    Examples
    --------
    >>> laplace((0.0, 3.0), (0.5, 2.0)).L
    6.0
    >>> laplace((0.0, 3.0), (0.5, 2.0), (1.0, 1.0)).L
    1.5
    """
    metric = _check_metric(metric)
    lo, hi = _interval("data_bounds", data_bounds)
    s1, s2 = _positive_lower_interval("the range of the scale", scale_bounds)
    try:
        m1, m2 = (float(b) for b in location_bounds)
    except (TypeError, ValueError):
        raise ValueError(f"location_bounds must be a pair, got {location_bounds!r}") from None
    if math.isnan(m1) or math.isnan(m2) or not m1 <= m2:
        raise ValueError(f"location_bounds must satisfy low <= high, got {location_bounds!r}")
    e = _elements(elements)
    tau = (0.0 if math.isinf(s2) else 1.0 / s2, 1.0 / s1)
    corners = [(min(max(m, lo), hi), t) for m in (m1, m2) for t in tau]
    half_osc = _corner_pair_oscillation(
        corners,
        part=lambda c, t: c[1] * abs(t - c[0]),
        slope=lambda c, t: c[1] * float(np.sign(t - c[0])),
        points=lambda c, d: (c[0], d[0]),
        lo=lo,
        hi=hi,
        metric=metric,
    )
    L, formula = _corner_bound(e, half_osc, metric, "k(t) = τ_c|t − μ_c| − τ_c'|t − μ_c'|")
    return FamilyBound(
        "laplace",
        L,
        f"{formula}  [{_REF}, Lemma 20 (Assumption 1 part), θ-free terms dropped]",
        metric,
        {
            "data_bounds": [lo, hi],
            "scale_bounds": _finite_or_none([s1, s2]),
            "location_bounds": _finite_or_none([m1, m2]),
            "elements": e,
        },
    )


def normal_variance(
    data_bounds,
    mean_bounds,
    sigma_bounds,
    *,
    metric: str = "replace_one",
    elements: int = 1,
) -> FamilyBound:
    r"""Normal likelihood with an unknown variance: σ in ``[s₁, s₂]``, μ in ``[m₁, m₂]``.

    With the precision ``τ = 1/σ² ∈ [τ₁, τ₂] = [1/s₂², 1/s₁²]`` (``s₂ = ∞`` gives
    ``τ₁ = 0``), ``r(μ, τ) = τ ((y − μ)² − (x − μ)²)/2``; the ``ln σ`` term is x-free and
    cancels. For fixed data r is bilinear in (μ, τ), so its extremes over the box are at
    its four corners c = (μ_c, τ_c), and r separates in x and y with
    ``part_c(t) = τ_c (t − μ_c)²/2`` (:func:`_corner_pair_oscillation`): ``k`` is a
    quadratic, whose extremes on ``[lo, hi]`` are at the ends and its vertex, and whose
    slope is linear. This L is exact (the brute-force maximum), for

    * ``"replace_one"``: ``L = e · ½ max_{c, c'} (max k − min k)``;
    * ``"l1"``: ``L = ½ max_{c, c'} sup |k'|`` per unit ``|x − y|``.

    With a known mean (``m₁ = m₂ = μ``) the replace-one formula is
    ``L = e (τ₂ − τ₁) D/4`` with ``D = max (t − μ)² − min (t − μ)²`` over the data bounds.
    Lemma 22 of Dimitrakakis et al. (known mean, trimmed prior on ``1/σ² ∈ [c₁, c₂]``) states
    Assumption 1 with ``L₂₂ = ½ c₂ max{|μ|, 1}`` under ``ρ = |x² − y²| + 2|x − y|``, which
    this never exceeds (θ-free terms dropped, oscillation instead of the supremum). With a
    known σ it equals :func:`normal_mean`. A σ that can approach 0 and a mean without
    bounds are refused (r is unbounded).

    Examples
    --------
    >>> round(normal_variance((-1.0, 1.0), (0.0, 0.0), (0.5, 2.0)).L, 6)
    0.9375
    """
    metric = _check_metric(metric)
    lo, hi = _interval("data_bounds", data_bounds)
    m1, m2 = _interval("the range of the mean", mean_bounds)
    s1, s2 = _positive_lower_interval("the range of sigma", sigma_bounds)
    e = _elements(elements)
    tau = (0.0 if math.isinf(s2) else 1.0 / s2**2, 1.0 / s1**2)

    def vertex(c, d):
        a = c[1] - d[1]
        return () if a == 0 else ((c[1] * c[0] - d[1] * d[0]) / a,)

    half_osc = _corner_pair_oscillation(
        [(m, t) for m in (m1, m2) for t in tau],
        part=lambda c, t: c[1] * (t - c[0]) ** 2 / 2,
        slope=lambda c, t: c[1] * (t - c[0]),
        points=vertex,
        lo=lo,
        hi=hi,
        metric=metric,
    )
    L, formula = _corner_bound(
        e, half_osc, metric, "k(t) = (τ_c(t − μ_c)² − τ_c'(t − μ_c')²)/2"
    )
    return FamilyBound(
        "normal_variance",
        L,
        f"{formula}  [{_REF}, Lemma 22 (Assumption 1 part), θ-free terms dropped]",
        metric,
        {
            "data_bounds": [lo, hi],
            "mean_bounds": [m1, m2],
            "sigma_bounds": _finite_or_none([s1, s2]),
            "elements": e,
        },
    )


def categorical(p_bounds, *, elements: int = 1, metric: str = "replace_one") -> FamilyBound:
    r"""Categorical likelihood ``p_x`` with every entry of p in ``[p_min, p_max]``, ``p_min > 0``.

    Each factor lies in ``[p_min, p_max]`` and oscillates by at most ``ln(p_max/p_min)``,
    whatever p each datum uses (the same vector, or a CPT row chosen by a parent's value);
    ``r`` has two factors, so ``L = e · ln(p_max / p_min)`` — Lemma 24's ``ln(1/ε)`` with ``ε = p_min`` and the
    largest probability ``p_max ≤ 1``. Category labels carry no metric: only
    ``"replace_one"``.

    Examples
    --------
    >>> round(categorical((0.05, 0.9)).L, 6)
    2.890372
    """
    if _check_metric(metric) != "replace_one":
        raise UnsupportedModelError("Categorical data support only metric='replace_one'.")
    lo, hi = _interval("the range of p", p_bounds, lower=0.0, upper=1.0)
    if not lo > 0:
        raise UnsupportedModelError(
            "Some category probability can reach 0, so the log-likelihood ratio of two data is "
            "unbounded. Bound every probability below, e.g. with "
            "pymc_dp.posterior_sampling.lipschitz.trimmed_dirichlet(name, a, min_prob=...)."
        )
    e = _elements(elements)
    return FamilyBound(
        "categorical",
        e * (math.log(hi) - math.log(lo)),
        f"L = e·ln(p_max/p_min)  [{_REF}, Lemma 24]",
        "replace_one",
        {"p_bounds": [lo, hi], "elements": e},
    )


def discrete_bayesian_network(min_prob, n_states) -> FamilyBound:
    r"""A discrete Bayesian network on K variables, every conditional probability ≥ ε_k.

    One datum is one joint observation ``x = (x_1..x_K)`` with
    ``P_θ(x) = Π_k P_θ(x_k | x_{P(k)})``. Replacing it changes every factor; factor k lies in
    ``[ε_k, 1 − (m_k − 1) ε_k]`` (m_k states, the other entries of its CPT row are ≥ ε_k),
    so with ``"replace_one"`` neighbours

        L = Σ_k ln((1 − (m_k − 1) ε_k) / ε_k)  ≤  K ln(1/ε).

    Lemma 24 of Dimitrakakis et al. states ``L = ln(1/ε)`` under ``ρ(x, y) = vᵀδ(x, y)``,
    ``v_k = 1 + outdeg(k)``, which for a whole changed record gives
    ``ln(1/ε) · Σ_k v_k``; the per-factor count above is never larger. Any prior on the CPTs
    whose support keeps every probability ≥ ε_k works (e.g. :func:`trimmed_dirichlet`).

    Parameters
    ----------
    min_prob : float or sequence of float
        ε_k, the smallest conditional probability of variable k (one for all, or one per
        variable).
    n_states : sequence of int
        m_k, the number of states of each variable.

    Examples
    --------
    >>> round(discrete_bayesian_network(0.05, [2, 2, 3]).L, 6)
    8.77925
    """
    states = [int(m) for m in n_states]
    if not states or any(m < 2 for m in states):
        raise ValueError(f"n_states must be a non-empty sequence of ints >= 2, got {n_states!r}")
    eps = np.broadcast_to(np.asarray(min_prob, dtype=float), (len(states),))
    terms = []
    for m, e in zip(states, eps):
        if not (0 < e <= 1 / m):
            raise UnsupportedModelError(
                f"min_prob must be in (0, 1/m] for a variable with m = {m} states, got {e!r}"
            )
        terms.append(math.log1p(-(m - 1) * e) - math.log(e))
    return FamilyBound(
        "discrete_bayesian_network",
        math.fsum(terms),
        f"L = Σ_k ln((1 − (m_k − 1)ε_k)/ε_k)  [{_REF}, Lemma 24]",
        "replace_one",
        {"min_prob": [float(e) for e in eps], "n_states": states},
    )


# ---------------------------------------------------------------------- modelling helper
def trimmed_dirichlet(name: str, a, *, min_prob: float, **kwargs):
    r"""A probability vector (or CPT) whose every entry is at least ``min_prob``.

    ``p = min_prob + (1 − k·min_prob) · w`` with ``w ~ Dirichlet(a)`` (``w_raw`` in the model),
    registered as the deterministic ``name``. Its entries lie in
    ``[min_prob, 1 − (k − 1) min_prob]`` and sum to 1, so a Categorical likelihood on it
    satisfies Lemma 24 with ``ε = min_prob``. Use it for the conditional probability tables
    of a discrete Bayesian network.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model():
    ...     p = trimmed_dirichlet("p", np.ones(3), min_prob=0.05)
    >>> p.name
    'p'
    """
    import pymc as pm

    a = np.asarray(a, dtype=float)
    k = a.shape[-1]
    if not (0 < float(min_prob) < 1 / k):
        raise ValueError(f"min_prob must be in (0, 1/k) for k = {k} categories, got {min_prob!r}")
    w = pm.Dirichlet(f"{name}_raw", a, **kwargs)
    return pm.Deterministic(
        name, float(min_prob) + (1 - k * float(min_prob)) * w, dims=kwargs.get("dims")
    )


# ---------------------------------------------------------------------- from a model
def _cast_range(lo: float, hi: float, dtype: str) -> tuple[float, float]:
    """The values a cast can give from [lo, hi]: a cast to an integer truncates (a value in
    [0.9, 1.1] becomes 0 or 1), one to bool gives 0 or 1."""
    if dtype == "bool":
        return (0.0 if lo <= 0.0 <= hi else 1.0), (0.0 if lo == hi == 0.0 else 1.0)
    if dtype.startswith(("int", "uint")):
        return float(math.floor(lo)), float(math.ceil(hi))
    return lo, hi


@dataclass(frozen=True)
class _Range:
    """The range of a tensor's entries, and whether it is indexed by (or reads) data."""

    lo: float
    hi: float
    data_indexed: bool = False
    reads_data: bool = False
    rvs: frozenset = frozenset()  # free RVs it depends on


_ANY = (-math.inf, math.inf)
_UNIT = (0.0, 1.0)
_POSITIVE = (0.0, math.inf)


class _RangeFinder:
    """Interval arithmetic on a PyMC graph; leaves are constants and free RVs' supports."""

    def __init__(self, model: Model):
        self.model = model
        self.free = set(model.free_RVs)
        self.data = set(model.observed_RVs) | set(model.data_vars) | {
            model.rvs_to_values[rv] for rv in model.observed_RVs
        }
        self.memo: dict[Variable, _Range] = {}
        first = model.rvs_to_values[model.observed_RVs[0]] if model.observed_RVs else None
        shape = _shape_of(first) if first is not None else ()
        #: rows of data; a constant array with this leading length may be a column of the
        #: private records passed as numpy (e.g. a parent's values), so it counts as data.
        self.n_data = int(shape[0]) if len(shape) else None

    def __call__(self, var: Variable) -> _Range:
        if var not in self.memo:
            self.memo[var] = self._compute(var)
        return self.memo[var]

    # -- leaves
    def _compute(self, var: Variable) -> _Range:
        if var in self.free:
            lo, hi = self.support(var)
            return _Range(lo, hi, rvs=frozenset([var]))
        if var in self.data or isinstance(var, SharedVariable):
            return _Range(-math.inf, math.inf, reads_data=True)
        if isinstance(var, Constant):
            value = np.asarray(var.data)
            if self._per_datum(value):
                return _Range(-math.inf, math.inf, reads_data=True)
            if value.dtype.kind not in "biuf" or value.size == 0:
                return _Range(*_ANY)
            if not np.all(np.isfinite(value)):
                return _Range(float(np.nanmin(value)), float(np.nanmax(value)))
            return _Range(float(value.min()), float(value.max()))
        node = var.owner
        if node is None:
            raise UnsupportedModelError(
                f"Cannot bound {var}: it is neither a constant nor a variable of the model."
            )
        op = node.op
        if isinstance(op, DimShuffle | SpecifyShape | Reshape | Alloc | ViewOp | DeepCopyOp):
            # The other inputs are shapes: they do not change the entries' values.
            return self(node.inputs[0])
        if isinstance(op, BaseSubtensor | Subtensor | AdvancedSubtensor):
            inner = self(node.inputs[0])
            index_reads_data = any(self._reads_data(i) for i in node.inputs[1:])
            return _Range(
                inner.lo,
                inner.hi,
                data_indexed=inner.data_indexed or index_reads_data,
                reads_data=inner.reads_data,
                rvs=inner.rvs,
            )
        if isinstance(op, MakeVector):
            return self._union([self(i) for i in node.inputs])
        if isinstance(op, Join):
            return self._union([self(i) for i in node.inputs[1:]])
        if isinstance(op, Elemwise):
            return self._elemwise(op.scalar_op, [self(i) for i in node.inputs], var)
        raise UnsupportedModelError(
            f"Cannot bound the parameter expression {var} (operation {op}). Supported: "
            "constants, free variables with a bounded prior, + − × ÷, exp, log, sigmoid, "
            "indexing and reshaping."
        )

    @staticmethod
    def _union(parts: list[_Range]) -> _Range:
        return _Range(
            min(p.lo for p in parts),
            max(p.hi for p in parts),
            data_indexed=any(p.data_indexed for p in parts),
            reads_data=any(p.reads_data for p in parts),
            rvs=frozenset().union(*(p.rvs for p in parts)),
        )

    def _per_datum(self, value: np.ndarray) -> bool:
        return self.n_data is not None and self.n_data > 1 and value.ndim >= 1 and (
            value.shape[0] == self.n_data
        )

    def _reads_data(self, var: Variable) -> bool:
        """Whether an index expression depends on data (its values need not be bounded)."""
        return any(
            a in self.data
            or isinstance(a, SharedVariable)
            or (isinstance(a, Constant) and self._per_datum(np.asarray(a.data)))
            for a in ancestors([var])
        )

    def _elemwise(self, sop, args: list[_Range], var) -> _Range:
        flags = {
            "data_indexed": any(a.data_indexed for a in args),
            "reads_data": any(a.reads_data for a in args),
            "rvs": frozenset().union(*(a.rvs for a in args)),
        }
        los = [a.lo for a in args]
        his = [a.hi for a in args]
        with np.errstate(all="ignore"):
            if isinstance(sop, ps.Identity):
                lo, hi = los[0], his[0]
            elif isinstance(sop, ps.Cast):
                lo, hi = _cast_range(los[0], his[0], sop.o_type.dtype)
            elif isinstance(sop, ps.Add):
                lo, hi = sum(los), sum(his)
            elif isinstance(sop, ps.Sub):
                lo, hi = los[0] - his[1], his[0] - los[1]
            elif isinstance(sop, ps.Neg):
                lo, hi = -his[0], -los[0]
            elif isinstance(sop, ps.Mul):
                lo, hi = los[0], his[0]
                for l2, h2 in zip(los[1:], his[1:]):
                    lo, hi = _mul((lo, hi), (l2, h2))
            elif isinstance(sop, ps.TrueDiv):
                lo, hi = _mul((los[0], his[0]), _reciprocal((los[1], his[1])))
            elif isinstance(sop, ps.Reciprocal):
                lo, hi = _reciprocal((los[0], his[0]))
            elif isinstance(sop, ps.Exp):
                lo, hi = math.exp(min(los[0], 700)), math.exp(min(his[0], 700))
                if his[0] > 700:
                    hi = math.inf
            elif isinstance(sop, ps.Log):
                lo = math.log(los[0]) if los[0] > 0 else -math.inf
                hi = math.log(his[0]) if his[0] > 0 else -math.inf
            elif isinstance(sop, ps.Log1p):
                lo = math.log1p(los[0]) if los[0] > -1 else -math.inf
                hi = math.log1p(his[0]) if his[0] > -1 else -math.inf
            elif isinstance(sop, Sigmoid):
                lo, hi = _sigmoid(los[0]), _sigmoid(his[0])
            elif isinstance(sop, Softplus):
                lo, hi = _softplus(los[0]), _softplus(his[0])
            elif isinstance(sop, ps.Sqrt):
                lo, hi = math.sqrt(max(los[0], 0.0)), math.sqrt(max(his[0], 0.0))
            elif isinstance(sop, ps.Sqr | ps.Abs):
                a, b = los[0], his[0]
                if isinstance(sop, ps.Abs):
                    ends = (abs(a), abs(b))
                    lo = 0.0 if a <= 0 <= b else min(ends)
                    hi = max(ends)
                else:
                    ends = (a * a, b * b)
                    lo = 0.0 if a <= 0 <= b else min(ends)
                    hi = max(ends)
            else:
                raise UnsupportedModelError(
                    f"Cannot bound the parameter expression {var} (elementwise {sop}). "
                    "Supported: + − × ÷, exp, log, log1p, sigmoid, softplus, sqrt, sqr, abs."
                )
        if math.isnan(lo) or math.isnan(hi):
            lo, hi = _ANY
        return _Range(lo, hi, **flags)

    # -- supports of free variables
    def support(self, rv) -> tuple[float, float]:
        """The support of a free RV: its distribution's, narrowed by its value transform."""
        op = rv.owner.op
        lo, hi = _ANY
        inputs = rv.owner.inputs
        if isinstance(op, UniformRV | _truncated_normal_type()):
            lower, upper = op.dist_params(rv.owner)[-2:]
            lo, hi = self(lower).lo, self(upper).hi
        elif type(op).__name__ == "TruncatedRV":
            lo, hi = self(inputs[-2]).lo, self(inputs[-1]).hi
        elif isinstance(op, BetaRV | DirichletRV):
            lo, hi = _UNIT
        elif isinstance(op, ExponentialRV | GammaRV | HalfNormalRV):
            lo, hi = _POSITIVE
        transform = self.model.rvs_to_transforms.get(rv)
        t_lo, t_hi = _ANY
        if transform is not None:
            name = type(transform).__name__
            if hasattr(transform, "get_a_and_b"):
                a, b, lower_bounded, upper_bounded = transform.get_a_and_b(inputs)
                t_lo = self(pt.as_tensor(a)).lo if lower_bounded else -math.inf
                t_hi = self(pt.as_tensor(b)).hi if upper_bounded else math.inf
            elif name in ("LogOddsTransform", "SimplexTransform"):
                t_lo, t_hi = _UNIT
            elif name in ("LogTransform", "LogExpM1"):
                t_lo, t_hi = _POSITIVE
        return max(lo, t_lo), min(hi, t_hi)


def _truncated_normal_type():
    from pymc.distributions.continuous import TruncatedNormalRV

    return TruncatedNormalRV


def _mul(x, y):
    products = [a * b for a in x for b in y]
    if any(math.isnan(p) for p in products):  # 0 · inf
        return _ANY
    return min(products), max(products)


def _reciprocal(x):
    lo, hi = x
    if lo <= 0 <= hi:
        return _ANY
    return 1.0 / hi, 1.0 / lo


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    ez = math.exp(z)
    return ez / (1.0 + ez)


def _softplus(z: float) -> float:
    return z + math.log1p(math.exp(-z)) if z > 0 else math.log1p(math.exp(z))


def _describe(rng: _Range) -> str:
    names = sorted(rv.name for rv in rng.rvs)
    return f"(depends on {names})" if names else ""


def _bounds_of(name: str, data_bounds):
    if data_bounds is None:
        return None
    if isinstance(data_bounds, dict):
        return data_bounds.get(name)
    return data_bounds


def lipschitz_bound(
    model: Model | None = None, *, data_bounds=None, metric: str = "replace_one"
) -> LipschitzBound:
    """The Lipschitz constant L of one datum of a PyMC model, or a clear refusal.

    Reads the model's structure, the priors' supports and the shapes of the data — never
    the data values. Each observed variable must be one of

    * ``pm.Normal(mu, sigma)`` with sigma a constant (known variance), mu bounded by the
      priors (e.g. ``pm.Uniform``), data bounds declared — :func:`normal_mean`;
    * ``pm.Normal(mu, sigma)`` with sigma a free variable bounded away from 0 by its prior
      (e.g. ``pm.Uniform("sigma", 0.5, 2)``), mu bounded, data bounds declared —
      :func:`normal_variance`;
    * ``pm.Laplace(mu, b)`` with b bounded away from 0 by its prior, any mu set by the
      priors, data bounds declared — :func:`laplace`;
    * ``pm.Bernoulli(p)`` or ``pm.Bernoulli(logit_p=...)`` with p trimmed away from 0 and 1
      — :func:`bernoulli`;
    * ``pm.Binomial(n, p)`` with a constant n and a trimmed p — :func:`binomial`;
    * ``pm.Exponential(lam)`` with a bounded rate and declared data bounds in ``[0, ∞)`` —
      :func:`exponential`;
    * ``pm.Categorical(p)`` with every entry of p bounded below (e.g.
      :func:`trimmed_dirichlet`), the building block of discrete Bayesian networks —
      :func:`categorical`.

    Parameters may be indexed by data (a Bayesian-network CPT row chosen by a parent's
    observed value) only for the discrete families. ``pm.Data``, observed values and any
    constant array whose leading length is the number of data (a column of the records
    passed as numpy, e.g. a parent's values) count as private data; other constants are
    public.

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: from context).
    data_bounds : (low, high) or dict, optional
        The declared range of every datum's values: one pair for all observed variables,
        or a dict from observed variable name to pair. Required for Normal, Laplace and
        Exponential observations; Bernoulli, Binomial and Categorical data have natural bounds.
    metric : {"replace_one", "l1"}
        The neighbouring relation (see the module docstring).

    Returns
    -------
    LipschitzBound
        ``L`` per datum (the sum over observed variables) with one term per variable.

    Raises
    ------
    UnsupportedModelError
        For a family without a supported bound, an unbounded likelihood (no data bounds),
        an untrimmed prior, or a parameter computed from data.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as m:
    ...     p = pm.Uniform("p", 0.1, 0.9)
    ...     _ = pm.Bernoulli("y", p, observed=np.array([0, 1, 1]))
    >>> round(lipschitz_bound(m).L, 6)
    2.197225
    """
    model = modelcontext(model)
    metric = _check_metric(metric)
    if not model.observed_RVs:
        raise UnsupportedModelError(NO_OBSERVED_MESSAGE)
    ranges = _RangeFinder(model)
    terms = []
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        shape = tuple(_shape_of(value))
        if len(shape) == 0:
            raise UnsupportedModelError(
                f"Observed variable {rv.name!r} is a scalar; one datum per row is needed."
            )
        elements = int(np.prod(shape[1:], dtype=int))
        bounds = _bounds_of(rv.name, data_bounds)
        term = _family_bound(rv, ranges, bounds, metric, max(elements, 1))
        terms.append(FamilyBound(term.family, term.L, term.formula, term.metric, term.inputs, rv.name))
    L = math.fsum(t.L for t in terms)
    if not (math.isfinite(L) and L > 0):
        raise UnsupportedModelError(f"The Lipschitz constant is {L}; it must be finite and > 0.")
    return LipschitzBound(L, metric, tuple(terms))


def _shape_of(value) -> tuple:
    if isinstance(value, Constant):
        return np.shape(value.data)
    if isinstance(value, SharedVariable):
        return np.shape(value.get_value(borrow=True))
    return tuple(value.shape.eval())


def _param(rv, ranges: _RangeFinder, param: Variable, what: str, *, allow_indexed: bool) -> _Range:
    rng = ranges(param)
    if rng.reads_data and not rng.data_indexed:
        raise UnsupportedModelError(
            f"The {what} of observed {rv.name!r} is computed from data (covariates, pm.Data or "
            "other observations). The posterior sampling mechanism supports only parameters "
            "set by the priors (and, for discrete families, CPT rows chosen by data). Use "
            "DPPenalty for regression-type models."
        )
    if rng.data_indexed and not allow_indexed:
        raise UnsupportedModelError(
            f"The {what} of observed {rv.name!r} is indexed by data (e.g. a group or parent "
            "chosen by pm.Data). That is supported only for Bernoulli, Binomial and Categorical "
            "observations; pass public indices as constants (numpy arrays) instead."
        )
    return rng


#: One rule per observed distribution type: ``rule(rv, ranges, bounds, metric, elements)``
#: returns the family's :class:`FamilyBound` or raises ``UnsupportedModelError``. Looked up by
#: the exact type of the observed variable's Op: a subclass (which may change the density)
#: gets no rule by inheritance.
_FAMILY_RULES: dict[type, Any] = {}


def _family_rule(op_type: type):
    """Register the Lipschitz rule of observed variables whose Op is ``op_type``."""

    def register(rule):
        if op_type in _FAMILY_RULES:
            raise ValueError(f"{op_type.__name__} already has a Lipschitz rule")
        _FAMILY_RULES[op_type] = rule
        return rule

    return register


def _family_bound(rv, ranges: _RangeFinder, bounds, metric: str, elements: int) -> FamilyBound:
    rule = _FAMILY_RULES.get(type(rv.owner.op))
    if rule is None:
        raise UnsupportedModelError(
            f"Observed {rv.name!r} has a {type(rv.owner.op).__name__} likelihood, for which no "
            "Lipschitz bound is implemented. Supported: Normal (bounded mean; known sigma or "
            "sigma bounded away from 0), Laplace (scale bounded away from 0), Bernoulli, "
            "Binomial, Exponential, Categorical (discrete Bayesian networks)."
        )
    return rule(rv, ranges, bounds, metric, elements)


def _require_data_bounds(rv, bounds, family: str) -> None:
    if bounds is None:
        raise UnsupportedModelError(
            f"Observed {rv.name!r} is {family}: its likelihood ratio is unbounded unless the "
            "data are. Declare data_bounds={...: (low, high)} (and clip the data to them)."
        )


def _bounded_mean(rv, ranges: _RangeFinder, mu) -> _Range:
    m = _param(rv, ranges, mu, "mean", allow_indexed=False)
    if not (math.isfinite(m.lo) and math.isfinite(m.hi)):
        raise UnsupportedModelError(
            f"The mean of observed {rv.name!r} is not bounded by its prior "
            f"{_describe(m)}: its support is [{m.lo}, {m.hi}]. Trim the prior, e.g. "
            "pm.Uniform(name, a, b) or pm.Truncated(name, pm.Normal.dist(...), lower=a, "
            "upper=b)."
        )
    return m


def _scale_range(rv, ranges: _RangeFinder, scale, what: str) -> tuple[float, float]:
    s = _param(rv, ranges, scale, what, allow_indexed=False)
    s_lo = max(s.lo, 0.0)  # a scale <= 0 has likelihood zero for every datum
    if not s_lo > 0:
        raise UnsupportedModelError(
            f"The {what} of observed {rv.name!r} is not bounded away from 0 by its prior "
            f"{_describe(s)}: its support reaches [{s.lo:.6g}, {s.hi:.6g}], and as it "
            "approaches 0 the log-likelihood ratio of two data is unbounded. Trim it, e.g. "
            "pm.Uniform(name, a, b) or pm.Truncated(name, pm.HalfNormal.dist(...), lower=a) "
            "with a > 0."
        )
    return s_lo, s.hi


@_family_rule(NormalRV)
def _normal_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    mu, sigma = rv.owner.op.dist_params(rv.owner)
    s = ranges(sigma)
    known = not (s.rvs or s.reads_data)
    if not known:
        _param(rv, ranges, sigma, "sigma", allow_indexed=False)
    m = _bounded_mean(rv, ranges, mu)
    _require_data_bounds(rv, bounds, "Normal")
    if known:
        return normal_mean(bounds, (m.lo, m.hi), s.lo, metric=metric, elements=elements)
    sigma_range = _scale_range(rv, ranges, sigma, "sigma")
    return normal_variance(bounds, (m.lo, m.hi), sigma_range, metric=metric, elements=elements)


@_family_rule(LaplaceRV)
def _laplace_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    mu, scale = rv.owner.op.dist_params(rv.owner)
    # Any location, even unbounded, but not one computed from data (covariates).
    m = _param(rv, ranges, mu, "location", allow_indexed=False)
    scale_range = _scale_range(rv, ranges, scale, "scale")
    _require_data_bounds(rv, bounds, "Laplace")
    return laplace(bounds, scale_range, (m.lo, m.hi), metric=metric, elements=elements)


@_family_rule(BernoulliRV)
def _bernoulli_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    (p,) = rv.owner.op.dist_params(rv.owner)
    r = _param(rv, ranges, p, "probability", allow_indexed=True)
    lo, hi = max(r.lo, 0.0), min(r.hi, 1.0)
    _check_trimmed(rv, r, lo, hi)
    return bernoulli((lo, hi), data_indexed=r.data_indexed, elements=elements, metric=metric)


@_family_rule(BinomialRV)
def _binomial_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    n, p = rv.owner.op.dist_params(rv.owner)
    nr = ranges(n)
    if nr.rvs or nr.reads_data or not math.isfinite(nr.hi):
        raise UnsupportedModelError(
            f"The number of trials of observed {rv.name!r} must be a known constant."
        )
    r = _param(rv, ranges, p, "probability", allow_indexed=True)
    lo, hi = max(r.lo, 0.0), min(r.hi, 1.0)
    _check_trimmed(rv, r, lo, hi)
    return binomial(
        (lo, hi),
        int(nr.hi),
        data_bounds=bounds,
        metric=metric,
        data_indexed=r.data_indexed,
        elements=elements,
    )


@_family_rule(ExponentialRV)
def _exponential_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    (scale,) = rv.owner.op.dist_params(rv.owner)
    s = _param(rv, ranges, scale, "scale", allow_indexed=False)
    s_lo = max(s.lo, 0.0)  # scale <= 0 has likelihood zero for every datum
    rate = (1.0 / s.hi if s.hi > 0 else math.inf, 1.0 / s_lo if s_lo > 0 else math.inf)
    if not math.isfinite(rate[1]):
        raise UnsupportedModelError(
            f"The rate of observed {rv.name!r} is not bounded above by its prior "
            f"{_describe(s)}. Trim it, e.g. pm.Uniform(name, c1, c2) with 0 <= c1 < c2."
        )
    if bounds is None:
        raise UnsupportedModelError(
            f"Observed {rv.name!r} is Exponential: declare data_bounds (low, high) with "
            "0 <= low < high (and clip the data to them)."
        )
    return exponential(rate, bounds, metric=metric, elements=elements)


@_family_rule(CategoricalRV)
def _categorical_rule(rv, ranges, bounds, metric, elements) -> FamilyBound:
    (p,) = rv.owner.op.dist_params(rv.owner)
    r = _param(rv, ranges, p, "probability vector", allow_indexed=True)
    lo, hi = max(r.lo, 0.0), min(r.hi, 1.0)
    if not lo > 0:
        raise UnsupportedModelError(
            f"A category probability of observed {rv.name!r} can reach 0 {_describe(r)}. "
            "Bound every probability below, e.g. "
            "pymc_dp.posterior_sampling.lipschitz.trimmed_dirichlet(name, a, min_prob=...)."
        )
    return categorical((lo, hi), elements=elements, metric=metric)


def _check_trimmed(rv, r: _Range, lo: float, hi: float) -> None:
    if not (0.0 < lo and hi < 1.0):
        raise UnsupportedModelError(
            f"The probability of observed {rv.name!r} is not trimmed away from 0 and 1 "
            f"{_describe(r)}: its prior support reaches [{lo:.6g}, {hi:.6g}]. Use a trimmed "
            "prior, e.g. pm.Uniform(name, a, b) or pm.Truncated(name, pm.Beta.dist(...), "
            "lower=a, upper=b) with 0 < a < b < 1."
        )


#: Families whose data are real numbers within declared ``data_bounds`` (the others are counts).
_CONTINUOUS_FAMILIES = frozenset({"normal_mean", "normal_variance", "laplace", "exponential"})


def check_data_within_bounds(model: Model | None, bound: LipschitzBound) -> None:
    """Check that every observed value lies within the bounds ``bound`` was computed for.

    Raises ``ValueError`` naming the variable, never the values (they are private). Reads
    the data only to check them; nothing is released.
    """
    model = modelcontext(model)
    by_name = {t.variable: t for t in bound.terms}
    for rv in model.observed_RVs:
        term = by_name.get(rv.name)
        if term is None:
            continue
        value = model.rvs_to_values[rv]
        data = (
            np.asarray(value.data)
            if isinstance(value, Constant)
            else np.asarray(value.get_value(borrow=True))
            if isinstance(value, SharedVariable)
            else np.asarray(value.eval())
        )
        if term.family in _CONTINUOUS_FAMILIES or term.family == "binomial":
            lo, hi = term.inputs["data_bounds"]
        elif term.family == "bernoulli":
            lo, hi = 0.0, 1.0
        else:  # categorical: labels 0..k-1, checked by the likelihood itself
            lo, hi = 0.0, math.inf
        ok = bool(np.all((data >= lo) & (data <= hi)))
        if term.family not in _CONTINUOUS_FAMILIES:
            ok = ok and bool(np.all(np.equal(np.mod(data, 1), 0)))
        if not ok:
            raise ValueError(
                f"Some observed values of {rv.name!r} lie outside the declared data bounds "
                f"{[lo, hi]} (or are not whole numbers for a discrete family). The guarantee "
                "holds only for data within the bounds: clip the data to them before "
                "building the model, or declare wider bounds."
            )
