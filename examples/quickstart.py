"""Quickstart: a private logistic regression with pymc_dp.DPPenalty.

200 000 people, two features scaled to [-1, 1]. The model is an ordinary PyMC model; the
only private parts are the step and `pymc_dp.sample`. The script prints the private
posterior next to a non-private reference (the Laplace approximation at the maximum
likelihood estimate, which reads the data without noise and is shown only for comparison)
and the privacy report.

Only the budget is given: the step spends half of each chain's share on a private warm-up
that finds its start, its proposal shape and its clip bound, and `pymc_dp.sample` picks the
chain length. `step.plan` prints the price of the run before any data is read.

Run: .venv/bin/python examples/quickstart.py
"""

import time

import arviz as az
import numpy as np
import pymc as pm

from scipy.optimize import minimize
from scipy.special import expit, log_expit

import pymc_dp

TRUTH = np.array([-0.3, 0.5, -0.4])  # intercept, beta[0], beta[1]


def simulate(n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    y = rng.binomial(1, expit(TRUTH[0] + X @ TRUTH[1:]))
    return X, y


def build_model(X, y):
    with pm.Model() as model:
        X_data = pm.Data("X", X)
        intercept = pm.Normal("intercept", 0, 5)
        beta = pm.Normal("beta", 0, 5, shape=2)
        pm.Bernoulli("y", logit_p=intercept + X_data @ beta, observed=y)
    return model


def non_private_reference(X, y):
    """MLE and Laplace-approximation sds (not private: for comparison only)."""
    A = np.column_stack([np.ones(len(y)), X])

    def nll(w):
        eta = A @ w
        return -np.sum(y * log_expit(eta) + (1 - y) * log_expit(-eta))

    w = minimize(nll, np.zeros(3), method="BFGS").x
    p = expit(A @ w)
    hessian = A.T @ (A * (p * (1 - p))[:, None])
    return w, np.sqrt(np.diag(np.linalg.inv(hessian)))


def main():
    X, y = simulate()
    model = build_model(X, y)
    with model:
        step = pymc_dp.DPPenalty(eps=2.0)
        print(step.plan(chains=2), end="\n\n")  # reads no data
        t0 = time.perf_counter()
        private = pymc_dp.sample(step=step, chains=2, random_seed=1)
        t_private = time.perf_counter() - t0

    summary = az.summary(private, kind="stats", var_names=["intercept", "beta"])
    mle, mle_sd = non_private_reference(X, y)
    print(f"{'':10s} {'private mean':>13s} {'private sd':>11s} {'non-private':>12s} {'sd':>7s} {'truth':>6s}")
    for i, name in enumerate(summary.index):
        row = summary.loc[name]
        print(
            f"{name:10s} {row['mean']:13.3f} {row['sd']:11.3f} {mle[i]:12.3f} {mle_sd[i]:7.3f} "
            f"{TRUTH[i]:6.2f}"
        )
    print(f"\nPrivate sampling took {t_private:.1f} s. Groups released: {sorted(private.children)}")
    print("\nPrivacy report:")
    print(pymc_dp.privacy_report(private))


if __name__ == "__main__":
    main()
