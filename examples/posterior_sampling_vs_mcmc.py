"""Posterior sampling against private MCMC (DPPenalty, DPHMC): which is more accurate, when?

One model, one ε, three mechanisms, three sizes n:

* the model: ``y_i ~ Bernoulli(p)``, ``p ~ Uniform(0.05, 0.95)`` (the probability trimmed
  away from 0 and 1, which the posterior sampling mechanism needs), true p = 0.3;
* ``PosteriorSampling``: N draws of the posterior tempered by T = ε/(2NL), pure ε-DP
  (δ = 0) for exact draws — here NUTS draws, whose MCMC error is outside ε;
* ``DPPenalty`` and ``DPHMC``: private MCMC on the log-odds of p with clip bounds equal to
  the exact per-datum Lipschitz constants (the clipping never binds, no bias), (ε, δ)-DP with
  δ = 0.1/n, two chains started at p = 0.5, the second halves kept; proposal scale and
  leapfrog step from a public guess of the posterior sd that uses n only.

Accuracy against the exact posterior (a truncated Beta, sampled exactly): the error of the
posterior mean in units of the exact posterior sd, the ratio of the sample's sd to the exact
sd, and the MMD (Gaussian kernel, median heuristic; ``pymc_dp.testing.evaluation.mmd``), each
averaged over a few repetitions.

What to expect: the tempered posterior is wider than the posterior by 1/√T = √(2NL/ε), so
its draws give a point estimate whose error is about √(2L/ε) posterior sds whatever n and N,
and a spread that is far too wide unless N is tiny. Private MCMC pays a fixed noise per
iteration while the posterior narrows with n, so it gets closer to the exact posterior as n
grows.

Run: python examples/posterior_sampling_vs_mcmc.py [--reps 3] [--eps 1.0]
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import numpy as np
import pymc as pm

from scipy import stats
from scipy.special import expit

import pymc_dp

from pymc_dp.testing.evaluation import mmd

PosteriorSampling = pymc_dp.PosteriorSampling
DPHMC = pymc_dp.DPHMC

A, B, TRUE_P = 0.05, 0.95, 0.3
QUIET = dict(progressbar=False, cores=1, compute_convergence_checks=False)


def build_model(y):
    with pm.Model() as model:
        p = pm.Uniform("p", A, B)
        pm.Bernoulli("y", p, observed=y)
    return model


def exact_posterior_draws(y, size, rng):
    """Exact draws of the posterior: Beta(1 + s, 1 + n − s) truncated to [A, B]."""
    s, n = int(y.sum()), y.size
    dist = stats.beta(1 + s, 1 + n - s)
    u = rng.uniform(dist.cdf(A), dist.cdf(B), size)
    return dist.ppf(u)


def value_space_lipschitz():
    """sup over z and x of |dℓ/dz| for p = A + (B − A)·sigmoid(z): public, data-free.

    |ℓ(x, z') − ℓ(x, z)| ≤ that · |z' − z|, so it is a clip bound that never binds, for the
    log-likelihood ratios (DPPenalty, DPHMC) and for the gradients (DPHMC).
    """
    z = np.linspace(-40, 40, 400_001)
    s = expit(z)
    p = A + (B - A) * s
    dp = (B - A) * s * (1 - s)
    return float(max(np.max(dp / p), np.max(dp / (1 - p))))


def summarise(draws, reference, mean, sd, rng):
    draws = np.asarray(draws, dtype=float).ravel()
    return {
        "err": abs(draws.mean() - mean) / sd,
        "sd_ratio": draws.std() / sd,
        "mmd": mmd(draws, reference, rng=rng) if draws.size > 1 else np.nan,
    }


def run_posterior_sampling(model, eps, n_draws, seed):
    with model:
        mech = PosteriorSampling(eps=eps, draws=n_draws)
        idata = mech.sample(chains=2, tune=1000, random_seed=seed, progressbar=False, cores=1)
    return idata.posterior["p"].values.ravel(), idata.attrs["dp_epsilon"], 0.0, mech.temperature


def public_scale(n):
    """A guess of the posterior sd of z = logit-interval(p) from n alone (p = 0.5)."""
    return 0.5 / np.sqrt(n) / ((B - A) / 4)


def run_dp_penalty(model, eps, clip, seed, n, tune=300, draws=300):
    with model:
        step = pymc_dp.DPPenalty(
            eps=eps, clip_bound=clip, proposal="random_walk", chains=2,
            S=np.array([2.4 * public_scale(n)]),
        )
        idata = pymc_dp.sample(
            step=step, draws=draws, tune=tune, chains=2, random_seed=seed,
            **QUIET,  # (the chains start at p = 0.5, the middle of the prior: PyMC's start)
        )
    post = idata.posterior["p"].values[:, draws // 2:]
    return post.ravel(), idata.attrs["dp_epsilon"], idata.attrs["dp_delta"]


def run_dp_hmc(model, eps, clip, seed, n, tune=400, draws=200):
    # One leapfrog step per iteration and 30 % of the budget on gradients did best on this
    # one-parameter model among L ∈ {1, 2, 3, 5, 10} (longer paths need larger ratio noise).
    with model:
        step = DPHMC(
            eps=eps, grad_clip=clip, loglik_clip=clip, n_steps=1, budget_split=0.3,
            step_size=0.5 * public_scale(n), chains=2,
        )
        idata = pymc_dp.sample(
            step=step, draws=draws, tune=tune, chains=2, random_seed=seed,
            **QUIET,  # (the chains start at p = 0.5, the middle of the prior: PyMC's start)
        )
    post = idata.posterior["p"].values[:, draws // 2:]
    return post.ravel(), idata.attrs["dp_epsilon"], idata.attrs["dp_delta"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)  # PyMC's per-run INFO lines
    eps = args.eps
    clip = value_space_lipschitz()
    L = (np.log(B / (1 - B)) - np.log(A / (1 - A))) / 2
    print(f"model: y ~ Bernoulli(p), p ~ Uniform({A}, {B}), true p = {TRUE_P}; ε = {eps}")
    print(f"posterior sampling: L = {L:.4f} per datum, per-draw ε = 2TL, pure DP (δ = 0)")
    print(f"DPPenalty / DPHMC: value-space Lipschitz clip = {clip:.4f} (never binds), "
          "δ = 0.1/n, 2 chains, second halves")
    print(f"metrics: |mean − exact mean| / exact sd, sd / exact sd, MMD to exact draws; "
          f"mean over {args.reps} repetitions")
    print()
    header = f"{'n':>7} {'method':<34} {'ε':>6} {'δ':>8} {'draws':>6} {'T':>9} " \
             f"{'mean err/sd':>11} {'sd ratio':>9} {'MMD':>7} {'sec':>6}"
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        rows: dict[str, list] = {}
        meta: dict[str, tuple] = {}
        for rep in range(args.reps):
            rng = np.random.default_rng(1000 * rep + n % 997)
            y = rng.binomial(1, TRUE_P, size=n)
            reference = exact_posterior_draws(y, 4000, rng)
            mean, sd = reference.mean(), reference.std()
            model = build_model(y)
            runs = [
                ("posterior sampling, N = 1", lambda: run_posterior_sampling(model, eps, 1, rep)),
                ("posterior sampling, N = 10", lambda: run_posterior_sampling(model, eps, 10, rep)),
                ("posterior sampling, N = 100", lambda: run_posterior_sampling(model, eps, 100, rep)),
                ("DPPenalty (300 + 300 its)", lambda: run_dp_penalty(model, eps, clip, rep, n)),
                ("DPHMC (L = 1, 400 + 200 its)", lambda: run_dp_hmc(model, eps, clip, rep, n)),
            ]
            for name, run in runs:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = run()
                seconds = time.perf_counter() - t0
                draws, e, d = out[:3]
                T = out[3] if len(out) > 3 else np.nan
                res = summarise(draws, reference, mean, sd, rng)
                res["sec"] = seconds
                rows.setdefault(name, []).append(res)
                meta[name] = (e, d, np.asarray(draws).size, T)
        for name, results in rows.items():
            e, d, k, T = meta[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # MMD of one draw: n/a
                avg = {key: np.nanmean([r[key] for r in results]) for key in results[0]}
            mmd_text = "    n/a" if np.isnan(avg["mmd"]) else f"{avg['mmd']:7.3f}"
            T_text = "" if np.isnan(T) else f"{T:.3g}"
            print(
                f"{n:>7} {name:<34} {e:6.3g} {d:8.2g} {k:>6} {T_text:>9} "
                f"{avg['err']:11.2f} {avg['sd_ratio']:9.2f} {mmd_text} {avg['sec']:6.1f}"
            )
        print()


if __name__ == "__main__":
    main()
