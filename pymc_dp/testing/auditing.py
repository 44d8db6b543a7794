"""Empirical privacy auditing: a statistical lower bound on ε from neighbouring runs.

Run a mechanism many times on two neighbouring datasets D and D', collect its (scalar or
discrete) outputs, and test sets ``S`` of outputs: if the mechanism is (ε, δ)-DP then
``P(M(D) ∈ S) ≤ e^ε P(M(D') ∈ S) + δ`` for every S. With Clopper–Pearson bounds on the two
probabilities this gives a lower bound on ε that holds with the stated confidence. A lower
bound above the claimed ε proves the claim wrong (e.g. a noise scale off by a factor of 2);
one below it is consistent with the claim.
"""

from __future__ import annotations

import math

import numpy as np

from scipy.stats import beta

__all__ = ["epsilon_lower_bound"]


def _cp_lower(k: int, n: int, alpha: float) -> float:
    return 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))


def _cp_upper(k: int, n: int, alpha: float) -> float:
    return 1.0 if k == n else float(beta.ppf(1 - alpha, k + 1, n - k))


def epsilon_lower_bound(
    outputs_d: np.ndarray,
    outputs_d_prime: np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    n_thresholds: int = 50,
) -> float:
    """A lower bound on ε, valid with probability ``confidence``, from neighbouring runs.

    Tests the sets ``{o > t}`` and ``{o ≤ t}`` for ``n_thresholds`` thresholds at quantiles
    of the pooled outputs, in both directions (D against D' and D' against D), with a
    Bonferroni correction over all the sets tested.

    Parameters
    ----------
    outputs_d, outputs_d_prime : array
        1-d outputs of independent runs on D and on D'.
    delta : float
        The δ of the claim being audited.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(0.0, 1.0, 100_000)   # Gaussian mechanism, sensitivity 1, σ = 1
    >>> b = rng.normal(1.0, 1.0, 100_000)
    >>> 0.5 < epsilon_lower_bound(a, b, delta=1e-3) < 3.0
    True
    """
    x = np.asarray(outputs_d, dtype=float).ravel()
    y = np.asarray(outputs_d_prime, dtype=float).ravel()
    pooled = np.concatenate([x, y])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]))
    tests = 4 * len(thresholds)
    alpha = (1 - confidence) / (2 * tests)  # two one-sided bounds per test
    xs, ys = np.sort(x), np.sort(y)
    best = 0.0
    for t in thresholds:
        kx_le = int(np.searchsorted(xs, t, side="right"))
        ky_le = int(np.searchsorted(ys, t, side="right"))
        for (ka, na), (kb, nb) in (
            ((kx_le, x.size), (ky_le, y.size)),
            ((x.size - kx_le, x.size), (y.size - ky_le, y.size)),
            ((ky_le, y.size), (kx_le, x.size)),
            ((y.size - ky_le, y.size), (x.size - kx_le, x.size)),
        ):
            p_lo = _cp_lower(ka, na, alpha) - delta
            q_hi = _cp_upper(kb, nb, alpha)
            if p_lo > 0 and q_hi > 0:
                best = max(best, math.log(p_lo / q_hi))
    return best
