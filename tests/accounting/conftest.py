"""A PostgreSQL server for the budget store's tests, started by the tests themselves.

Session-scoped: one server (``initdb`` and ``pg_ctl`` from Debian's ``postgresql`` package,
run as the ``postgres`` user when the tests run as root) in a temporary directory on a free
loopback port; each test gets a database of its own. ``$PYMC_DP_TEST_POSTGRES`` (a URL of a
server that may create databases) is used instead when set.

If no server can be started the tests that need one FAIL, saying why: a store that is not
tested must not look tested. ``scripts/bootstrap.sh test`` installs the package (as root).
"""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd, as_postgres: bool, log: str) -> None:
    if as_postgres:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"Could not start the PostgreSQL server for the budget tests: {cmd[0]} "
                    f"failed:\n{done.stdout}\n{done.stderr}\n{log}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_server():
    """The URL of a server on which the tests may create databases."""
    url = os.environ.get("PYMC_DP_TEST_POSTGRES")
    if url:
        yield url
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is not installed: the PostgreSQL budget store cannot be tested. "
                    "Run `bash scripts/bootstrap.sh test` (the test extra installs it).",
                    pytrace=False)
    bindir = _bindir()
    if bindir is None:
        pytest.fail("No PostgreSQL server binaries (initdb, pg_ctl) found: the PostgreSQL "
                    "budget store cannot be tested. Install Debian's postgresql package "
                    "(`bash scripts/bootstrap.sh test` does, as root) or set "
                    "$PYMC_DP_TEST_POSTGRES to a server URL.", pytrace=False)
    root = os.geteuid() == 0
    home = tempfile.mkdtemp(prefix="pymc_dp_pg_")
    data, log = os.path.join(home, "data"), os.path.join(home, "server.log")
    if root:  # the server refuses to run as root
        shutil.chown(home, "postgres", "postgres")
    port = _free_port()
    try:
        _run([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres",
              "--no-sync", "-E", "UTF8"], root, "")
        _run([f"{bindir}/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o",
              f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off "
              "-c max_connections=60", "start"], root, log)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                (["runuser", "-u", "postgres", "--"] if root else [])
                + [f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=120,
            )
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """A new, empty database on the test server (dropped after the test)."""
    import psycopg

    name = f"pymc_dp_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base = postgres_server.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    """A fresh budget store of each kind: an SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "budgets.db")
    return request.getfixturevalue("postgres_url")
