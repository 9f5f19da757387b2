"""The state database: schema, migration and the queries, on a plain sqlite3 connection.

Nothing here knows about threads or gevent: the store thread (sqlite.py) and the
inspection commands (`acp-green sessions`, `acp-green usage`) both call these functions on a
connection they own. A turn is one row holding its updates as JSON Lines, so a streamed
turn of any length is one INSERT in one transaction.

A Python str may hold lone surrogates (a JSON `\\udce9` escape, or how a non-UTF-8 path byte
reaches Python), which SQLite cannot store as TEXT. Every str column therefore holds TEXT when
the value is valid Unicode, and otherwise a BLOB of its UTF-8 bytes with the surrogates passed
through: lossless, ordinary rows stay readable text, and equality filters still work because
one str always encodes the same way (`_column`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from .session_record import SessionRecord
from ..usage import UsageRecord

DB_NAME = "state.sqlite3"
# 1: the tables. 2: a str column may hold a BLOB (a str with lone surrogates, see above); the
# tables are unchanged, so a version-1 database is a valid version-2 one. The bump keeps an
# older acp-green, which would misread such a BLOB, from opening the database at all.
SCHEMA_VERSION = 2
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


def connect(path: str, *, trace: Callable[[str], None] | None = None, page_limit: int | None = None) -> sqlite3.Connection:
    """Open and migrate the database `path` for serving; raises on any problem.

    The caller has made the file safe to open (store/private.py: ours, 0600, no symlink).
    `page_limit` caps the file (PRAGMA max_page_count): how the tests make a store "full".
    """
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
    except BaseException:  # ok: close, then re-raise
        conn.close()
        raise
    return conn


def connect_existing(path: str, *, write: bool = False) -> sqlite3.Connection | None:
    """The database for `acp-green sessions`/`usage`: never created, migrated or re-moded.

    Read-only unless `write` (SQLite's `mode=ro`: it cannot take the write lock, so it never
    waits on an agent's, and WAL lets it read while agents write). None when the file holds no
    schema yet. Every older schema has the tables of this one (see SCHEMA_VERSION), so it is
    read as it is; only a newer one is refused. While no process has the database open (no -wal
    or -shm beside it: a WAL database's last connection removes them), a reader opens it
    `immutable`, so it creates no file at all; otherwise those files exist and a plain
    read-only connection reads consistently through them.
    """
    # Bytes, so a path that is not UTF-8 (surrogate-escaped in Python) is named exactly.
    uri = "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))
    if write:
        uri += "?mode=rw"
    elif not any(os.path.lexists(path + suffix) for suffix in ("-wal", "-shm")):
        uri += "?mode=ro&immutable=1"
    else:
        uri += "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateDbError(f"the state database has schema {version}; this acp-green knows {SCHEMA_VERSION}")
        if version < 1:
            conn.close()
            return None
    except BaseException:  # ok: close, then re-raise
        conn.close()
        raise
    return conn


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
        if version < SCHEMA_VERSION:  # 1 -> 2 changes no table (see SCHEMA_VERSION)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:  # ok: roll back, then re-raise
        conn.execute("ROLLBACK")
        raise


# -- str columns ---------------------------------------------------------------------------
def _column(value: str | None) -> str | bytes | None:
    """TEXT for a str that is valid Unicode, else a BLOB of its bytes (surrogates passed through)."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


def _str(value: str | bytes | None) -> str | None:
    """The str a column holds (the inverse of `_column`)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    return value


def _json_column(value: Any) -> str | bytes:
    """JSON with every str kept as its characters (not \\u escapes), so that any str, even two
    lone surrogates that would read back as one escaped pair, survives `json.loads`."""
    return _column(json.dumps(value, ensure_ascii=False))


# -- writes ------------------------------------------------------------------------------------
def save_session(conn: sqlite3.Connection, record: SessionRecord) -> None:
    conn.execute(
        """INSERT INTO sessions (session_id, cwd, additional_directories, title, mode_id, config, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,
               additional_directories = excluded.additional_directories, title = excluded.title,
               mode_id = excluded.mode_id, config = excluded.config, updated_at = excluded.updated_at""",
        (
            _column(record.session_id),
            _column(record.cwd),
            _json_column(record.additional_directories),
            _column(record.title),
            _column(record.mode_id),
            _json_column(record.config),
            record.updated_at,
        ),
    )


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget a session and its history; its usage records stay in the ledger (S16)."""
    key = _column(session_id)
    conn.execute("DELETE FROM sessions WHERE session_id = ?", (key,))
    conn.execute("DELETE FROM turns WHERE session_id = ?", (key,))


def append_turn(conn: sqlite3.Connection, session_id: str, entries: Sequence[bytes], stop_reason: str | None = None) -> None:
    """One row per turn; `entries` are the updates' JSON, stored one per line (JSON Lines).

    JSON escapes newlines inside strings, so the lines split back exactly, without parsing;
    an entry holding a raw newline could not, and is refused (ValueError) rather than split.
    The runtime's entries are ASCII and stored as TEXT; any other bytes are kept as a BLOB.
    """
    joined = b"\n".join(entries)
    if joined.count(b"\n") != max(len(entries) - 1, 0):
        raise ValueError("a history entry holds a raw newline")
    conn.execute(
        "INSERT INTO turns (session_id, recorded_at, stop_reason, entries) VALUES (?, ?, ?, ?)",
        (_column(session_id), time.time(), _column(stop_reason), joined.decode("ascii") if joined.isascii() else joined),
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
            _column(record.usage_id), _column(record.session_id), _column(record.request_id),
            _column(record.stop_reason), record.started_at, record.duration, record.input_bytes,
            record.output_bytes, record.input_tokens, record.output_tokens, record.recorded_at,
            os.getpid() if record.pid is None else record.pid,
        ),
    )


# -- reads -------------------------------------------------------------------------------------
_SESSION_COLUMNS = "session_id, cwd, additional_directories, title, mode_id, config, updated_at"


def _session(row: tuple[Any, ...]) -> SessionRecord:
    sid, cwd, dirs, title, mode_id, config, updated_at = row
    return SessionRecord(_str(sid), _str(cwd), json.loads(_str(dirs)), _str(title), _str(mode_id), json.loads(_str(config)), updated_at)


def load_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (_column(session_id),)).fetchone()
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
        args.append(_column(cwd))
    if after is not None:
        # Ids are generated ASCII, so TEXT ordering is the ordering of the str.
        clauses.append("(updated_at < ? OR (updated_at = ? AND session_id < ?))")
        args.extend((after[0], after[0], _column(after[1])))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {_SESSION_COLUMNS} FROM sessions {where} ORDER BY updated_at DESC, session_id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return [_session(row) for row in conn.execute(sql, args)]


def history(conn: sqlite3.Connection, session_id: str) -> list[bytes]:
    """Every stored update's JSON, oldest first."""
    entries: list[bytes] = []
    for (text,) in conn.execute("SELECT entries FROM turns WHERE session_id = ? ORDER BY id", (_column(session_id),)):
        if text:
            entries.extend((text.encode("utf-8") if isinstance(text, str) else text).split(b"\n"))
    return entries


def turn_count(conn: sqlite3.Connection, session_id: str) -> int:
    return conn.execute("SELECT count(*) FROM turns WHERE session_id = ?", (_column(session_id),)).fetchone()[0]


def usage(conn: sqlite3.Connection, session_id: str | None = None) -> list[UsageRecord]:
    sql = """SELECT session_id, request_id, stop_reason, started_at, duration, input_bytes, output_bytes,
                    input_tokens, output_tokens, recorded_at, usage_id, pid FROM usage"""
    args: tuple[Any, ...] = ()
    if session_id is not None:
        sql += " WHERE session_id = ?"
        args = (_column(session_id),)
    records = []
    for row in conn.execute(sql + " ORDER BY id", args):
        sid, request_id, stop_reason, *numbers, usage_id, pid = row
        records.append(UsageRecord(_str(sid), _str(request_id), _str(stop_reason), *numbers, usage_id=_str(usage_id), pid=pid))
    return records
