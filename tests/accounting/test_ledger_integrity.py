"""The budget ledger protects itself (pymc_dp.accounting.guard): permissions, hash chain,
checkpoints against truncation, and the budget held in memory.

Every attack is refused with :class:`LedgerIntegrityError` (a ``PrivacyBudgetExceeded``), and
the refused ledger is left exactly as it was: never reset, never repaired.
"""

import json
import os
import pickle
import shutil
import stat

import numpy as np
import pytest

import pymc_dp

from pymc_dp.accounting import GaussianEvent, max_iterations
from pymc_dp.accounting.guard import BudgetGuard, LedgerIntegrityError
from pymc_dp.errors import PrivacyBudgetExceeded

EPS, DELTA = 1.0, 1e-5
ONE = GaussianEvent(name="ratio", count=1, noise_multiplier=20.0)
NOT_VERIFIED = "cannot be verified"
OTHER_UID = 65534  # "nobody"


@pytest.fixture
def ledger_dir(tmp_path):
    return tmp_path / "ledgers"


@pytest.fixture
def guard(ledger_dir):
    g = BudgetGuard(EPS, DELTA, ledger_dir=ledger_dir, owner="Test")
    for chain in range(3):
        g.reserve([ONE], chain=chain)
    return g


def _edit(path, change):
    with open(path) as f:
        doc = json.load(f)
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def _records(doc):
    # Format 1 (before the hash chain) kept bare reservations at the top; the attacks apply
    # to both formats, so that these tests also show the unchained ledger accepting them.
    return doc["records"] if "records" in doc else doc["reservations"]


def _reservation(record):
    return record.get("reservation", record)


def _refused(guard, match=NOT_VERIFIED):
    """The guard refuses to reserve and to report, and leaves the file as it is."""
    with open(guard.path, "rb") as f:
        before = f.read()
    with pytest.raises(LedgerIntegrityError, match=match):
        guard.reserve([ONE])
    with pytest.raises(LedgerIntegrityError, match=match):
        guard.reservations()
    with open(guard.path, "rb") as f:
        assert f.read() == before


def _swap_first_two(doc):
    rows = _records(doc)
    rows[0], rows[1] = rows[1], rows[0]


ATTACKS = {
    "edit a cost": lambda doc: _reservation(_records(doc)[1])["events"][0].update(
        noise_multiplier=40.0
    ),
    "drop a reservation": lambda doc: _records(doc).pop(1),
    "truncate the tail": lambda doc: _records(doc).pop(),
    "empty the reservations": lambda doc: _records(doc).clear(),
    "reorder": _swap_first_two,
    "budget in the file": lambda doc: doc.get("header", doc).update(epsilon=10.0),
}


# ------------------------------------------------------------------ normal runs
def test_an_untouched_ledger_keeps_working_across_copies(guard):
    stale = pickle.loads(pickle.dumps(guard))  # like a worker's copy: it saw 3 records
    guard.reserve([ONE], chain=3)
    stale.reserve([ONE], chain=4)  # the file grew since the copy was made: fine
    assert [r["chain"] for r in guard.reservations()] == [0, 1, 2, 3, 4]
    assert [r["chain"] for r in stale.reservations()] == [0, 1, 2, 3, 4]


def test_files_are_0600_and_the_directory_0700_whatever_the_umask(ledger_dir):
    old = os.umask(0)
    try:
        g = BudgetGuard(EPS, DELTA, ledger_dir=ledger_dir)
        g.reserve([ONE])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(ledger_dir).st_mode) == 0o700
    files = sorted(os.listdir(ledger_dir))
    assert files and not any(f.endswith(".tmp") for f in files)
    for name in files:
        assert stat.S_IMODE(os.stat(ledger_dir / name).st_mode) == 0o600, name


def test_a_crash_between_ledger_and_head_file_is_not_a_truncation(guard):
    # The head file is written after the ledger: a crash in between leaves it one behind.
    with open(guard.path + ".head", "rb") as f:
        head = f.read()
    guard.reserve([ONE])
    with open(guard.path + ".head", "wb") as f:
        f.write(head)
    assert len(guard.reservations()) == 4
    guard.reserve([ONE])
    assert len(guard.reservations()) == 5


# ------------------------------------------------------------------ attacks on the file
@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_an_altered_ledger_is_refused(guard, attack):
    _edit(guard.path, attack)
    _refused(guard, match=NOT_VERIFIED + "|differs from the budget")


