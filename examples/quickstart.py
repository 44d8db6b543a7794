"""Quickstart: a private logistic regression with pymc_dp.DPPenalty.

100 000 people, two features scaled to [-1, 1]. The model is an ordinary PyMC model; the
only private parts are the step and `pymc_dp.sample`. The script prints the private
posterior next to the non-private one (NUTS, which reads the data without noise and is
shown only for comparison) and the privacy report.

Run: .venv/bin/python examples/quickstart.py
"""

import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp


def simulate(n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    logits = -0.5 + X @ np.array([1.5, -1.0])
    y = rng.binomial(1, 1 / (1 + np.exp(-logits)))
    return X, y


def build_model(X, y):
    with pm.Model() as model:
        X_data = pm.Data("X", X)
        intercept = pm.Normal("intercept", 0, 5)
        beta = pm.Normal("beta", 0, 5, shape=2)
        pm.Bernoulli("y", logit_p=intercept + X_data @ beta, observed=y)
    return model


def main():
    X, y = simulate()
    model = build_model(X, y)
    with model:
        # Features are in [-1, 1] (plus the intercept), so each person's log-likelihood
        # ratio is at most sqrt(3)·‖θ'−θ‖: a clip bound of 1.8 never binds.
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.8, proposal="guided", scaling=0.01)
        t0 = time.perf_counter()
        private = pymc_dp.sample(
            step=step, draws=1000, tune=1000, chains=4, cores=1, random_seed=1, progressbar=False
        )
        t_private = time.perf_counter() - t0
        exact = pm.sample(draws=500, tune=500, chains=2, cores=1, random_seed=1, progressbar=False)

    print("\nPrivate posterior (DPPenalty, ε = 1):")
    print(az.summary(private, kind="stats", var_names=["intercept", "beta"]))
    print("\nNon-private posterior (NUTS, for comparison only):")
    print(az.summary(exact, kind="stats", var_names=["intercept", "beta"]))
    print(f"\nPrivate sampling took {t_private:.1f} s. Groups released: {sorted(private.children)}")
    print("\nPrivacy report:")
    print(pymc_dp.privacy_report(private))


if __name__ == "__main__":
    main()
