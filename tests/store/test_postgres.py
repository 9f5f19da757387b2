"""The PostgreSQL store (acp_green/store/postgres.py) against a real server: a fresh database per
test (`postgres_url`, tests/postgres_server.py).

Strings come back exactly (lone surrogates, NUL); history pages stream a few rows at a time and
page as the other stores do; a fork shares its source's history rows; two stores own sessions
through advisory locks, a release waiting for the commit; a record the server refuses inside a
transaction is dropped alone; and through a TCP proxy the test cuts, writes made while the server
is unreachable wait and reach it once it is back, reads fail fast or are answered past them, and
the session locks are taken back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from urllib.parse import quote, urlsplit, urlunsplit

import gevent
import psycopg

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from gevent import socket as gsocket
from gevent.server import StreamServer

from acp_green.store import pg_connection, postgres, statedb
from acp_green.store.base import MemoryStore
from acp_green.store.database import StoreOpenError
from acp_green.store.operations import StoreUnavailable
from acp_green.store.postgres import PostgresDatabase, PostgresOpener, PostgresStore, redacted
from acp_green.store.session_record import SessionRecord
from tests.helpers import wait_until
from acp_green.store.sqlite import SqliteStore
from acp_green.store.threaded import READ_TIMEOUT
from acp_green.store.turns import TurnOutcome
from acp_green.usage import UsageRecord

ODD = "\udce9\x00\U0001f600\u2028é"  # a lone surrogate, NUL, an astral character, a line separator, an accent


def _direct(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _history_rows(url: str) -> int:
    with _direct(url) as conn:
        return conn.execute("SELECT count(*) FROM acp_green.history").fetchone()[0]


def _wait_for(condition, timeout: float = 20.0, what: str = "the condition") -> None:
    """Poll `condition` cooperatively (the hub runs: the proxy forwards meanwhile)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        gevent.sleep(0.02)


# -- strings -----------------------------------------------------------------------------------------
def test_strings_with_lone_surrogates_and_nul_round_trip_in_every_column(postgres_url):
    sid, fork = f"s{ODD}", f"f{ODD}"
    record = SessionRecord(sid, f"/w{ODD}", [f"/x{ODD}", ODD], f"title {ODD}", f"mode{ODD}",
                           {f"k{ODD}": [ODD, {"n": ODD}], "\udcff": "\ud800"}, 12.5, True, f"from{ODD}")
    turn, failed = f"t{ODD}", f"u{ODD}"
    entries = [b'{"x":"\\udce9"}', "{\"y\":\"é\"}".encode(), b"\x00\xff\xfe not UTF-8"]
    state = b'{"state":"\xed\xb3\xa9"}\x00\xff'  # a surrogate's bytes (surrogatepass), NUL, invalid UTF-8
    usage = UsageRecord(sid, f"r{ODD}", f"stop{ODD}", 1.0, 2.0, 3, 4, 5, 6, 7.0, usage_id=f"u{ODD}", pid=42)
    store = PostgresStore(postgres_url)
    try:
        store.own_new_session(sid)
        store.save_session(record)
        store.begin_turn(sid, turn, 1.0, entries[:1])
        store.append_history(sid, turn, entries[1:])
        store.end_turn(sid, turn, TurnOutcome(f"end{ODD}", f"error {ODD}"))
        store.begin_turn(sid, failed, 2.0, [])
        store.end_turn(sid, failed, TurnOutcome("error", ODD))
        store.save_state(sid, state)
        store.record_usage(usage)
        store.save_session(SessionRecord(fork, "/w", forked_from=sid))
        store.fork_history(sid, fork)
        store.sync()
        assert store.failed_writes == 0
    finally:
        store.close()
    reopened = PostgresStore(postgres_url)
    try:
        assert reopened.load_session(sid) == record
        assert reopened.list_sessions(cwd=f"/w{ODD}") == [record]
        assert reopened.history(sid) == entries
        assert [(e.turn_id, e.update) for e in reopened.history_page(sid, None, 100, 1 << 20, turn).entries] == \
            [(turn, entry) for entry in entries]
        turns = reopened.turns(sid)
        assert [(t.turn_id, t.stop_reason, t.error) for t in turns] == [(turn, f"end{ODD}", f"error {ODD}"), (failed, "error", ODD)]
        assert [t.turn_id for t in reopened.turn_page(sid, 0, 10, newest_first=True)] == [failed, turn]
        assert reopened.load_state(sid) == state
        assert reopened.usage(sid) == [usage]
        assert reopened.history(fork) == entries
    finally:
        reopened.close()


