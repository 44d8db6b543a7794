"""Cost of every datum's clipped gradient against the summed gradient, per construction.

For each model, the CPU milliseconds of one call of
:meth:`pymc_dp.model.PrivateModel.clipped_gradient` with per-datum gradients by reverse mode
(``compile_gradients("reverse")``: where :mod:`pymc_dp.model.row_locality` proves it applies,
including the copies of ``X @ β`` and ``a[g]`` that "auto" does not make) and by forward mode,
and of one call of the gradient of the summed log-likelihood compiled from the same graph
with the data as inputs (what a non-private gradient method needs; ``model.compile_dlogp()``
would fold a NumPy-constant data set into sufficient statistics and time something else),
all in one process: blocks of ``--calls`` calls, the three functions taking turns block by
block ``--repeats`` times; min / median over the blocks, and the ratios to the summed
gradient. Every datum's gradient is taken in a d×d basis, as the warm-up's metric gives it.
``dp_hmc.py speed`` measures what matters to a user (whole DPHMC iterations against
``pm.HamiltonianMC``); this script shows where the time goes. ``--realistic`` runs the
models of ``realistic_models.py`` instead.

Run on 2026-11-26 (2 cores, load average about 1, BLAS on both cores; n = 10⁵; CPU ms, min /
median of 5 blocks; the ratio of the minima to the summed gradient's):

==========================  ============  =====================  ======================
model                       summed        reverse                forward
==========================  ============  =====================  ======================
flat banana d = 2           0.064 / 0.064 0.484 / 0.492 (7.5)    0.448 / 0.451 (7.0)
flat banana d = 10          0.288 / 0.295 4.859 / 6.829 (16.9)   3.426 / 3.492 (11.9)
flat banana d = 30          0.518 / 0.530 53.18 / 53.70 (103)    17.54 / 17.96 (33.9)
logistic regression d = 10  2.664 / 3.331 5.507 / 6.371 (2.07)   15.02 / 16.05 (5.64)
hierarchical d = 10         0.166 / 0.170 1.280 / 1.282 (7.71)   2.668 / 2.685 (16.1)
hierarchical d = 30         0.173 / 0.175 n/a                    10.80 / 10.88 (62.4)
==========================  ============  =====================  ======================

``--realistic`` (same run, ``--calls 20``), reverse / forward, min / min: linear d = 6
3.90 / 1.20, logistic d = 5 4.35 / 3.05, hierarchical d = 10 1.08 / 2.15, Poisson d = 4
4.19 / 1.56, Student-t d = 5 5.68 / 3.36, mixture d = 5 2.89 / 19.76, censored d = 3 4.13 /
4.17, MvNormal rows d = 5 n/a / 256.7 (102 times the summed gradient; 6.1 ms since its solves
became products, below), deterministics d = 2
0.66 / 0.62, negative binomial d = 5 5.39 / 8.16, Gamma d = 5 1.86 / 3.40, logistic_wide
d = 11 17.59 / 9.46, hier_slope d = 21 n/a / 6.20.

MvNormal rows, with one triangular solve per row until 2026-11-29 and one product with the
inverse factor since (``pymc_dp/model/shared_solves.py``): ``--realistic --models mvnormal
--calls 20`` on the commit before and after, the same session (2 cores, load average about
1), min / median: the summed gradient 2.28 / 2.38 → 1.03 / 1.04 ms (it is built from the
same rewritten graph), forward mode 223.4 / 225.0 → 6.14 / 6.23 ms, 5.97 times the summed
gradient (98 before).

The target of issue 14 (≤ 2.5 times the summed gradient at d = 2, 10, 30) is met only by the
logistic regression at d = 10, in reverse mode through a copy of ``X @ β`` per row. The
summed gradients are cheap because PyTensor rewrites them into sums of the data (the banana:
Σ_j (x_j − μ) = Σ_j x_j − nμ); clipping needs each row's gradient and norm, in the warm-up's
metric (``Bᵀ∇ℓ_j``): d numbers a row, O(n·d) against O(n).

Why "auto" does not copy ``X @ β`` or ``a[g]``: these figures move by 2–6 times with how
glibc hands out memory for the (n, d) arrays (fresh pages from the OS on every call, or
reused blocks) and with BLAS threads. Measured in one process on one core (wall time,
scratch scripts, not in the repository) the same copies gave 0.47–0.61 of forward mode's
time on the hierarchical and logistic models and 1.0 on Student-t, but 7.8 on the Gaussian
regression; the run above gives 0.5 on the hierarchical model and 1.3–1.9 on the logistic
regressions with an intercept. Nothing public tells in advance which side a model falls
on, so the copies are an option (``compile_gradients("reverse")``), not the default. For
the same reason the banana's rows at d > 6 are one (n, d) matrix product (on one core:
1.8 against 2.7 ms forward at d = 10, 9.4 against 16.5 at d = 30) that loses on two cores
in CPU time above (until 2026-11-26 they were d² products per row: 5.27 ms at d = 10).

Usage: ``python benchmarks/per_datum_gradients.py [--n 100000] [--repeats 5] [--calls 100] [--realistic]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import types

from pathlib import Path

import numpy as np
import pymc as pm

from pymc.pytensorf import compile as pm_compile
from pytensor.gradient import grad as pt_grad

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dp_hmc import logistic_regression  # noqa: E402

from pymc_dp.testing.benchmark_models import banana  # noqa: E402
from pymc_dp.model import PrivateModel  # noqa: E402


def hierarchical(n, groups, seed):
    """Group intercepts (non-centred) and one slope: d = groups + 4."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    x = rng.normal(size=n)
    y = rng.normal(0.0, 0.5, groups)[g] + 0.8 * x + rng.normal(size=n)
    with pm.Model() as model:
        g_data, x_data = pm.Data("g", g), pm.Data("x", x)
        mu, sigma_a = pm.Normal("mu", 0.0, 5.0), pm.HalfNormal("sigma_a", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=groups)
        slope = pm.Normal("slope", 0.0, 2.0)
        pm.Normal("y", mu + sigma_a * z[g_data] + slope * x_data, pm.HalfNormal("sigma", 2.0),
                  observed=y)
    return types.SimpleNamespace(model=model)


