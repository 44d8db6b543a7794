"""DPPenalty against the floor: its own compiled per-datum log-likelihood call, and pm.Metropolis.

For each model — the thesis' flat 2-d banana (:func:`pymc_dp.testing.benchmark_models.banana`; a row
is two numbers whose log-densities are summed, so the per-row log-likelihood is a reduction
and the ratio takes a second pass over the n values) and a linear regression with a
``pm.Data`` covariate (elementwise: PyTensor fuses the log-likelihood and the clipped ratio into
one loop) — and each n, in one process, ``--repeats`` interleaved repetitions of:

* ``loglik``: one call of the compiled per-datum log-likelihood
  (:meth:`pymc_dp.model.PrivateModel.loglik`), CPU time, mean of a block of calls;
* ``iteration``: one DPPenalty iteration inside ``pymc_dp.sample`` (fixed settings, no
  warm-up), by differencing a long and a short run built before the clock starts, so that
  compilation and fixed costs drop out — everything PyMC's loop adds per draw is included;
* ``first draw``: wall time from building the step to the first draw (``draws=1``), for
  DPPenalty with fixed settings and for ``pm.Metropolis``, each after one unmeasured run
  (one-time costs of the process, e.g. loading Numba's cache, excluded for both);
* ``peak``: the peak of memory allocated (``tracemalloc``: NumPy's and PyTensor's arrays)
  during a short DPPenalty run, over the size of the data.

It prints the minimum and median over the repeats, the ratio iteration / loglik (target
≤ 1.3), the growth exponent of the iteration cost from the smallest to the largest n
(target ≤ 1.05), the first-draw ratio to ``pm.Metropolis`` (target ≤ 2) and the peak
memory over the data's size (target ≤ 1).

Run on 2026-11-26 (2 cores, load average about 1; ``--repeats 5``; CPU ms min / median;
first draw wall s, min), as it is and with glibc told to keep freed blocks for reuse
(``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=2147483648``, see
``docs/private-mcmc.md``, "Speed and memory"):

==========  ==========  ===============  ===============  ===========  =======================
model       n           loglik (ms)      iteration (ms)   ratio        first draw / Metropolis
==========  ==========  ===============  ===============  ===========  =======================
banana      10⁵         0.208 / 0.212    0.251 / 0.323    1.21 / 1.52  0.21 / 0.47 s
banana      10⁶         2.162 / 2.185    2.933 / 3.078    1.36 / 1.41  0.30 / 0.56 s
banana      10⁷         53.56 / 54.42    58.03 / 59.90    1.08 / 1.10  1.38 / 0.88 s
regression  10⁵         0.024 / 0.024    0.088 / 0.089    3.65 / 3.66  0.24 / 0.32 s
regression  10⁶         0.250 / 0.288    0.608 / 0.631    2.43 / 2.19  0.31 / 0.89 s
regression  10⁷         6.427 / 34.57    17.72 / 49.18    2.76 / 1.42  1.12 / 1.20 s
heap reused:
banana      10⁷         21.59 / 21.64    26.95 / 27.67    1.25 / 1.28  0.79 / 0.70 s
regression  10⁷         6.276 / 6.327    8.766 / 8.937    1.40 / 1.41  0.70 / 1.17 s
==========  ==========  ===============  ===============  ===========  =======================

Growth exponents of the iteration (medians, 10⁵ → 10⁷): banana 1.13, regression 1.37; with
the heap reused 0.97 and 0.99 (the compiled log-likelihood's own: 1.20 and 1.58, heap
reused 1.00 and 1.21). At n = 10⁷ every call allocates an 80 MB array for the new
log-likelihoods, which glibc takes from the operating system and zero-fills page by page:
on this machine that costs more than computing them. With small per-row cost (the
regression: 0.24 ns a row) PyMC's and the step's fixed cost per draw (about 65 µs) dominates
below 10⁶ rows. Peak memory during sampling was 2.0–2.8 (banana) and 3.1–4.2 (regression)
times the data: the two arrays of log-likelihoods (the cached and the proposal's), and
PyMC's own result, which copied the data into ``observed_data`` and ``constant_data`` with a
label per row. Since 2026-11-29 ``pymc_dp.sample`` converts only the draws and stats; the
same command then (``--n 100000 1000000 --repeats 3``, load average about 4: the timings
of that run are not comparable and not shown) printed peak memory 1.95 and 1.05 times the
data for the banana at n = 10⁵ and 10⁶, and 1.96 and 1.13 for the regression: at 10⁶ the
two arrays of log-likelihoods (as large as the data here, two numbers a row) and little
else; at 10⁵ the chain start's own allocations (its checks and compiled functions' storage,
1 to 1.5 MB, whatever n) weigh against 1.6 MB of data.

Usage::

    python benchmarks/dp_penalty_floor.py [--n 100000 1000000 10000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import logging
import types
import statistics
import time
import tracemalloc
import warnings

import numpy as np
import pymc as pm

import pymc_dp

from pymc_dp.testing.benchmark_models import banana

SETTINGS = dict(eps=1.0, clip_bound=1.8, proposal="random_walk", scaling=0.008, warmup=False,
                chains=1)
SAMPLE = dict(tune=0, chains=1, cores=1, progressbar=False, compute_convergence_checks=False)


def _banana(n, seed):
    bm = banana(n=n, d=2, seed=seed)
    start = {"theta": bm.true_theta}
    return types.SimpleNamespace(model=bm.model, data=[bm.data], start=start, point=start)


def _regression(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 1.0 + 2.0 * x + rng.normal(size=n)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        a, b = pm.Normal("a", 0.0, 10.0), pm.Normal("b", 0.0, 10.0)
        pm.Normal("y", a + b * xd, pm.HalfNormal("sigma", 5.0), observed=y)
    return types.SimpleNamespace(model=model, data=[x, y], start={"a": 1.0, "b": 2.0, "sigma": 1.0},
                                 point={k: np.array(v) for k, v in
                                        {"a": 1.0, "b": 2.0, "sigma_log__": 0.0}.items()})


MODELS = {"banana": _banana, "regression": _regression}


def _run_dp_penalty(bm, draws, seed):
    with bm.model:
        step = pymc_dp.DPPenalty(**SETTINGS, initial_point=bm.point)
        start = time.process_time()
        pymc_dp.sample(step=step, draws=draws, random_seed=seed, initvals=bm.start, **SAMPLE)
        return time.process_time() - start


def _iteration_seconds(bm, short, long, seed):
    return (_run_dp_penalty(bm, long, seed) - _run_dp_penalty(bm, short, seed)) / (long - short)


def _loglik_seconds(bm, calls):
    with bm.model:
        pmodel = pymc_dp.DPPenalty(**SETTINGS).private_model
    q = pmodel.ravel(pmodel.model.initial_point())
    pmodel.loglik(q)
    start = time.process_time()
    for _ in range(calls):
        pmodel.loglik(q)
    return (time.process_time() - start) / calls


def _first_draw_seconds(bm, which, seed):
    start = time.perf_counter()
    with bm.model:
        if which == "DPPenalty":
            step = pymc_dp.DPPenalty(**SETTINGS)
            pymc_dp.sample(step=step, draws=1, random_seed=seed, **SAMPLE)
        else:
            pm.sample(step=pm.Metropolis(), draws=1, random_seed=seed, **SAMPLE)
    return time.perf_counter() - start


def _peak_over_data(bm, draws, seed):
    data_bytes = sum(np.asarray(v).nbytes for v in bm.data)
    with bm.model:
        step = pymc_dp.DPPenalty(**SETTINGS)
        tracemalloc.start()
        pymc_dp.sample(step=step, draws=draws, random_seed=seed, **SAMPLE)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / data_bytes


def _stats(values):
    return min(values), statistics.median(values)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--model", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)

    for name in args.model:
        print(f"--- {name}", flush=True)
        _report(name, args)


def _report(name, args):
    rows = []
    for n in args.n:
        bm = MODELS[name](n, args.seed)
        # about 2 s of iterations per long run whatever n (≈ 3 ns per row per iteration), so
        # that the differenced work dwarfs the run's fixed costs and their jitter
        long = int(np.clip(6e8 / n, 60, 20000))
        short = long // 4
        calls = int(np.clip(2e8 / n, 20, 2000))
        for which in ("DPPenalty", "Metropolis"):
            _first_draw_seconds(bm, which, args.seed)  # one-time costs, unmeasured
        _iteration_seconds(bm, short, long, args.seed)
        loglik, iteration, first, metropolis = [], [], [], []
        for r in range(args.repeats):  # interleaved
            loglik.append(_loglik_seconds(bm, calls))
            iteration.append(_iteration_seconds(bm, short, long, args.seed + r))
            first.append(_first_draw_seconds(bm, "DPPenalty", args.seed + r))
            metropolis.append(_first_draw_seconds(bm, "Metropolis", args.seed + r))
        peak = _peak_over_data(bm, short, args.seed)
        row = dict(n=n, loglik=_stats(loglik), iteration=_stats(iteration),
                   first=_stats(first), metropolis=_stats(metropolis), peak=peak)
        rows.append(row)
        print(
            f"n={n:>10,}  loglik {1e3 * row['loglik'][0]:8.3f} / {1e3 * row['loglik'][1]:8.3f} ms"
            f"  iteration {1e3 * row['iteration'][0]:8.3f} / {1e3 * row['iteration'][1]:8.3f} ms"
            f"  ratio {row['iteration'][0] / row['loglik'][0]:.2f} (min)"
            f" {row['iteration'][1] / row['loglik'][1]:.2f} (median)  [target <= 1.3]",
            flush=True,
        )
        print(
            f"{'':14}first draw {row['first'][0]:.2f} / {row['first'][1]:.2f} s, pm.Metropolis"
            f" {row['metropolis'][0]:.2f} / {row['metropolis'][1]:.2f} s: ratio"
            f" {row['first'][0] / row['metropolis'][0]:.2f} (min) [target <= 2];"
            f" peak memory {peak:.2f}x the data [target <= 1]",
            flush=True,
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        span = np.log(last["n"] / first["n"])
        for key, label in (("iteration", "DPPenalty iteration"), ("loglik", "compiled loglik")):
            exponent = np.log(last[key][1] / first[key][1]) / span
            print(f"growth exponent of the {label} (medians) from n={first['n']:,} to "
                  f"n={last['n']:,}: {exponent:.3f}"
                  + ("  [target <= 1.05]" if key == "iteration" else ""), flush=True)


if __name__ == "__main__":
    main()