def test_sessions_list_in_code_point_order_like_the_memory_store(postgres_url):
    """bytea compares bytes, and UTF-8's byte order is code point order: the cursor agrees with MemoryStore's."""
    ids = ["a", "b", "\x00", "é", "\udce9", "\ud7ff", "\ue000", "\U0001f600", "\uffff", "z\x00", "z"]
    memory, store = MemoryStore(), PostgresStore(postgres_url)
    try:
        for n, sid in enumerate(ids):
            for target in (memory, store):
                target.save_session(SessionRecord(sid, "/w", updated_at=float(n % 3)))
        expected = [r.session_id for r in memory.list_sessions()]
        assert [r.session_id for r in store.list_sessions()] == expected
        for cursor in [(1.0, "\udce9"), (2.0, "\U0001f600"), (0.0, "z")]:
            assert [r.session_id for r in store.list_sessions(after=cursor, limit=3)] == \
                [r.session_id for r in memory.list_sessions(after=cursor, limit=3)]
    finally:
        store.close()


def test_records_the_server_would_refuse_are_refused_alone_before_any_statement(postgres_url, caplog):
    """A raw newline, an int no bigint holds, a turn begun twice, an id over an index entry's size:
    each is dropped and said at ERROR, once, and every write around them is stored."""
    store = PostgresStore(postgres_url)
    try:
        store.save_session(SessionRecord("before", "/w"))
        store.begin_turn("before", "t", 1.0, [b'{"ok":1}'])
        store.append_history("before", "t", [b'{"raw\nnewline":1}'])
        store.record_usage(UsageRecord("before", "r", "end_turn", 1.0, 1.0, 1 << 64, 0))
        store.begin_turn("before", "t", 2.0, [b'{"again":1}'])
        store.save_session(SessionRecord("x" * (postgres.MAX_KEY_BYTES + 1), "/w"))
        store.save_session(SessionRecord("after", "/w"))
        store.sync()
        assert store.failed_writes == 4 and store.retries == 0
        assert {r.session_id for r in store.list_sessions()} == {"before", "after"}
        assert store.history("before") == [b'{"ok":1}']
        assert [t.complete for t in store.turns("before")] == [False]  # the refused piece marks it
        assert store.usage() == []
    finally:
        store.close()
    assert sum("dropped a" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR) == 4


def test_a_record_the_server_refuses_mid_transaction_is_dropped_alone_on_the_retry(postgres_url, monkeypatch, caplog):
    """A statement the server refuses aborts its whole transaction: the transaction is retried with
    a savepoint per write, which drops that record alone."""
    monkeypatch.setattr(postgres, "_INT64", (-(1 << 80), 1 << 80))  # let an out-of-range int reach the server
    store = PostgresStore(postgres_url)
    try:
        store.save_session(SessionRecord("before", "/w"))
        store.record_usage(UsageRecord("before", "r", "end_turn", 1.0, 1.0, 1 << 64, 0, usage_id="bad"))
        store.record_usage(UsageRecord("before", "r", "end_turn", 1.0, 1.0, 1, 0, usage_id="good"))
        store.save_session(SessionRecord("after", "/w"))
        store.sync()
        assert store.failed_writes == 1 and store.retries == 1
        assert {r.session_id for r in store.list_sessions()} == {"before", "after"}
        assert [u.usage_id for u in store.usage()] == ["good"]
        store.save_session(SessionRecord("later", "/w"))  # later transactions take no savepoints
        store.sync()
        assert store.load_session("later") is not None and store.retries == 1
    finally:
        store.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "NumericValueOutOfRange" in errors[0], errors


