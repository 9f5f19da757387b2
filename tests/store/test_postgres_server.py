"""The `postgres_url` fixture (tests/postgres_server.py): a fresh, empty, writable database on a real
PostgreSQL server for each test, never the same one twice."""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg

from tests.postgres_server import create_database, database_url, drop_database

#: The databases the tests of this module were given, by test: with xdist's load distribution the
#: tests of a module may run in either worker, so a check across tests looks at those seen here.
SEEN: dict[str, str] = {}


def _user_tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')").fetchall()
    return [row[0] for row in rows]


def test_the_database_is_empty_and_writable(postgres_url):
    name = urlsplit(postgres_url).path.lstrip("/")
    assert name.startswith("acp_test_")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)
        assert _user_tables(conn) == []
        conn.execute("CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)")
        conn.execute("INSERT INTO notes (body) VALUES (%s), (%s)", ["one", "two"])
        assert conn.execute("SELECT body FROM notes ORDER BY id").fetchall() == [("one",), ("two",)]
    SEEN["empty_and_writable"] = postgres_url


def test_another_database_does_not_see_this_ones_tables(postgres_url):
    """Within one test (whatever the distribution): a second fresh database is another database."""
    other = create_database()
    try:
        assert other != postgres_url
        with psycopg.connect(postgres_url, autocommit=True) as mine:
            mine.execute("CREATE TABLE only_here (x int)")
        with psycopg.connect(other, autocommit=True) as theirs:
            assert _user_tables(theirs) == []
    finally:
        drop_database(other)
    SEEN["another"] = postgres_url


def _leave_a_table_and_check_the_other(postgres_url: str, mine: str, other: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert _user_tables(conn) == []  # the other test's table is not here
        conn.execute(f"CREATE TABLE {mine} (x int)")
        conn.execute(f"INSERT INTO {mine} VALUES (1)")
    SEEN[mine] = postgres_url
    if other in SEEN:  # the other test ran first, in this process: its database is not this one
        assert SEEN[other] != postgres_url


def test_one_database_per_test_first(postgres_url):
    _leave_a_table_and_check_the_other(postgres_url, "first_marker", "second_marker")


def test_one_database_per_test_second(postgres_url):
    _leave_a_table_and_check_the_other(postgres_url, "second_marker", "first_marker")


def test_the_database_is_dropped_after_its_test(postgres_url):
    """A database made by an earlier test in this process is gone by now (dropped at its teardown)."""
    with psycopg.connect(database_url(postgres_url, "postgres"), autocommit=True) as conn:
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()}
    assert urlsplit(postgres_url).path.lstrip("/") in names
    earlier = {urlsplit(url).path.lstrip("/") for url in SEEN.values()}
    assert not earlier & names, f"databases of finished tests still exist: {earlier & names}"