def test_a_spent_step_whose_reservations_were_emptied_cannot_run_again(ledger_dir):
    # The reviewer's attack: emptying the list let a spent step run again and report half.
    g = BudgetGuard(EPS, DELTA, ledger_dir=ledger_dir)
    for _ in range(max_iterations(EPS, DELTA, ONE.mu)):
        g.reserve([ONE])
    _edit(g.path, lambda doc: _records(doc).clear())
    _refused(g)


def test_a_truncated_tail_is_caught_by_the_head_file_too(guard, ledger_dir):
    # A copy made before any reservation never saw the records: the head file did.
    fresh = BudgetGuard(EPS, DELTA, ledger_dir=ledger_dir)
    early_copy = pickle.loads(pickle.dumps(fresh))
    fresh.reserve([ONE])
    fresh.reserve([ONE])
    _edit(fresh.path, lambda doc: _records(doc).pop())
    _refused(early_copy, match="head file")


def test_a_ledger_rolled_back_to_an_older_copy_is_refused(ledger_dir, tmp_path):
    g = BudgetGuard(EPS, DELTA, ledger_dir=ledger_dir)
    g.reserve([ONE])
    saved = tmp_path / "saved"
    saved.mkdir()
    files = os.listdir(ledger_dir)
    for name in files:
        shutil.copy2(ledger_dir / name, saved / name)
    g.reserve([ONE])
    g.reserve([ONE])
    for name in files:  # ledger and head file restored together, consistently
        shutil.copy2(saved / name, ledger_dir / name)
    _refused(g, match="this step has already seen")


def test_a_ledger_of_the_old_unchained_format_is_refused(guard):
    old = {"owner": "Test", "epsilon": EPS, "delta": DELTA, "created": 0.0, "reservations": []}
    with open(guard.path, "w") as f:
        json.dump(old, f)
    _refused(guard, match="older than hash-chained ledgers")


def test_missing_head_file_is_refused(guard):
    os.remove(guard.path + ".head")
    with pytest.raises(PrivacyBudgetExceeded, match="missing"):
        guard.reserve([ONE])


# ------------------------------------------------------------------ the budget in memory
def test_a_budget_changed_in_the_guards_memory_is_refused(guard):
    guard.epsilon = 2.0
    _refused(guard, match="differs from the budget recorded")


@pytest.mark.parametrize("change", [{"epsilon": 0.5}, {"epsilon": 2.0}, {"delta": 1e-3}])
def test_a_budget_changed_in_the_steps_memory_is_refused(conjugate, change):
    model, *_ = conjugate
    with model:
        step = pymc_dp.DPPenalty(eps=EPS, clip_bound=2.0, chains=1)
    for name, value in change.items():
        with pytest.raises(AttributeError, match="fixed once the step is built"):
            setattr(step, name, value)  # the first line: the step's settings are fixed
        step.__dict__[name] = value  # past it, by hand: the ledger is the second line
    with pytest.raises(LedgerIntegrityError, match="differs from the budget recorded"):
        step.setup_chain(np.random.default_rng(0), 0, 5)
    assert step.guard.reservations() == []


# ------------------------------------------------------------------ permissions
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_directory_others_can_write_is_refused(tmp_path, mode):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(LedgerIntegrityError, match="chmod 700"):
        BudgetGuard(EPS, DELTA, ledger_dir=shared)
    assert os.listdir(shared) == []


def test_a_directory_opened_to_others_later_is_refused(guard, ledger_dir):
    ledger_dir.chmod(0o777)
    _refused(guard, match="chmod 700")


def test_a_ledger_file_others_can_read_or_write_is_refused(guard):
    os.chmod(guard.path, 0o666)
    _refused(guard, match="chmod 600")


def test_a_ledger_file_replaced_by_a_symlink_is_refused(guard, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    shutil.copy2(guard.path, elsewhere)
    os.remove(guard.path)
    os.symlink(elsewhere, guard.path)
    with pytest.raises(LedgerIntegrityError, match="regular file"):
        guard.reserve([ONE])


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="giving a file to another user (chown) needs root",
)
def test_a_directory_or_file_of_another_user_is_refused(guard, ledger_dir, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(LedgerIntegrityError, match="belongs to another user"):
        BudgetGuard(EPS, DELTA, ledger_dir=theirs)
    os.chown(guard.path, OTHER_UID, OTHER_UID)
    _refused(guard, match="belongs to another user")
    os.chown(guard.path, 0, 0)
    os.chown(ledger_dir, OTHER_UID, OTHER_UID)
    _refused(guard, match="belongs to another user")