# -- history -----------------------------------------------------------------------------------------
def _write_conversation(stores, sessions=("s", "other")) -> None:
    """Turns of many small rows (PIECE_ROW_BYTES is tiny here), two sessions interleaved."""
    for n in range(6):
        for sid in sessions:
            turn = f"{sid}-turn-{n}"
            prompt = [f'{{"p":{n},"s":"{sid}"}}'.encode()]
            for store in stores:
                store.begin_turn(sid, turn, float(n), prompt)
            for piece in range(n * 3):
                updates = [f'{{"t":{n},"piece":{piece},"u":{u},"pad":"{"x" * (u * 7 % 23)}"}}'.encode() for u in range(piece % 4 + 1)]
                for store in stores:
                    store.append_history(sid, turn, updates)
            if n != 5:  # the last turn of each session still runs
                for store in stores:
                    store.end_turn(sid, turn, TurnOutcome("end_turn"))


def _pages(store, sid, max_entries, max_bytes, turn_id=None):
    pages, after = [], None
    while True:
        page = store.history_page(sid, after, max_entries, max_bytes, turn_id)
        pages.append([(e.turn_id, e.update) for e in page.entries])
        if page.after is None:
            return pages
        assert page.entries, "a page with more to come always moves on"
        after = page.after


def test_history_pages_tiny_across_many_rows_as_the_other_stores_page(postgres_url, tmp_path, monkeypatch):
    monkeypatch.setattr(statedb, "PIECE_ROW_BYTES", 60)  # a piece of several updates is split in rows
    memory = MemoryStore()
    sqlite = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    store = PostgresStore(postgres_url)
    try:
        _write_conversation([memory, sqlite, store])
        store.sync()
        assert _history_rows(postgres_url) > 150  # many rows, most holding one update or two
        expected = memory.history("s")
        assert store.history("s") == expected == sqlite.history("s")
        for max_entries, max_bytes in [(1, 1 << 20), (2, 1 << 20), (3, 45), (7, 10), (1000, 100), (5, 1)]:
            pages = _pages(store, "s", max_entries, max_bytes)
            assert pages == _pages(memory, "s", max_entries, max_bytes) == _pages(sqlite, "s", max_entries, max_bytes)
            assert [update for page in pages for _, update in page] == expected
        for turn in ("s-turn-0", "s-turn-4", "s-turn-5", "missing"):
            assert _pages(store, "s", 2, 80, turn) == _pages(memory, "s", 2, 80, turn) == _pages(sqlite, "s", 2, 80, turn)
        assert store.turn_page("s", 1, 2, newest_first=True) == memory.turn_page("s", 1, 2, newest_first=True)
        # A fork pages through its source's rows, then its own.
        for target in (memory, sqlite, store):
            target.fork_history("s", "f")
            target.begin_turn("f", "f-turn", 9.0, [b'{"f":0}'])
            target.append_history("f", "f-turn", [f'{{"f":{n},"pad":"{"y" * n}"}}'.encode() for n in range(1, 30)])
        store.sync()
        for max_entries, max_bytes in [(1, 1 << 20), (4, 70), (1000, 1 << 20)]:
            assert _pages(store, "f", max_entries, max_bytes) == _pages(memory, "f", max_entries, max_bytes) \
                == _pages(sqlite, "f", max_entries, max_bytes)
        for turn in ("s-turn-3", "f-turn"):
            assert _pages(store, "f", 3, 1 << 20, turn) == _pages(memory, "f", 3, 1 << 20, turn) == _pages(sqlite, "f", 3, 1 << 20, turn)
    finally:
        store.close()
        sqlite.close()


