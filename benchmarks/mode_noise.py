"""The plan's figure for the warm-up's mode against what the warm-up does (issue 13).

``step.plan()`` prints, reading no data, about how many posterior sds the private warm-up's
mode lies off on a parameter that m people inform: ``A/√m``
(:meth:`pymc_dp.accounting.plan.WarmupPlan.mode_noise`). This script checks that guide on two
models whose posterior is Gaussian and known exactly (a known residual sd, fixed group
prior): a linear regression (every coefficient informed by all n) and varying intercepts
for groups of 30 to 3000 people. For each ε it runs the warm-up of ``DPPenalty(eps=ε)``
(two chains' shared warm-up, as ``pymc_dp.sample`` runs it) with several seeds and prints,
per kind of parameter, the root mean square error of the private mode in exact posterior
sds against the plan's ``A/√m``.

    python benchmarks/mode_noise.py [--n 10000] [--seeds 8] [--eps 1 4]

Run on 2026-11-28 (2 cores, another job on the other; n = 10⁴, 8 seeds; the warm-up as
of the commit that gave fixed-prior group intercepts their release coordinates); rms
error of the mode in posterior sds, the plan's A/√m in brackets:

==========================  ==============  ==============
parameters (m people)       ε = 1           ε = 4
==========================  ==============  ==============
coefficients (all 10⁴)      0.84 (0.80)     0.32 (0.23)
intercept (30 people)       4.89 (10.21)    2.75 (2.96)
intercept (100 people)      2.68 (5.59)     0.93 (1.62)
intercept (300 people)      2.42 (3.23)     0.51 (0.94)
intercept (1000 people)     1.67 (1.77)     0.42 (0.51)
intercept (3000 people)     0.71 (1.02)     0.19 (0.30)
intercept (5570 people)     0.52 (0.75)     0.13 (0.22)
==========================  ==============  ==============

The figure is right to within a factor of 1.5 where m is a few thousand. For small groups
it is pessimistic: the prior N(0, 1) caps how far an intercept can go (it bounds the error
at about √(m + 1) posterior sds of its own), which the figure does not know.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pymc as pm

import pymc_dp

GROUP_SIZES = (30, 100, 300, 1000, 3000)


def linear(rng, n):
    """y = Xβ + N(0, 1), five covariates and an intercept, β ~ N(0, 10²)."""
    x = np.c_[np.ones(n), rng.normal(size=(n, 5))]
    beta = np.array([1.0, 0.5, -0.3, 0.2, 0.0, 1.0])
    y = x @ beta + rng.normal(size=n)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        b = pm.Normal("b", 0.0, 10.0, shape=6)
        pm.Normal("y", xd @ b, 1.0, observed=y)
    precision = x.T @ x + np.eye(6) / 100.0
    cov = np.linalg.inv(precision)
    mean = cov @ (x.T @ y)
    return model, mean, np.sqrt(np.diag(cov)), {"coefficients (all n)": (np.arange(6), n)}


def groups(rng, n):
    """y = a[g] + N(0, 1), a ~ N(0, 1), groups of GROUP_SIZES people and one of the rest."""
    sizes = [*GROUP_SIZES, n - sum(GROUP_SIZES)]
    g = np.repeat(np.arange(len(sizes)), sizes)
    a = rng.normal(size=len(sizes))
    y = a[g] + rng.normal(size=n)
    with pm.Model() as model:
        gd = pm.Data("g", g)
        a_ = pm.Normal("a", 0.0, 1.0, shape=len(sizes))
        pm.Normal("y", a_[gd], 1.0, observed=y)
    precision = np.asarray(sizes, dtype=float) + 1.0
    mean = np.bincount(g, weights=y) / precision
    kinds = {f"intercept ({m} people)": (np.array([k]), m) for k, m in enumerate(sizes)}
    return model, mean, 1.0 / np.sqrt(precision), kinds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--eps", nargs="+", type=float, default=[1.0, 4.0])
    args = parser.parse_args(argv)
    print(f"n = {args.n}, {args.seeds} seeds; rms error of the mode in posterior sds (plan)")
    for build in (linear, groups):
        model, exact, sds, kinds = build(np.random.default_rng([7, args.n]), args.n)
        rows = {kind: [] for kind in kinds}
        for eps in args.eps:
            errors, plan = [], None
            for seed in range(args.seeds):
                with model, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    step = pymc_dp.DPPenalty(eps=eps)
                    text = str(step.plan(chains=2))
                    found = step.warm_up_for_run(
                        np.random.default_rng([seed, int(eps * 1000)]), 2,
                        sum(step.default_length(2)),
                    )
                errors.append((found.mean - exact) / sds)
                plan = float(text.split("the warm-up's mode: about ")[1].split("/√m")[0])
            errors = np.asarray(errors)
            for kind, (index, m) in kinds.items():
                rms = float(np.sqrt(np.mean(errors[:, index] ** 2)))
                rows[kind].append(f"{rms:5.2f} ({plan / np.sqrt(m):5.2f})")
        print(f"\n{build.__name__}: " + "  ".join(f"ε = {e:g}" for e in args.eps))
        for kind, cells in rows.items():
            print(f"  {kind:28s} " + "   ".join(cells))


if __name__ == "__main__":
    main()
