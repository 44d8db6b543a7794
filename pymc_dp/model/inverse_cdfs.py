"""Inverse CDFs of the outcomes the warm-up simulates (:mod:`pymc_dp.model.replicates`).

:func:`inverse_cdf` uses a rule registered here for the type of the variable's op when
there is one, else PyMC's own ``icdf``. A rule exists where PyMC's is wrong for the models
users write, which makes the clipping-bias correction silently absent (its replicates not
finite) or wrong:

* **TruncatedNormalRV** (``pm.Truncated`` of a normal, ``pm.TruncatedNormal``): PyMC 6.4
  decides from the graph whether a bound is infinite, and a bound broadcast to the
  observations' shape (every model with ``observed=``) is not a constant it can read: with
  ``lower=0`` and no upper bound, 72 % of the simulated outcomes (every uniform above about
  0.3) came out NaN, the correction saw only the lower tail and corrected nothing (the
  scale stayed 0.3–0.5 posterior sds low at ε = 16). The rule treats infinite bounds
  elementwise.
* **PoissonRV, NegBinomialRV, BinomialRV** (counts): PyMC 6.4 has no inverse CDF for them,
  so count models went without the correction (the negative binomial's dispersion kept
  its clipping bias). Their rules find the smallest count whose CDF reaches the uniform by
  bisection over a bracket that holds it (:func:`_count_quantile`), a fixed number of
  steps, with the CDF from the regularised incomplete gamma or beta function; exact (as
  SciPy's ``ppf``), and NaN where the bracket was too wide or did not hold it (the
  correction then leaves that outcome out). 1–3 µs an outcome at a regression's counts.

A rule is a function ``(op, rv, u) -> outcome`` of the variable and a tensor of uniforms of
the outcome's shape, built from elementwise operations on ``u`` and the distribution's
parameters (so that outcome j reads row j only, which :mod:`pymc_dp.model.replicates` then
proves on the graph like any other).
"""

from __future__ import annotations

from functools import singledispatch

import numpy as np
import pytensor.tensor as pt

from pymc.distributions.continuous import TruncatedNormalRV
from pymc.distributions.dist_math import normal_lcdf
from pymc.logprob.basic import icdf
from pytensor.tensor.random.basic import BinomialRV, NegBinomialRV, PoissonRV

__all__ = ["inverse_cdf"]


def inverse_cdf(rv, u):
    """The outcome of ``rv`` at uniforms ``u`` (its inverse CDF); raises
    ``NotImplementedError`` where neither a rule here nor PyMC has one.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pytensor.tensor as pt
    >>> y = pm.Truncated.dist(pm.Normal.dist(1.0, 2.0), lower=0.0, shape=3)
    >>> np.round(inverse_cdf(y, pt.as_tensor([0.1, 0.5, 0.9])).eval(), 3)  # scipy truncnorm.ppf
    array([0.377, 1.794, 3.964])
    >>> inverse_cdf(pm.Poisson.dist(3.0, shape=3), pt.as_tensor([0.1, 0.5, 0.9])).eval()
    array([1., 3., 5.])
    """
    outcome = _rule(rv.owner.op, rv, u)
    return icdf(rv, u) if outcome is None else outcome


@singledispatch
def _rule(op, rv, u):
    return None  # (no rule: PyMC's own)


@_rule.register(TruncatedNormalRV)
def _truncated_normal(op, rv, u):
    mu, sigma, lower, upper = op.dist_params(rv.owner)
    a, b = (lower - mu) / sigma, (upper - mu) / sigma

    def log_phi(z):  # log Φ(z), also at ±inf
        return normal_lcdf(0.0, 1.0, z)

    # P(X ≤ x) = Φ(a) + u (Φ(b) − Φ(a)), in log space so that deep truncation keeps its
    # digits: from the lower tail where a ≤ 0, from the upper tail (its complement) where
    # a > 0. An infinite bound's term is exp(−inf) = 0 in either form.
    low = log_phi(b) + pt.log(u + (1.0 - u) * pt.exp(log_phi(a) - log_phi(b)))
    high = log_phi(-a) + pt.log((1.0 - u) + u * pt.exp(log_phi(-b) - log_phi(-a)))
    z = pt.switch(a <= 0.0, pt.ndtri_exp(low), -pt.ndtri_exp(high))
    inside = (u >= 0.0) & (u <= 1.0) & (sigma > 0.0) & (lower <= upper)
    return pt.switch(inside, mu + sigma * z, np.nan)


