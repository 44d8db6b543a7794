"""The stores a :class:`~pymc_dp.accounting.budget.Budget` keeps its records in: the tables,
the statements a budget needs, and the SQLite store (the PostgreSQL one is in
:mod:`~pymc_dp.accounting.budget_postgres`). What the tables hold and why is said in
:mod:`~pymc_dp.accounting.budget`; a store only runs transactions.
"""

from __future__ import annotations

import os
import urllib.parse

from contextlib import contextmanager

from pymc_dp.errors import PrivacyBudgetExceeded

__all__ = ["SCHEMA_VERSION", "BudgetStoreError", "SQLiteStore"]

SCHEMA_VERSION = 1


class BudgetStoreError(PrivacyBudgetExceeded):
    """The budget's store cannot be read or written (read-only, full, unreachable).

    Nothing was reserved and no data was read: a run that cannot record its spending does
    not run.
    """


_SCHEMA = [
    "CREATE TABLE pymc_dp_schema (version INTEGER NOT NULL)",
    """CREATE TABLE pymc_dp_budgets (
        name TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        epsilon DOUBLE PRECISION NOT NULL,
        delta DOUBLE PRECISION NOT NULL,
        genesis TEXT NOT NULL,
        count BIGINT NOT NULL,
        head TEXT NOT NULL)""",
    """CREATE TABLE pymc_dp_records (
        budget TEXT NOT NULL REFERENCES pymc_dp_budgets(name),
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        prev TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (budget, seq))""",
]


class _Transaction:
    """The statements a budget needs, over one open transaction of a DB-API cursor.

    ``param`` is the driver's placeholder (``?`` for sqlite3, ``%s`` for psycopg).
    """

    param = "?"
    lock_budget_row = ""  # appended to the budget row's SELECT in a write transaction

    def __init__(self, cursor, write: bool):
        self.cursor = cursor
        self.write = write

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.param)

    def schema_version(self) -> list | None:
        """The versions in the schema table, or None if the store has no pymc_dp tables."""
        tables = self.tables()
        ours = {"pymc_dp_schema", "pymc_dp_budgets", "pymc_dp_records"} & tables
        if not ours:
            return None
        if "pymc_dp_schema" not in ours:
            return []
        self.cursor.execute("SELECT version FROM pymc_dp_schema")
        return [row[0] for row in self.cursor.fetchall()]

    def tables(self) -> set[str]:
        raise NotImplementedError

    def create_schema(self) -> None:
        for statement in _SCHEMA + self.append_only_statements():
            self.cursor.execute(statement)
        self.cursor.execute(self._q("INSERT INTO pymc_dp_schema (version) VALUES (?)"),
                            (SCHEMA_VERSION,))

    def append_only_statements(self) -> list[str]:
        raise NotImplementedError

    def budget(self, name: str):
        sql = "SELECT header, epsilon, delta, genesis, count, head FROM pymc_dp_budgets WHERE name = ?"
        if self.write:
            sql += self.lock_budget_row
        self.cursor.execute(self._q(sql), (name,))
        return self.cursor.fetchone()

    def create_budget(self, name, header, epsilon, delta, genesis) -> None:
        self.cursor.execute(
            self._q("INSERT INTO pymc_dp_budgets (name, header, epsilon, delta, genesis, count, "
                    "head) VALUES (?, ?, ?, ?, ?, 0, ?)"),
            (name, header, epsilon, delta, genesis, genesis),
        )

    def records(self, name: str) -> list:
        self.cursor.execute(
            self._q("SELECT seq, body, prev, hash FROM pymc_dp_records WHERE budget = ? "
                    "ORDER BY seq"),
            (name,),
        )
        return self.cursor.fetchall()

    def append(self, name, seq, body, prev, digest) -> None:
        self.cursor.execute(
            self._q("INSERT INTO pymc_dp_records (budget, seq, body, prev, hash) "
                    "VALUES (?, ?, ?, ?, ?)"),
            (name, seq, body, prev, digest),
        )
        self.cursor.execute(
            self._q("UPDATE pymc_dp_budgets SET count = ?, head = ? WHERE name = ?"),
            (seq, digest, name),
        )


class _SQLiteTransaction(_Transaction):
    def tables(self) -> set[str]:
        self.cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {row[0] for row in self.cursor.fetchall()}

    def append_only_statements(self) -> list[str]:
        refuse = "BEGIN SELECT RAISE(ABORT, 'pymc_dp budget records are append-only'); END"
        return [
            f"CREATE TRIGGER pymc_dp_records_no_update BEFORE UPDATE ON pymc_dp_records {refuse}",
            f"CREATE TRIGGER pymc_dp_records_no_delete BEFORE DELETE ON pymc_dp_records {refuse}",
            f"CREATE TRIGGER pymc_dp_budgets_no_delete BEFORE DELETE ON pymc_dp_budgets {refuse}",
            "CREATE TRIGGER pymc_dp_budgets_fixed BEFORE UPDATE OF name, header, epsilon, "
            f"delta, genesis ON pymc_dp_budgets {refuse}",
            "CREATE TRIGGER pymc_dp_budgets_forward BEFORE UPDATE OF count ON pymc_dp_budgets "
            f"WHEN NEW.count <> OLD.count + 1 {refuse}",
        ]


class SQLiteStore:
    """A budget store in an SQLite file (Python's ``sqlite3``).

    Every operation opens its own connection (so the store may be pickled into worker
    processes, and forked children never share one). A write is one ``BEGIN IMMEDIATE``
    transaction: SQLite's file lock serialises writers of all processes on the machine.
    The file must not be on a network file system whose locks SQLite cannot trust (use
    PostgreSQL across machines).

    Parameters
    ----------
    path : str
        The database file; created (with its tables) by the first budget opened in it.
    timeout : float
        Seconds to wait for another process's transaction before giving up.
    """

    kind = "sqlite"

    def __init__(self, path: str, timeout: float = 120.0):
        self.path = str(path)
        self.timeout = float(timeout)

    def describe(self) -> str:
        return f"sqlite:///{self.path}"

    def _connect(self, create: bool):
        import sqlite3

        # mode=rw: a store that has gone (deleted, moved) is an error, not a new empty file
        uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode={'rwc' if create else 'rw'}"
        conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    @contextmanager
    def transaction(self, write: bool, create: bool = False):
        """One transaction (a write one takes SQLite's write lock at once); committed if the
        block ends normally, rolled back if it raises. Only ``create`` makes a new file."""
        import sqlite3

        try:
            conn = self._connect(create)
        except sqlite3.Error as exc:
            raise _store_error(self, exc) from None
        try:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                cursor = conn.cursor()
            except sqlite3.Error as exc:
                raise _store_error(self, exc) from None
            try:
                yield _SQLiteTransaction(cursor, write)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise _store_error(self, exc) from None
            except BaseException:
                _rollback(conn)
                raise
        finally:
            conn.close()


def _rollback(conn) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:  # (no transaction left to roll back: SQLite rolled it back itself)
        pass


def _store_error(store, exc: Exception, *, detail: bool = True) -> BudgetStoreError:
    # SQLite's and the PostgreSQL server's messages are about the store (read-only, disk
    # full, permission denied), never data; a driver's message on connecting may quote the
    # URL it was given, password included: not shown (detail=False).
    why = f"{type(exc).__name__}: {exc}" if detail else type(exc).__name__
    return BudgetStoreError(
        f"The budget store {store.describe()} cannot be used ({why}). "
        "Nothing was reserved and no data was read: a run that cannot record its spending "
        "does not run. Make the store writable (permissions, free space, a reachable "
        "server) and run again."
    )
