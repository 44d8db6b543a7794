"""A Budget's SQLite store under load and faults: nothing lost, nothing overspent, and a run
that cannot record its spending does not run.

Processes are forked (the store opens a connection per operation, so a child never shares
one with its parent).
"""

import multiprocessing
import os
import signal
import sqlite3
import stat
import tempfile

import pytest

import pymc_dp

from pymc_dp.accounting import Budget, BudgetStoreError, GaussianEvent, PrivacyLedger, PureDPEvent
from pymc_dp.accounting.budget_store import SQLiteStore
from pymc_dp.errors import PrivacyBudgetExceeded

DELTA = 1e-6
PROCS, EACH = 8, 20
FORK = multiprocessing.get_context("fork")


def _reserve_many(store, epsilon, event, worker, out):
    budget = Budget("load", epsilon=epsilon, delta=DELTA, store=store)
    admitted, refused = [], 0
    for i in range(EACH):
        try:
            budget.reserve([event], who=f"{worker}-{i}")
            admitted.append(f"{worker}-{i}")
        except PrivacyBudgetExceeded:
            refused += 1
    out.put((admitted, refused))


def _hammer(store, epsilon, event):
    out = FORK.Queue()
    procs = [FORK.Process(target=_reserve_many, args=(store, epsilon, event, w, out))
             for w in range(PROCS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    admitted = [who for a, _ in results for who in a]
    assert len(admitted) + sum(r for _, r in results) == PROCS * EACH
    return admitted


@pytest.mark.parametrize("kind", ["pure", "gaussian"])
def test_many_processes_reserving_at_once_never_overspend_or_lose_a_reservation(any_store, kind):
    store = any_store
    if kind == "pure":  # 1/64 is exact: exactly 64 of the 160 fit
        event, epsilon = PureDPEvent(name="q", epsilon=1 / 64), 1.0
        fits = 64
    else:  # composed exactly: many more fit than adding their ε's would allow
        event = GaussianEvent(name="g", noise_multiplier=20.0)
        epsilon = 10 * PrivacyLedger([event]).epsilon(DELTA)
        fits = max(k for k in range(1, PROCS * EACH + 1)
                   if PrivacyLedger([event] * k).epsilon(DELTA) <= epsilon)
        assert 10 < fits < PROCS * EACH
    Budget("load", epsilon=epsilon, delta=DELTA, store=store, create=True)
    admitted = _hammer(store, epsilon, event)
    budget = Budget("load", epsilon=epsilon, delta=DELTA, store=store)
    records = budget.records()
    # every admitted reservation is in the store, nothing else is, none twice
    assert sorted(r["who"] for r in records) == sorted(admitted)
    assert len(records) == fits
    assert budget.spent().epsilon(DELTA) <= epsilon


def _killed_in_the_middle(store, ready):
    budget = Budget("kill", epsilon=1.0, delta=DELTA, store=store)
    append = Budget._append

    def append_then_hang(self, *args):
        append(self, *args)  # the record is written, not committed
        ready.set()
        signal.pause()

    Budget._append = append_then_hang
    budget.reserve([PureDPEvent(name="never", epsilon=0.5)])


def test_a_process_killed_in_the_middle_of_a_reservation_leaves_no_partial_record(any_store):
    store = any_store
    budget = Budget("kill", epsilon=1.0, delta=DELTA, store=store, create=True)
    budget.reserve([PureDPEvent(name="first", epsilon=0.25)])
    ready = FORK.Event()
    child = FORK.Process(target=_killed_in_the_middle, args=(store, ready))
    child.start()
    assert ready.wait(timeout=120)
    os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    # its reservation is not there, the chain verifies, the lock is free
    reopened = Budget("kill", epsilon=1.0, delta=DELTA, store=store)
    assert [r["events"][0]["name"] for r in reopened.records()] == ["first"]
    budget.reserve([PureDPEvent(name="after", epsilon=0.75)])
    assert budget.spent().epsilon(DELTA) == 1.0


# ---------------------------------------------------------------------- read-only, full
def _as_another_user(fn, *args):
    """Run ``fn`` in a child that cannot write the store: as 'nobody' if we are root
    (root ignores file modes), else as ourselves. Returns what it raised, as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            fn(*args)
            message = "no error"
        except BaseException as exc:  # noqa: BLE001 (reported to the parent)
            message = f"{type(exc).__name__}: {exc}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        message = f.read()
    os.waitpid(pid, 0)
    return message


@pytest.fixture
def shared_dir():
    # Under a world-readable parent: pytest's tmp_path is private to its user.
    path = tempfile.mkdtemp(prefix="pymc_dp_budget_ro_")
    os.chmod(path, 0o755)
    yield path
    os.chmod(path, 0o755)
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    os.rmdir(path)


def _reserve(store):
    Budget("ro", epsilon=1.0, delta=DELTA, store=store).reserve(
        [PureDPEvent(name="x", epsilon=0.1)]
    )


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_read_only_store_refuses_the_reservation_with_a_clear_error(shared_dir, what):
    store = os.path.join(shared_dir, "b.db")
    budget = Budget("ro", epsilon=1.0, delta=DELTA, store=store, create=True)
    budget.reserve([PureDPEvent(name="first", epsilon=0.1)])
    # a read-only file, or a writable file in a directory where SQLite cannot write its
    # journal (as root, the child runs as 'nobody', for whom the owner's bits do not count)
    root = os.geteuid() == 0
    if what == "file":
        os.chmod(store, 0o644 if root else 0o444)
    else:
        os.chmod(store, 0o666)
        os.chmod(shared_dir, 0o755 if root else 0o555)
    message = _as_another_user(_reserve, store)
    assert message.startswith("BudgetStoreError: The budget store"), message
    assert "Nothing was reserved and no data was read" in message
    assert len(budget.records()) == 1
    # reading still works for that user (a report of a read-only store)
    assert _as_another_user(lambda: Budget("ro", epsilon=1.0, delta=DELTA, store=store)
                            .records()) == "no error"


def _full(monkeypatch):
    """Simulate a full disk: no connection may grow the file beyond its pages now."""
    connect = SQLiteStore._connect

    def limited(self, create):
        conn = connect(self, create)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        return conn

    monkeypatch.setattr(SQLiteStore, "_connect", limited)


def test_a_full_store_refuses_the_reservation_and_stays_consistent(tmp_path, monkeypatch):
    store = str(tmp_path / "b.db")
    budget = Budget("full", epsilon=1.0, delta=DELTA, store=store, create=True)
    budget.reserve([PureDPEvent(name="first", epsilon=0.1)])
    _full(monkeypatch)
    with pytest.raises(BudgetStoreError, match=r"(?i)full.*Nothing was reserved"):
        budget.reserve([PureDPEvent(name="big", epsilon=0.1)], note="x" * 20_000)
    assert [r["events"][0]["name"] for r in budget.records()] == ["first"]
    budget.verify()


def test_a_run_whose_store_is_full_does_not_run(conjugate, tmp_path, monkeypatch):
    model, *_ = conjugate
    store = str(tmp_path / "b.db")
    budget = Budget("full", epsilon=1.0, delta=DELTA, store=store, create=True)
    with model:
        step = pymc_dp.DPPenalty(eps=0.5, budget=budget, clip_bound=2.0, chains=1,
                                 warmup=False)
    step._transition = lambda q: pytest.fail("the chain read the data")
    _full(monkeypatch)
    for _ in range(200):  # fill what free space the last page has left
        try:
            budget.reserve([PureDPEvent(name="filler", epsilon=1e-6)], note="x" * 200)
        except BudgetStoreError:
            break
    else:
        pytest.fail("the store never filled up")
    filled = len(budget.records())
    with model, pytest.raises(BudgetStoreError):
        pymc_dp.sample(step=step, draws=5, tune=0, chains=1, random_seed=0,
                       progressbar=False, cores=1, compute_convergence_checks=False)
    assert len(budget.records()) == filled and step.guard.reservations() == []


def test_a_deleted_store_is_refused_not_recreated(tmp_path):
    store = tmp_path / "b.db"
    budget = Budget("gone", epsilon=1.0, delta=DELTA, store=str(store), create=True)
    budget.reserve([PureDPEvent(name="first", epsilon=0.1)])
    store.unlink()
    with pytest.raises(BudgetStoreError, match="cannot be used"):
        budget.reserve([PureDPEvent(name="x", epsilon=0.1)])
    assert not store.exists()


def test_a_replaced_store_is_refused(tmp_path):
    store = tmp_path / "b.db"
    budget = Budget("swap", epsilon=1.0, delta=DELTA, store=str(store), create=True)
    budget.reserve([PureDPEvent(name="first", epsilon=0.1)])
    store.unlink()
    sqlite3.connect(store).close()  # an empty database in its place
    assert stat.S_ISREG(os.stat(store).st_mode)
    with pytest.raises(pymc_dp.PrivacyBudgetExceeded, match="no pymc_dp tables"):
        budget.reserve([PureDPEvent(name="x", epsilon=0.1)])
