"""ABCDP on the tuberculosis birth–death model (Park, Vinaroz & Jitkrittum, section 6.3),
at reduced size.

The model is Lintusaari et al.'s (2019) stochastic birth–death model of TB outbreaks
(``pymc_dp.testing.epidemics.simulate_tb``): new strains appear at the burden rate β;
non-compliant hosts transmit at a1 and die at d1 (R1 = a1/d1, t1 = a1 − d1), compliant hosts
transmit at a2 = R2 · 5.95 and die at 5.95 a year; 80 % of deaths in a two-year window are
observed with their strain. One "observation" is one outbreak, summarised as in Lintusaari
et al.'s Table 1 (``tb_summaries``); the private data are ``n`` outbreaks simulated at the
truth the ABCDP authors used, (R1, t1, R2, β) = (5.88, 6.74, 0.09, 192) (Lintusaari et al.'s
SF estimates), with the prior of the paper and of their code: β ~ N(200, 30) (30 a variance),
R1 ~ U(1.01, 20), t1 ~ U(0.01, 30), R2 = u (1 − 0.05 R1) / 0.95 with u ~ U(0.01, 1), kept only
where a1 < 40 and the balance number observed per year is in (0, 350): a joint prior drawn by
rejection (a ``pm.CustomDist`` with a ``random`` function; ABCDP only draws from the prior).

Distance, as in the authors' code: each simulated outbreak j is compared with private
outbreak j by Lintusaari et al.'s weighted L2 distance (``tb_distance``), clipped at C = 200,
and the n clipped distances are averaged: replacing one private outbreak moves the average by
at most C/n, the sensitivity (``ClippedDistance``). ABCDP with ε = 1, ε_abc = 150, c = 10
accepted samples, RESAMPLE on and off; the error is the mean absolute difference between the
posterior mean of (R1, t1, R2, β) and the truth.

The paper reports errors 4.71 (n = 100) → 2.20 (n = 1000) with RESAMPLE and 4.51 → 2.10
without, from one run each of up to 1000 prior draws. Those sizes take hours with this NumPy
simulator (an outbreak is about 10⁴ Gillespie events, ~20 years of warm-up), so the defaults
are reduced: n = 10 and 40 outbreaks, at most ``--max-prior-draws`` prior draws, a warm-up
capped at 60 years (``--max-warmup``; Lintusaari et al.: 300). The Laplace scale is
(c + 1)·C/(n ε) (or 2c·C/(nε) with RESAMPLE), so a smaller n means proportionally more noise
than the paper's: with n = 10 it is 220 (400) against a threshold of 150, and the sparse
vector accepts almost at random. The script prints the noise scale of each run next to the
paper's, the error of the prior mean and that of the mean of c random prior draws; the
paper's sizes are ``--n 100 1000 --max-prior-draws 1000 --max-warmup 300`` (hours).

Run: .venv/bin/python examples/abcdp_tuberculosis.py [--n 10 40] [--max-prior-draws 60]
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp

from pymc_dp.testing.epidemics import (
    simulate_tb,
    tb_balance,
    tb_distance,
    tb_rates,
    tb_summaries,
)

TRUTH = np.array([5.88, 6.74, 0.09, 192.0])          # (R1, t1, R2, β)
NAMES = ("R1", "t1", "R2", "burden")
PAPER_ERRORS = {(100, True): 4.71, (1000, True): 2.20, (100, False): 4.51, (1000, False): 2.10}
CLIP = 200.0                                          # C
THRESHOLD = 150.0                                     # ε_abc
EPSILON = 1.0
A1_BOUND, MEAN_OBS_BOUNDS = 40.0, (0.0, 350.0)        # the authors' prior constraints
N_SUMMARIES = 8


def _constrained(r1, t1, r2, burden):
    """Where the authors' prior constraints hold: a1 < 40, balance observed a year in (0, 350)."""
    a2, d2, a1, d1 = tb_rates(r1, t1, r2)
    n_c, n_nc = tb_balance(burden, a2, d2, a1, d1, 0.95)
    mean_obs = 0.8 * (n_c * d2 + n_nc * d1)
    return (a1 < A1_BOUND) & (mean_obs > MEAN_OBS_BOUNDS[0]) & (mean_obs < MEAN_OBS_BOUNDS[1])


def joint_prior(rng=None, size=None):
    """Draws of (R1, t1, R2, β) from the authors' prior, constraints by rejection."""
    n = 1 if size is None else int(np.prod(size))
    out = np.empty((0, 4))
    while out.shape[0] < n:
        m = 4 * n
        r1, t1 = rng.uniform(1.01, 20.0, m), rng.uniform(0.01, 30.0, m)
        r2 = rng.uniform(0.01, 1.0, m) * (1.0 - 0.05 * r1) / 0.95
        burden = rng.normal(200.0, np.sqrt(30.0), m)
        keep = _constrained(r1, t1, r2, burden)
        out = np.vstack([out, np.column_stack([r1, t1, r2, burden])[keep]])
    return out[:n].reshape((4,) if size is None else (*np.atleast_1d(size), 4))