class _CountingConnection:
    """A connection whose fetched result sizes are recorded, to see how much a page reads."""

    def __init__(self, conn, fetched: list[int]) -> None:
        self._conn = conn
        self._fetched = fetched

    def execute(self, *args, **kwargs):
        cursor = self._conn.execute(*args, **kwargs)
        fetched = self._fetched

        class Counted:
            statusmessage = cursor.statusmessage

            def fetchall(self):
                rows = cursor.fetchall()
                fetched.append(len(rows))
                return rows

            def fetchone(self):
                return cursor.fetchone()

        return Counted()

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_a_history_page_fetches_a_bounded_number_of_rows_whatever_the_sessions_length(postgres_url, monkeypatch):
    monkeypatch.setattr(statedb, "PIECE_ROW_BYTES", 1)  # one update a row
    db = PostgresOpener(postgres_url).open()
    try:
        db.begin_write()
        db.begin_turn("s", "t", 1.0, [b'{"n":-1}'])
        for n in range(40):
            db.append_history("s", "t", [f'{{"n":{n},"k":{k}}}'.encode() for k in range(10)])
        db.end_turn("s", "t", TurnOutcome("end_turn"))
        db.commit()
        fetched: list[int] = []
        db.conn = _CountingConnection(db.conn, fetched)
        page = db.history_page("s", None, 1, 1 << 20)
        assert len(page.entries) == 1 and max(fetched) <= 4, fetched
        page = db.history_page("s", page.after, 3, 1 << 20)
        assert [e.update for e in page.entries] == [b'{"n":0,"k":0}', b'{"n":0,"k":1}', b'{"n":0,"k":2}']
        fetched.clear()
        assert len(db.history("s")) == 401
        assert max(fetched) <= postgres.HISTORY_FETCH_ROWS < 401, fetched
    finally:
        db.conn = getattr(db.conn, "_conn", db.conn)
        db.close()


def test_a_fork_reads_its_sources_history_rows_and_copies_none(postgres_url):
    memory, store = MemoryStore(), PostgresStore(postgres_url)
    try:
        for target in (memory, store):
            target.save_session(SessionRecord("src", "/w"))
            for n in range(3):
                target.begin_turn("src", f"t{n}", float(n), [f'{{"prompt":{n}}}'.encode()])
                target.append_history("src", f"t{n}", [f'{{"reply":{n},"k":{k}}}'.encode() for k in range(4)])
                if n < 2:  # t2 still runs: a fork leaves it out
                    target.end_turn("src", f"t{n}", TurnOutcome("end_turn"))
        store.sync()
        rows = _history_rows(postgres_url)
        for target in (memory, store):
            target.fork_history("src", "fork")
        store.sync()
        assert _history_rows(postgres_url) == rows  # nothing copied
        assert store.history("fork") == memory.history("fork") == store.history("src")[:10]
        assert [t.turn_id for t in store.turns("fork")] == ["t0", "t1"]
        for target in (memory, store):  # the fork goes on on its own; the source too
            target.begin_turn("fork", "t9", 9.0, [b'{"fork":9}'])
            target.append_history("src", "t2", [b'{"late":2}'])
            target.append_history("fork", "t1", [b'{"refused":1}'])  # a copied turn takes no more history
            target.fork_history("fork", "grandchild")
        assert store.history("fork") == memory.history("fork")
        assert store.history("src") == memory.history("src")
        assert store.failed_writes == memory.failed_writes == 1
        assert store.history("grandchild") == memory.history("grandchild") == memory.history("fork")[:10]
        assert _pages(store, "fork", 3, 1 << 20) == _pages(memory, "fork", 3, 1 << 20)
        assert _pages(store, "fork", 2, 1 << 20, "t1") == _pages(memory, "fork", 2, 1 << 20, "t1")
        store.delete_session("src")
        store.sync()
        assert store.history("fork") == memory.history("fork")  # the rows it reads outlive their session
        # src's rows of t0 and t1 (the fork's turns read them) and the fork's t9 are left; src's t2 went.
        assert _history_rows(postgres_url) == 4 + 1
    finally:
        store.close()


