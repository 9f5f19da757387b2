"""The state database: schema, migration and the queries, on a plain sqlite3 connection.

Nothing here knows about threads or gevent: the store thread (store_thread.py) and the
inspection commands (`acp-green sessions`, `acp-green usage`) both call these functions on a
connection they own.

History (schema 3) is a `turns` table (one row per turn: its id, start, outcome and whether
every piece of it was stored) and a `history` table (one row per stored piece: the session, the
turn, the piece's number in the turn and its updates as JSON Lines, one SessionUpdate object's
JSON per line). A piece is split into rows of at most PIECE_ROW_BYTES, so reading history back
one row at a time holds a bounded amount whatever the length of the turn (a single update
larger than that is one row of its own). The stored form is the update JSON the runtime hands
over, independent of how the wire encodes it.

Forks share history (schema 6): a turn's rows are the `history` rows whose `turn` is the turn's
`history_turn`. A turn written here has its own id there; a turn a fork copied (`fork_history`)
has its source turn's `history_turn`, so a fork copies a few small columns per turn and never a
history row. Every read goes through `history_turn` (`history_page`); a history row lives as long
as some turn refers to it (`delete_session`, `purge_history`).

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
from typing import Any, overload

from .database import StoreOpenError
from .session_record import SessionRecord
from .turns import HistoryEntry, HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

DB_NAME = "state.sqlite3"
# 1: the tables. 2: a str column may hold a BLOB (a str with lone surrogates, see above); the
# tables are unchanged, so a version-1 database is a valid version-2 one. The bump keeps an
# older acp-green, which would misread such a BLOB, from opening the database at all.
# 3: history is stored per piece (`history`) with one `turns` row per turn and its outcome; a
# version-2 turn (one row holding a whole turn) is converted in place (`_migrate_history`).
# 4: a `session_state` table holds each session's agent state (`session.state` as JSON), added
# by `_migrate_state`; nothing else changes.
# 5: `sessions.archived` (session/archive) and `sessions.forked_from` (session/fork), added by
# `_migrate_session_admin`; an older acp-green refuses the database, as any newer schema.
# 6: `turns.history_turn` (indexed by `turns_by_history`): whose `history` rows hold a turn's
# pieces, so a fork shares its source's rows instead of copying them; `_migrate_shared_history`
# sets it to the turn's own id for every existing turn.
SCHEMA_VERSION = 6
BUSY_TIMEOUT_MS = 5000
PIECE_ROW_BYTES = 128 * 1024  # a stored piece is split into rows of at most this many bytes

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

# Schema 3's history. `turns.complete` is 0 once any piece of the turn was refused or dropped.
# `history.turn` is `turns.id`; rows are read in `history.id` order, which is the order pieces
# were stored (a session runs one turn at a time, so its pieces never interleave).
_SCHEMA_V3_HISTORY = (
    """CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        started_at REAL NOT NULL,
        ended_at REAL,
        stop_reason TEXT,
        error TEXT,
        complete INTEGER NOT NULL DEFAULT 1,
        UNIQUE (session_id, turn_id)
    )""",
    "CREATE INDEX turns_by_session ON turns (session_id, id)",
    """CREATE TABLE history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        entries TEXT NOT NULL,
        UNIQUE (turn, seq)
    )""",
    "CREATE INDEX history_by_session ON history (session_id, id)",
)
# Schema 4: the agent's `session.state` of a session, one JSON object per session.
_SCHEMA_V4_STATE = (
    """CREATE TABLE IF NOT EXISTS session_state (
        session_id TEXT PRIMARY KEY,
        state TEXT NOT NULL
    )""",
)
# Schema 5: two columns of a session, every existing session not archived and forked from none.
_SCHEMA_V5_SESSIONS = {
    "archived": "ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    "forked_from": "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
}
# Schema 6: the `turns.id` whose `history` rows hold a turn's pieces (its own id, or for a turn a
# fork copied, its source turn's history_turn). History is found through turns only, so the index
# of rows by the session that wrote them goes (its page is the new index's).
_SCHEMA_V6_TURNS = (
    "ALTER TABLE turns ADD COLUMN history_turn INTEGER",
    "DROP INDEX IF EXISTS history_by_session",
    "UPDATE turns SET history_turn = id WHERE history_turn IS NULL",
    "CREATE INDEX IF NOT EXISTS turns_by_history ON turns (history_turn)",
)
MIGRATED_TURN_PREFIX = "v2-"  # the turn id a version-2 turn gets: the prefix and its old row id


class StateDbError(StoreOpenError):
    """The state database cannot be used (unwritable, full, corrupt, newer schema)."""


class RefusedRecord(ValueError):
    """A write refused for its own content (an update holding a raw newline, a turn never begun)."""


# What one record's content can cause (a value that cannot be bound, a row too big, a
# constraint); every other sqlite3.Error (I/O, full, read-only, corrupt, locked) is the database's.
_RECORD_ERROR_TYPES = (sqlite3.DataError, sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError)
_RECORD_ERROR_CODES = frozenset((sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE))


def is_record_error(exc: BaseException) -> bool:
    """True when `exc` is about the record being written, not about the database or the disk.

    Any error that is not sqlite3's comes from the record (a value that cannot be encoded, a
    RefusedRecord); of sqlite3's, the types above and the codes of a value SQLite refuses
    ("string or blob too big" is SQLITE_TOOBIG, whatever class reports it).
    """
    if not isinstance(exc, sqlite3.Error):
        return isinstance(exc, Exception)
    if isinstance(exc, _RECORD_ERROR_TYPES):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _RECORD_ERROR_CODES


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
    schema yet. Only a newer schema is refused. A version-1 or -2 database (history one row per
    turn) is read through temporary views that show it in this schema's shape (`_v2_views`); it
    is changed (`write`) only once `acp-green serve` has converted it. An older `sessions` table
    (`_v4_views`) and `turns` table (`_v5_views`: each turn's history its own) are shown the same
    way, and left as they are. While no process has the
    database open (no -wal or -shm beside it: a WAL database's last connection removes them), a
    reader opens it `immutable`, so it creates no file at all; otherwise those files exist and a
    plain read-only connection reads consistently through them.
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
        version_2 = version < 3 and "entries" in {column for _, column, *_ in conn.execute("PRAGMA table_info(turns)")}
        if version_2:
            if write:
                raise StateDbError(f"the state database has schema {version}; start `acp-green serve` once to convert it to {SCHEMA_VERSION}")
            _v2_views(conn)
        if version < 5:
            _v4_views(conn)
        if version < 6 and not version_2:
            _v5_views(conn)
    except BaseException:  # ok: close, then re-raise
        conn.close()
        raise
    return conn


def _v2_views(conn: sqlite3.Connection) -> None:
    """Temporary views (they shadow main's tables of the same name) showing a version-2 history
    in this schema's shape: each old turn one `turns` row and one `history` piece."""
    conn.execute(
        f"""CREATE TEMP VIEW turns AS SELECT id, session_id, '{MIGRATED_TURN_PREFIX}' || id AS turn_id,
               recorded_at AS started_at, recorded_at AS ended_at, stop_reason, NULL AS error, 1 AS complete,
               id AS history_turn
           FROM main.turns"""
    )
    conn.execute("CREATE TEMP VIEW history AS SELECT id, session_id, id AS turn, 0 AS seq, entries FROM main.turns")


def _v4_views(conn: sqlite3.Connection) -> None:
    """A temporary view (it shadows main's table) showing a version-4 or older `sessions` table
    with this schema's columns: no session archived or forked. Writes name `main.sessions`."""
    conn.execute(
        """CREATE TEMP VIEW sessions AS SELECT session_id, cwd, additional_directories, title, mode_id, config,
               updated_at, 0 AS archived, NULL AS forked_from FROM main.sessions"""
    )


def _v5_views(conn: sqlite3.Connection) -> None:
    """A temporary view (it shadows main's table) showing a version-3 to -5 `turns` table with this
    schema's `history_turn`: every turn's history its own. Writes name `main.turns`."""
    conn.execute(
        """CREATE TEMP VIEW turns AS SELECT id, session_id, turn_id, started_at, ended_at, stop_reason, error, complete,
               id AS history_turn FROM main.turns"""
    )


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
        # 1 -> 2 changes no table (see SCHEMA_VERSION); 2 -> 3 converts the history.
        if version < 3:
            _migrate_history(conn)
        if version < 4:
            _migrate_state(conn)
        if version < 5:
            _migrate_session_admin(conn)
        if version < 6:
            _migrate_shared_history(conn)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:  # ok: roll back, then re-raise
        conn.execute("ROLLBACK")
        raise


def _migrate_history(conn: sqlite3.Connection) -> None:
    """Version-2 turns (one row each: recorded_at, stop_reason, the whole turn as JSON Lines)
    become `turns` rows with their stop reason and `history` pieces of bounded rows.

    Old rows are read one at a time, so the migration holds one old turn at once.
    """
    conn.execute("DROP INDEX IF EXISTS turns_by_session")
    conn.execute("ALTER TABLE turns RENAME TO turns_v2")
    for statement in _SCHEMA_V3_HISTORY:
        conn.execute(statement)
    old_ids = [row_id for (row_id,) in conn.execute("SELECT id FROM turns_v2 ORDER BY id")]
    for old_id in old_ids:
        session_key, recorded_at, stop_reason, text = conn.execute(
            "SELECT session_id, recorded_at, stop_reason, entries FROM turns_v2 WHERE id = ?", (old_id,)
        ).fetchone()
        turn = _new_row_id(conn.execute(
            "INSERT INTO turns (session_id, turn_id, started_at, ended_at, stop_reason) VALUES (?, ?, ?, ?, ?)",
            (session_key, f"{MIGRATED_TURN_PREFIX}{old_id}", recorded_at, recorded_at, stop_reason),
        ))
        if text:
            _insert_pieces(conn, session_key, turn, 0, _lines(text))
    conn.execute("DROP TABLE turns_v2")


def _migrate_state(conn: sqlite3.Connection) -> None:
    """3 -> 4: the table for each session's agent state; no session has any yet."""
    for statement in _SCHEMA_V4_STATE:
        conn.execute(statement)


def _migrate_session_admin(conn: sqlite3.Connection) -> None:
    """4 -> 5: the archive state and the fork source of each session (none archived, none forked).

    A column already there is kept (a version-1 database is created with this schema's tables)."""
    present = {column for _, column, *_ in conn.execute("PRAGMA table_info(sessions)")}
    for column, statement in _SCHEMA_V5_SESSIONS.items():
        if column not in present:
            conn.execute(statement)


def _migrate_shared_history(conn: sqlite3.Connection) -> None:
    """5 -> 6: `turns.history_turn`, each existing turn's own id (a version-5 fork holds copies of
    its source's rows, so every turn's rows are its own), and its index; `history_by_session`
    goes (reads, deletes and purges find rows by turn)."""
    add_column, *rest = _SCHEMA_V6_TURNS
    if "history_turn" not in {column for _, column, *_ in conn.execute("PRAGMA table_info(turns)")}:
        conn.execute(add_column)
    for statement in rest:
        conn.execute(statement)


# -- str columns ---------------------------------------------------------------------------
@overload
def _column(value: str) -> str | bytes: ...
@overload
def _column(value: None) -> None: ...
@overload
def _column(value: str | None) -> str | bytes | None: ...
def _column(value: str | None) -> str | bytes | None:
    """TEXT for a str that is valid Unicode, else a BLOB of its bytes (surrogates passed through)."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


@overload
def _str(value: str | bytes) -> str: ...
@overload
def _str(value: None) -> None: ...
@overload
def _str(value: str | bytes | None) -> str | None: ...
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
        """INSERT INTO sessions (session_id, cwd, additional_directories, title, mode_id, config, updated_at,
               archived, forked_from)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,
               additional_directories = excluded.additional_directories, title = excluded.title,
               mode_id = excluded.mode_id, config = excluded.config, updated_at = excluded.updated_at,
               archived = excluded.archived, forked_from = excluded.forked_from""",
        (
            _column(record.session_id),
            _column(record.cwd),
            _json_column(record.additional_directories),
            _column(record.title),
            _column(record.mode_id),
            _json_column(record.config),
            record.updated_at,
            int(record.archived),
            _column(record.forked_from),
        ),
    )


# The history rows a delete may free: a turn's rows are `history` rows whose `turn` is its
# `history_turn`, and they live while any turn (of any session) has that `history_turn`. Those
# of the session's turns that no other session's turn shares are freed by its delete.
_FREED_BY_DELETE = """SELECT mine.history_turn FROM turns AS mine WHERE mine.session_id = ?
    AND NOT EXISTS (SELECT 1 FROM turns AS other WHERE other.history_turn = mine.history_turn
                    AND other.session_id <> mine.session_id)"""


def _purge_queue(conn: sqlite3.Connection) -> None:
    """The turns whose history rows are left to purge, per deleted session (see delete_session):
    a TEMP table, so it belongs to this connection and is gone with it."""
    conn.execute(
        """CREATE TEMP TABLE IF NOT EXISTS history_purge (
               session_id TEXT NOT NULL,
               turn INTEGER NOT NULL,
               PRIMARY KEY (session_id, turn)
           ) WITHOUT ROWID"""
    )


def delete_session(conn: sqlite3.Connection, session_id: str, max_history_rows: int | None = None) -> bool:
    """Forget a session and its history; its usage records stay in the ledger (S16).

    The session and its turns go at once, which makes its history unreadable (history is read
    through its turns). A history row goes only once no turn refers to it any more: the rows
    of the session's turns that no other session's turn shares (`_FREED_BY_DELETE`). That covers
    its own rows that no fork shares, and the rows of an earlier-deleted source that only this
    session's forked turns still kept: the freed set is keyed on `history_turn` values, not on
    who wrote the rows, so a fork deleted last frees its source's rows too.

    Without `max_history_rows` the freed rows go now (`acp-green sessions delete`). With it, the
    freed `history_turn` values are queued under this session on the connection (a TEMP table,
    committed or rolled back with the delete), at most that many rows go now, and the rest go in
    steps of `purge_history`; True when some are left. A process killed before the queue is
    done loses it; `orphaned_history` finds those rows at the next start.
    """
    key = _column(session_id)
    conn.execute("DELETE FROM main.sessions WHERE session_id = ?", (key,))  # main: past _v4_views
    if max_history_rows is None:
        conn.execute(f"DELETE FROM history WHERE turn IN ({_FREED_BY_DELETE})", (key,))
    else:
        _purge_queue(conn)
        conn.execute(
            f"""INSERT OR IGNORE INTO temp.history_purge (session_id, turn)
                SELECT ?, freed.history_turn FROM ({_FREED_BY_DELETE}) AS freed
                WHERE EXISTS (SELECT 1 FROM history WHERE history.turn = freed.history_turn)""",
            (key, key),
        )
    conn.execute("DELETE FROM main.turns WHERE session_id = ?", (key,))  # main: past _v5_views
    # `acp-green sessions delete` may write to a version-3 database, which has no state table.
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_state'").fetchone():
        conn.execute("DELETE FROM session_state WHERE session_id = ?", (key,))
    if max_history_rows is None:
        return False
    return purge_history(conn, session_id, max_history_rows)


def purge_history(conn: sqlite3.Connection, session_id: str, max_rows: int) -> bool:
    """Delete up to `max_rows` of the history rows queued under `session_id` (by delete_session
    or orphaned_history), a queued turn's rows in order; True when more are left.

    Each round deletes at least one row or drops a queued turn whose rows are all gone (another
    process may have purged them), so a step costs at most about `max_rows` small statements.
    """
    key = _column(session_id)
    _purge_queue(conn)
    left = max_rows
    for _ in range(max(max_rows, 1)):
        queued = conn.execute("SELECT turn FROM temp.history_purge WHERE session_id = ? ORDER BY turn LIMIT 1", (key,)).fetchone()
        if queued is None:
            return False
        turn = queued[0]
        if left > 0:
            left -= conn.execute(
                "DELETE FROM history WHERE id IN (SELECT id FROM history WHERE turn = ? ORDER BY seq LIMIT ?)", (turn, left)
            ).rowcount
        if conn.execute("SELECT 1 FROM history WHERE turn = ? LIMIT 1", (turn,)).fetchone() is not None:
            return True  # this turn has rows left: `left` is spent
        conn.execute("DELETE FROM temp.history_purge WHERE session_id = ? AND turn = ?", (key, turn))
        if left <= 0:
            break
    return conn.execute("SELECT 1 FROM temp.history_purge WHERE session_id = ? LIMIT 1", (key,)).fetchone() is not None


def orphaned_history(conn: sqlite3.Connection) -> str | None:
    """History rows no turn refers to any more (a process killed while purging them, or before
    it purged them): every such turn is queued for `purge_history` under the session that wrote
    the first one found, whose id is returned; None when there are none.

    It reads the `history (turn, seq)` index up to the first such row, then on from it to queue
    the others, probing `turns_by_history` for each row: about one pass over the index (the old
    search, `turn NOT IN turns`, read the same). It runs at a store's start and again once what
    it queued is purged.
    """
    row = conn.execute(_ORPHANED_ROW).fetchone()
    if row is None:
        return None
    turn, writer = row
    _purge_queue(conn)
    conn.execute(
        f"""INSERT OR IGNORE INTO temp.history_purge (session_id, turn)
            SELECT ?, turn FROM history WHERE turn >= ? AND {_UNREFERENCED}""",
        (writer, turn),
    )
    return _str(writer)


_UNREFERENCED = "NOT EXISTS (SELECT 1 FROM turns WHERE turns.history_turn = history.turn)"
# The turn and the writer of one history row no turn refers to (the inner search reads only the
# index of `history (turn, seq)`, which holds each row's id).
_ORPHANED_ROW = f"""SELECT turn, session_id FROM history WHERE id = (SELECT id FROM history WHERE {_UNREFERENCED} LIMIT 1)"""


def _lines(text: str | bytes) -> list[bytes]:
    """The updates a JSON Lines column holds."""
    return (text.encode("utf-8") if isinstance(text, str) else text).split(b"\n")


def _joined(updates: Sequence[bytes]) -> str | bytes:
    """Updates as one JSON Lines column: TEXT when ASCII (the runtime's), else a BLOB kept exactly.

    JSON escapes newlines inside strings, so the lines split back exactly, without parsing; an
    update holding a raw newline could not, and is refused rather than split.
    """
    joined = b"\n".join(updates)
    if joined.count(b"\n") != len(updates) - 1:
        raise RefusedRecord("a history entry holds a raw newline")
    return joined.decode("ascii") if joined.isascii() else joined


def _insert_pieces(conn: sqlite3.Connection, session_key: str | bytes, turn: int, seq: int, updates: Sequence[bytes]) -> int:
    """Store `updates` as rows of at most PIECE_ROW_BYTES from piece number `seq`; the next number."""
    start, size = 0, 0
    for end, update in enumerate(updates):
        if end > start and size + len(update) > PIECE_ROW_BYTES:
            conn.execute("INSERT INTO history (session_id, turn, seq, entries) VALUES (?, ?, ?, ?)",
                         (session_key, turn, seq, _joined(updates[start:end])))
            seq, start, size = seq + 1, end, 0
        size += len(update) + 1
    if start < len(updates):
        conn.execute("INSERT INTO history (session_id, turn, seq, entries) VALUES (?, ?, ?, ?)",
                     (session_key, turn, seq, _joined(updates[start:])))
        seq += 1
    return seq


def _new_row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row the INSERT `cursor` ran has just added."""
    # typeshed types lastrowid Optional (None before any INSERT); a successful INSERT always sets it.
    row_id = cursor.lastrowid
    assert row_id is not None
    return row_id


def _turn_row(conn: sqlite3.Connection, session_id: str, turn_id: str) -> int:
    """The session's own `turns` row of the turn (a fork's copied turn is a row of the fork's)."""
    row = conn.execute("SELECT id FROM turns WHERE session_id = ? AND turn_id = ?", (_column(session_id), _column(turn_id))).fetchone()
    if row is None:
        raise RefusedRecord(f"no turn {turn_id!r} was begun in session {session_id!r} (or the session was deleted)")
    return row[0]


def begin_turn(conn: sqlite3.Connection, session_id: str, turn_id: str, started_at: float, prompt: Sequence[bytes]) -> None:
    """A new turn, whose history rows are its own (history_turn = its id), and its prompt (piece
    0); a prompt that cannot be stored leaves the turn incomplete."""
    session_key = _column(session_id)
    turn = _new_row_id(conn.execute(
        "INSERT INTO turns (session_id, turn_id, started_at) VALUES (?, ?, ?)", (session_key, _column(turn_id), started_at)
    ))
    conn.execute("UPDATE turns SET history_turn = id WHERE id = ?", (turn,))
    try:
        _insert_pieces(conn, session_key, turn, 0, prompt)
    except Exception:  # ok: mark the turn, then re-raise for the caller to count and log
        conn.execute("UPDATE turns SET complete = 0 WHERE id = ?", (turn,))
        raise


def append_history(conn: sqlite3.Connection, session_id: str, turn_id: str, updates: Sequence[bytes]) -> None:
    """The next piece of a running turn; one that cannot be stored leaves the turn incomplete.

    A turn a fork copied has ended and shares its source's rows: it takes no more pieces."""
    key = _column(session_id)
    row = conn.execute("SELECT id, history_turn FROM turns WHERE session_id = ? AND turn_id = ?", (key, _column(turn_id))).fetchone()
    if row is None:
        raise RefusedRecord(f"no turn {turn_id!r} was begun in session {session_id!r} (or the session was deleted)")
    turn, history_turn = row
    if history_turn != turn:
        raise RefusedRecord(f"turn {turn_id!r} of session {session_id!r} was copied by a fork: it takes no more history")
    try:
        (last,) = conn.execute("SELECT max(seq) FROM history WHERE turn = ?", (turn,)).fetchone()
        _insert_pieces(conn, key, turn, 0 if last is None else last + 1, updates)
    except Exception:  # ok: mark the turn, then re-raise for the caller to count and log
        conn.execute("UPDATE turns SET complete = 0 WHERE id = ?", (turn,))
        raise


def end_turn(conn: sqlite3.Connection, session_id: str, turn_id: str, outcome: TurnOutcome, ended_at: float | None = None) -> None:
    turn = _turn_row(conn, session_id, turn_id)
    conn.execute(
        "UPDATE turns SET stop_reason = ?, error = ?, ended_at = ? WHERE id = ?",
        (_column(outcome.stop_reason), _column(outcome.error), time.time() if ended_at is None else ended_at, turn),
    )


def fork_history(conn: sqlite3.Connection, source_id: str, fork_id: str) -> None:
    """Give `fork_id` every turn of `source_id` that has ended, sharing its history rows.

    One statement copies the ended turns' `turns` rows (their ids, times, outcome, completeness
    and `history_turn`, in the source's order) and no history row: the fork's copy of a turn
    reads the rows its source's turn reads, and keeps them alive after the source is deleted.
    A turn still running when the fork is made (no `ended_at` yet) is left out: a fork holds
    the conversation up to its last finished turn, and a turn that may still grow is never shared.
    """
    conn.execute(
        """INSERT INTO turns (session_id, turn_id, started_at, ended_at, stop_reason, error, complete, history_turn)
           SELECT ?, turn_id, started_at, ended_at, stop_reason, error, complete, history_turn FROM turns
           WHERE session_id = ? AND ended_at IS NOT NULL ORDER BY id""",
        (_column(fork_id), _column(source_id)),
    )


def mark_incomplete(conn: sqlite3.Connection, session_id: str, turn_id: str) -> None:
    """Some of the turn's history was not stored (refused, or dropped before it reached us)."""
    conn.execute("UPDATE turns SET complete = 0 WHERE session_id = ? AND turn_id = ?", (_column(session_id), _column(turn_id)))


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


def save_state(conn: sqlite3.Connection, session_id: str, state: bytes) -> None:
    """Replace the session's agent state (one JSON object, UTF-8; see sessions.encode_state)."""
    conn.execute(
        "INSERT INTO session_state (session_id, state) VALUES (?, ?) ON CONFLICT (session_id) DO UPDATE SET state = excluded.state",
        (_column(session_id), _text_or_blob(state)),
    )


def _text_or_blob(data: bytes) -> str | bytes:
    """TEXT when `data` is valid UTF-8, else the bytes as a BLOB (a str with lone surrogates)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


# -- reads -------------------------------------------------------------------------------------
_SESSION_COLUMNS = "session_id, cwd, additional_directories, title, mode_id, config, updated_at, archived, forked_from"


def _session(row: tuple[Any, ...]) -> SessionRecord:
    sid, cwd, dirs, title, mode_id, config, updated_at, archived, forked_from = row
    return SessionRecord(_str(sid), _str(cwd), json.loads(_str(dirs)), _str(title), _str(mode_id), json.loads(_str(config)),
                         updated_at, bool(archived), _str(forked_from))


def load_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (_column(session_id),)).fetchone()
    return _session(row) if row is not None else None


def list_sessions(
    conn: sqlite3.Connection,
    cwd: str | None = None,
    after: tuple[float, str] | None = None,
    limit: int | None = None,
    archived: bool | None = None,
) -> list[SessionRecord]:
    """Most recently updated first; `after` is the (updated_at, session_id) of the last row seen;
    `archived` True or False keeps only the sessions in that archive state, None keeps both."""
    clauses: list[str] = []
    args: list[str | bytes | float | None] = []
    if archived is not None:
        clauses.append("archived = ?")
        args.append(int(archived))
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


# A session's turns in order, from one on (turns_by_session), each with whose rows hold its history.
_SESSION_TURNS = "SELECT id, turn_id, history_turn FROM turns WHERE session_id = ? AND id >= ? ORDER BY id"
# One turn's rows in order, from one piece on (the unique index on history (turn, seq)).
_TURN_ROWS = "SELECT id, entries FROM history WHERE turn = ? AND seq >= ? ORDER BY seq"


def history_page(
    conn: sqlite3.Connection,
    session_id: str,
    after: HistoryPosition | None,
    max_entries: int,
    max_bytes: int,
    turn_id: str | None = None,
) -> HistoryPage:
    """Stored updates from `after` on (of one turn, with `turn_id`): at most `max_entries`, and
    no more than `max_bytes` of updates unless the first alone is larger (a page always moves on).

    The session's turns are walked in id order and each turn's rows read through its
    `history_turn` in (turn, seq) order, both along an index: nothing is sorted, and rows are
    fetched one at a time, so a page holds at most one row beyond its entries. A position is a
    history row's id and an update's index in it; the page after it starts at the session's turn
    that reads that row (`_resume`), so it works across a fork's shared turns and its own.
    """
    key = _column(session_id)
    start = _resume(conn, key, after, turn_id)
    if start is None:
        return HistoryPage([], None)
    first_turn, first_seq = start
    piece, skip = (after.piece, after.index) if after is not None else (0, 0)
    if turn_id is not None:
        turns = conn.execute("SELECT id, turn_id, history_turn FROM turns WHERE id = ?", (first_turn,))
    else:
        turns = conn.execute(_SESSION_TURNS, (key, first_turn))
    entries: list[HistoryEntry] = []
    size = 0
    try:
        for turn, turn_key, history_turn in turns:
            row_turn = _str(turn_key)
            rows = conn.execute(_TURN_ROWS, (history_turn, first_seq if turn == first_turn else 0))
            try:
                for row_id, text in rows:
                    if not text:  # a version-2 turn that stored nothing
                        continue
                    updates = _lines(text)
                    index = skip if turn == first_turn and row_id == piece else 0
                    while index < len(updates):
                        update = updates[index]
                        if entries and (len(entries) >= max_entries or size + len(update) > max_bytes):
                            return HistoryPage(entries, HistoryPosition(row_id, index))
                        entries.append(HistoryEntry(row_turn, update))
                        size += len(update)
                        index += 1
            finally:
                rows.close()
    finally:
        turns.close()
    return HistoryPage(entries, None)


def _resume(conn: sqlite3.Connection, key: str | bytes, after: HistoryPosition | None, turn_id: str | None) -> tuple[int, int] | None:
    """Where a page starts: the session's `turns.id` and the piece number (`seq`) in it; None
    when there is nothing to read (no such turn, or a position no turn of the session reads)."""
    if turn_id is not None:
        turn = conn.execute("SELECT id, history_turn FROM turns WHERE session_id = ? AND turn_id = ?", (key, _column(turn_id))).fetchone()
        if turn is None:
            return None
        if after is None:
            return turn[0], 0
        row = conn.execute("SELECT seq FROM history WHERE id = ? AND turn = ?", (after.piece, turn[1])).fetchone()
        return (turn[0], row[0]) if row is not None else None
    if after is None:
        return 0, 0
    row = conn.execute("SELECT turn, seq FROM history WHERE id = ?", (after.piece,)).fetchone()
    if row is None:
        return None
    # `+session_id`: found through turns_by_history (the few turns sharing these rows), never by
    # walking the session's turns.
    turn = conn.execute("SELECT min(id) FROM turns WHERE history_turn = ? AND +session_id = ?", (row[0], key)).fetchone()[0]
    return (turn, row[1]) if turn is not None else None


def history(conn: sqlite3.Connection, session_id: str) -> list[bytes]:
    """Every stored update's JSON, oldest first (all at once: for export and small histories)."""
    entries: list[bytes] = []
    after: HistoryPosition | None = None
    while True:
        page = history_page(conn, session_id, after, 10_000, 1 << 24)
        entries.extend(entry.update for entry in page.entries)
        if page.after is None:
            return entries
        after = page.after


def turns(conn: sqlite3.Connection, session_id: str) -> list[StoredTurn]:
    """The session's turns, oldest first."""
    return [
        StoredTurn(_str(turn_id), started_at, _str(stop_reason), _str(error), bool(complete))
        for turn_id, started_at, stop_reason, error, complete in conn.execute(
            "SELECT turn_id, started_at, stop_reason, error, complete FROM turns WHERE session_id = ? ORDER BY id",
            (_column(session_id),),
        )
    ]


def load_state(conn: sqlite3.Connection, session_id: str) -> bytes | None:
    """The session's stored agent state (JSON), None if it has none."""
    row = conn.execute("SELECT state FROM session_state WHERE session_id = ?", (_column(session_id),)).fetchone()
    if row is None:
        return None
    state = row[0]
    return state if isinstance(state, bytes) else state.encode("utf-8", "surrogatepass")


def turn_page(conn: sqlite3.Connection, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
    """At most `limit` of the session's turns, skipping the first `start` in the order asked
    (oldest first, or newest first): the turn list a page at a time."""
    order = "DESC" if newest_first else "ASC"
    return [
        StoredTurn(_str(turn_id), started_at, _str(stop_reason), _str(error), bool(complete))
        for turn_id, started_at, stop_reason, error, complete in conn.execute(
            f"SELECT turn_id, started_at, stop_reason, error, complete FROM turns WHERE session_id = ? ORDER BY id {order} LIMIT ? OFFSET ?",
            (_column(session_id), limit, start),
        )
    ]


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
        (sid, request_id, stop_reason, started_at, duration, input_bytes, output_bytes,
         input_tokens, output_tokens, recorded_at, usage_id, pid) = row
        records.append(UsageRecord(
            _str(sid), _str(request_id), _str(stop_reason), started_at, duration, input_bytes, output_bytes,
            input_tokens, output_tokens, recorded_at, usage_id=_str(usage_id), pid=pid,
        ))
    return records
