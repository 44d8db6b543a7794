"""Signed error of the private warm-up's mode, coordinate by coordinate (issue 13).

Runs :func:`pymc_dp.kernels.warmup.laplace_warmup` with the library's own settings
(:data:`pymc_dp.steps.warmup.DEFAULT_WARMUP`: its iterations, quantile and clip margin), at
the noise a run's whole warm-up gets when the Laplace draws are the result (the warm-up's
share of one chain's μ for (ε, 10⁻⁵)), from θ = 0 (``--start``), with ``--seeds`` seeds on one data set,
and prints for each coordinate the mean error over seeds with its standard error, and the
rms error, in exact posterior sds. A mean error several standard errors from zero is a
bias of the mechanism (the same data, fresh noise), not noise.

Problems (n rows, prior N(0, 10²) on every coordinate of θ):

* ``normal``: y ~ N(μ, σ), θ = (μ, log σ);
* ``linear``: y ~ N(α + Xβ, σ) with four standard-normal covariates, θ = (α, β, log σ);
* ``logistic``: the well-scaled logistic regression of ``benchmarks/warmup_laplace.py``.

The exact mode is Newton's method on the same data without noise or clipping.

    python benchmarks/warmup_bias.py [--n 10000] [--eps 1 4] [--seeds 20] [--problems ...]
        [--start {zero,mode,mirror}] [--clip-margin M] [--quantile Q] [--replicates K]

The steps use the same kernel with two more things this script leaves out: the prior's log
density (steps stay where the prior allows) and, for models whose likelihood parameters are
known, steps on those parameters with the exact prior.

``--replicates K`` sets how many outcomes per person the warm-up simulates to take the
clipping bias out of its gradient release (:mod:`pymc_dp.kernels.score_correction`; the
library's default 16; 0: the plain clipped sum). Each problem simulates its own outcomes
here, as the library does from the PyMC model.

Run on 2026-11-28 (2 cores; ``--seeds 20``, n = 10⁴; mean ± se / rms, exact posterior sds),
with the default 16 replicates::

    normal    ε = 1  mu -0.05 ± 0.15 / 0.67   log_sigma -0.39 ± 0.17 / 0.84
    normal    ε = 4  mu -0.04 ± 0.05 / 0.22   log_sigma -0.21 ± 0.05 / 0.31
    linear    ε = 1  alpha +0.50 ± 0.23 / 1.13   b1 -0.44 ± 0.21 / 1.01   b2 -0.07 ± 0.23 / 1.02
                     b3 -0.19 ± 0.17 / 0.76   b4 -0.30 ± 0.24 / 1.09   log_sigma -1.82 ± 0.23 / 2.09
    linear    ε = 4  alpha -0.08 ± 0.08 / 0.36   b1 -0.10 ± 0.10 / 0.45   b2 +0.06 ± 0.09 / 0.40
                     b3 +0.05 ± 0.10 / 0.43   b4 -0.18 ± 0.09 / 0.42   log_sigma -0.26 ± 0.08 / 0.45
    logistic  ε = 1  alpha +0.09 ± 0.19 / 0.85   b1 -0.43 ± 0.25 / 1.15   b2 -0.28 ± 0.22 / 1.01
                     b3 +0.42 ± 0.26 / 1.20   b4 -0.31 ± 0.14 / 0.70
    logistic  ε = 4  alpha -0.09 ± 0.08 / 0.37   b1 -0.06 ± 0.09 / 0.40   b2 +0.03 ± 0.07 / 0.32
                     b3 +0.01 ± 0.11 / 0.47   b4 -0.06 ± 0.08 / 0.37

and with ``--replicates 0``::

    normal    ε = 1  mu -0.05 ± 0.18 / 0.79   log_sigma -1.04 ± 0.14 / 1.21
    normal    ε = 4  mu -0.02 ± 0.06 / 0.26   log_sigma -0.47 ± 0.05 / 0.53
    linear    ε = 1  alpha -0.39 ± 0.28 / 1.26   b1 -0.51 ± 0.26 / 1.26   b2 +0.28 ± 0.20 / 0.93
                     b3 +0.06 ± 0.25 / 1.08   b4 -0.02 ± 0.27 / 1.18   log_sigma -2.51 ± 0.32 / 2.88
    linear    ε = 4  alpha -0.04 ± 0.10 / 0.44   b1 -0.20 ± 0.12 / 0.58   b2 +0.12 ± 0.07 / 0.33
                     b3 -0.04 ± 0.11 / 0.46   b4 +0.07 ± 0.09 / 0.41   log_sigma -0.34 ± 0.12 / 0.63
    logistic  ε = 1  alpha +0.24 ± 0.29 / 1.29   b1 -0.07 ± 0.21 / 0.92   b2 +0.02 ± 0.22 / 0.94
                     b3 -0.22 ± 0.23 / 1.01   b4 +0.23 ± 0.15 / 0.68
    logistic  ε = 4  alpha +0.13 ± 0.10 / 0.46   b1 -0.03 ± 0.09 / 0.38   b2 -0.05 ± 0.08 / 0.34
                     b3 +0.00 ± 0.07 / 0.29   b4 +0.05 ± 0.06 / 0.28

``--start mode --seeds 40 --eps 1 --problems normal linear``: log_sigma normal −0.36 ± 0.10
(−0.95 ± 0.10 with ``--replicates 0``), linear −1.01 ± 0.17 (−1.45 ± 0.18). Earlier, without
replicates (2026-11-27), ``--clip-margin 3 --eps 1``: normal log_sigma
-0.68 ± 0.31 / 1.51, linear log_sigma -4.76 ± 0.62 / 5.47, logistic alpha +2.52 ± 0.62 / 3.70
(a wider clip cuts less of the scale's tail but adds noise, and noisy Newton targets are
biased too). What these mean: ``docs/private-mcmc.md``, "Where it falls short".
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
from scipy.special import expit, ndtri

from pymc_dp.accounting.gaussian import max_gaussian_mu
from pymc_dp.kernels.warmup import laplace_warmup
from pymc_dp.steps.warmup import DEFAULT_WARMUP

PRIOR_PRECISION = 1e-2  # every coordinate of θ ~ N(0, 10²)


def _antithetic(rng, n, draws):
    """``draws`` arrays of n uniforms in pairs u, 1 − u (as the library draws them)."""
    half = [np.clip(rng.random(n), 1e-12, 1 - 1e-12) for _ in range(draws // 2)]
    return [v for u in half for v in (u, 1.0 - u)]


def _gaussian_rows(y, design):
    """Per-datum gradients of N(y | design·b, e^s) in θ = (b, s), the same at outcomes
    simulated at θ (the replicates), and a start for Newton's method on the exact posterior
    (least squares)."""

    def rows_at(q, y):
        b, s = q[:-1], q[-1]
        r = (y - design @ b) * np.exp(-s)
        return np.column_stack([(r * np.exp(-s))[:, None] * design, r**2 - 1.0])

    def replicates(q, rng, draws):
        return [rows_at(q, design @ q[:-1] + np.exp(q[-1]) * ndtri(u))
                for u in _antithetic(rng, len(y), draws)]

    b = np.linalg.lstsq(design, y, rcond=None)[0]
    return (lambda q: rows_at(q, y)), np.r_[b, np.log(np.std(y - design @ b))], replicates


def normal(n, rng):
    y = rng.normal(1.0, 1.3, n)
    return *_gaussian_rows(y, np.ones((n, 1))), ["mu", "log_sigma"]


def linear(n, rng):
    x = np.c_[np.ones(n), rng.normal(size=(n, 4))]
    y = x @ np.array([1.5, 0.8, -1.2, 0.3, 2.0]) + rng.normal(0.0, 1.3, n)
    return *_gaussian_rows(y, x), ["alpha", "b1", "b2", "b3", "b4", "log_sigma"]


def logistic(n, rng):
    """The well-scaled logistic regression of ``benchmarks/warmup_laplace.py``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from warmup_laplace import BETAS, SCALES

    x = np.c_[np.ones(n), rng.normal(size=(n, 4)) * np.asarray(SCALES["well scaled"])]
    y = rng.uniform(size=n) < expit(x @ np.asarray(BETAS["well scaled"]))

    def rows_at(q, y):
        return (y - expit(np.clip(x @ q, -500, 500)))[:, None] * x

    def replicates(q, rng, draws):
        return [rows_at(q, u < expit(x @ q)) for u in _antithetic(rng, n, draws)]

    return (lambda q: rows_at(q, y)), np.zeros(5), replicates, ["alpha", "b1", "b2", "b3", "b4"]


