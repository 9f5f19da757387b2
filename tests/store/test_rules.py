"""Rules of the store, each proved directly on SqliteStore / statedb / open_store and the usage
report: what is handed to the store thread at once, how transactions begin, busy databases,
the write queued with close, durability pragmas, and the fallbacks to memory (S16)."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time

import gevent
import pytest
from click.testing import CliRunner

from acp_green.cli import cli
from acp_green.demo import DemoAgent
from acp_green.store.session_record import SessionRecord
from acp_green.store import MemoryStore, statedb
from acp_green.store.sqlite import SqliteStore
from acp_green.store.threaded import ThreadedStore
from acp_green.store.statedb import SCHEMA_VERSION, db_path
from acp_green.store.statedir import open_store
from acp_green.usage import UsageRecord
from tests.helpers import wait_until


def _usage(session_id: str = "s", request_id: str = "1") -> UsageRecord:
    return UsageRecord(session_id, request_id, "end_turn", 0.0, 0.0, 3, 4)


def _rows(path: str, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path, timeout=5)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("op", ["record_usage", "append_turn", "delete_session"])
def test_S16_usage_turns_and_deletes_are_handed_to_the_store_thread_at_once(tmp_path, op):
    """S16: a usage record, a finished turn and a delete reach the store thread the moment they
    are written, not on the hub's next timer: with the hub blocked right after the write (as if
    the process were about to be killed), another connection still sees it committed."""
    store = open_store(str(tmp_path / "state"))
    assert isinstance(store, ThreadedStore)
    path = db_path(str(tmp_path / "state"))
    try:
        if op == "record_usage":
            store.record_usage(_usage())
            query, expected = "SELECT count(*) FROM usage", [(1,)]
        elif op == "append_turn":
            store.append_turn("s", [b'{"sessionUpdate":"agent_message_chunk"}'], "end_turn")
            query, expected = "SELECT count(*) FROM turns", [(1,)]
        else:
            store.save_session(SessionRecord("s", "/tmp"))
            store.sync()
            store.delete_session("s")
            query, expected = "SELECT count(*) FROM sessions", [(0,)]
        deadline = time.monotonic() + 10
        while _rows(path, query) != expected and time.monotonic() < deadline:
            time.sleep(0.01)  # blocks the hub on purpose: no gevent timer may run
        assert _rows(path, query) == expected, f"{op} waited on the hub instead of going to the store thread"
    finally:
        store.close()


def test_write_transactions_begin_immediate(tmp_path):
    """Layout: every write batch takes the write lock up front (BEGIN IMMEDIATE), so a batch
    that reads before it writes never has to upgrade a read lock (no upgrade deadlock, no
    SQLITE_BUSY_SNAPSHOT halfway through). Checked with the store's sqlite trace hook."""
    trace: list[str] = []
    store = open_store(str(tmp_path / "state"), trace=trace.append)
    try:
        trace.clear()
        store.save_session(SessionRecord("s", "/tmp"))
        store.append_turn("s", [b"{}"], "end_turn")
        store.record_usage(_usage())
        store.sync()
    finally:
        store.close()
    begins = [s.strip() for s in trace if s.strip().upper().startswith("BEGIN")]
    assert begins, trace
    assert all(s.upper() == "BEGIN IMMEDIATE" for s in begins), begins


