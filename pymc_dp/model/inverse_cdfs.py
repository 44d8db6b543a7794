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
