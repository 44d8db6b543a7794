"""Cost of one DPPenalty iteration relative to one ``pm.Metropolis`` iteration.

Both samplers run on the same model — the thesis' flat 2-d banana with n = 10⁵ individuals
(:func:`pymc_dp.testing.benchmark_models.banana`) — one chain on one core. Compilation and the fixed
costs of a sampling call are excluded by differencing: each sampler runs ``--short`` and
``--long`` draws (no tuning) in the same process, with the step objects built (and compiled)
before the clock starts, and the time per iteration is

    (t(long) − t(short)) / (long − short).

Both the process CPU time and the wall time are measured; the machine may be shared, so
CPU time (insensitive to other processes) is the primary measure, and of ``--repeats``
interleaved repetitions the minimum (least disturbed) and the median are reported. DPPenalty
needs a fresh step (a fresh budget) for every run, so each run builds its own;
``pm.Metropolis`` is rebuilt the same way for symmetry. The target is a ratio ≤ 1.3.

Usage::

    python benchmarks/dp_penalty_speed.py [--n 100000] [--short 200] [--long 1200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import numpy as np
import pymc as pm

import pymc_dp

from pymc_dp.testing.benchmark_models import banana


def _clock():
    return np.array([time.process_time(), time.perf_counter()])


def _time_metropolis(bm, draws, seed):
    with bm.model:
        step = pm.Metropolis()
        start = _clock()
        pm.sample(
            draws=draws, tune=0, chains=1, cores=1, step=step, random_seed=seed,
            progressbar=False, compute_convergence_checks=False, initvals={"theta": bm.true_theta},
        )
        return _clock() - start


def _time_dp_penalty(bm, draws, seed, proposal):
    with bm.model:
        step = pymc_dp.DPPenalty(
            eps=1.0, clip_bound=1.8, proposal=proposal, scaling=0.008, chains=1,
            initial_point={"theta": bm.true_theta},
        )
        start = _clock()
        pymc_dp.sample(
            step=step, draws=draws, tune=0, chains=1, cores=1, random_seed=seed,
            progressbar=False, compute_convergence_checks=False, initvals={"theta": bm.true_theta},
        )
        return _clock() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of individuals (default 1e5)")
    parser.add_argument("--short", type=int, default=200, help="draws of the short run")
    parser.add_argument("--long", type=int, default=1200, help="draws of the long run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--proposal", default="guided", choices=["guided", "random_walk", "one_component"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.long <= args.short:
        parser.error("--long must exceed --short")

    bm = banana(n=args.n, d=2, a=20.0, sigma0_sq=1000.0, seed=args.seed)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    per_iter = {"Metropolis": [], "DPPenalty": []}
    totals = {"Metropolis": [], "DPPenalty": []}
    # Warm-up: the first call of each sampler pays one-off costs (imports, caches).
    _time_metropolis(bm, 10, args.seed)
    _time_dp_penalty(bm, 10, args.seed, args.proposal)
    for r in range(args.repeats):
        seed = args.seed + 1 + r
        for name, fn in (
            ("Metropolis", lambda k: _time_metropolis(bm, k, seed)),
            ("DPPenalty", lambda k: _time_dp_penalty(bm, k, seed, args.proposal)),
        ):
            t_short = fn(args.short)
            t_long = fn(args.long)
            per_iter[name].append((t_long - t_short) / (args.long - args.short))
            totals[name].append((t_short, t_long))

    print(f"model: flat banana d=2, n={bm.n}; one chain, one core; draws {args.short} vs {args.long}, "
          f"{args.repeats} repeats; DPPenalty proposal={args.proposal}")
    summary = {}
    for name in ("Metropolis", "DPPenalty"):
        cpu = [1e3 * v[0] for v in per_iter[name]]
        wall = [1e3 * v[1] for v in per_iter[name]]
        summary[name] = (min(cpu), statistics.median(cpu), min(wall), statistics.median(wall))
        print(f"{name:>10}: CPU ms/iteration min {min(cpu):.3f} median {statistics.median(cpu):.3f}; "
              f"wall ms/iteration min {min(wall):.3f} median {statistics.median(wall):.3f}")
        print(f"{'':>12}repeats (CPU ms): {', '.join(f'{v:.3f}' for v in cpu)}; "
              f"short/long wall s: {', '.join(f'{s_[1]:.2f}/{l_[1]:.2f}' for s_, l_ in totals[name])}")
    m, d = summary["Metropolis"], summary["DPPenalty"]
    print(f"ratio DPPenalty / Metropolis (CPU, min)    = {d[0] / m[0]:.3f}  (target <= 1.3)")
    print(f"ratio DPPenalty / Metropolis (CPU, median) = {d[1] / m[1]:.3f}")
    print(f"ratio DPPenalty / Metropolis (wall, min)   = {d[2] / m[2]:.3f}")
    return summary


if __name__ == "__main__":
    main()
