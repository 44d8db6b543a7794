"""A :class:`~pymc_dp.accounting.budget.Budget` store in PostgreSQL, for budgets shared by
machines (``store="postgresql://user@host/db"``; needs the ``postgres`` extra, psycopg 3).

The same tables as the SQLite store. A reservation is a ``READ COMMITTED`` transaction
that first locks the budget's row (``SELECT … FOR UPDATE``): reservations against one
budget are serialised across every client of the server, while other budgets proceed. A
read is a ``REPEATABLE READ READ ONLY`` transaction, so that it sees the row and the
records of one instant. Creating the tables and a budget's row happens under a
transaction-scoped advisory lock, so that two clients creating them at once do not clash.
Triggers refuse ``UPDATE``, ``DELETE`` and ``TRUNCATE`` of the records, a budget's
deletion or change, and a checkpoint that does not move one record forward.

A server that cannot be reached, a connection dropped in the middle of a reservation, or a
role that may not write, raise :class:`~pymc_dp.accounting.budget.BudgetStoreError`, and
the transaction is rolled back by the server: nothing is reserved, nothing runs.
"""

from __future__ import annotations

import urllib.parse

from contextlib import contextmanager

from pymc_dp.accounting.budget_store import _store_error, _Transaction

__all__ = ["PostgresStore"]

# pg_advisory_xact_lock key of "creating pymc_dp tables or budget rows" (any fixed number)
_CREATE_LOCK = 7_166_521_103
#: The PostgreSQL schema that holds every pymc_dp budget of a database.
SCHEMA = "pymc_dp"


class _PostgresTransaction(_Transaction):
    param = "%s"
    lock_budget_row = " FOR UPDATE"

    def create_schema(self) -> None:
        self.cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        super().create_schema()

    def tables(self) -> set[str]:
        self.cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()"
        )
        return {row[0] for row in self.cursor.fetchall()}

    def append_only_statements(self) -> list[str]:
        return [
            """CREATE FUNCTION pymc_dp_append_only() RETURNS trigger LANGUAGE plpgsql AS
               $body$ BEGIN RAISE EXCEPTION 'pymc_dp budget records are append-only'; END
               $body$""",
            """CREATE TRIGGER pymc_dp_records_append_only BEFORE UPDATE OR DELETE
               ON pymc_dp_records FOR EACH ROW EXECUTE FUNCTION pymc_dp_append_only()""",
            """CREATE TRIGGER pymc_dp_records_no_truncate BEFORE TRUNCATE
               ON pymc_dp_records FOR EACH STATEMENT EXECUTE FUNCTION pymc_dp_append_only()""",
            """CREATE TRIGGER pymc_dp_budgets_fixed
               BEFORE DELETE OR UPDATE OF name, header, epsilon, delta, genesis
               ON pymc_dp_budgets FOR EACH ROW EXECUTE FUNCTION pymc_dp_append_only()""",
            """CREATE TRIGGER pymc_dp_budgets_no_truncate BEFORE TRUNCATE
               ON pymc_dp_budgets FOR EACH STATEMENT EXECUTE FUNCTION pymc_dp_append_only()""",
            """CREATE TRIGGER pymc_dp_budgets_forward BEFORE UPDATE OF count
               ON pymc_dp_budgets FOR EACH ROW WHEN (NEW.count <> OLD.count + 1)
               EXECUTE FUNCTION pymc_dp_append_only()""",
        ]


class PostgresStore:
    """A budget store in a PostgreSQL database (psycopg 3).

    Parameters
    ----------
    url : str
        ``postgresql://user[:password]@host[:port]/database`` (libpq's URL form). The
        password is never shown in messages or reports.
    timeout : float
        Seconds to wait for the server to answer a connection.
    """

    kind = "postgresql"

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url
        self.timeout = float(timeout)

    def describe(self) -> str:
        # (never the password; a URL that does not parse is not echoed at all)
        try:
            parts = urllib.parse.urlsplit(self.url)
            host = parts.hostname or ""
            if parts.port:
                host += f":{parts.port}"
            user = f"{parts.username}@" if parts.username else ""
            return urllib.parse.urlunsplit((parts.scheme, user + host, parts.path, "", ""))
        except ValueError:
            return "a PostgreSQL URL that does not parse"

    @contextmanager
    def transaction(self, write: bool, create: bool = False):
        """One transaction; committed if the block ends normally, rolled back if it raises."""
        try:
            import psycopg
        except ImportError:
            raise ImportError(
                "A PostgreSQL budget store needs psycopg 3: pip install 'pymc_dp[postgres]'"
            ) from None
        try:
            # One schema of its own, whoever connects: with the default search_path a role
            # with a schema named after it would otherwise find (or make) other tables.
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(self.timeout)),
                                   options=f"-c search_path={SCHEMA}")
        except (psycopg.Error, ValueError) as exc:  # (ValueError: a URL that does not parse)
            raise _store_error(self, exc, detail=False) from None
        try:
            try:
                cursor = conn.cursor()
                if write:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
                else:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                if write and create:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                yield _PostgresTransaction(cursor, write)
                conn.commit()
            except psycopg.Error as exc:
                _rollback(conn)
                raise _store_error(self, exc) from None  # (the server's own words: no URL)
            except BaseException:
                _rollback(conn)
                raise
        finally:
            conn.close()


def _rollback(conn) -> None:
    try:
        conn.rollback()
    except Exception:  # (a dropped connection: the server rolls the transaction back)
        pass
