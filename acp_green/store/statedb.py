"""The state database: schema, migration and the queries, on a plain sqlite3 connection.

Nothing here knows about threads or gevent: the store thread (sqlite.py) and the
inspection commands (`acp-green sessions`, `acp-green usage`) both call these functions on a
connection they own. A turn is one row holding its updates as one JSON array, so a streamed
turn of any length is one INSERT in one transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..sessions import SessionRecord
from ..usage import UsageRecord

DB_NAME = "state.sqlite3"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5000

_SCHEMA_V1 = (
    """CREATE TABLE IF NOT EXISTS sessions (
        session_id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        additional_directories TEXT NOT NULL,
        title TEXT,
        mode_id TEXT,
        config TEXT NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at DESC, session_id DESC)",
    """CREATE TABLE IF NOT EXISTS turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        stop_reason TEXT,
        entries TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS turns_by_session ON turns (session_id, id)",
    """CREATE TABLE IF NOT EXISTS usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        usage_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        stop_reason TEXT NOT NULL,
        started_at REAL NOT NULL,
        duration REAL NOT NULL,
        input_bytes INTEGER NOT NULL,
        output_bytes INTEGER NOT NULL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        recorded_at REAL NOT NULL,
        pid INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS usage_by_session ON usage (session_id, id)",
)


class StateDbError(Exception):
    """The state database cannot be used (unwritable, full, corrupt, newer schema)."""


def db_path(state_dir: str) -> str:
    return os.path.join(state_dir, DB_NAME)


def prepare_dir(path: str) -> str:
    """Create the state directory private to the user (0700) if it does not exist."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # makedirs' mode is filtered by the umask
    return path


def connect(path: str, *, trace: Callable[[str], None] | None = None, page_limit: int | None = None, create_dir: bool = False) -> sqlite3.Connection:
    """Open (creating it private to the user) and migrate the database; raises on any problem.

    `page_limit` caps the file (PRAGMA max_page_count): how the tests make a store "full".
    """
    if create_dir:
        prepare_dir(os.path.dirname(path))
    try:
        # Create the file 0600 ourselves: sqlite would create it with the umask's mode.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=True)
    try:
        if trace is not None:
            conn.set_trace_callback(trace)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if page_limit is not None:
            conn.execute(f"PRAGMA max_page_count = {int(page_limit)}")
        # Reading the schema fails here, not later, on a file that is not a database.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StateDbError(f"cannot switch {path} to WAL (journal_mode={mode})")
        # WAL + NORMAL survives a crash of the process (what S16 needs); only power loss may
        # lose the last commits.
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn)
        for suffix in ("-wal", "-shm"):
            _make_private(path + suffix)
    except BaseException:  # ok: close, then re-raise
        conn.close()
        raise
    return conn


def _make_private(path: str) -> None:
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to SCHEMA_VERSION under BEGIN IMMEDIATE (the write lock, held briefly)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateDbError(f"the state database has schema {version}; this acp-green knows {SCHEMA_VERSION}")
        if version < 1:
            for statement in _SCHEMA_V1:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:  # ok: roll back, then re-raise
        conn.execute("ROLLBACK")
        raise


# -- writes ------------------------------------------------------------------------------------
def save_session(conn: sqlite3.Connection, record: SessionRecord) -> None:
    conn.execute(
        """INSERT INTO sessions (session_id, cwd, additional_directories, title, mode_id, config, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,
               additional_directories = excluded.additional_directories, title = excluded.title,
               mode_id = excluded.mode_id, config = excluded.config, updated_at = excluded.updated_at""",
        (
            record.session_id,
            record.cwd,
            json.dumps(record.additional_directories),
            record.title,
            record.mode_id,
            json.dumps(record.config),
            record.updated_at,
        ),
    )


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget a session and its history; its usage records stay in the ledger (S16)."""
    conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM turns WHERE session_id = ?", (session_id,))


def append_turn(conn: sqlite3.Connection, session_id: str, entries: Sequence[bytes], stop_reason: str | None = None) -> None:
    """One row per turn; `entries` are the updates' JSON, stored one per line (JSON Lines).

    JSON escapes newlines inside strings, so the lines split back exactly, without parsing.
    """
    conn.execute(
        "INSERT INTO turns (session_id, recorded_at, stop_reason, entries) VALUES (?, ?, ?, ?)",
        (session_id, time.time(), stop_reason, b"\n".join(entries).decode("ascii")),
    )


def record_usage(conn: sqlite3.Connection, record: UsageRecord) -> None:
    """Insert, or replace the record with the same usage_id (the "running" one of admission)."""
    conn.execute(
        """INSERT INTO usage (usage_id, session_id, request_id, stop_reason, started_at, duration,
               input_bytes, output_bytes, input_tokens, output_tokens, recorded_at, pid)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (usage_id) DO UPDATE SET stop_reason = excluded.stop_reason,
               duration = excluded.duration, input_bytes = excluded.input_bytes,
               output_bytes = excluded.output_bytes, input_tokens = excluded.input_tokens,
               output_tokens = excluded.output_tokens, recorded_at = excluded.recorded_at""",
        (
            record.usage_id, record.session_id, record.request_id, record.stop_reason, record.started_at,
            record.duration, record.input_bytes, record.output_bytes, record.input_tokens,
            record.output_tokens, record.recorded_at, os.getpid() if record.pid is None else record.pid,
        ),
    )


# -- reads -------------------------------------------------------------------------------------
_SESSION_COLUMNS = "session_id, cwd, additional_directories, title, mode_id, config, updated_at"


def _session(row: tuple[Any, ...]) -> SessionRecord:
    sid, cwd, dirs, title, mode_id, config, updated_at = row
    return SessionRecord(sid, cwd, json.loads(dirs), title, mode_id, json.loads(config), updated_at)


def load_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return _session(row) if row is not None else None


def list_sessions(
    conn: sqlite3.Connection,
    cwd: str | None = None,
    after: tuple[float, str] | None = None,
    limit: int | None = None,
) -> list[SessionRecord]:
    """Most recently updated first; `after` is the (updated_at, session_id) of the last row seen."""
    clauses, args = [], []
    if cwd is not None:
        clauses.append("cwd = ?")
        args.append(cwd)
    if after is not None:
        clauses.append("(updated_at < ? OR (updated_at = ? AND session_id < ?))")
        args.extend((after[0], after[0], after[1]))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {_SESSION_COLUMNS} FROM sessions {where} ORDER BY updated_at DESC, session_id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return [_session(row) for row in conn.execute(sql, args)]


def history(conn: sqlite3.Connection, session_id: str) -> list[bytes]:
    """Every stored update's JSON, oldest first."""
    entries: list[bytes] = []
    for (text,) in conn.execute("SELECT entries FROM turns WHERE session_id = ? ORDER BY id", (session_id,)):
        if text:
            entries.extend(text.encode("ascii").split(b"\n"))
    return entries


def turn_count(conn: sqlite3.Connection, session_id: str) -> int:
    return conn.execute("SELECT count(*) FROM turns WHERE session_id = ?", (session_id,)).fetchone()[0]


def usage(conn: sqlite3.Connection, session_id: str | None = None) -> list[UsageRecord]:
    sql = """SELECT session_id, request_id, stop_reason, started_at, duration, input_bytes, output_bytes,
                    input_tokens, output_tokens, recorded_at, usage_id, pid FROM usage"""
    args: tuple[Any, ...] = ()
    if session_id is not None:
        sql += " WHERE session_id = ?"
        args = (session_id,)
    return [UsageRecord(*row) for row in conn.execute(sql + " ORDER BY id", args)]
