"""A real PostgreSQL server for the tests, and a fresh, empty database on it for each test.

The server is the one named by ACP_GREEN_TEST_POSTGRES (a URL, which .ci/run sets from
scripts/setup-postgres.sh). Without it, scripts/setup-postgres.sh is run here, once per process and
under a file lock (pytest-xdist's workers would otherwise both start one): it installs PostgreSQL
if need be, starts a throwaway server for this checkout (or reuses the running one) and prints its
URL, which is then put in ACP_GREEN_TEST_POSTGRES for the rest of the run. There is no skipping:
a test that asks for a database and cannot have one fails, saying why.

Each database is CREATEd empty (acp_test_<random>) and DROPped WITH (FORCE) after its test, so
connections a test left open do not keep it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ENV = "ACP_GREEN_TEST_POSTGRES"
ROOT = Path(__file__).resolve().parent.parent
SETUP_SCRIPT = ROOT / "scripts" / "setup-postgres.sh"
STATE_DIR = ROOT / ".pg"  # the script's own directory (ignored by git); the lock file is kept there
SETUP_TIMEOUT = 900  # the first run may install Debian's postgresql package
CONNECT_TIMEOUT = 10


class PostgresUnavailable(RuntimeError):
    """No server could be had: the message says why and what was tried."""


_server_url: str | None = None


def server_url() -> str:
    """The URL of the test server (its `postgres` database): ACP_GREEN_TEST_POSTGRES, or else that of
    the server scripts/setup-postgres.sh starts (or finds running) for this checkout."""
    global _server_url
    if _server_url is None:
        _server_url = os.environ.get(ENV) or _start_server()
        os.environ[ENV] = _server_url  # processes a test starts see the same server
    return _server_url


def _start_server() -> str:
    STATE_DIR.mkdir(exist_ok=True)
    with open(STATE_DIR / "fixture.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        try:
            done = subprocess.run(["bash", str(SETUP_SCRIPT)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=SETUP_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise PostgresUnavailable(f"{ENV} is not set and {SETUP_SCRIPT} could not be run: {error}") from error
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("postgresql://"):
        raise PostgresUnavailable(
            f"{ENV} is not set and {SETUP_SCRIPT} did not start a PostgreSQL server (exit {done.returncode}).\n"
            f"stderr:\n{done.stderr.strip()}\nstdout:\n{done.stdout.strip()}\n"
            f"Set {ENV}=postgresql://USER:PASSWORD@HOST:PORT/postgres to use a server of your own "
            f"(its user must be allowed to CREATE DATABASE).")
    return lines[-1]


def database_url(server: str, name: str) -> str:
    """The server's URL with its database replaced by `name`."""
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path="/" + name))


def _admin(server: str):  # -> psycopg.Connection; psycopg is imported here, when a test needs it
    import psycopg

    try:
        return psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as error:
        where = urlsplit(server)
        raise PostgresUnavailable(f"cannot connect to the test PostgreSQL server at {where.hostname}:{where.port} "
                                  f"({ENV} or scripts/setup-postgres.sh): {error}") from error


def create_database(server: str | None = None) -> str:
    """A new, empty database on the test server; returns its URL."""
    server = server or server_url()
    name = f"acp_test_{secrets.token_hex(6)}"
    with _admin(server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return database_url(server, name)


def drop_database(url: str) -> None:
    """Drop the database of `url` (made by create_database), ending any session still on it."""
    name = urlsplit(url).path.lstrip("/")
    assert name.startswith("acp_test_"), f"refusing to drop a database not made for a test: {name!r}"
    with _admin(database_url(url, "postgres")) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a fresh, empty database for the duration of the block; dropped after it."""
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)
