"""A store failure the disk may recover from (full, I/O error, the write lock held elsewhere) never
turns persistence off: what could not be written waits, is retried with backoff and is written
once the disk works again; only a database unusable for good (corrupt, not a database) is
replaced by memory. Reads never wait on another process's lock nor behind a long delete.

S10 and S16: control never waits behind the store's writes, and what waits through a disk failure (usage records included) is written once the disk works.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator

import gevent
import pytest

from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.operations import PURGE_ROWS
from acp_green.store.sqlite import SqliteDatabase

is_unusable = SqliteDatabase.is_unusable.__get__(object.__new__(SqliteDatabase))
from acp_green.store.turns import TurnOutcome
from acp_green.usage import UsageRecord
from tests.helpers import wait_until

CHUNK = b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}'


def usage(session_id: str) -> UsageRecord:
    return UsageRecord(session_id, "1", "end_turn", 0.0, 0.0, 3, 4)


def reopened(path: str) -> tuple[list[str], list[bytes], list[str]]:
    """Sessions, history of "late" and usage as a fresh store (a restart) finds them."""
    store = SqliteStore(path)
    try:
        return [r.session_id for r in store.list_sessions()], store.history("late"), [u.session_id for u in store.usage()]
    finally:
        store.close()


def write_a_session(store: SqliteStore, session_id: str) -> None:
    store.save_session(SessionRecord(session_id, "/tmp", updated_at=time.time()))
    store.begin_turn(session_id, "t", 1.0, [CHUNK])
    store.end_turn(session_id, "t", TurnOutcome("end_turn"))
    store.record_usage(usage(session_id))


# -- disk full, simulated at the sqlite3 layer (runs anywhere) -----------------------------------
class DiskFull:
    """statedb.begin_turn fails as a full disk does (SQLITE_FULL) until `freed`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        real = statedb.begin_turn

        def begin_turn(conn, *args):
            if self.full:
                exc = sqlite3.OperationalError("database or disk is full")
                exc.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
                raise exc
            return real(conn, *args)

        monkeypatch.setattr(statedb, "begin_turn", begin_turn)


def test_a_full_disk_keeps_writes_waiting_and_writes_them_once_space_is_freed(tmp_path, monkeypatch, caplog):
    path = statedb.db_path(str(tmp_path / "state"))
    disk = DiskFull(monkeypatch)
    store = SqliteStore(path)
    try:
        write_a_session(store, "early")
        store.sync()
        disk.full = True
        write_a_session(store, "late")
        wait_until(lambda: store.retries >= 2, what="the store to retry the full disk")
        # Not given up: the writes wait, the stats say so, reads still answer (the waiting save applied).
        assert not store.degraded and store.waiting_writes >= 4
        assert store.health() == {"storeInMemory": False, "storeWaitingWrites": store.waiting_writes, "storeRetries": store.retries}
        assert {r.session_id for r in store.list_sessions()} == {"early", "late"}
        assert store.load_session("late") is not None
        assert "cannot be written now" in caplog.text
        disk.full = False  # space freed
        store.sync()  # answers once the waiting writes are written
        assert store.waiting_writes == 0 and not store.degraded and store.failed_writes == 0
        write_a_session(store, "after")
    finally:
        store.close()
    sessions, history, used = reopened(path)
    assert set(sessions) == {"early", "late", "after"} and history == [CHUNK] and sorted(used) == ["after", "early", "late"]


def test_writes_the_disk_never_takes_are_counted_at_close(tmp_path, monkeypatch, caplog):
    path = statedb.db_path(str(tmp_path / "state"))
    disk = DiskFull(monkeypatch)
    monkeypatch.setattr("acp_green.store.waiting_writes.CLOSE_RETRY", 0.3)
    store = SqliteStore(path)
    disk.full = True
    write_a_session(store, "late")
    wait_until(lambda: store.retries >= 1, what="the store to meet the full disk")
    store.close()
    assert store.failed_writes == 4 and "they are lost" in caplog.text


def test_only_a_corrupt_database_is_unusable_for_good():
    def error(code: int) -> sqlite3.Error:
        exc = sqlite3.OperationalError("x")
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    assert is_unusable(error(sqlite3.SQLITE_CORRUPT)) and is_unusable(error(sqlite3.SQLITE_NOTADB))
    for code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
                 sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, 266):  # 266: SQLITE_IOERR_READ
        assert not is_unusable(error(code)), code


