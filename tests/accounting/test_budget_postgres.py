"""What only the PostgreSQL budget store has to show: tampering through SQL is refused, a
dropped connection or an unreachable or read-only server refuses the reservation, and the
chains of one run, in separate worker processes, draw from one budget through the URL.

(The store-agnostic tests of tests/accounting/test_budget.py and the load and SIGKILL tests
of test_budget_faults.py run on PostgreSQL too.) The server is started by conftest.py.
"""

import os

import pytest

import pymc_dp

from pymc_dp.accounting import Budget, BudgetStoreError, PureDPEvent
from pymc_dp.accounting.guard import LedgerIntegrityError

try:
    import psycopg
except ImportError:  # (never skipped: conftest's server fixture fails, saying why)
    psycopg = None

DELTA = 1e-6


def _sql(url, *statements):
    with psycopg.connect(url, autocommit=True, options="-c search_path=pymc_dp") as conn:
        for statement in statements:
            conn.execute(*statement) if isinstance(statement, tuple) else conn.execute(statement)


def _three(url):
    budget = Budget("d", epsilon=5.0, delta=DELTA, store=url, create=True)
    for i in range(3):
        budget.reserve([PureDPEvent(name=f"e{i}", epsilon=0.5)])
    return budget


def test_records_cannot_be_changed_through_sql(postgres_url):
    _three(postgres_url)
    for sql in ("UPDATE pymc_dp_records SET body = '{}'", "DELETE FROM pymc_dp_records",
                "TRUNCATE pymc_dp_records CASCADE", "TRUNCATE pymc_dp_budgets CASCADE",
                "DELETE FROM pymc_dp_budgets", "UPDATE pymc_dp_budgets SET epsilon = 9.0",
                "UPDATE pymc_dp_budgets SET count = 1",
                "UPDATE pymc_dp_budgets SET count = 0, head = genesis"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            _sql(postgres_url, sql)


@pytest.mark.parametrize("attack", [
    "UPDATE pymc_dp_records SET body = replace(body, '0.5', '0.001') WHERE seq = 2",
    "DELETE FROM pymc_dp_records WHERE seq = 2",
    "DELETE FROM pymc_dp_records WHERE seq = 3",
    "UPDATE pymc_dp_budgets SET epsilon = 50.0",
])
def test_an_altered_history_is_refused(postgres_url, attack):
    budget = _three(postgres_url)
    _sql(postgres_url, "ALTER TABLE pymc_dp_records DISABLE TRIGGER USER",
         "ALTER TABLE pymc_dp_budgets DISABLE TRIGGER USER", attack)
    for access in (budget.records, lambda: budget.reserve([PureDPEvent(name="x", epsilon=0.1)])):
        with pytest.raises(LedgerIntegrityError, match="cannot be verified"):
            access()


def test_a_connection_dropped_in_the_middle_of_a_reservation_reserves_nothing(
        postgres_url, monkeypatch):
    budget = _three(postgres_url)
    append = Budget._append

    def append_then_drop(self, tx, *args):
        append(self, tx, *args)
        _sql(postgres_url, ("SELECT pg_terminate_backend(%s)",
                            (tx.cursor.connection.info.backend_pid,)))

    monkeypatch.setattr(Budget, "_append", append_then_drop)
    with pytest.raises(BudgetStoreError, match="Nothing was reserved and no data was read"):
        budget.reserve([PureDPEvent(name="dropped", epsilon=0.1)])
    monkeypatch.undo()
    assert [r["events"][0]["name"] for r in budget.records()] == ["e0", "e1", "e2"]
    budget.reserve([PureDPEvent(name="after", epsilon=0.1)])


def test_an_unreachable_server_is_a_clear_refusal(postgres_url):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://someone:secret@127.0.0.1:{port}/nothing"
    with pytest.raises(BudgetStoreError, match="cannot be used") as refused:
        Budget("d", epsilon=1.0, delta=DELTA, store=url)
    assert "secret" not in str(refused.value)  # a password is never shown


def test_a_role_that_may_only_read_can_report_but_not_reserve(postgres_url):
    budget = _three(postgres_url)
    role = "reader_" + os.urandom(4).hex()
    _sql(postgres_url, f"CREATE ROLE {role} LOGIN", f"GRANT USAGE ON SCHEMA pymc_dp TO {role}",
         f"GRANT SELECT ON ALL TABLES IN SCHEMA pymc_dp TO {role}")
    try:
        reader_url = postgres_url.replace("postgres@", f"{role}@", 1)
        reader = Budget("d", epsilon=5.0, delta=DELTA, store=reader_url)
        assert len(reader.records()) == 3
        with pytest.raises(BudgetStoreError, match="(?i)permission denied"):
            reader.reserve([PureDPEvent(name="x", epsilon=0.1)])
        assert len(budget.records()) == 3
    finally:
        _sql(postgres_url, f"REVOKE ALL ON ALL TABLES IN SCHEMA pymc_dp FROM {role}",
             f"REVOKE ALL ON SCHEMA pymc_dp FROM {role}", f"DROP ROLE {role}")


def test_a_role_with_a_schema_of_its_own_opens_the_same_budget(postgres_url):
    # With the default search_path ("$user", public) such a role found no tables and made a
    # budget of its own, whole again (found by review). Every budget lives in schema pymc_dp.
    budget = _three(postgres_url)
    role = "analyst_" + os.urandom(4).hex()
    _sql(postgres_url, f"CREATE ROLE {role} LOGIN", f"CREATE SCHEMA {role} AUTHORIZATION {role}",
         f"GRANT USAGE ON SCHEMA pymc_dp TO {role}",
         f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA pymc_dp TO {role}",
         f"GRANT UPDATE (count, head) ON pymc_dp_budgets TO {role}")
    try:
        url = postgres_url.replace("postgres@", f"{role}@", 1)
        assert len(Budget("d", epsilon=5.0, delta=DELTA, store=url).records()) == 3
        with pytest.raises(BudgetStoreError, match="already holds"):
            Budget("d", epsilon=5.0, delta=DELTA, store=url, create=True)
        assert len(budget.records()) == 3
    finally:
        _sql(postgres_url, f"DROP SCHEMA {role} CASCADE",
             f"REVOKE ALL ON ALL TABLES IN SCHEMA pymc_dp FROM {role}",
             f"REVOKE ALL ON SCHEMA pymc_dp FROM {role}", f"DROP ROLE {role}")


def test_the_chains_of_a_run_in_worker_processes_draw_from_one_budget(conjugate, postgres_url):
    model, *_ = conjugate
    budget = Budget("census", epsilon=1.0, delta=1e-4, store=postgres_url, create=True)
    with model:
        step = pymc_dp.DPPenalty(eps=0.8, budget=budget, clip_bound=2.0, chains=2, warmup=False)
        idata = pymc_dp.sample(step=step, draws=10, tune=0, chains=2, cores=2, random_seed=0,
                               progressbar=False, compute_convergence_checks=False)
    records = budget.records()
    assert len(records) == 2 and len({r["pid"] for r in records}) == 2
    assert os.getpid() not in {r["pid"] for r in records}  # reserved by the workers
    assert pymc_dp.privacy_report(idata).epsilon == pytest.approx(
        budget.spent().epsilon(1e-4))
