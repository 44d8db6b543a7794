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

Run to completion on a quiet machine (n = 10⁵; CPU ms, min of 5 blocks; ratio to summed):

==========================  =======  ============  ============
model                       summed   reverse       forward
==========================  =======  ============  ============
flat banana d = 2           0.223    0.436 (1.96)  0.408 (1.83)
flat banana d = 10          0.341    2.181 (6.40)  3.275 (9.61)
logistic regression d = 10  2.363    n/a           6.786 (2.87)
==========================  =======  ============  ============

The summed gradient of the banana is one pass of column sums (Σ_j (x_j − μ) = Σ_j x_j − nμ
after PyTensor's rewrites); clipping needs each row's gradient and norm. At d = 2 the two
constructions cost about the same; the regression's product ``X @ β`` is not elementwise,
so only forward mode applies (and there each pass costs about one column of X).

Usage: ``python benchmarks/per_datum_gradients.py [--n 100000] [--repeats 5] [--calls 200]``.
"""

from __future__ import annotations

import argparse
import sys
import time

from pathlib import Path

import numpy as np

from pymc.pytensorf import compile as pm_compile
from pytensor.gradient import grad as pt_grad

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dp_hmc import logistic_regression  # noqa: E402

from pymc_dp.benchmark_models import banana  # noqa: E402
from pymc_dp.model import PrivateModel  # noqa: E402


def _ms_per_call(fn, repeats, calls):
    fn()  # warm-up
    blocks = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        blocks.append(1e3 * (time.process_time() - start) / calls)
    return min(blocks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    cases = [
        ("flat banana d=2", banana(n=args.n, d=2, seed=0)),
        ("flat banana d=10", banana(n=args.n, d=10, seed=0)),
        ("logistic regression d=10", logistic_regression(args.n, 10, 0)),
    ]
    for label, bm in cases:
        model = bm.model
        point = model.initial_point()
        point["theta"] = np.asarray(bm.true_theta, dtype=float) + 0.01
        reference = PrivateModel(model)
        summed_graph = pt_grad(reference._per_datum_graph.sum(), reference._q)
        summed_fn = pm_compile(
            [reference._q, *reference._placeholders], summed_graph, on_unused_input="ignore"
        )
        q = reference.ravel(point)
        summed = _ms_per_call(
            lambda: summed_fn(q, *reference._data_values), args.repeats, args.calls
        )
        row = [f"{label}, n={args.n}: summed gradient {summed:.3f} ms"]
        for method in ("reverse", "forward"):
            pmodel = PrivateModel(model)
            try:
                pmodel.compile_gradients(method)
            except ValueError:
                row.append(f"{method} n/a")
                continue
            ms = _ms_per_call(lambda: pmodel.clipped_gradient(q, 1.0), args.repeats, args.calls)
            row.append(f"{method} {ms:.3f} ms (ratio {ms / summed:.2f})")
        print("; ".join(row), flush=True)


if __name__ == "__main__":
    main()