def simulate(rng, theta, min_warmup, max_warmup, size):
    """``size[0]`` outbreaks at θ = (R1, t1, R2, β), as rows of Lintusaari et al.'s summaries."""
    r1, t1, r2, burden = (float(v) for v in np.asarray(theta, dtype=float).reshape(4))
    sim = simulate_tb(rng, burden, r1, t1, r2, size=int(size[0]),
                      min_warmup=float(np.asarray(min_warmup).reshape(-1)[0]),
                      max_warmup=float(np.asarray(max_warmup).reshape(-1)[0]))
    return tb_summaries(sim)


def averaged_clipped_distance(observed, simulated):
    """Mean over outbreaks of min(ρ_j, C), ρ_j the weighted L2 distance of pair j (NaN → C)."""
    d = tb_distance(observed, simulated)
    return float(np.mean(np.minimum(np.nan_to_num(d, nan=CLIP), CLIP)))


def build_model(observed, args):
    with pm.Model() as model:
        theta = pm.CustomDist("theta", random=joint_prior, signature="->(4)",
                              logp=lambda value: pt.zeros_like(value).sum(-1))
        pm.Simulator("outbreaks", simulate, theta, args.min_warmup, args.max_warmup,
                     observed=observed)
    return model


def private_run(observed, resample, args, seed):
    n = observed.shape[0]
    distance = pymc_dp.ClippedDistance(averaged_clipped_distance, clip=CLIP,
                                       sensitivity=lambda rows: CLIP / rows,
                                       name="mean of clipped weighted L2")
    with build_model(observed, args):
        step = pymc_dp.ABCDP(eps=EPSILON, threshold=THRESHOLD, resample=resample, chains=1,
                             distance=distance, max_prior_draws=args.max_prior_draws,
                             batch_size=args.batch_size)
        idata = pymc_dp.sample(step=step, draws=args.c, chains=1, cores=1, random_seed=seed,
                               progressbar=False)
    accepted = pymc_dp.accepted_samples(idata)
    post = accepted["theta"].transpose("sample", ...).values.reshape(-1, 4)
    tested = int(idata.sample_stats["prior_draws_chain"].values.max())
    scale = step.laplace_scale(args.c)
    assert np.isclose(scale, ((2 * args.c) if resample else (args.c + 1)) * CLIP / n / EPSILON)
    return post, tested, scale, float(idata.attrs["dp_epsilon"])


def prior_mean_error(rng, draws=20000):
    """Error of the (constrained) prior mean."""
    mean = joint_prior(rng, size=draws).mean(axis=0)
    return float(np.mean(np.abs(mean - TRUTH))), mean


def random_acceptance_error(rng, c, repeats=2000):
    """Mean error of the mean of c prior draws: what a sparse vector accepting at random
    would score (the reference the noisiest runs fall back to)."""
    draws = joint_prior(rng, size=c * repeats).reshape(repeats, c, 4)
    return float(np.mean(np.abs(draws.mean(axis=1) - TRUTH).mean(axis=1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 40],
                        help="numbers of private outbreaks (the paper: 100 1000)")
    parser.add_argument("--c", type=int, default=10, help="accepted samples (the paper: 10)")
    parser.add_argument("--max-prior-draws", type=int, default=60,
                        help="prior draws per run at most (the paper: 1000)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--min-warmup", type=float, default=15.0)
    parser.add_argument("--max-warmup", type=float, default=60.0,
                        help="warm-up cap in years (Lintusaari et al.: 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)

    start = time.perf_counter()
    err0, mean0 = prior_mean_error(np.random.default_rng(args.seed))
    print("Park et al. section 6.3 at reduced size: ε = 1, ε_abc = 150, C = 200, "
          f"c = {args.c}, at most {args.max_prior_draws} prior draws per run")
    err_random = random_acceptance_error(np.random.default_rng(args.seed + 1), args.c)
    print(f"truth (R1, t1, R2, β) = {TRUTH.tolist()}; prior mean {np.round(mean0, 2).tolist()}, "
          f"its error {err0:.2f}; mean of {args.c} random prior draws: error {err_random:.2f}")
    print(f"\n{'n':>5} {'RESAMPLE':>9} {'b':>8} {'paper b':>8} {'prior draws':>12} "
          f"{'accepted':>9} {'error':>7} {'paper error':>12}  posterior mean (R1, t1, R2, β)")
    for n in args.n:
        sim_rng = np.random.default_rng([args.seed, n])
        observed = simulate(sim_rng, TRUTH, args.min_warmup, args.max_warmup, (n, N_SUMMARIES))
        for resample in (True, False):
            post, tested, scale, spent = private_run(observed, resample, args,
                                                     seed=args.seed * 1000 + n + resample)
            mean = post.mean(axis=0) if post.size else np.full(4, np.nan)
            err = float(np.mean(np.abs(mean - TRUTH)))
            paper_n = 100 if n <= 100 else 1000
            paper_b = ((2 * 10) if resample else 11) * CLIP / paper_n / EPSILON
            paper = PAPER_ERRORS[(paper_n, resample)]
            print(f"{n:>5} {str(resample):>9} {scale:>8.1f} {paper_b:>8.1f} {tested:>12} "
                  f"{post.shape[0]:>9} {err:>7.2f} {paper:>7.2f} (n={paper_n:<4})  "
                  f"{np.round(mean, 2).tolist()}   [ε spent {spent:g}]")
    print(f"\ntotal time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