def test_a_fork_deleted_after_its_source_frees_the_rows_they_shared(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        store.append_turn("src", [b'{"a":1}'] * 40, "end_turn")  # one row: PIECE_ROW_BYTES is large
        for n in range(40):  # more rows than one purge step deletes
            store.append_turn("src", [f'{{"n":{n}}}'.encode()], "end_turn")
        store.fork_history("src", "fork")
        store.delete_session("src")
        store.sync()
        assert _history_rows(postgres_url) == 41  # the fork reads them all
        assert store.history("fork") == [b'{"a":1}'] * 40 + [f'{{"n":{n}}}'.encode() for n in range(40)]
        store.delete_session("fork")  # the last turns reading src's rows: they go, in steps
        store.sync()
        _wait_for(lambda: _history_rows(postgres_url) == 0, what="the shared rows to be purged")
    finally:
        store.close()


def test_history_rows_left_by_a_process_ended_before_its_purge_go_at_the_next_start(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        for n in range(50):
            store.append_turn("gone", [f'{{"n":{n}}}'.encode()], "end_turn")
        store.append_turn("kept", [b'{"k":1}'], "end_turn")
        store.sync()
    finally:
        store.close()
    with _direct(postgres_url) as conn:  # what a process killed between the delete's commit and its purge leaves
        conn.execute("DELETE FROM acp_green.turns WHERE session_id = %s", (b"gone",))
    assert _history_rows(postgres_url) == 51
    restarted = PostgresStore(postgres_url)  # finds them unreferenced, and purges them between batches
    try:
        _wait_for(lambda: _history_rows(postgres_url) == 1, what="the orphaned rows to be purged")
        assert restarted.history("kept") == [b'{"k":1}']
    finally:
        restarted.close()


# -- session locks -----------------------------------------------------------------------------------
def test_two_stores_own_sessions_one_at_a_time_naming_the_holder(postgres_url):
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        first.own_new_session("s")
        first.save_session(SessionRecord("s", "/w", title="v1"))
        assert first.claim_session("s") is None  # ours already
        holder = second.claim_session("s")
        assert holder is not None and f"acp-green pid {os.getpid()} on " in holder and "from 127.0.0.1, since " in holder
        for n in range(30):
            first.save_session(SessionRecord("s", "/w", title=f"v{n}", updated_at=float(n)))
        first.release_session("s")
        _wait_for(lambda: second.claim_session("s") is None, what="the release")
        assert second.load_session("s").title == "v29"  # the next owner reads every write
        assert first.claim_session("s") is not None
        assert first.claim_session("t") is None
        assert second.claim_session("t") is not None
    finally:
        first.close()
    try:
        assert second.claim_session("t") is None  # a closed store lets its sessions go
    finally:
        second.close()


def test_a_release_inside_a_transaction_waits_for_its_commit_and_a_rollback_keeps_it(postgres_url):
    owner, other = PostgresOpener(postgres_url).open(), PostgresOpener(postgres_url).open()
    try:
        assert owner.lock_session("s") is None
        owner.begin_write()
        owner.save_session(SessionRecord("s", "/w", title="v1"))
        owner.commit()
        owner.begin_write()
        owner.save_session(SessionRecord("s", "/w", title="v2"))
        owner.unlock_session("s")
        assert other.lock_session("s") is not None  # not before the commit...
        assert other.load_session("s").title == "v1"
        owner.rollback()  # ...and not after a rollback: the release is retried with the writes
        assert other.lock_session("s") is not None
        owner.begin_write()
        owner.save_session(SessionRecord("s", "/w", title="v2"))
        owner.unlock_session("s")
        owner.commit()
        assert other.lock_session("s") is None  # once committed, the next owner reads v2
        assert other.load_session("s").title == "v2"
        assert owner.lock_session("s") is not None
        # Released then claimed again in one transaction: it stays ours after the commit.
        assert owner.lock_session("u") is None
        owner.begin_write()
        owner.unlock_session("u")
        assert owner.lock_session("u") is None
        owner.commit()
        assert other.lock_session("u") is not None
    finally:
        owner.close()
        other.close()


# -- schema ------------------------------------------------------------------------------------------
def test_agents_starting_together_migrate_once_and_a_newer_schema_is_refused(postgres_url):
    opened: list[object] = []

    def open_one() -> None:
        try:
            opened.append(PostgresOpener(postgres_url).open())
        except Exception as exc:  # noqa: BLE001 - reported below
            opened.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(db, PostgresDatabase) for db in opened), opened
    for db in opened:
        db.close()
    with _direct(postgres_url) as conn:
        assert conn.execute("SELECT version FROM acp_green.schema_version").fetchall() == [(postgres.SCHEMA_VERSION,)]
        conn.execute("UPDATE acp_green.schema_version SET version = %s", (postgres.SCHEMA_VERSION + 1,))
    with pytest.raises(StoreOpenError, match=f"has schema {postgres.SCHEMA_VERSION + 1}; this acp-green knows"):
        PostgresOpener(postgres_url).open()


def test_the_name_hides_the_password():
    assert redacted("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redacted("postgresql://u:p%40ss@h1,h2/db?sslmode=require&password=x") == \
        "postgresql://u:***@h1,h2/db?sslmode=require&password=***"
    assert redacted("postgres://h/db") == "postgres://h/db"
    assert redacted("host=h password='a b' user=u") == "host=h password=*** user=u"
    assert PostgresOpener("postgresql://u:s3cret@h/db").name == "postgresql://u:***@h/db"


def test_importing_the_package_and_the_module_does_not_import_psycopg():
    import subprocess
    import sys

    code = ("import sys; import acp_green, acp_green.store.postgres, acp_green.store.statedir; "
            "print('psycopg' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


# -- faults: a proxy the test cuts -------------------------------------------------------------------
class CuttableProxy:
    """A TCP proxy (greenlets on the test's hub) in front of the server; `cut` closes every
    connection through it and refuses new ones until `restore`. `cut(server_notices=False)`
    closes only the agent's side, as a network cut the server has not noticed: its process for
    that connection lives on (with its locks) until it is ended."""

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname, parts.port or 5432)
        self._pairs: set[tuple[object, object]] = set()
        self._stale: list[int] = []  # descriptors of server-side sockets a cut left open
        self._server = StreamServer(("127.0.0.1", 0), self._handle)
        self._server.start()
        self.port = self._server.server_port
        self.url = urlunsplit(parts._replace(netloc=f"{parts.username}:{parts.password}@127.0.0.1:{self.port}"))

    def _handle(self, client, _address) -> None:
        try:
            upstream = gsocket.create_connection(self.upstream)
        except OSError:
            return
        pair = (client, upstream)
        self._pairs.add(pair)
        back = gevent.spawn(self._pipe, upstream, client)
        try:
            self._pipe(client, upstream)
            back.join()
        finally:
            self._pairs.discard(pair)

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self, server_notices: bool = True) -> None:
        self._server.close()  # new connections are refused
        for client, upstream in list(self._pairs):
            if server_notices:
                _shutdown(upstream)
            else:
                self._stale.append(upstream.detach())  # the pipes let go of it; the descriptor stays open
            _shutdown(client)
        _wait_for(lambda: not self._pairs, 5.0, "the proxied connections to close")

    def restore(self) -> None:
        self._server = StreamServer(("127.0.0.1", self.port), self._handle)
        self._server.start()

    def close(self) -> None:
        self._server.close()
        for client, upstream in list(self._pairs):
            _shutdown(client)
            _shutdown(upstream)
        for fd in self._stale:
            os.close(fd)


def _shutdown(sock) -> None:
    try:
        sock.shutdown(gsocket.SHUT_RDWR)
    except OSError:
        pass


@pytest.fixture
def proxy(postgres_url):
    made = CuttableProxy(postgres_url)
    yield made
    made.close()


def _lock_holders(url: str) -> dict[int, str]:
    """Advisory locks held on the database: key -> holder's application_name."""
    with _direct(url) as conn:
        rows = conn.execute(
            """SELECT (l.classid::bigint << 32) | l.objid::bigint, a.application_name FROM pg_locks l
               JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())""").fetchall()
    return {(key if key < 1 << 63 else key - (1 << 64)): name for key, name in rows}


def test_writes_made_while_the_server_is_cut_off_wait_and_reach_it_in_order(postgres_url, proxy, caplog):
    store = PostgresStore(proxy.url)
    other = PostgresStore(postgres_url)  # another agent, straight to the server
    try:
        store.own_new_session("mine")
        store.save_session(SessionRecord("mine", "/w", title="before"))
        assert store.claim_session("lent") is None
        store.begin_turn("mine", "t1", 1.0, [b'{"n":0}'])
        store.sync()
        assert set(_lock_holders(postgres_url)) == {postgres.session_lock_key("mine"), postgres.session_lock_key("lent")}

        proxy.cut()
        expected = [b'{"n":0}']
        for n in range(1, 40):
            store.append_history("mine", "t1", [f'{{"n":{n}}}'.encode()])
            expected.append(f'{{"n":{n}}}'.encode())
        store.end_turn("mine", "t1", TurnOutcome("end_turn"))
        store.save_session(SessionRecord("mine", "/w", title="during"))
        store.save_session(SessionRecord("new", "/w", title="made during the cut"))
        store.record_usage(UsageRecord("mine", "r1", "end_turn", 1.0, 2.0, 3, 4, usage_id="u1"))
        store.save_state("mine", b'{"k":1}')
        _wait_for(lambda: store.waiting_writes > 0 and store.retries >= 2, what="the writes to wait")
        # Reads meanwhile: a session saved during the cut is answered from the waiting writes...
        assert store.load_session("mine").title == "during"
        assert store.load_session("new").title == "made during the cut"
        # ...and what only the server can answer fails, at once rather than at READ_TIMEOUT.
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.history("mine")
        assert time.monotonic() - started < READ_TIMEOUT / 2
        # The server dropped the cut connection's locks: another agent can take a session meanwhile.
        _wait_for(lambda: other.claim_session("lent") is None, what="the lost connection's locks to go")

        proxy.restore()
        store.sync()  # answered once the writes that waited are written
        assert store.waiting_writes == 0 and store.failed_writes == 0
        assert other.history("mine") == expected
        assert [(t.turn_id, t.stop_reason) for t in other.turns("mine")] == [("t1", "end_turn")]
        assert other.load_session("mine").title == "during"
        assert other.load_session("new").title == "made during the cut"
        assert [u.usage_id for u in other.usage()] == ["u1"]
        assert other.load_state("mine") == b'{"k":1}'
        # The session locks were taken back on the new connection; the one taken meanwhile was not.
        holder = other.claim_session("mine")
        assert holder is not None and f"pid {os.getpid()}" in holder
        assert store.claim_session("lent") is not None
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("session 'lent' was taken by" in message for message in errors), errors
    finally:
        store.close()
        other.close()


def test_reads_come_back_after_an_outage_with_no_write_waiting(postgres_url, proxy):
    store = PostgresStore(proxy.url)
    try:
        store.save_session(SessionRecord("s", "/w"))
        store.sync()
        proxy.cut()
        with pytest.raises(StoreUnavailable):
            store.list_sessions()
        proxy.restore()
        assert [r.session_id for r in store.list_sessions()] == ["s"]
    finally:
        store.close()


def test_a_lost_connections_server_process_still_holding_the_locks_is_ended(postgres_url, proxy):
    """A network cut the server has not noticed: its process for the lost connection still holds
    this agent's locks; reconnecting ends it and takes them back."""
    store = PostgresStore(proxy.url)
    try:
        assert store.claim_session("s") is None
        holders = _lock_holders(postgres_url)
        proxy.cut(server_notices=False)
        assert _lock_holders(postgres_url) == holders  # still held by the stale process
        with pytest.raises(StoreUnavailable):
            store.list_sessions()
        proxy.restore()
        assert store.list_sessions() == []  # reconnects
        assert _lock_holders(postgres_url) == {postgres.session_lock_key("s"): pg_connection.application_name()}
        with _direct(postgres_url) as conn:  # one connection of this agent's: the stale one was ended
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                (pg_connection.application_name(),)).fetchone()[0] == 1
    finally:
        store.close()