PROBLEMS = {f.__name__: f for f in (normal, linear, logistic)}


def exact_mode(rows, start, iterations=30, h=1e-6):
    """Newton's method on the exact log posterior from ``start`` (finite-difference
    Hessian), and the exact posterior sds there."""
    q, d = np.array(start, dtype=float), len(start)

    def grad(q):
        return rows(q).sum(axis=0) - PRIOR_PRECISION * q

    for _ in range(iterations):
        g = grad(q)
        hess = np.column_stack([(grad(q + h * e) - g) / h for e in np.eye(d)])
        hess = 0.5 * (hess + hess.T)
        q = q + np.linalg.solve(-hess, g)
    return q, np.sqrt(np.diag(np.linalg.inv(-hess)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--eps", nargs="+", type=float, default=[1.0, 4.0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--clip-margin", type=float, default=None,
                        help="the plan's clip margin (default: the library's)")
    parser.add_argument("--quantile", type=float, default=None,
                        help="the plan's clip quantile (default: the library's)")
    parser.add_argument("--replicates", type=int, default=None,
                        help="the plan's simulated outcomes per iteration (default: the "
                        "library's; 0: the plain clipped gradient)")
    parser.add_argument("--start", choices=["zero", "mode", "mirror"], default="zero",
                        help="where the warm-up starts: θ = 0 (PyMC's usual start on these "
                        "problems), the exact mode, or as far beyond the mode as 0 is before it")
    args = parser.parse_args(argv)
    changes = {k: v for k, v in (("clip_margin", args.clip_margin), ("quantile", args.quantile),
                                 ("replicates", args.replicates)) if v is not None}
    plan = dataclasses.replace(DEFAULT_WARMUP, **changes)
    print(f"{plan}\nerror of the mode in exact posterior sds: mean ± se / rms over seeds")
    for name in args.problems:
        rows, start, replicates, names = PROBLEMS[name](args.n, np.random.default_rng(1))
        d = len(names)
        mode, sds = exact_mode(rows, start)
        prior = PRIOR_PRECISION * np.eye(d)
        starts = {"zero": np.zeros(d), "mode": mode, "mirror": 2.0 * mode}
        for eps in args.eps:
            noise = plan.noise_multipliers(max_gaussian_mu(eps, 1e-5) / plan.share)
            errors = []
            for seed in range(args.seeds):
                with np.errstate(all="ignore"):
                    found = laplace_warmup(
                        np.random.default_rng(seed), starts[args.start], rows,
                        lambda q: -PRIOR_PRECISION * q, lambda q: prior,
                        noise_multipliers=noise, quantile=plan.quantile,
                        clip_margin=plan.clip_margin,
                        replicates_fn=(lambda q, r: replicates(q, r, plan.replicates))
                        if plan.replicates else None,
                    )
                errors.append((found.mean - mode) / sds)
            errors = np.array(errors)
            mean, se = errors.mean(axis=0), errors.std(axis=0, ddof=1) / np.sqrt(len(errors))
            rms = np.sqrt(np.mean(errors**2, axis=0))
            cells = "   ".join(
                f"{k} {m:+.2f} ± {s:.2f} / {r:.2f}" for k, m, s, r in zip(names, mean, se, rms)
            )
            print(f"{name:<9} ε = {eps:g}  {cells}")


if __name__ == "__main__":
    main()
