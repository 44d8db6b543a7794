"""How close the private Laplace warm-up comes to the exact mode and curvature (issue 13).

Logistic regression with an intercept and four covariates, either well scaled (standard
normal) or badly scaled (standard deviations 1, 10, 0.1, 1), n = 10⁴ and 10⁵, ε = 4 and 1
(δ = 0.1/n), two chains, half of a chain's budget on the warm-up
(:class:`pymc_dp.accounting.plan.WarmupPlan`). For each setting it runs
:func:`pymc_dp.kernels.warmup.laplace_warmup` from θ = 0 with several seeds and prints the
error of the private mode in exact posterior standard deviations (median, 90th percentile
and max over seeds and coordinates) and the ratio of the private to the exact posterior
sds (median, min, max). The exact mode and curvature come from Newton's method on the
same data.

    python benchmarks/warmup_laplace.py [--seeds 12] [--iterations 8] [--quantile 0.999]
"""

from __future__ import annotations

import argparse

import numpy as np

from pymc_dp.accounting.gaussian import max_gaussian_mu
from pymc_dp.accounting.plan import WarmupPlan
from pymc_dp.kernels.warmup import laplace_warmup

SCALES = {"well scaled": [1.0, 1.0, 1.0, 1.0], "badly scaled": [1.0, 10.0, 0.1, 1.0]}
BETAS = {"well scaled": [-1.0, 0.5, 1.0, -2.0, 0.3], "badly scaled": [-1.0, 0.05, 10.0, -2.0, 0.3]}
PRIOR_PRECISION = 1e-2  # β ~ N(0, 10²)


def logistic_problem(kind: str, n: int, rng: np.random.Generator):
    """Per-datum gradients, the prior's, and the exact mode and posterior sds."""
    x = np.c_[np.ones(n), rng.normal(size=(n, 4)) * np.asarray(SCALES[kind])]
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-x @ np.asarray(BETAS[kind])))
    d = x.shape[1]

    def grads(q):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ q, -500, 500)))
        return (y - p)[:, None] * x

    def prior_grad(q):
        return -PRIOR_PRECISION * q

    def prior_hessian(q):
        return PRIOR_PRECISION * np.eye(d)

    mode = np.zeros(d)
    for _ in range(50):  # Newton's method on the exact posterior
        p = 1.0 / (1.0 + np.exp(-x @ mode))
        hessian = (x.T * (p * (1 - p))) @ x + PRIOR_PRECISION * np.eye(d)
        mode = mode + np.linalg.solve(hessian, grads(mode).sum(axis=0) + prior_grad(mode))
    sds = np.sqrt(np.diag(np.linalg.inv(hessian)))
    return grads, prior_grad, prior_hessian, mode, sds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--quantile", type=float, default=0.999)
    args = parser.parse_args()
    plan = WarmupPlan(share=0.5, iterations=args.iterations, quantile=args.quantile, growth=1.5)
    print(f"{plan}\nerror of the mode in posterior sds: median / 90% / max; sd ratio: median "
          "(min, max)")
    for kind in SCALES:
        for n in (10**4, 10**5):
            grads, prior_grad, prior_hessian, mode, sds = logistic_problem(
                kind, n, np.random.default_rng(1)
            )
            for eps in (4.0, 1.0):
                noise = plan.noise_multipliers(max_gaussian_mu(eps, 0.1 / n) / 2)
                errors, ratios = [], []
                for seed in range(args.seeds):
                    with np.errstate(over="ignore"):
                        found = laplace_warmup(
                            np.random.default_rng(seed), np.zeros(mode.size), grads,
                            prior_grad, prior_hessian, noise_multipliers=noise,
                            quantile=plan.quantile,
                        )
                    errors.append(np.abs(found.mean - mode) / sds)
                    ratios.append(np.sqrt(np.diag(np.linalg.inv(found.hessian))) / sds)
                errors, ratios = np.array(errors), np.array(ratios)
                print(
                    f"{kind:>12}  n = {n:>6}  ε = {eps:g}:  error {np.median(errors):5.2f} / "
                    f"{np.quantile(errors.max(axis=1), 0.9):5.2f} / {errors.max():6.2f}   "
                    f"sd ratio {np.median(ratios):4.2f} ({ratios.min():4.2f}, {ratios.max():4.2f})"
                )


if __name__ == "__main__":
    main()
