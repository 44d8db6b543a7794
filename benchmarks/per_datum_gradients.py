"""Cost of every datum's clipped gradient against the summed gradient, per construction.

For each model, the CPU milliseconds of one call of
:meth:`pymc_dp.model.PrivateModel.clipped_gradient` with per-datum gradients by reverse mode
(where :mod:`pymc_dp.row_locality` proves it applies) and by forward mode, and of one call of
the gradient of the summed log-likelihood compiled from the same graph with the data as
inputs (what a non-private gradient method needs; ``model.compile_dlogp()`` would fold a
NumPy-constant data set into sufficient statistics and time something else), all in one
process: the minimum over ``--repeats`` blocks of ``--calls`` calls, and the ratio to the
summed gradient. ``dp_hmc.py speed`` measures what matters to a user (whole DPHMC
iterations against ``pm.HamiltonianMC``); this script shows where the time goes.

Run on 2026-11-26 (2 cores, load average about 1; n = 10⁵; CPU ms, min of 5 blocks; ratio
to summed; every datum's gradient in a d×d basis, as the warm-up's metric gives it):

==========================  =======  =============  =============
model                       summed   reverse        forward
==========================  =======  =============  =============
flat banana d = 2           0.062    0.496 (7.94)   0.546 (8.75)
flat banana d = 10          0.281    5.271 (18.78)  2.707 (9.65)
logistic regression d = 10  1.362    n/a            8.384 (6.16)
hierarchical d = 30         0.162    n/a            9.989 (61.85)
==========================  =======  =============  =============

These are far from the target of issue 14 (≤ 2.5 times the summed gradient at d = 2, 10,
30). The summed gradients are cheap because PyTensor rewrites them into sums of the data
(the banana: Σ_j (x_j − μ) = Σ_j x_j − nμ); clipping needs each row's gradient and norm.
Every datum's gradient is taken in the warm-up's metric (``Bᵀ∇ℓ_j``, B public): forward
mode takes its d products along B's columns (the rows come out in B's coordinates; until
2026-11-26 an (n, d) matrix was stacked and multiplied by B, and the same run gave 27.24,
26.70 and 78.26 ms for the last three rows); reverse mode combines its d columns with B's
entries, d² products a row fused with the clip, which at d = 10 costs more than forward
mode's d passes. The same run with glibc keeping freed blocks for reuse
(``MALLOC_MMAP_THRESHOLD_``, ``docs/private-mcmc.md``) gave the same figures within 0.1 ms
but for the banana at d = 2 (forward 0.436 ms).

Usage: ``python benchmarks/per_datum_gradients.py [--n 100000] [--repeats 5] [--calls 200]``.
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

from pymc_dp.benchmark_models import banana  # noqa: E402
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
    args = parser.parse_args(argv)
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
