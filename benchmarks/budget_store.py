"""Reservations per second that a :class:`pymc_dp.Budget` store sustains.

Each reservation is one transaction: verify the budget's whole hash chain, compose every
reservation so far with the new one through the accountant, append a record. Its cost
therefore grows with the number of records already there; the benchmark reports the rate
over ``--reservations`` reservations into a fresh budget, from one process and from
``--procs`` processes at once (each makes ``reservations / procs``), for

* SQLite in a temporary file (always);
* PostgreSQL, if ``--postgres URL`` (or ``$PYMC_DP_TEST_POSTGRES``) names a server.

Pure ε events are reserved (their composition is a sum, so the numbers measure the store,
not dp-accounting); ``--gaussian`` reserves Gaussian events (exact closed form) instead.

Usage::

    python benchmarks/budget_store.py [--reservations 200] [--procs 4] [--postgres URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
import uuid

import pymc_dp

from pymc_dp.accounting import GaussianEvent, PureDPEvent


def _event(gaussian: bool):
    if gaussian:
        return GaussianEvent(name="bench", noise_multiplier=1000.0)
    return PureDPEvent(name="bench", epsilon=1e-6)


def _work(store, name, n, gaussian):
    budget = pymc_dp.Budget(name, epsilon=1e3, delta=1e-6, store=store)
    for _ in range(n):
        budget.reserve([_event(gaussian)])


def rate(store: str, total: int, procs: int, gaussian: bool) -> float:
    """Reservations per second of ``procs`` processes sharing ``total`` reservations."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    pymc_dp.Budget(name, epsilon=1e3, delta=1e-6, store=store, create=True)
    ctx = multiprocessing.get_context("fork")
    start = time.perf_counter()
    if procs == 1:
        _work(store, name, total, gaussian)
    else:
        workers = [ctx.Process(target=_work, args=(store, name, total // procs, gaussian))
                   for _ in range(procs)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
            if w.exitcode != 0:
                raise RuntimeError("a benchmark worker failed")
    elapsed = time.perf_counter() - start
    done = len(pymc_dp.Budget(name, epsilon=1e3, delta=1e-6, store=store).records())
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reservations", type=int, default=200)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--postgres", default=os.environ.get("PYMC_DP_TEST_POSTGRES"))
    parser.add_argument("--gaussian", action="store_true")
    args = parser.parse_args()
    stores = [("sqlite", os.path.join(tempfile.mkdtemp(), "budgets.db"))]
    if args.postgres:
        stores.append(("postgresql", args.postgres))
    print(f"{args.reservations} reservations into a fresh budget "
          f"({'Gaussian' if args.gaussian else 'pure ε'} events)")
    for label, store in stores:
        for procs in (1, args.procs):
            r = rate(store, args.reservations, procs, args.gaussian)
            print(f"  {label:10s} {procs} process(es): {r:8.1f} reservations/s")


if __name__ == "__main__":
    main()