# -- disk full for real: a 3 MB tmpfs --------------------------------------------------------------
@contextlib.contextmanager
def tmpfs(path: str, size: str) -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the sqlite3-layer test above covers the logic)")
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", path], check=False)


def fill(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)


def test_a_real_full_filesystem_then_freed_loses_nothing(tmp_path):
    mount = str(tmp_path / "full")
    with tmpfs(mount, "3m"):
        path = statedb.db_path(os.path.join(mount, "state"))
        store = SqliteStore(path)
        try:
            write_a_session(store, "early")
            store.sync()
            fill(os.path.join(mount, "filler"))
            big = [CHUNK + b" " * 1000] * 200  # more than the few bytes left
            store.save_session(SessionRecord("late", "/tmp", updated_at=time.time()))
            store.begin_turn("late", "t", 1.0, big)
            store.end_turn("late", "t", TurnOutcome("end_turn"))
            store.record_usage(usage("late"))
            wait_until(lambda: store.retries >= 1, what="the store to meet the full filesystem")
            assert not store.degraded and store.waiting_writes > 0
            assert "late" in [r.session_id for r in store.list_sessions()]
            os.remove(os.path.join(mount, "filler"))
            store.sync()
            assert store.waiting_writes == 0 and not store.degraded
        finally:
            store.close()
        sessions, history, used = reopened(path)
    assert set(sessions) == {"early", "late"} and len(history) == 200 and sorted(used) == ["early", "late"]


# -- the write lock held by another process ---------------------------------------------------------
def test_a_write_lock_held_elsewhere_never_holds_reads_and_loses_nothing(tmp_path):
    """The reviewer's case, shortened from 80 s: while another connection holds the write lock,
    list and load answer at once (not after a busy timeout), a session created meanwhile is
    listed, and once the lock is released it is written and survives a restart."""
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        write_a_session(store, "early")
        store.sync()
        holder.execute("BEGIN IMMEDIATE")
        write_a_session(store, "late")
        wait_until(lambda: store.retries >= 1, what="the store to meet the lock")
        slowest = 0.0
        for _ in range(5):
            started = time.monotonic()
            listed = [r.session_id for r in store.list_sessions()]
            store.load_session("early")
            slowest = max(slowest, time.monotonic() - started)
            gevent.sleep(0.2)
        assert set(listed) == {"early", "late"}
        assert slowest < 1.0, slowest  # the old store waited 5 s per attempt, 60 s in all
        assert not store.degraded and store.waiting_writes > 0
        holder.execute("COMMIT")
        store.sync()
        assert store.waiting_writes == 0
    finally:
        holder.close()
        store.close()
    sessions, history, used = reopened(path)
    assert set(sessions) == {"early", "late"} and history == [CHUNK] and sorted(used) == ["early", "late"]