def _interleaved_ms(fns, repeats, calls):
    """CPU ms per call of each function: blocks of ``calls`` calls, the functions taking turns
    block by block ``repeats`` times (so that a change in the machine's load hits all of them
    alike). Returns, per function, (min, median) over its blocks."""
    for fn in fns:
        fn()  # warm-up
    blocks = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, blocks):
            start = time.process_time()
            for _ in range(calls):
                fn()
            times.append(1e3 * (time.process_time() - start) / calls)
    return [(min(t), float(np.median(t))) for t in blocks]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument(
        "--realistic", action="store_true",
        help="the models of realistic_models.py instead (their simulated data at --n)",
    )
    parser.add_argument("--models", nargs="+", help="with --realistic: only these models")
    args = parser.parse_args(argv)
    if args.realistic:
        import realistic_models

        cases = [
            (name, types.SimpleNamespace(model=realistic_models._build(name, 0, args.n, 13)))
            for name in realistic_models.MODELS
            if not args.models or name in args.models
        ]
    else:
        cases = [
            ("flat banana d=2", banana(n=args.n, d=2, seed=0)),
            ("flat banana d=10", banana(n=args.n, d=10, seed=0)),
            ("flat banana d=30", banana(n=args.n, d=30, seed=0)),
            ("logistic regression d=10", logistic_regression(args.n, 10, 0)),
            ("hierarchical d=10", hierarchical(args.n, 6, 0)),
            ("hierarchical d=30", hierarchical(args.n, 26, 0)),
        ]
    for label, bm in cases:
        model = bm.model
        point = model.initial_point()
        if hasattr(bm, "true_theta"):
            point["theta"] = np.asarray(bm.true_theta, dtype=float) + 0.01
        reference = PrivateModel(model)
        if args.realistic:
            label = f"{label} d={reference.dim}"
        summed_graph = pt_grad(reference._per_datum_graph.sum(), reference._q)
        summed_fn = pm_compile(
            [reference._q, *reference._placeholders], summed_graph, on_unused_input="ignore"
        )
        q = reference.ravel(point)
        # every datum's gradient in a d×d basis, as the warm-up's metric gives it
        basis = np.linalg.qr(np.random.default_rng(0).normal(size=(q.size, q.size)))[0]
        fns, names = [lambda: summed_fn(q, *reference._data_values)], ["summed"]
        for method in ("reverse", "forward"):
            pmodel = PrivateModel(model)
            try:
                pmodel.compile_gradients(method)
            except ValueError:
                continue
            fns.append(lambda pmodel=pmodel: pmodel.clipped_gradient(q, 1.0, basis))
            names.append(method)
        times = dict(zip(names, _interleaved_ms(fns, args.repeats, args.calls)))
        summed = times.pop("summed")
        row = [f"{label}, n={args.n}: summed gradient {summed[0]:.3f} / {summed[1]:.3f} ms"]
        for method in ("reverse", "forward"):
            if method not in times:
                row.append(f"{method} n/a")
                continue
            (lo, med) = times[method]
            row.append(
                f"{method} {lo:.3f} / {med:.3f} ms "
                f"(ratio {lo / summed[0]:.2f} / {med / summed[1]:.2f})"
            )
        print("; ".join(row), flush=True)


if __name__ == "__main__":
    main()
