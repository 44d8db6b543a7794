"""Set-up of a step on a model of a form already compiled in the process (issue 14 item 3).

Building a private step compiles its model's per-datum graphs (log-likelihood, clipped
ratio, clipped gradients). The data are inputs of those graphs, so a second step of the
same model, or a step of a model of the same form on other data of the same length, can
reuse the compiled code (:func:`pymc_dp.model.graphs.compile_function`). For each model and
n, ``--repeats`` interleaved pairs, each on freshly built PyMC models:

* ``afresh``: the compiled-function cache emptied first, then the step built and its
  gradients compiled (what every build cost before);
* ``reused``: the same on a model of the same form whose graphs the process compiled before.

Wall seconds, min / median, and their ratio. Both are measured after one unmeasured build
(one-time costs of the process: imports, Numba's on-disk cache).

Run on 2026-11-28 (2 cores, load average about 1.2; ``--repeats 5``; DPHMC with fixed
settings; wall seconds min / median):

================  =========  ===============  ===============  ===========
model             n          afresh (s)       reused (s)       ratio
================  =========  ===============  ===============  ===========
regression        10⁴        1.65 / 2.02      0.92 / 0.97      0.56 / 0.48
regression        10⁶        1.77 / 2.15      0.76 / 1.13      0.43 / 0.52
logistic_groups   10⁴        3.42 / 4.31      1.62 / 2.22      0.47 / 0.51
logistic_groups   10⁶        3.72 / 4.69      1.89 / 2.76      0.51 / 0.59
================  =========  ===============  ===============  ===========

What is left of a reused build is the model's checks (the proof that each row reads only
its own datum, the index bounds, the row probes) and PyMC's own model graph: it grows
with the model's size, not with n. PyMC puts n into the graph as a constant (the length
of the observed array), so a model of the same form with another number of rows is
compiled afresh.

Usage::

    python benchmarks/step_setup.py [--n 10000 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import pymc as pm

import pymc_dp
import pymc_dp.model.graphs as graphs


def regression(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.0, -0.5, 0.2]) + rng.normal(size=n)
    with pm.Model() as model:
        X = pm.Data("X", x)
        b = pm.Normal("b", 0.0, 5.0, shape=3)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", X @ b, sigma, observed=y)
    return model


def logistic_groups(n, seed):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 8, n)
    x = rng.normal(size=n)
    p = 1 / (1 + np.exp(-(rng.normal(0, 0.5, 8)[g] + 0.7 * x)))
    with pm.Model() as model:
        gd, xd = pm.Data("g", g), pm.Data("x", x)
        mu = pm.Normal("mu", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=8)
        b = pm.Normal("b", 0.0, 2.0)
        pm.Bernoulli("y", logit_p=mu + tau * z[gd] + b * xd, observed=rng.binomial(1, p))
    return model


MODELS = {"regression": regression, "logistic_groups": logistic_groups}


def build(make, n, seed):
    model = make(n, seed)
    start = time.perf_counter()
    step = pymc_dp.DPHMC(eps=1.0, loglik_clip=1.0, grad_clip=1.0, step_size=0.1,
                         n_steps=3, warmup=False, model=model)
    step.private_model.compile_gradients()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"{'model':16} {'n':>9}  {'afresh (s)':>15}  {'reused (s)':>15}  {'ratio':>11}")
    for name, make in MODELS.items():
        for n in args.n:
            build(make, n, 0)  # (one-time costs of the process)
            afresh, reused = [], []
            for r in range(args.repeats):
                graphs._COMPILED.clear()
                afresh.append(build(make, n, 2 * r + 1))
                reused.append(build(make, n, 2 * r + 2))
            lo = (min(afresh), statistics.median(afresh))
            hi = (min(reused), statistics.median(reused))
            print(f"{name:16} {n:>9}  {lo[0]:6.2f} / {lo[1]:6.2f}  {hi[0]:6.2f} / {hi[1]:6.2f}  "
                  f"{hi[0] / lo[0]:.2f} / {hi[1] / lo[1]:.2f}")


if __name__ == "__main__":
    main()
