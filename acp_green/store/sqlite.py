"""The SQLite store: a state directory's database (`statedb`) and its session lock files
(`SessionLockFiles`), driven by the store thread as a `Database`.

Any number of serving processes share one state directory: each owns the sessions it has live
(a lock file each), and every process creates, lists, deletes and reads usage through the one
database, whose writes WAL and the write lock keep whole. SQLite needs the processes on one
host: over a network file system neither its locks nor `flock` can be trusted (use PostgreSQL).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import private, statedb
from .session_locks import SessionLockFiles, raise_open_file_limit
from .session_record import SessionRecord
from .threaded import ThreadedStore
from .turns import HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

__all__ = ["SqliteDatabase", "SqliteStore"]

SERVE_BUSY_TIMEOUT_MS = 100  # once open, a write lock held elsewhere is retried, not waited for


def SqliteStore(  # noqa: N802 - named as the store it makes
    path: str,
    *,
    trace: Callable[[str], None] | None = None,
    page_limit: int | None = None,
    named_dir: bool = False,
    **bounds: int,
) -> ThreadedStore:
    """The store in the SQLite database `path` (made private and migrated on the store thread);
    `named_dir`: the user chose its directory (--state-dir); `bounds`: ThreadedStore's."""
    return ThreadedStore(SqliteOpener(path, trace, page_limit, named_dir), **bounds)


@dataclass
class SqliteOpener:
    """Opens the state directory's database on the store thread."""

    name: str  # the database file
    trace: Callable[[str], None] | None = None
    page_limit: int | None = None  # PRAGMA max_page_count: how the tests make a store "full"
    named_dir: bool = False

    def open(self) -> SqliteDatabase:
        private.prepare(self.name, named=self.named_dir)
        conn = statedb.connect(self.name, trace=self.trace, page_limit=self.page_limit)
        try:
            # Opening waited for other processes' locks; serving never waits long on one.
            conn.execute(f"PRAGMA busy_timeout = {SERVE_BUSY_TIMEOUT_MS}")
            raise_open_file_limit()  # a descriptor per live session
            locks = SessionLockFiles(os.path.dirname(self.name))
        except BaseException:  # ok: close, then re-raise
            conn.close()
            raise
        return SqliteDatabase(conn, locks)


class SqliteDatabase:
    """`Database` on one sqlite3 connection and the state directory's lock files."""

    # A lock file that cannot be had (no descriptor left, a symlink in its place) is that
    # session's failure, not the database's: a claim fails saying why; a new session's own lock
    # is dropped, said at ERROR and counted (statedb.is_record_error), and the rest is written.
    failures: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection, locks: SessionLockFiles | None) -> None:
        """`locks` None: a reader that owns no session (`acp-green sessions list`, `usage`)."""
        self.conn = conn
        self.locks = locks
        self._unlock_at_commit: list[str] = []

    # -- transactions and failures ----------------------------------------------------------------
    def begin_write(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        unlock, self._unlock_at_commit = self._unlock_at_commit, []
        for session_id in unlock:
            self._locks().unlock(session_id)

    def rollback(self) -> None:
        self._unlock_at_commit.clear()  # the release is retried with the writes before it
        self.conn.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction

    def reconnect(self) -> None:
        """A file stays open: nothing to reconnect."""

    def is_unusable(self, exc: BaseException) -> bool:
        """Corrupt or not a database; every other failure of the disk (full, I/O, read-only,
        busy) may go away and is retried."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
        text = str(exc)
        return "malformed" in text or "not a database" in text

    def is_busy(self, exc: BaseException) -> bool:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
        return "locked" in str(exc) or "busy" in str(exc)

    def is_record_error(self, exc: BaseException) -> bool:
        return statedb.is_record_error(exc)

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.locks is not None:
                self.locks.close()  # after the database: the next owner finds everything committed

    # -- session ownership ------------------------------------------------------------------------
    def lock_session(self, session_id: str) -> str | None:
        if session_id in self._unlock_at_commit:  # let go and taken again in one batch: stays ours
            self._unlock_at_commit = [other for other in self._unlock_at_commit if other != session_id]
        return self._locks().lock(session_id)

    def lost(self, session_id: str) -> bool:
        """An flock is never lost while its process lives."""
        return False

    def unlock_session(self, session_id: str) -> None:
        if self.conn.in_transaction:
            self._unlock_at_commit.append(session_id)
        else:
            self._locks().unlock(session_id)

    def _locks(self) -> SessionLockFiles:
        if self.locks is None:
            raise RuntimeError("this database was opened to read only: it owns no session")
        return self.locks

    # -- writes -----------------------------------------------------------------------------------
    def save_session(self, record: SessionRecord) -> None:
        statedb.save_session(self.conn, record)

    def delete_session(self, session_id: str, max_history_rows: int | None = None) -> bool:
        if self.locks is not None:
            self.locks.deleted(session_id)
        return statedb.delete_session(self.conn, session_id, max_history_rows)

    def purge_history(self, session_id: str, max_rows: int) -> bool:
        return statedb.purge_history(self.conn, session_id, max_rows)

    def orphaned_history(self) -> str | None:
        return statedb.orphaned_history(self.conn)

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: Sequence[bytes]) -> None:
        statedb.begin_turn(self.conn, session_id, turn_id, started_at, prompt)

    def append_history(self, session_id: str, turn_id: str, updates: Sequence[bytes]) -> None:
        statedb.append_history(self.conn, session_id, turn_id, updates)

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome, ended_at: float | None = None) -> None:
        statedb.end_turn(self.conn, session_id, turn_id, outcome, ended_at)

    def fork_history(self, source_id: str, fork_id: str) -> None:
        statedb.fork_history(self.conn, source_id, fork_id)

    def mark_incomplete(self, session_id: str, turn_id: str) -> None:
        statedb.mark_incomplete(self.conn, session_id, turn_id)

    def record_usage(self, record: UsageRecord) -> None:
        statedb.record_usage(self.conn, record)

    def save_state(self, session_id: str, state: bytes) -> None:
        statedb.save_state(self.conn, session_id, state)

    # -- reads ------------------------------------------------------------------------------------
    def load_session(self, session_id: str) -> SessionRecord | None:
        return statedb.load_session(self.conn, session_id)

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None,
                      archived: bool | None = None) -> list[SessionRecord]:
        return statedb.list_sessions(self.conn, cwd, after, limit, archived)

    def load_state(self, session_id: str) -> bytes | None:
        return statedb.load_state(self.conn, session_id)

    def history_page(self, session_id: str, after: HistoryPosition | None, max_entries: int, max_bytes: int,
                     turn_id: str | None = None) -> HistoryPage:
        return statedb.history_page(self.conn, session_id, after, max_entries, max_bytes, turn_id)

    def history(self, session_id: str) -> list[bytes]:
        return statedb.history(self.conn, session_id)

    def turns(self, session_id: str) -> list[StoredTurn]:
        return statedb.turns(self.conn, session_id)

    def turn_page(self, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
        return statedb.turn_page(self.conn, session_id, start, limit, newest_first)

    def turn_count(self, session_id: str) -> int:
        return statedb.turn_count(self.conn, session_id)

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return statedb.usage(self.conn, session_id)