def test_a_session_taken_while_the_connection_was_lost_is_written_no_more(postgres_url):
    """The server ended this agent's connection (pg_terminate_backend: as a server restart or a cut
    it noticed), so its locks went, and another agent took a session meanwhile: once reconnected,
    the first agent's writes to that session are dropped (counted), never mixed into the other's."""
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        first.own_new_session("s")
        first.save_session(SessionRecord("s", "/w", title="first"))
        first.sync()
        key = postgres.session_lock_key("s")
        with _direct(postgres_url) as conn:
            conn.execute(
                """SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
                   AND ((classid::bigint << 32) | objid::bigint) = %s""", (key if key >= 0 else key + (1 << 64),))
        wait_until(lambda: second.claim_session("s") is None, what="the other store to take the session")
        second.save_session(SessionRecord("s", "/w", title="second"))
        second.sync()
        dropped = first.failed_writes
        first.save_session(SessionRecord("s", "/w", title="first again"))
        first.sync()  # reconnects, cannot take the session back: the save is dropped
        assert first.failed_writes == dropped + 1
        assert second.load_session("s").title == "second"
    finally:
        first.close()
        second.close()


def test_the_inspection_commands_create_nothing_on_a_database_no_agent_used(postgres_url):
    """`acp-green sessions list --store URL` on a database without our schema (a mistyped name):
    the empty answer and a note naming it without its password; no schema or table is made."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "acp_green", "sessions", "list", "--json", "--store", postgres_url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and "nothing is stored in" in done.stderr and ":***@" in done.stderr
    with _direct(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'acp_green'").fetchone()[0] == 0


def test_a_request_the_store_cannot_answer_gets_one_clear_error_and_no_traceback(postgres_url, proxy, inprocess, caplog):
    """The server cut off: session/list is answered -32603 with data.reason store_unavailable
    naming the store without its password, and no traceback is logged for it; once the server
    is back the same request is answered."""
    from acp_green.demo import DemoAgent

    harness = inprocess(DemoAgent(), store=PostgresStore(proxy.url))
    client = harness.client
    client.initialize()
    assert client.call("session/list", {}) == {"sessions": []}
    proxy.cut()
    with caplog.at_level("ERROR"):
        answer = client.request("session/list", {}).response()
    assert answer["error"]["code"] == -32603 and answer["error"]["data"]["reason"] == "store_unavailable", answer
    assert "***" in answer["error"]["message"] and "\n" not in answer["error"]["message"]
    assert "Traceback" not in caplog.text and "session/list" not in caplog.text
    proxy.restore()
    wait_until(lambda: "result" in client.request("session/list", {}).response(), what="the list once the server is back")


@settings(max_examples=300, deadline=None)
@given(user=st.text(alphabet=st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=12),
       password=st.text(min_size=4, max_size=40).filter(
           lambda p: p.strip() == p and "***" not in p and quote(p, safe="") not in "postgresql://@db.example/acp?password="),
       query_password=st.booleans())
def test_no_password_of_any_shape_survives_in_the_name(user, password, query_password):
    """Whatever the password holds (percent-encoded in the URL, or as a query parameter), the name
    used in every log line and error shows *** in its place and never the password itself."""
    encoded = quote(password, safe="")
    url = (f"postgresql://{quote(user, safe='')}@db.example/acp?password={encoded}" if query_password
           else f"postgresql://{quote(user, safe='')}:{encoded}@db.example/acp")
    shown = redacted(url)
    assert "***" in shown and encoded not in shown.replace(quote(user, safe=""), "", 1)
