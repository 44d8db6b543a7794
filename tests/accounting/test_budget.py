"""pymc_dp.Budget: one (ε, δ) per dataset, reservations composed by the accountant, kept in
an SQLite store whose hash chain refuses an altered history."""

import json
import sqlite3

import pytest

import pymc_dp

from pymc_dp.accounting import (
    Budget,
    BudgetStoreError,
    GaussianEvent,
    LaplaceEvent,
    PrivacyLedger,
    PureDPEvent,
)
from pymc_dp.accounting.guard import LedgerIntegrityError
from pymc_dp.accounting.hashchain import canonical, link
from pymc_dp.errors import PrivacyBudgetExceeded

DELTA = 1e-6


def gaussian(z=10.0, count=1, name="g"):
    return GaussianEvent(name=name, count=count, noise_multiplier=z)


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "budgets.db")


def test_exported_from_the_package():
    assert pymc_dp.Budget is Budget
    assert "Budget" in pymc_dp.__all__ and "Budget" in pymc_dp.accounting.__all__


def test_reservations_compose_through_the_accountant_not_by_adding_epsilons(any_store):
    store = any_store
    one = PrivacyLedger([gaussian()]).epsilon(DELTA)
    budget = Budget("d", epsilon=3 * one, delta=DELTA, store=store, create=True)
    admitted = 0
    for _ in range(100):
        try:
            budget.reserve([gaussian()])
        except PrivacyBudgetExceeded:
            break
        admitted += 1
    # Adding ε's would admit 3; the exact Gaussian composition admits exactly as many as
    # the ledger says fit.
    expected = max(k for k in range(1, 100)
                   if PrivacyLedger([gaussian(count=k)]).epsilon(DELTA) <= 3 * one)
    assert admitted == expected > 3
    assert len(budget.records()) == admitted
    assert budget.spent().epsilon(DELTA) <= budget.epsilon


def test_a_refused_reservation_writes_nothing_and_says_why(any_store):
    store = any_store
    budget = Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    budget.reserve([LaplaceEvent(name="a", epsilon=0.75)], owner="first")
    before = budget.witness()
    with pytest.raises(PrivacyBudgetExceeded, match=r"over its ε = 1 .*Nothing was reserved"):
        budget.reserve([LaplaceEvent(name="b", epsilon=0.5)])
    assert budget.witness() == before and len(budget.records()) == 1
    assert budget.remaining() == pytest.approx(0.25)
    assert budget.fits([LaplaceEvent(name="c", epsilon=0.25)])
    assert not budget.fits([LaplaceEvent(name="c", epsilon=0.26)])


def test_records_spent_and_remaining(any_store):
    store = any_store
    budget = Budget("d", epsilon=2.0, delta=DELTA, store=store, create=True)
    assert budget.records() == [] and budget.remaining() == 2.0
    budget.reserve([PureDPEvent(name="svt", epsilon=0.5)], owner="me", run_id="r1")
    budget.reserve([gaussian(count=3)], owner="you")
    records = budget.records()
    assert [r["seq"] for r in records] == [1, 2]
    assert records[0]["owner"] == "me" and records[0]["run_id"] == "r1"
    assert records[0]["events"] == [PureDPEvent(name="svt", epsilon=0.5).to_dict()]
    spent = PrivacyLedger([PureDPEvent(name="svt", epsilon=0.5), gaussian(count=3)])
    assert budget.spent() == spent
    assert budget.remaining() == pytest.approx(2.0 - spent.epsilon(DELTA))


def test_reopening_shares_the_budget_and_a_different_budget_is_refused(any_store):
    store = any_store
    Budget("census", epsilon=1.0, delta=DELTA, store=store, create=True).reserve([gaussian()])
    url = store if "://" in store else f"sqlite:///{store}"
    again = Budget("census", epsilon=1.0, delta=DELTA, store=url)
    assert len(again.records()) == 1
    for eps, delta in ((2.0, DELTA), (1.0, 1e-5)):
        with pytest.raises(LedgerIntegrityError, match="cannot be changed once it exists"):
            Budget("census", epsilon=eps, delta=delta, store=store)
    # another dataset in the same store has its own budget
    other = Budget("survey", epsilon=5.0, delta=DELTA, store=store, create=True)
    assert other.records() == [] and len(again.records()) == 1