def _count_quantile(cdf, centre, reach, u, *, upper=None, steps=20):
    """The smallest count k ≥ 0 with ``cdf(k) ≥ u``, elementwise, by bisection.

    ``cdf`` maps a tensor of (integer-valued, float) counts ≥ 0 to the CDF there. The
    bracket is ``centre`` ± ``reach`` (at most ``upper``), which should hold the quantile of
    every u the warm-up draws (10⁻¹² inside (0, 1)). The invariant cdf(lo) < u ≤ cdf(hi)
    (cdf(−1) = 0) makes the answer hi once hi − lo = 1; where the bracket did not hold the
    quantile, or was wider than 2^``steps``, the outcome is NaN, never a wrong count.
    """
    def at(k):
        return pt.switch(k < 0.0, 0.0, cdf(pt.maximum(k, 0.0)))

    hi = pt.ceil(centre + reach) + pt.zeros_like(u)
    hi = hi if upper is None else pt.minimum(hi, upper)
    lo = pt.maximum(pt.floor(centre - reach), -1.0) + pt.zeros_like(u)
    held = (at(lo) < u) & (at(hi) >= u)
    for _ in range(steps):
        mid = pt.floor((lo + hi) / 2.0)
        below = at(mid) >= u
        hi, lo = pt.switch(below, mid, hi), pt.switch(below, lo, mid)
    return pt.switch(held & (hi - lo <= 1.0) & (u >= 0.0) & (u <= 1.0), hi, np.nan)


def _float64(*params):
    return [pt.cast(p, "float64") for p in params]


@_rule.register(PoissonRV)
def _poisson(op, rv, u):
    (mu,) = _float64(*op.dist_params(rv.owner))
    # P(X ≤ k) = Q(k + 1, μ), cheap enough to search 10 sds and 30 counts each side of the
    # mean (its tails are lighter than a normal's on the left, a little heavier on the
    # right): 20 steps, a mean up to 2·10⁹.
    reach = 10.0 * pt.sqrt(mu) + 30.0
    k = _count_quantile(lambda k: pt.gammaincc(k + 1.0, mu), mu, reach, u)
    return pt.switch(mu >= 0.0, k, np.nan)


@_rule.register(NegBinomialRV)
def _negative_binomial(op, rv, u):
    n, p = _float64(*op.dist_params(rv.owner))
    # P(X ≤ k) = I_p(n, k + 1), whose evaluations cost: the search starts from the quantile
    # of a gamma of the same mean and variance (within 4 counts of the answer at means of
    # 10⁻² to 10⁴ and n of 0.05 to 100, scratch checks against SciPy), in a bracket of 8
    # counts and 1/16 sd each side: 12 steps, an sd up to 3·10⁴.
    mean = n * (1.0 - p) / p
    var = mean / p
    guess = pt.gammaincinv(mean**2 / var, u) * var / mean
    k = _count_quantile(lambda k: pt.betainc(n, k + 1.0, p), guess,
                        8.0 + pt.sqrt(var) / 16.0, u, steps=12)
    return pt.switch((n > 0.0) & (p > 0.0) & (p <= 1.0), k, np.nan)


@_rule.register(BinomialRV)
def _binomial(op, rv, u):
    n, p = _float64(*op.dist_params(rv.owner))

    def cdf(k):  # I_{1−p}(n − k, k + 1) below n, 1 from n on
        return pt.switch(k >= n, 1.0, pt.betainc(pt.maximum(n - k, 1.0), k + 1.0, 1.0 - p))

    k = _count_quantile(cdf, n * p, 10.0 * pt.sqrt(n * p * (1.0 - p)) + 30.0, u, upper=n)
    return pt.switch((n >= 0.0) & (p >= 0.0) & (p <= 1.0), k, np.nan)
