"""Speed of ABCDP on the toy model of Park et al. section 6.1 (N = 5000).

1. **Prior draws per second**, exact MMD vs random-feature MMD (100 frequencies): the whole
   pipeline of a chain — prior draw, simulation of N = 5000 rows, public summary, distance to
   the private data, sparse-vector test — measured by running chains that test ``short`` and
   ``long`` prior draws (a threshold no draw passes, so each chain tests exactly its cap) and
   differencing, so that compilation and fixed costs cancel. The distance alone (summary of a
   simulation plus the distance to the data) is timed too.
2. **The 10 000-draw toy run**: one chain that tests T = 10 000 prior draws (c = 100,
   ε = 10, ε_abc = 0.05, RESAMPLE=False, values of the paper's grid; about 60 draws pass, fewer
   than c, so every one of the 10 000 is tested), step construction and result included, with
   random features, in one process and with the simulations on a 2-process pool. Target:
   under a minute on 2 cores.

CPU time of this process (insensitive to other load on a shared machine, but blind to the
pool's workers) and wall time are both printed; of ``--repeats`` repetitions the minimum is
shown.

Usage::

    python benchmarks/abcdp_speed.py [--n 5000] [--repeats 2] [--skip-exact]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import time
import warnings

from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pymc as pm

import pymc_dp

THETA_STAR = np.array([0.25, 0.04, 0.33, 0.04, 0.34])


def mixture_of_uniforms(rng, theta, size):
    theta = np.asarray(theta, dtype=float)
    component = rng.choice(theta.size, size=size, p=theta / theta.sum())
    return component + rng.random(size)


def _clock():
    return np.array([time.process_time(), time.perf_counter()])


def build_model(n):
    y = mixture_of_uniforms(np.random.default_rng(0), THETA_STAR, n)
    with pm.Model() as model:
        theta = pm.Dirichlet("theta", a=np.ones(5))
        pm.Simulator("y", mixture_of_uniforms, theta, observed=y)
    return model, y


def chain_time(model, distance, prior_draws, *, threshold=1e-9, eps=1.0, draws=1,
               executor=None, seed=0):
    """Clock of one chain (construction + sampling) and the released stats."""
    start = _clock()
    with model:
        step = pymc_dp.ABCDP(
            eps=eps, threshold=threshold, chains=1, distance=distance,
            max_prior_draws=prior_draws, executor=executor,
        )
        idata = pymc_dp.sample(
            step=step, draws=draws, chains=1, cores=1, random_seed=seed, progressbar=False,
            compute_convergence_checks=False,
        )
    elapsed = _clock() - start
    stats = idata.sample_stats
    return elapsed, int(stats["prior_draws_chain"].values.max()), int(stats["accepted"].sum())


def draws_per_second(model, make_distance, short, long, repeats):
    chain_time(model, make_distance(), 2)  # warm-up: first compilations, caches
    per_draw = []
    for r in range(repeats):
        t_short, n_short, _ = chain_time(model, make_distance(), short, seed=r)
        t_long, n_long, _ = chain_time(model, make_distance(), long, seed=r)
        assert (n_short, n_long) == (short, long)
        per_draw.append((t_long - t_short) / (long - short))
    best = np.min(per_draw, axis=0)
    return 1.0 / best


def distance_only(y, make_distance, count):
    rng = np.random.default_rng(1)
    sims = [mixture_of_uniforms(rng, rng.dirichlet(np.ones(5)), y.size) for _ in range(count)]
    distance = make_distance().fit(sims[:10], rng)
    bound = distance.bind(y)
    start = _clock()
    bound([distance.summarize(s) for s in sims])
    return count / (_clock() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-exact", action="store_true")
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")

    model, y = build_model(args.n)
    makers = {
        "random-feature MMD (D=100)": (
            lambda: pymc_dp.RandomFeatureMMD(bandwidth="median", n_features=100), 200, 1200, 500
        ),
    }
    if not args.skip_exact:
        makers["exact MMD"] = (lambda: pymc_dp.MMD(bandwidth="median"), 5, 25, 10)

    print(f"N = {args.n} individuals, simulations of N rows; rates are best of {args.repeats}")
    print(f"{'distance':<30}{'prior draws/s (CPU)':>21}{'(wall)':>9}"
          f"{'distance only/s (CPU)':>23}{'(wall)':>9}")
    for label, (make, short, long, count) in makers.items():
        rate = draws_per_second(model, make, short, long, args.repeats)
        only = distance_only(y, make, count)
        print(f"{label:<30}{rate[0]:>21.1f}{rate[1]:>9.1f}{only[0]:>23.1f}{only[1]:>9.1f}")

    print("\n10 000-draw toy run (c = 100, ε = 10, ε_abc = 0.05, random-feature MMD):")
    runs = {"1 process": None}
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    runs["simulations on a 2-process pool"] = pool
    for label, executor in runs.items():
        best = None
        for r in range(args.repeats):
            elapsed, tested, accepted = chain_time(
                model, pymc_dp.RandomFeatureMMD(bandwidth="median", n_features=100), 10_000,
                threshold=0.05, eps=10.0, draws=100, executor=executor, seed=10 + r,
            )
            best = elapsed if best is None else np.minimum(best, elapsed)
        print(f"  {label:<34} wall {best[1]:6.1f} s   (CPU of this process {best[0]:5.1f} s)   "
              f"prior draws tested {tested}, accepted {accepted}")
    pool.shutdown()


if __name__ == "__main__":
    main()