def test_bad_arguments(store):
    with pytest.raises(ValueError):
        Budget("", epsilon=1.0, delta=DELTA, store=store)
    with pytest.raises(ValueError):
        Budget("d", epsilon=-1.0, delta=DELTA, store=store)
    with pytest.raises(ValueError):
        Budget("d", epsilon=1.0, delta=1.5, store=store)
    with pytest.raises(ValueError, match="Unknown budget store URL scheme"):
        Budget("d", epsilon=1.0, delta=DELTA, store="mysql://host/db")
    budget = Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    with pytest.raises(ValueError, match="reserved"):
        budget.reserve([gaussian()], pid=3)
    with pytest.raises(ValueError):  # not JSON: refused before anything is written
        budget.reserve([gaussian()], run_id=float("nan"))
    with pytest.raises(ValueError):  # no accountant composes these with replace-one events
        budget.reserve([gaussian()])
        budget.reserve([GaussianEvent(name="x", noise_multiplier=9.0, neighbouring="add_remove")])
    assert len(budget.records()) == 1


def test_a_pure_budget_takes_pure_events_only(any_store):
    store = any_store
    budget = Budget("d", epsilon=1.0, delta=0, store=store, create=True)
    budget.reserve([LaplaceEvent(name="l", epsilon=0.5)])
    with pytest.raises(PrivacyBudgetExceeded, match="ε = inf"):
        budget.reserve([gaussian(z=1000.0)])


def test_records_cannot_be_updated_or_deleted_through_sql(store):
    budget = Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    budget.reserve([gaussian()])
    budget.reserve([gaussian()])
    with sqlite3.connect(store) as conn:
        for sql in ("UPDATE pymc_dp_records SET body = '{}'", "DELETE FROM pymc_dp_records",
                    "DELETE FROM pymc_dp_budgets", "UPDATE pymc_dp_budgets SET epsilon = 9.0",
                    "UPDATE pymc_dp_budgets SET header = '{}'",
                    "UPDATE pymc_dp_budgets SET count = 1",
                    "UPDATE pymc_dp_budgets SET count = 0, head = genesis"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)
    budget.verify()


# ---------------------------------------------------------------------- the hash chain
def _tamper(store, *statements):
    """Do what an attacker with write access would: drop the triggers, change rows."""
    with sqlite3.connect(store) as conn:
        triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in triggers.fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(*statement) if isinstance(statement, tuple) else conn.execute(statement)


def _three(store):
    budget = Budget("d", epsilon=5.0, delta=DELTA, store=store, create=True)
    for i in range(3):
        budget.reserve([gaussian(z=10.0 + i, name=f"g{i}")])
    return budget


def _body(store, seq):
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT body FROM pymc_dp_records WHERE seq = ?", (seq,)).fetchone()[0]


def _cheaper(store, seq):
    body = json.loads(_body(store, seq))
    body["events"][0]["noise_multiplier"] = 1e6  # claim the release cost almost nothing
    return canonical(body).decode()


