"""SPPE and SPLE (neural posterior / likelihood estimation) from privatized releases,
against SMC-ABC and data augmentation.

Xiong, Ju & Zhang's main method (Algorithms 1 and 2) through the optional ``sbi`` extra
(``bash scripts/bootstrap.sh sbi``): :func:`pymc_dp.mechanisms.neural_posterior` trains a
normalizing flow on (θ, s_dp) pairs from the private-data simulator (confidential model,
then the release's own mechanism with randomized quasi-Monte Carlo noise), in sequential
rounds whose proposal is the previous round's posterior at the observed release.

(a) Linear regression (section 4.2, appendix E.2, Tables 2-4), on the releases the authors
    published (``examples/private_regression.py``'s ``paper_release``): SPPE, SPLE, SMC-ABC
    (the mechanism as kernel, exact target) and data augmentation (NUTS, exact), with the
    paper's SPPE and SPLE rows. The truth θ* = (-1.79, -2.89, -0.66) generated Ju et al.'s
    confidential data; "covers" says whether each 95 % interval contains it.
(b) The SIR epidemic (section 4.1, appendix E.1.1), on the paper's published infection
    curve (``examples/sir_privatized.py``): SPPE, SPLE and SMC-ABC (Gaussian kernel of 3
    counts, the mechanism inside the simulator), intervals of β, γ, R0 and coverage of θ*.

Every run prints its time. The flows are sbi's masked autoregressive flows ("maf"), not the
paper's 8-layer neural spline flows ("nsf", ``--flow nsf``), for speed on a CPU.

Run: .venv/bin/python examples/neural_privatized.py            (4 rounds x 1000; the regression 13 minutes here, SIR not run)
     .venv/bin/python examples/neural_privatized.py --quick    (2 rounds x 500; 44 minutes here)
     .venv/bin/python examples/neural_privatized.py --quick --skip sir   (the regression: 5 minutes)
     options: --eps 10 1 0.1 (the three tables), --rounds, --simulations, --noise-draws

What it printed on 2026-11-27, ``.venv/bin/python examples/neural_privatized.py --quick``
(2 rounds x 500 simulations, one noise draw each: a tenth of the paper's 10 x 1000; on 2
cores shared with other jobs, so the times are long)::

    SPPE / SPLE: 2 rounds x 500 simulations, 1 RQMC noise draw(s) each, flow 'maf'; 4 x 1000 draws

    (a) Linear regression, the paper's release at ε = 10 (Table 2)
                                    b0 mean (95% interval)      b1 mean (95% interval)      b2 mean (95% interval)   covers θ*   time
      truth θ*                                       -1.79                       -2.89                       -0.66
      SPPE                       -1.011 ( -2.798,  0.611)   -1.942 ( -3.550, -0.037)    1.100 ( -0.554,  2.599)   y y N         65 s
      SPLE                       -0.432 ( -1.882,  0.913)   -2.399 ( -3.543, -0.633)    1.035 ( -0.399,  2.660)   y y N        101 s
      SMC-ABC                    -0.656 ( -2.380,  1.042)   -2.630 ( -3.698, -0.902)    0.601 ( -1.005,  2.502)   y y y          9 s
      data augmentation          -0.609 ( -2.307,  1.124)   -2.601 ( -3.659, -0.698)    0.652 ( -1.072,  2.640)   y y y         72 s
      paper: SPPE                -0.510 ( -2.250,  1.070)   -2.400 ( -3.610, -0.300)    0.900 ( -0.890,  2.850)   y y y
      paper: SPLE                -0.640 ( -2.310,  0.960)   -2.610 ( -3.650, -0.980)    0.640 ( -0.930,  2.480)   y y y
      paper: DA-MCMC             -0.620 ( -2.500,  0.990)   -2.720 ( -3.740, -0.960)    0.540 ( -1.060,  2.460)   y y y
      paper: SMC-ABC             -0.590 ( -2.280,  0.930)   -2.440 ( -3.670, -0.380)    0.850 ( -0.880,  2.770)   y y y
      SPPE: largest |mean - data augmentation| 0.66, |mean - paper's SPPE| 0.50
      SPLE: largest |mean - data augmentation| 0.38, |mean - paper's SPLE| 0.40
      SMC-ABC: largest |mean - data augmentation| 0.05, |mean - paper's SMC-ABC| 0.25

    (b) SIR, the paper's published infection curve (ε = 10)
                                  beta mean (95% interval)   gamma mean (95% interval)      R0 mean (95% interval)   covers θ*   time
      truth θ*                                      0.6065                     0.04979                       12.18
      SPPE                        0.633 (  0.514,  0.846)    0.054 (  0.047,  0.066)   11.810 (  8.782, 17.610)   y y y        923 s
      SPLE                        0.656 (  0.560,  0.768)    0.049 (  0.046,  0.051)   13.482 ( 11.567, 16.089)   y y y       1332 s
      SMC-ABC                     0.609 (  0.558,  0.677)    0.051 (  0.047,  0.053)   12.002 ( 10.483, 14.191)   y y y        129 s

(total 44 minutes of wall time, 27 of CPU, on the shared machine.)

The regression at the default size (4 rounds x 1000), on 2026-11-27:
``.venv/bin/python examples/neural_privatized.py --skip sir`` (run from ``examples/``)::

    SPPE / SPLE: 4 rounds x 1000 simulations, 1 RQMC noise draw(s) each, flow 'maf'; 4 x 1000 draws
      ... SPPE: 395 s
      ... SPLE: 257 s
      ... SMC-ABC: 23 s
      ... data augmentation: 96 s

    (a) Linear regression, the paper's release at ε = 10 (Table 2)
                                    b0 mean (95% interval)      b1 mean (95% interval)      b2 mean (95% interval)   covers θ*   time
      truth θ*                                       -1.79                       -2.89                       -0.66
      SPPE                       -0.793 ( -2.451,  0.830)   -2.012 ( -3.618, -0.244)    1.170 ( -0.472,  2.797)   y y N        395 s
      SPLE                       -0.776 ( -2.475,  0.763)   -2.629 ( -3.633, -0.897)    0.606 ( -0.909,  2.469)   y y y        257 s
      SMC-ABC                    -0.598 ( -2.358,  1.086)   -2.610 ( -3.672, -0.834)    0.643 ( -0.970,  2.645)   y y y         23 s
      data augmentation          -0.673 ( -2.458,  1.018)   -2.648 ( -3.715, -0.873)    0.572 ( -1.089,  2.598)   y y y         96 s
      paper: SPPE                -0.510 ( -2.250,  1.070)   -2.400 ( -3.610, -0.300)    0.900 ( -0.890,  2.850)   y y y
      paper: SPLE                -0.640 ( -2.310,  0.960)   -2.610 ( -3.650, -0.980)    0.640 ( -0.930,  2.480)   y y y
      paper: DA-MCMC             -0.620 ( -2.500,  0.990)   -2.720 ( -3.740, -0.960)    0.540 ( -1.060,  2.460)   y y y
      paper: SMC-ABC             -0.590 ( -2.280,  0.930)   -2.440 ( -3.670, -0.380)    0.850 ( -0.880,  2.770)   y y y
      SPPE: largest |mean - data augmentation| 0.64, |mean - paper's SPPE| 0.39
      SPLE: largest |mean - data augmentation| 0.10, |mean - paper's SPLE| 0.14
      SMC-ABC: largest |mean - data augmentation| 0.08, |mean - paper's SMC-ABC| 0.21

How this compares with the paper. Regression: data augmentation and SMC-ABC agree with each
other (means within 0.08 at the default size, 0.05 in the quick run) and with the paper's
DA-MCMC and SMC-ABC rows (within 0.12 and 0.25). SPLE at 4 rounds of 1000 simulations agrees
with data augmentation (means within 0.10) and with the paper's SPLE row (within 0.14), and
covers θ*. SPPE does not: its b2 mean is 1.17 against data augmentation's 0.57 (1.10 after 2
rounds of 500), and its b2 interval misses θ*'s -0.66 (lower end -0.47). The paper's own SPPE
row is off the same way, less far (b2 0.90 against its DA-MCMC's 0.54; lower end -0.89, so it
covers θ*), after 10 rounds. The paper's 10 rounds and its neural spline flow were not run
here; whether they close the rest of the gap is not known. The tests show both methods
recover an exact posterior with 2 rounds of 500 simulations on a 1-parameter problem.
SIR (quick run only): all three methods cover θ* (β, γ and R0), as the paper's Figure 6
histograms do; SPPE's intervals are wider than SMC-ABC's (R0 8.8-17.6 against 10.5-14.2) and
SPLE's β sits higher (0.656 against 0.609), both after a tenth of the paper's simulations.
The paper finds SPPE and SPLE faster than SMC-ABC (its Table 1); here they were 7 and 10
times slower in wall time than this (small, Gaussian-kernel) SMC-ABC: the simulations run
one θ at a time and each round retrains the flow on every simulation so far, on a CPU shared
with other jobs. This was not profiled further.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings

import numpy as np
import pymc as pm

from private_regression import (
    BETA_TRUE,
    EPSILONS,
    N,
    P,
    PAPER_TABLES,
    paper_release,
    params as regression_params,
    records as regression_records,
)
from sir_privatized import LOG_THETA_TRUE
from sir_privatized import make_spec as sir_spec
from sir_privatized import paper_release as sir_release

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    data_augmentation_model,
    neural_posterior,
    smc_abc_model,
)

# The paper's SPPE and SPLE rows of Tables 2-4 (mean, 2.5 %, 97.5 % of b0, b1, b2).
PAPER_NEURAL = {
    10.0: {"SPPE": [(-0.51, -2.25, 1.07), (-2.40, -3.61, -0.30), (0.90, -0.89, 2.85)],
           "SPLE": [(-0.64, -2.31, 0.96), (-2.61, -3.65, -0.98), (0.64, -0.93, 2.48)]},
    1.0: {"SPPE": [(-0.93, -2.80, 1.04), (-0.90, -2.62, 0.97), (1.11, -0.71, 2.72)],
          "SPLE": [(-0.89, -2.69, 1.06), (-1.04, -2.82, 0.91), (1.25, -0.55, 2.88)]},
    0.1: {"SPPE": [(-0.12, -2.13, 1.73), (-0.12, -2.11, 1.83), (0.14, -1.81, 2.09)],
          "SPLE": [(-0.04, -2.01, 1.99), (-0.06, -2.00, 1.85), (0.12, -1.86, 2.09)]},
}


def summarize(samples: dict[str, np.ndarray]) -> dict[str, tuple[float, float, float]]:
    out = {}
    for name, x in samples.items():
        lo, hi = np.quantile(x, [0.025, 0.975])
        out[name] = (float(np.mean(x)), float(lo), float(hi))
    return out


def print_rows(rows: dict, truth: dict, times: dict) -> None:
    names = list(truth)
    print(f"  {'':24s}" + "".join(f"{n + ' mean (95% interval)':>28s}" for n in names)
          + "   covers θ*   time")
    print(f"  {'truth θ*':24s}" + "".join(f"{truth[n]:>28.4g}" for n in names))
    for label, stats in rows.items():
        cells, cover = "", []
        for n in names:
            m, lo, hi = stats[n]
            cells += f"{m:>9.3f} ({lo:7.3f},{hi:7.3f})"
            cover.append("y" if lo <= truth[n] <= hi else "N")
        took = f"{times[label]:6.0f} s" if label in times else ""
        print(f"  {label:24s}{cells}   {' '.join(cover):9s} {took}")


def progress(label: str, seconds: float) -> None:
    print(f"  ... {label}: {seconds:.0f} s", file=sys.stderr, flush=True)


def neural(spec, method, args, seed):
    start = time.perf_counter()
    result = neural_posterior(spec, method=method, rounds=args.rounds,
                              simulations=args.simulations, noise_draws=args.noise_draws,
                              density_estimator=args.flow, rng=seed)
    took = time.perf_counter() - start
    progress(method, took)
    return result, took


def regression(args) -> None:
    truth = {f"b{j}": BETA_TRUE[j] for j in range(P + 1)}
    for eps in args.eps:
        rel = paper_release(eps)
        spec = PrivatizedDataModel(params=regression_params, records=regression_records,
                                   releases={"s": rel}, n=N, aggregate="mean")
        rows, times = {}, {}

        def beta_rows(beta):  # (..., 3) draws
            flat = np.asarray(beta).reshape(-1, P + 1)
            return summarize({f"b{j}": flat[:, j] for j in range(P + 1)})

        for method in ("SPPE", "SPLE"):
            result, times[method] = neural(spec, method, args, seed=1)
            rows[method] = beta_rows(result.posterior["beta"].values)

        start = time.perf_counter()
        with smc_abc_model(spec, simulations=args.abc_simulations):
            idata = pm.sample_smc(args.smc_draws, chains=args.smc_chains, cores=1,
                                  progressbar=False, random_seed=2,
                                  compute_convergence_checks=False)
        times["SMC-ABC"] = time.perf_counter() - start
        progress("SMC-ABC", times["SMC-ABC"])
        rows["SMC-ABC"] = beta_rows(idata.posterior["beta"].values)

        start = time.perf_counter()
        with data_augmentation_model(spec):
            idata = pm.sample(args.da_draws, tune=args.da_draws, chains=2, cores=1,
                              target_accept=0.9, progressbar=False, random_seed=1,
                              compute_convergence_checks=False)
        times["data augmentation"] = time.perf_counter() - start
        progress("data augmentation", times["data augmentation"])
        rows["data augmentation"] = beta_rows(idata.posterior["beta"].values)

        for method in ("SPPE", "SPLE", "DA-MCMC", "SMC-ABC"):
            table = PAPER_NEURAL[eps].get(method) or PAPER_TABLES[eps][method]
            rows[f"paper: {method}"] = {f"b{j}": table[j] for j in range(P + 1)}
        print(f"\n(a) Linear regression, the paper's release at ε = {eps:g} "
              f"(Table {2 + EPSILONS.index(eps)})")
        print_rows(rows, truth, times)
        da = np.array([rows["data augmentation"][f"b{j}"][0] for j in range(P + 1)])
        for method in ("SPPE", "SPLE", "SMC-ABC"):
            ours = np.array([rows[method][f"b{j}"][0] for j in range(P + 1)])
            paper = np.array([rows[f"paper: {method}"][f"b{j}"][0] for j in range(P + 1)])
            print(f"  {method}: largest |mean - data augmentation| {np.abs(ours - da).max():.2f},"
                  f" |mean - paper's {method}| {np.abs(ours - paper).max():.2f}")


def sir(args) -> None:
    steps = {"max_step": 0.25}
    spec = sir_spec(sir_release(), steps)
    beta, gamma = np.exp(LOG_THETA_TRUE)
    truth = {"beta": beta, "gamma": gamma, "R0": beta / gamma}
    rows, times = {}, {}

    def sir_rows(post):
        lb, lg = post["log_beta"].values.ravel(), post["log_gamma"].values.ravel()
        return summarize({"beta": np.exp(lb), "gamma": np.exp(lg), "R0": np.exp(lb - lg)})

    for method in ("SPPE", "SPLE"):
        result, times[method] = neural(spec, method, args, seed=3)
        rows[method] = sir_rows(result.posterior)
    start = time.perf_counter()
    with smc_abc_model(spec, kernel="gaussian", bandwidth=3.0,
                       simulations=args.sir_abc_simulations):
        idata = pm.sample_smc(args.sir_smc_draws, chains=2, cores=1, progressbar=False,
                              random_seed=1, compute_convergence_checks=False)
    times["SMC-ABC"] = time.perf_counter() - start
    progress("SMC-ABC", times["SMC-ABC"])
    rows["SMC-ABC"] = sir_rows(idata.posterior)
    print("\n(b) SIR, the paper's published infection curve (ε = 10)")
    print_rows(rows, truth, times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small runs: 2 rounds of 500 simulations (default 4 of 1000), "
                             "smaller SMC-ABC and data augmentation")
    parser.add_argument("--eps", type=float, nargs="+", default=[10.0], choices=EPSILONS)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--simulations", type=int, default=None, help="per round")
    parser.add_argument("--noise-draws", type=int, default=None)
    parser.add_argument("--flow", default="maf", help="sbi density estimator (maf, nsf, ...)")
    parser.add_argument("--skip", choices=("regression", "sir"), default=None)
    args = parser.parse_args()
    quick = args.quick
    defaults = {"rounds": 2 if quick else 4, "simulations": 500 if quick else 1000,
                "noise_draws": 1}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.abc_simulations, args.smc_draws, args.smc_chains = (50, 200, 2) if quick else (100, 500, 2)
    args.da_draws = 500 if quick else 1000
    args.sir_abc_simulations, args.sir_smc_draws = (20, 100) if quick else (50, 200)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    print(f"SPPE / SPLE: {args.rounds} rounds x {args.simulations} simulations, "
          f"{args.noise_draws} RQMC noise draw(s) each, flow {args.flow!r}; 4 x 1000 draws")
    if args.skip != "regression":
        regression(args)
    if args.skip != "sir":
        sir(args)


if __name__ == "__main__":
    main()