def test_busy_database_is_retried_not_abandoned(tmp_path, monkeypatch, caplog):
    """Layout: a database another process holds locked is waited for and retried; the store does
    not fall back to memory, and the write lands once the lock is released."""
    monkeypatch.setattr(statedb, "BUSY_TIMEOUT_MS", 50)  # each attempt waits 50 ms, not 5 s
    caplog.set_level(logging.INFO, logger="acp_green.store.waiting_writes")
    state = str(tmp_path / "state")
    store = open_store(state)
    assert isinstance(store, ThreadedStore)
    locker = sqlite3.connect(db_path(state), timeout=0, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        store.record_usage(_usage())
        wait_until(lambda: store.degraded or "busy; retrying" in caplog.text, what="the store to meet the lock")
        locker.execute("ROLLBACK")
        store.sync()
        assert not store.degraded, "a busy database was abandoned for memory"
        assert _rows(db_path(state), "SELECT count(*) FROM usage") == [(1,)]
    finally:
        locker.close()
        store.close()


def test_write_queued_together_with_close_is_not_lost(tmp_path):
    """S16: a write still waiting on the hub when close() is called goes to the store thread in the
    same batch as the close, and is committed: save, close, reopen, and it is there."""
    gate_armed, entered, release = threading.Event(), threading.Event(), threading.Event()

    def trace(sql: str) -> None:  # runs on the store thread
        if gate_armed.is_set() and sql.strip().upper() == "BEGIN IMMEDIATE":
            gate_armed.clear()
            entered.set()
            release.wait(10)

    state = str(tmp_path / "state")
    store = open_store(state, trace=trace)
    gate_armed.set()
    store.record_usage(_usage())  # handed over at once; the thread now holds in the trace hook
    wait_until(entered.is_set, what="the store thread to start a batch")
    store.save_session(SessionRecord("last", "/tmp"))  # waits on the hub's write timer
    closer = gevent.spawn(store.close)
    gevent.sleep(0)  # close() flushed the save and queued itself behind it, both in the queue now
    release.set()
    closer.join(timeout=30)
    assert closer.dead
    reopened = open_store(state)
    try:
        assert isinstance(reopened, ThreadedStore)
        assert reopened.load_session("last") is not None
        assert len(reopened.usage()) == 1
    finally:
        reopened.close()


def test_connections_are_wal_with_synchronous_normal(tmp_path):
    """S16: the store's connection runs in WAL mode with synchronous=NORMAL: a committed turn
    survives a crash of the process (OFF would not guarantee it)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    conn = statedb.connect(db_path(str(state)))
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        conn.close()


def _warned_memory(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "memory" in r.getMessage())


def test_state_dir_under_a_regular_file_falls_back_to_memory(tmp_path, caplog):
    """Layout: an unusable state directory (its parent is a regular file: the OS refuses with
    NotADirectoryError, an OSError) falls back to memory with a warning."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING):
        store = open_store(str(blocker / "state"))
    assert isinstance(store, MemoryStore)
    assert "unusable" in _warned_memory(caplog)


def _newer_schema_state(tmp_path) -> str:
    state = str(tmp_path / "state")
    store = open_store(state)
    store.record_usage(_usage())
    store.close()
    conn = sqlite3.connect(db_path(state), isolation_level=None)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    return state


def test_newer_schema_falls_back_to_memory_with_a_clear_warning(tmp_path, caplog):
    """A database written by a newer acp-green (higher schema version) is not opened: memory, and a
    warning that names the schema."""
    state = _newer_schema_state(tmp_path)
    with caplog.at_level(logging.WARNING):
        store = open_store(state)
    assert isinstance(store, MemoryStore)
    warning = _warned_memory(caplog)
    assert "schema" in warning and str(SCHEMA_VERSION + 1) in warning, warning


def test_usage_command_refuses_a_newer_schema(tmp_path):
    """`acp-green usage` on a database of a newer schema fails clearly (exit 1, names the schema)
    instead of reading tables it does not know."""
    state = _newer_schema_state(tmp_path)
    result = CliRunner().invoke(cli, ["usage", "--json", "--state-dir", state])
    assert result.exit_code == 1, result.output
    assert "schema" in result.output and "Traceback" not in result.output


def test_usage_report_keeps_input_and_output_bytes_apart_S16(inprocess, tmp_path):
    """S16: the usage ledger and `acp-green usage` count input and output bytes separately, checked
    on prompts of known, different sizes."""
    state = str(tmp_path / "state")
    harness = inprocess(DemoAgent(), state_dir=state)
    client = harness.client
    client.initialize()
    session_id = client.new_session()
    assert client.prompt(session_id, "/stream 3 10").result() == {"stopReason": "end_turn"}  # in 12, out 30
    assert client.prompt(session_id, "hello").result() == {"stopReason": "end_turn"}  # in 5, out 5
    harness.finish()
    result = CliRunner().invoke(cli, ["usage", "--json", "--records", "--state-dir", state])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [(r["inputBytes"], r["outputBytes"]) for r in report["records"]] == [(12, 30), (5, 5)]
    assert (report["totals"]["inputBytes"], report["totals"]["outputBytes"]) == (17, 35)
    [per_session] = report["sessions"]
    assert (per_session["inputBytes"], per_session["outputBytes"]) == (17, 35)