ATTACKS = {
    "edited record": lambda s: [("UPDATE pymc_dp_records SET body = ? WHERE seq = 2",
                                 (_cheaper(s, 2),))],
    "deleted record": lambda s: ["DELETE FROM pymc_dp_records WHERE seq = 2"],
    "reordered records": lambda s: [
        "UPDATE pymc_dp_records SET seq = -1 WHERE seq = 1",
        "UPDATE pymc_dp_records SET seq = 1 WHERE seq = 2",
        "UPDATE pymc_dp_records SET seq = 2 WHERE seq = -1",
    ],
    "inserted record": lambda s: [
        "UPDATE pymc_dp_records SET seq = seq + 100 WHERE seq >= 2",
        "UPDATE pymc_dp_records SET seq = seq - 99 WHERE seq >= 100",
        ("INSERT INTO pymc_dp_records SELECT budget, 2, body, prev, hash FROM pymc_dp_records "
         "WHERE seq = 1",),
    ],
    "truncated tail": lambda s: ["DELETE FROM pymc_dp_records WHERE seq = 3"],
    "emptied": lambda s: ["DELETE FROM pymc_dp_records"],
    "budget raised in its row": lambda s: ["UPDATE pymc_dp_budgets SET epsilon = 50.0"],
    "budget raised in its header": lambda s: [
        "UPDATE pymc_dp_budgets SET epsilon = 50.0, header = replace(header, '5.0', '50.0')"
    ],
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_altered_history_is_refused_by_every_access(store, attack):
    budget = _three(store)
    _tamper(store, *ATTACKS[attack](store))
    left = _rows(store)
    fresh = "budget raised" not in attack  # (else a fresh open with ε = 5 is refused too)
    for access in (budget.records, budget.spent, budget.witness, budget.verify,
                   lambda: budget.reserve([gaussian()])):
        with pytest.raises(LedgerIntegrityError, match="cannot be verified"):
            access()
    if fresh:
        with pytest.raises(LedgerIntegrityError, match="cannot be verified"):
            Budget("d", epsilon=5.0, delta=DELTA, store=store)
    # fail closed: the store is left as it is (nothing repaired, nothing appended)
    assert _rows(store) == left


def _rows(store):
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT * FROM pymc_dp_records ORDER BY seq").fetchall()


def _rewrite_consistently(store, keep):
    """What no chain without a secret can stop: drop records and recompute the checkpoint."""
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT seq, hash FROM pymc_dp_records ORDER BY seq").fetchall()
    head = rows[keep - 1][1]
    _tamper(store, f"DELETE FROM pymc_dp_records WHERE seq > {keep}",
            ("UPDATE pymc_dp_budgets SET count = ?, head = ?", (keep, head)))


def test_a_consistent_truncation_is_caught_by_what_was_seen_or_a_witness(store):
    budget = _three(store)
    witness = budget.witness()
    _rewrite_consistently(store, keep=1)
    # The object that saw three records refuses; so does anyone holding the witness.
    with pytest.raises(LedgerIntegrityError, match="already seen"):
        budget.records()
    with pytest.raises(LedgerIntegrityError, match="witness"):
        Budget("d", epsilon=5.0, delta=DELTA, store=store, witness=witness)
    # Documented limit: a fresh process without a witness cannot tell.
    assert len(Budget("d", epsilon=5.0, delta=DELTA, store=store).records()) == 1


def test_a_full_rewrite_with_recomputed_hashes_is_caught_by_a_witness_only(store):
    budget = _three(store)
    witness = budget.witness()
    # Rewrite record 2 as cheaper and recompute every hash after it and the checkpoint.
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT seq, body FROM pymc_dp_records ORDER BY seq").fetchall()
        genesis = conn.execute("SELECT genesis FROM pymc_dp_budgets").fetchone()[0]
    rows[1] = (2, _cheaper(store, 2))
    prev, rewritten = genesis, []
    for seq, body in rows:
        digest = link(prev, {"budget": "d", "seq": seq, "body": json.loads(body)})
        rewritten.append((body, prev, digest, seq))
        prev = digest
    _tamper(store, *[("UPDATE pymc_dp_records SET body = ?, prev = ?, hash = ? WHERE seq = ?", r)
                     for r in rewritten],
            ("UPDATE pymc_dp_budgets SET head = ?", (prev,)))
    with pytest.raises(LedgerIntegrityError, match="already seen"):
        budget.spent()
    with pytest.raises(LedgerIntegrityError, match="witness"):
        Budget("d", epsilon=5.0, delta=DELTA, store=store).verify(witness=witness)
    Budget("d", epsilon=5.0, delta=DELTA, store=store).verify()  # documented limit


def test_a_witness_of_the_chain_verifies(any_store):
    store = any_store
    budget = _three(store)
    early = f"0:{json.loads(json.dumps(budget.witness()))}"  # not a point of the chain
    w = budget.witness()
    budget.reserve([gaussian()])
    budget.verify(witness=w)  # an earlier point still lies on the chain
    Budget("d", epsilon=5.0, delta=DELTA, store=store, witness=w)
    for bad in (early, "²:x", "no colon", f"99:{w.split(':')[1]}"):
        with pytest.raises(LedgerIntegrityError, match="witness"):
            budget.verify(witness=bad)


def test_an_unknown_schema_is_refused(store):
    Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE pymc_dp_schema SET version = 2")
    with pytest.raises(LedgerIntegrityError, match="schema"):
        Budget("d", epsilon=1.0, delta=DELTA, store=store)


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "budgets.db"
    path.write_text("not a database " * 100)
    with pytest.raises(BudgetStoreError, match="cannot be used"):
        Budget("d", epsilon=1.0, delta=DELTA, store=str(path))


def test_no_store_given_is_refused_or_taken_from_the_environment(monkeypatch, tmp_path):
    # (no default in a temporary directory: a budget lost with it would start again whole)
    monkeypatch.delenv("PYMC_DP_BUDGET_STORE", raising=False)
    with pytest.raises(ValueError, match="store="):
        Budget("d", epsilon=1.0, delta=DELTA, create=True)
    monkeypatch.setenv("PYMC_DP_BUDGET_STORE", str(tmp_path / "team.db"))
    Budget("d", epsilon=1.0, delta=DELTA, create=True).reserve([gaussian()])
    assert len(Budget("d", epsilon=1.0, delta=DELTA).records()) == 1
    assert (tmp_path / "team.db").exists()


@pytest.mark.parametrize("gone", ["deleted", "emptied", "row deleted"])
def test_a_store_that_is_gone_is_never_made_again_by_a_new_budget(store, gone):
    # A new process opens the budget by name: a missing, emptied or replaced store must not
    # give it the whole budget again (found by review: it did).
    Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True).reserve([gaussian()])
    if gone == "deleted":
        import os

        os.remove(store)
    elif gone == "emptied":
        open(store, "wb").close()
    else:
        with sqlite3.connect(store) as conn:
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger'"
            ).fetchall():
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("DELETE FROM pymc_dp_budgets")
    with pytest.raises((BudgetStoreError, LedgerIntegrityError)):
        Budget("d", epsilon=1.0, delta=DELTA, store=store).reserve([gaussian()])