# -- a long delete ----------------------------------------------------------------------------------
def huge_session(path: str, rows: int) -> None:
    """A stored session whose history is `rows` rows of ~128 KiB."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    conn = statedb.connect(path)
    try:
        conn.execute("BEGIN")
        statedb.save_session(conn, SessionRecord("huge", "/tmp", updated_at=1.0))
        statedb.begin_turn(conn, "huge", "t", 1.0, [])
        update = b'{"sessionUpdate":"agent_message_chunk","x":"' + b"y" * 1000 + b'"}'
        for _ in range(rows):
            statedb.append_history(conn, "huge", "t", [update] * 120)
        statedb.save_session(conn, SessionRecord("other", "/tmp", updated_at=2.0))
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_delete_of_a_long_history_goes_in_steps_between_which_reads_are_served(tmp_path, monkeypatch):
    path = statedb.db_path(str(tmp_path / "state"))
    huge_session(path, 300)
    store = SqliteStore(path)
    steps: list[int] = []
    real = statedb.purge_history

    def purge_history(conn, session_id, max_rows):
        steps.append(max_rows)
        return real(conn, session_id, max_rows)

    monkeypatch.setattr(statedb, "purge_history", purge_history)
    try:
        store.delete_session("huge")
        started = time.monotonic()
        assert [r.session_id for r in store.list_sessions()] == ["other"]
        assert store.history("huge") == [] and store.turns("huge") == []
        first_read = time.monotonic() - started
        wait_until(lambda: len(steps) >= 300 // PURGE_ROWS, what="the purge to finish")
        store.sync()
    finally:
        store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM history").fetchone() == (0,)
    finally:
        conn.close()
    assert all(n == PURGE_ROWS for n in steps) and len(steps) >= 300 // PURGE_ROWS
    assert first_read < 2.0, first_read


def test_history_rows_a_killed_purge_left_behind_are_purged_at_the_next_start(tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    huge_session(path, 40)
    conn = statedb.connect(path)
    try:
        statedb.delete_session(conn, "huge", max_history_rows=0)  # as if killed right after the delete
    finally:
        conn.close()
    store = SqliteStore(path)
    try:
        def left() -> int:
            probe = sqlite3.connect(path, timeout=5)
            try:
                return probe.execute("SELECT count(*) FROM history").fetchone()[0]
            finally:
                probe.close()

        wait_until(lambda: left() == 0, what="the orphaned rows to be purged")
    finally:
        store.close()


def test_serve_on_a_full_filesystem_keeps_sessions_and_says_so_in_its_stats(launch, tmp_path):
    """The reviewer's case under the real CLI: a 3 MB tmpfs fills up; a session created then is
    kept waiting (`storeWaitingWrites` > 0, `storeRetries` > 0, not in memory for good); once
    space is freed it is written, and the next agent on the directory lists it."""
    mount = str(tmp_path / "full")
    with tmpfs(mount, "3m"):
        state = os.path.join(mount, "state")
        agent = launch("--state-dir", state)
        agent.initialize()
        early = agent.new_session()
        assert agent.prompt(early, "before").result() == {"stopReason": "end_turn"}
        agent.call("session/list", {})
        fill(os.path.join(mount, "filler"))
        late = agent.new_session()
        assert agent.prompt(late, "/stream 200 1000").result() == {"stopReason": "end_turn"}
        stats = agent.wait_for(lambda: (lambda s: s if s["storeRetries"] > 0 else None)(agent.call("_acp_green/stats", {})),
                               what="the store to meet the full filesystem")
        assert stats["storeWaitingWrites"] > 0 and stats["storeInMemory"] is False and stats["storeFailedWrites"] == 0, stats
        assert late in [s["sessionId"] for s in agent.call("session/list", {})["sessions"]]
        os.remove(os.path.join(mount, "filler"))
        agent.wait_for(lambda: agent.call("_acp_green/stats", {})["storeWaitingWrites"] == 0, what="the waiting writes to be written")
        assert agent.close() == 0
        assert b"cannot be written now" in bytes(agent.stderr) and b"is written again" in bytes(agent.stderr)
        agent = launch("--state-dir", state)
        agent.initialize()
        assert {early, late} <= {s["sessionId"] for s in agent.call("session/list", {})["sessions"]}
        assert agent.close() == 0


def test_writes_waiting_for_the_disk_are_bounded_further_ones_dropped_counted_said_once(tmp_path, monkeypatch, caplog):
    path = statedb.db_path(str(tmp_path / "state"))
    disk = DiskFull(monkeypatch)
    monkeypatch.setattr("acp_green.store.waiting_writes.WAITING_WRITES_LIMIT", 6)
    store = SqliteStore(path)
    try:
        disk.full = True
        write_a_session(store, "a")  # 4 writes: the begin_turn fails the batch
        wait_until(lambda: store.retries >= 1, what="the store to meet the full disk")
        store.load_session("a")  # a read: every write before it was handed over
        assert store.waiting_writes == 4
        store.save_session(SessionRecord("b", "/tmp"))
        store.save_session(SessionRecord("c", "/tmp"))  # 6: at the limit, kept
        store.load_session("a")  # a read: everything before it was handed over
        assert store.waiting_writes == 6 and store.failed_writes == 0
        for name in ("d", "e", "f"):
            store.save_session(SessionRecord(name, "/tmp"))
        store.load_session("a")
        assert store.waiting_writes == 6 and store.failed_writes == 3
        assert len([r for r in caplog.records if "already wait" in r.getMessage()]) == 1
        disk.full = False
        store.sync()
        assert {r.session_id for r in store.list_sessions()} == {"a", "b", "c"}
    finally:
        store.close()