def test_create_makes_a_budget_once(store):
    Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    with pytest.raises(BudgetStoreError, match="already holds"):
        Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)


def test_a_reservation_cannot_set_the_records_position_hash_or_time(store):
    # (the report's witness comes from the chain, not from what a caller wrote)
    budget = Budget("d", epsilon=5.0, delta=DELTA, store=store, create=True)
    for key in ("seq", "hash", "when", "epsilon"):
        with pytest.raises(ValueError, match="reserved"):
            budget.reserve([gaussian()], **{key: "x"})
    budget.reserve([gaussian()], note="mine")
    report = budget.report()
    assert report["details"]["witness"] == budget.witness()
    assert [r["seq"] for r in report["details"]["releases"]] == [1]


# ---------------------------------------------------------------------- slices
def test_a_slice_is_capped_and_draws_from_the_whole_budget(any_store):
    store = any_store
    budget = Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    a = budget.slice(0.6, DELTA, owner="A")
    b = budget.slice(0.6, DELTA, owner="B")
    a.reserve([LaplaceEvent(name="x", epsilon=0.5)], run_id="r")
    with pytest.raises(PrivacyBudgetExceeded, match="share ε = 0.6"):
        a.reserve([LaplaceEvent(name="x", epsilon=0.2)])
    with pytest.raises(PrivacyBudgetExceeded, match="budget 'd'"):
        b.reserve([LaplaceEvent(name="x", epsilon=0.55)])  # fits b's cap, not the budget
    b.reserve([LaplaceEvent(name="x", epsilon=0.5)])
    assert [r["run_id"] for r in a.reservations()] == ["r"]
    assert a.spent().epsilon(DELTA) == 0.5 and len(b.reservations()) == 1
    assert [r["owner"] for r in budget.records()] == ["A", "B"]
    with pytest.raises(LedgerIntegrityError, match="differs"):
        a.reserve([LaplaceEvent(name="x", epsilon=0.01)], budget=(0.7, DELTA))
    with pytest.raises(ValueError, match="cannot exceed"):
        budget.slice(1.5, DELTA)


def test_a_budget_and_its_slices_pickle(any_store):
    store = any_store
    import pickle

    budget = Budget("d", epsilon=1.0, delta=DELTA, store=store, create=True)
    s = budget.slice(0.5, DELTA, owner="A")
    s.reserve([LaplaceEvent(name="x", epsilon=0.25)])
    copy = pickle.loads(pickle.dumps(s))
    copy.reserve([LaplaceEvent(name="x", epsilon=0.25)])
    assert len(s.reservations()) == 2
    with pytest.raises(PrivacyBudgetExceeded):
        s.reserve([LaplaceEvent(name="x", epsilon=0.01)])
