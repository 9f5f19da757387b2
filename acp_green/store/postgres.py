"""The PostgreSQL store: the state database on a server (`--store postgresql://...`), shared by any
number of agents on any number of hosts, driven by the store thread as a `Database` (database.py).

One connection per store, owned by the store thread (a real OS thread, store_thread.py), in
autocommit mode with explicit BEGIN/COMMIT/ROLLBACK, as SQLite's. psycopg is imported only when
a postgresql:// store is opened.

**Waiting without gevent.** The store thread's connection is made and waited on without
gevent's patched calls and without holding the GIL (pg_connection.py): from that thread they
would start a gevent hub of its own.

**Strings.** Every str column is `bytea` holding `s.encode("utf-8", "surrogatepass")`: PostgreSQL
`text` can hold neither a lone surrogate (`"\\udce9"`) nor NUL, and both must come back exactly.
UTF-8's byte order is code point order, so (updated_at DESC, session_id DESC) lists sessions as
SQLite and MemoryStore do. History pieces (JSON Lines) and agent state are `bytea` too, and the
JSON columns hold `json.dumps(value, ensure_ascii=False)` encoded the same way.

**Schema** `acp_green` (tables qualified by it), at SCHEMA_VERSION, which mirrors the SQLite
schema of that number (statedb.py): history shared by forks through `turns.history_turn`. It is
created and migrated under `pg_advisory_xact_lock(MIGRATION_LOCK)`, so agents starting together
do not race; a newer schema is refused (StoreOpenError).

**Session ownership** (database.py) is a session-level advisory lock per session
(`pg_try_advisory_lock`), which the server drops when the connection ends, however it ends. The
holder is named from pg_locks and pg_stat_activity (its application_name carries its pid and
host). A release inside a transaction waits for its COMMIT and is discarded by a ROLLBACK (the
writes before it, and it, are retried), as SqliteDatabase does.

**Failures.** A lost connection (server down or restarted, network cut) is transient: the store
thread keeps the writes waiting and calls `reconnect()` before each retry, which opens a new
connection and takes back every session lock held. Any call made outside a transaction
reconnects first too, so reads come back after an outage with no write waiting. Lock waits are
cut short (`lock_timeout`, SERVE_LOCK_TIMEOUT_MS) and retried, as SQLite's busy timeout. Nothing
is given up for good (`is_unusable` is always False).

A statement that fails inside a transaction aborts the whole transaction on PostgreSQL (SQLite
carries on past it), so a record the server refuses would take the writes after it down too:
the transaction is then failed as a whole and retried with each operation under a savepoint of
its own (`_careful`), which drops that record alone. Savepoints are not used otherwise: each
costs a round trip, and many in one transaction slow every other connection of the server
(subtransaction overflow). Values the server would refuse are refused before any statement
where they can be (an int out of bigint's range, an id over MAX_KEY_BYTES, a turn begun twice).

One outcome stays unknown, as with any server: a connection lost while its COMMIT is under way
may have committed. The writes are then retried, and those that are not idempotent (a history
piece) may be stored twice; saves, usage records and state are upserts, and a turn begun twice
is refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import statedb
from .database import StoreOpenError
from .pg_connection import connect, psycopg_module
from .session_record import SessionRecord
from .threaded import ThreadedStore
from .turns import HistoryEntry, HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDatabase", "PostgresOpener", "PostgresStore", "redacted"]

log = logging.getLogger(__name__)

SCHEMA = "acp_green"
# The shape of statedb's schema 6 (history shared by forks through turns.history_turn); a
# PostgreSQL database has never held an older one, so there is nothing to migrate from yet.
SCHEMA_VERSION = 6
SERVE_LOCK_TIMEOUT_MS = 100  # a row or table lock held elsewhere is retried, not waited for (SQLite's busy timeout)
MIGRATION_LOCK_TIMEOUT = "30s"  # opening waits this long for another process's migration
HISTORY_FETCH_ROWS = 32  # history rows one query fetches at most (each at most statedb.PIECE_ROW_BYTES, unless one update is larger)
_SAVEPOINT = "acp_green_op"
_BUSY_STATES = frozenset(("55P03", "40001", "40P01"))  # lock_not_available, serialization_failure, deadlock_detected
_INT64 = (-(1 << 63), (1 << 63) - 1)
# An indexed str's bytes at most (the id columns): a B-tree entry holds about 2.7 kB, and a longer
# one would be refused by the server mid-transaction, so it is refused before any statement.
MAX_KEY_BYTES = 2000


def _key(text: str) -> int:
    """A signed 64-bit advisory lock key: the first 8 bytes of a sha256."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big", signed=True)


MIGRATION_LOCK = _key("acp-green schema migration")


def session_lock_key(session_id: str) -> int:
    """The advisory lock that makes `session_id` this process's (signed 64-bit, as PostgreSQL takes it)."""
    return _key("acp-green session " + session_id)


def redacted(url: str) -> str:
    """`url` with any password replaced by ***: for logs and errors."""
    if "://" not in url:  # a key=value connection string
        return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "(a PostgreSQL URL that cannot be parsed)"
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hosts}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(name == "password" for name, _ in pairs):
            query = urllib.parse.urlencode([(name, "***" if name == "password" else value) for name, value in pairs], safe="*")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def PostgresStore(url: str, **bounds: int) -> ThreadedStore:  # noqa: N802 - named as the store it makes
    """The store on the PostgreSQL server at `url` (connected and migrated on the store thread);
    `bounds`: ThreadedStore's."""
    return ThreadedStore(PostgresOpener(url), **bounds)


@dataclass
class PostgresOpener:
    """Opens the server's database on the store thread; `name` is the URL without its password."""

    url: str = field(repr=False)  # it may hold the password
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = redacted(self.url)

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection (autocommit, serving settings), or psycopg.OperationalError."""
        return connect(self.url, {"lock_timeout": f"{SERVE_LOCK_TIMEOUT_MS}ms"})

    def open(self) -> PostgresDatabase:
        conn = self.connect()
        try:
            migrate(conn, self.name)
        except BaseException:  # ok: close, then re-raise
            conn.close()
            raise
        return PostgresDatabase(conn, self.connect, self.name)

    def open_existing(self) -> PostgresDatabase | None:
        """For the inspection commands: nothing is created or migrated; None when no agent has
        made the schema there yet (a mistyped database name gets no tables)."""
        conn = self.connect()
        try:
            version = _schema_version(conn)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreOpenError(f"the state database {self.name} has schema {version}; this acp-green knows {SCHEMA_VERSION}")
        except BaseException:  # ok: close, then re-raise
            conn.close()
            raise
        if version is None:
            conn.close()
            return None
        return PostgresDatabase(conn, self.connect, self.name)





# -- schema ----------------------------------------------------------------------------------------
_TABLES = (
    f"""CREATE TABLE {SCHEMA}.sessions (
        session_id bytea PRIMARY KEY,
        cwd bytea NOT NULL,
        additional_directories bytea NOT NULL,
        title bytea,
        mode_id bytea,
        config bytea NOT NULL,
        updated_at double precision NOT NULL,
        archived boolean NOT NULL DEFAULT false,
        forked_from bytea
    )""",
    f"CREATE INDEX sessions_by_update ON {SCHEMA}.sessions (updated_at DESC, session_id DESC)",
    # history_turn: the turns.id whose history rows hold this turn's pieces (its own id, or for a
    # turn a fork copied, the source turn's history_turn).
    f"""CREATE TABLE {SCHEMA}.turns (
        id bigserial PRIMARY KEY,
        session_id bytea NOT NULL,
        turn_id bytea NOT NULL,
        started_at double precision NOT NULL,
        ended_at double precision,
        stop_reason bytea,
        error bytea,
        complete boolean NOT NULL DEFAULT true,
        history_turn bigint NOT NULL,
        UNIQUE (session_id, turn_id)
    )""",
    f"CREATE INDEX turns_by_session ON {SCHEMA}.turns (session_id, id)",
    f"CREATE INDEX turns_by_history ON {SCHEMA}.turns (history_turn)",
    f"""CREATE TABLE {SCHEMA}.history (
        id bigserial PRIMARY KEY,
        session_id bytea NOT NULL,
        turn bigint NOT NULL,
        seq integer NOT NULL,
        entries bytea NOT NULL,
        UNIQUE (turn, seq)
    )""",
    # How a deleted session's rows are found, to purge them in bounded steps.
    f"CREATE INDEX history_by_session ON {SCHEMA}.history (session_id, id)",
    f"""CREATE TABLE {SCHEMA}.usage (
        id bigserial PRIMARY KEY,
        usage_id bytea NOT NULL UNIQUE,
        session_id bytea NOT NULL,
        request_id bytea NOT NULL,
        stop_reason bytea NOT NULL,
        started_at double precision NOT NULL,
        duration double precision NOT NULL,
        input_bytes bigint NOT NULL,
        output_bytes bigint NOT NULL,
        input_tokens bigint,
        output_tokens bigint,
        recorded_at double precision NOT NULL,
        pid bigint NOT NULL
    )""",
    f"CREATE INDEX usage_by_session ON {SCHEMA}.usage (session_id, id)",
    f"""CREATE TABLE {SCHEMA}.session_state (
        session_id bytea PRIMARY KEY,
        state bytea NOT NULL
    )""",
)


def migrate(conn: psycopg.Connection[Any], name: str) -> None:
    """Bring the schema to SCHEMA_VERSION, one process at a time (a transaction-scoped advisory
    lock); a newer schema raises StoreOpenError. Creates nothing when the schema is current, so a
    role without CREATE can use tables made for it."""
    conn.execute("BEGIN")
    try:
        conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        version = _schema_version(conn)
        if version is not None and version > SCHEMA_VERSION:
            raise StoreOpenError(f"the state database {name} has schema {version}; this acp-green knows {SCHEMA_VERSION}")
        if version is None:
            if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone() is None:
                conn.execute(f"CREATE SCHEMA {SCHEMA}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (version integer NOT NULL)")
            for statement in _TABLES:
                conn.execute(statement)
            conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
        # Later versions migrate here, from `version` up.
        conn.execute("COMMIT")
    except BaseException:  # ok: roll back, then re-raise
        if not conn.closed:
            conn.execute("ROLLBACK")
        raise


def _schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The schema's version, None when there is no schema yet."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",)).fetchone()
    if row is None or not row[0]:
        return None
    found = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
    return None if found is None or found[0] is None else int(found[0])


# -- columns ---------------------------------------------------------------------------------------
def _b(value: str | None) -> bytes | None:
    """A str column: its UTF-8 bytes, lone surrogates passed through (None stays NULL)."""
    return None if value is None else value.encode("utf-8", "surrogatepass")


def _s(value: bytes | None) -> str | None:
    """The str a column holds (the inverse of `_b`)."""
    return None if value is None else bytes(value).decode("utf-8", "surrogatepass")


def _str(value: bytes) -> str:
    return bytes(value).decode("utf-8", "surrogatepass")


def _json(value: Any) -> bytes:
    """JSON with every str kept as its characters (as statedb._json_column), so any str survives."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _joined(updates: Sequence[bytes]) -> bytes:
    """Updates as one JSON Lines column; an update holding a raw newline is refused (statedb._joined)."""
    joined = b"\n".join(updates)
    if joined.count(b"\n") != len(updates) - 1:
        raise statedb.RefusedRecord("a history entry holds a raw newline")
    return joined


def _key_column(value: str, what: str) -> bytes:
    """An id column (indexed): refused before any statement when longer than MAX_KEY_BYTES."""
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_KEY_BYTES:
        raise statedb.RefusedRecord(f"the {what} is {len(encoded)} bytes long; ids of at most {MAX_KEY_BYTES} bytes are stored")
    return encoded


def _int64(value: int | None, what: str) -> int | None:
    """`value`, refused before any statement when bigint cannot hold it (the server would abort the transaction)."""
    if value is not None and not _INT64[0] <= value <= _INT64[1]:
        raise statedb.RefusedRecord(f"{what} {value} is out of the range a bigint holds")
    return value


# The history rows a delete may free (statedb._FREED_BY_DELETE): a turn's rows live while any turn,
# of any session, has that history_turn; those of the session's turns no other session shares go.
_FREED_BY_DELETE = f"""SELECT mine.history_turn FROM {SCHEMA}.turns AS mine WHERE mine.session_id = %s
    AND NOT EXISTS (SELECT 1 FROM {SCHEMA}.turns AS other WHERE other.history_turn = mine.history_turn
                    AND other.session_id <> mine.session_id)"""

_SESSION_COLUMNS = "session_id, cwd, additional_directories, title, mode_id, config, updated_at, archived, forked_from"


def _session(row: Sequence[Any]) -> SessionRecord:
    sid, cwd, dirs, title, mode_id, config, updated_at, archived, forked_from = row
    return SessionRecord(_str(sid), _str(cwd), json.loads(_str(dirs)), _s(title), _s(mode_id), json.loads(_str(config)),
                         updated_at, bool(archived), _s(forked_from))


def _turn(row: Sequence[Any]) -> StoredTurn:
    turn_id, started_at, stop_reason, error, complete = row
    return StoredTurn(_str(turn_id), started_at, _s(stop_reason), _s(error), bool(complete))



# -- session locks ---------------------------------------------------------------------------------
class SessionLocks:
    """The sessions one connection owns (session-level advisory locks), and the releases that wait
    for the open transaction's COMMIT; used by the store thread only."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        self._at_commit: list[str] = []  # released inside the open transaction
        # Sessions another process took while our connection was lost: their writes are refused
        # here from then on, so the two processes never both write one session.
        self.lost: set[str] = set()

    def lock(self, conn: psycopg.Connection[Any], session_id: str) -> str | None:
        """Take the session (never waits): None once ours (already ours: never locked twice), else the holder's line."""
        if session_id in self.held:
            if session_id in self._at_commit:  # released, then claimed again, before the commit: stays ours
                self._at_commit = [sid for sid in self._at_commit if sid != session_id]
            return None
        for _attempt in range(3):
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (session_lock_key(session_id),)).fetchone()
            if row is not None and row[0]:
                self.held.add(session_id)
                self.lost.discard(session_id)
                return None
            holder = _holder(conn, session_id)
            if holder is not None:
                return holder
            # The holder let it go between the two statements: try again.
        return "another acp-green process (it holds the session's lock; it could not be named)"

    def release_at_commit(self, session_id: str) -> None:
        self._at_commit.append(session_id)

    def committed(self, conn: psycopg.Connection[Any], name: str) -> None:
        """The transaction committed: let go of what it released."""
        released, self._at_commit = self._at_commit, []
        if released:
            self.release(conn, released, name)

    def rolled_back(self) -> None:
        """The transaction is gone: its releases are retried with the writes before them."""
        self._at_commit.clear()

    def release(self, conn: psycopg.Connection[Any], session_ids: list[str], name: str) -> None:
        """Let the sessions go now. Never raises: on a lost connection the server has let them go already."""
        ours = [sid for sid in dict.fromkeys(session_ids) if sid in self.held]
        self.held.difference_update(ours)
        if not ours or conn.closed:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(k) FROM unnest(%s::bigint[]) AS u(k)",
                         ([session_lock_key(sid) for sid in ours],)).fetchall()
        except psycopg_module().Error as exc:
            if not conn.closed:
                conn.close()  # locks held that are no longer tracked: only a new connection is sure to drop them
            log.info("releasing %d sessions on %s failed (%s); the connection is closed, which releases them", len(ours), name, exc)

    def take_back(self, conn: psycopg.Connection[Any], name: str) -> None:
        """On a new connection, lock again every session held; one another process took meanwhile is
        said at ERROR and is no longer ours."""
        held = sorted(self.held)
        if not held:
            return
        rows = conn.execute(
            "SELECT pg_try_advisory_lock(k) FROM unnest(%s::bigint[]) WITH ORDINALITY AS u(k, n) ORDER BY n",
            ([session_lock_key(sid) for sid in held],),
        ).fetchall()
        for session_id, (taken,) in zip(held, rows):
            if not taken:
                self.held.discard(session_id)
                self.lost.add(session_id)
                log.error("session %s was taken by %s while the connection to %s was lost: it is no longer this "
                          "process's, and its writes here are dropped from now on (close it and load it again "
                          "once the other lets it go)", ascii(session_id), _holder(conn, session_id), name)


def _holder(conn: psycopg.Connection[Any], session_id: str) -> str | None:
    """Who holds the session's lock, as the refused process is told; None when nobody does."""
    key = session_lock_key(session_id) & 0xFFFFFFFFFFFFFFFF  # pg_locks shows the high and low 32 bits
    row = conn.execute(
        """SELECT a.application_name, host(a.client_addr), a.backend_start
           FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s AND l.objid::bigint = %s
             AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           LIMIT 1""",
        (key >> 32, key & 0xFFFFFFFF),
    ).fetchone()
    if row is None:
        return None
    name, address, started = row
    since = started.astimezone().strftime("%Y-%m-%d %H:%M:%S") if started is not None else "an unknown time"
    return f"another acp-green process ({name or 'unnamed'}, from {address or 'a local socket'}, since {since})"


# -- the purge queue -------------------------------------------------------------------------------
class PurgeQueue:
    """Per deleted session, the history_turn values whose history rows are left to purge (SQLite
    keeps this in a TEMP table). It lives in this process, not on the server, and goes with the
    transaction that changes it: a copy of it as it was (`_before`) is kept until that commits,
    and put back should it roll back or its connection be lost. Lost with the process, the rows it
    named are found again by `orphaned_history` at the next start."""

    def __init__(self) -> None:
        self.turns: dict[str, set[int]] = {}
        self._before: dict[str, set[int]] | None = None
        self._open = False  # a transaction is open: changes are kept only once it commits

    def begin(self) -> None:
        self.end(committed=False)  # a transaction whose connection was lost left its changes
        self._open = True

    def end(self, committed: bool) -> None:
        if self._before is not None and not committed:
            self.turns = self._before
        self._before = None
        self._open = False

    def copy(self) -> dict[str, set[int]]:
        return {sid: set(turns) for sid, turns in self.turns.items()}

    def add(self, session_id: str, turns: list[int]) -> None:
        self._keep()
        self.turns.setdefault(session_id, set()).update(turns)

    def first(self, session_id: str) -> int | None:
        queued = self.turns.get(session_id)
        return min(queued) if queued else None

    def remove(self, session_id: str, turn: int) -> None:
        self._keep()
        queued = self.turns.get(session_id)
        if queued is not None:
            queued.discard(turn)
            if not queued:
                del self.turns[session_id]

    def _keep(self) -> None:
        if self._open and self._before is None:
            self._before = self.copy()


# -- the database ----------------------------------------------------------------------------------
_Method = TypeVar("_Method", bound=Callable[..., Any])


def _operation(method: _Method) -> _Method:
    """One operation of the store thread: outside a transaction, reconnects first; inside one, runs
    under a savepoint while the transaction is retried `_careful`ly, and when the server refused a
    record and so aborted the transaction, fails it as a whole, to be retried that way."""

    @functools.wraps(method)
    def run(self: PostgresDatabase, *args: Any, **kwargs: Any) -> Any:
        if self._outside_transaction():
            return method(self, *args, **kwargs)
        careful = self._careful
        if careful:
            queue = self._queue.copy()
            self.conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            result = method(self, *args, **kwargs)
        except Exception as exc:
            if self._aborted() and self.is_record_error(exc):
                if careful:  # this record alone is dropped; the transaction goes on
                    self.conn.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
                    self.conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
                    self._queue.turns = queue
                    raise
                self._careful = True
                raise self._psycopg.errors.InFailedSqlTransaction(
                    f"the server refused a record ({type(exc).__name__}: {str(exc).strip()}), which aborted "
                    "the transaction; it is retried with each write on its own"
                ) from exc
            raise
        if careful:
            self.conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        return result

    return cast(_Method, run)


class PostgresDatabase:
    """`Database` on one psycopg connection: transactions, failures and reconnecting here, the
    statements in the functions below, session ownership in `SessionLocks`."""

    failures: tuple[type[BaseException], ...]

    def __init__(self, conn: psycopg.Connection[Any], connect: Callable[[], psycopg.Connection[Any]] | None = None,
                 name: str = "the PostgreSQL store") -> None:
        """`connect` opens a new connection for `reconnect` (None: a lost connection stays lost)."""
        self._psycopg = psycopg_module()
        self.failures = (self._psycopg.Error,)
        self.conn = conn
        self.name = name
        self._connect = connect
        self.locks = SessionLocks()
        self._queue = PurgeQueue()
        self._writing = False  # between begin_write and its commit or rollback
        self._careful = False  # a record aborted the last try: one savepoint per operation until a commit
        self._relock = False  # reconnected, and the session locks are not all taken back yet
        self._backend = _backend_identity(conn)

    # -- transactions and failures ----------------------------------------------------------------
    def begin_write(self) -> None:
        self._transaction_gone()  # one whose connection was lost: its releases and queue changes with it
        self._live()
        self.conn.execute("BEGIN")
        self._writing = True
        self._queue.begin()

    def commit(self) -> None:
        if self._aborted():  # a failure was caught above: COMMIT would only roll back
            self._careful = True
            raise self._psycopg.errors.InFailedSqlTransaction("the transaction was aborted by a failed statement")
        try:
            done = self.conn.execute("COMMIT")
        finally:
            self._writing = False
        if done.statusmessage != "COMMIT":
            raise self._psycopg.errors.InFailedSqlTransaction(f"the server did not commit ({done.statusmessage})")
        self._queue.end(committed=True)
        self._careful = False
        self.locks.committed(self.conn, self.name)

    def rollback(self) -> None:
        self._transaction_gone()
        try:
            self.conn.execute("ROLLBACK")
        except self._psycopg.Error:
            self.conn.close()  # a connection that cannot even roll back is opened anew: reconnect()

    def _transaction_gone(self) -> None:
        self._writing = False
        self.locks.rolled_back()  # the releases are retried with the writes before them
        self._queue.end(committed=False)

    @property
    def in_transaction(self) -> bool:
        status = self.conn.info.transaction_status
        tx = self._psycopg.pq.TransactionStatus
        return bool(status == tx.INTRANS or status == tx.INERROR)

    def _aborted(self) -> bool:
        return bool(self.conn.info.transaction_status == self._psycopg.pq.TransactionStatus.INERROR)

    def _live(self) -> None:
        """Reconnect first when the connection was lost (a read after an outage with no write waiting)."""
        if self.conn.closed or self._relock:
            self.reconnect()

    def _outside_transaction(self) -> bool:
        """True, after reconnecting if need be, unless a write transaction is open: there a lost
        connection fails the transaction instead (its writes are retried whole, never split)."""
        if self._writing and not self.conn.closed:
            return False
        if self._writing:
            self._transaction_gone()
        self._live()
        return True

    def reconnect(self) -> None:
        """A lost connection opened anew (raises while the server cannot be reached), its server
        process ended should it linger, and every session lock taken back (SessionLocks.take_back)."""
        if not self.conn.closed and not self._relock:
            return
        if self.conn.closed:
            if self._connect is None:
                raise self._psycopg.OperationalError(f"the connection to {self.name} is lost")
            old = self._backend
            self.conn = self._connect()
            self._transaction_gone()
            self._relock = True  # until every lock is taken back, even should that fail now
            self._backend = _backend_identity(self.conn)
            _end_stale_backend(self.conn, old, self.name)
        self.locks.take_back(self.conn, self.name)
        self._relock = False
        log.info("reconnected to %s (%d session locks held)", self.name, len(self.locks.held))

    def is_unusable(self, exc: BaseException) -> bool:
        """Nothing on a server is corrupt for good from here: every failure is retried."""
        return False

    def is_busy(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) in _BUSY_STATES

    def is_record_error(self, exc: BaseException) -> bool:
        """The record's own fault: a value the server refuses (data exceptions, constraints, a row or
        key over a limit: class 54), or any error not psycopg's (an encoding, a RefusedRecord)."""
        if not isinstance(exc, self._psycopg.Error):
            return isinstance(exc, Exception)
        if isinstance(exc, (self._psycopg.DataError, self._psycopg.IntegrityError)):
            return True
        return (getattr(exc, "sqlstate", None) or "").startswith("54")

    def close(self) -> None:
        """Let every session go, then close the connection (after the last commit).

        Unlocked first, in one round trip: the server drops a closed connection's locks only once
        its backend has noticed the close, a moment later, and the next owner should not wait."""
        if self.locks.held and not self.conn.closed:
            try:
                self.conn.execute("SELECT pg_advisory_unlock_all()")
            except psycopg_module().Error as exc:  # the connection's end drops them anyway
                log.info("letting the sessions of %s go before closing failed (%s)", self.name, exc)
        self.locks.held.clear()
        self.conn.close()

    # -- session ownership ------------------------------------------------------------------------
    def lock_session(self, session_id: str) -> str | None:
        if session_id not in self.locks.held:
            self._outside_transaction()
        return self.locks.lock(self.conn, session_id)

    def lost(self, session_id: str) -> bool:
        return session_id in self.locks.lost

    def unlock_session(self, session_id: str) -> None:
        if self._writing:
            self.locks.release_at_commit(session_id)
        else:
            self.locks.release(self.conn, [session_id], self.name)

    # -- writes and reads: the statements are the functions below -----------------------------------
    @_operation
    def save_session(self, record: SessionRecord) -> None:
        save_session(self.conn, record)

    @_operation
    def delete_session(self, session_id: str, max_history_rows: int | None = None) -> bool:
        return delete_session(self.conn, self._queue, session_id, max_history_rows)

    @_operation
    def purge_history(self, session_id: str, max_rows: int) -> bool:
        return purge_history(self.conn, self._queue, session_id, max_rows)

    @_operation
    def orphaned_history(self) -> str | None:
        return orphaned_history(self.conn, self._queue)

    @_operation
    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: Sequence[bytes]) -> None:
        begin_turn(self.conn, session_id, turn_id, started_at, prompt)

    @_operation
    def append_history(self, session_id: str, turn_id: str, updates: Sequence[bytes]) -> None:
        append_history(self.conn, session_id, turn_id, updates)

    @_operation
    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome, ended_at: float | None = None) -> None:
        end_turn(self.conn, session_id, turn_id, outcome, ended_at)

    @_operation
    def fork_history(self, source_id: str, fork_id: str) -> None:
        fork_history(self.conn, source_id, fork_id)

    @_operation
    def mark_incomplete(self, session_id: str, turn_id: str) -> None:
        mark_incomplete(self.conn, session_id, turn_id)

    @_operation
    def record_usage(self, record: UsageRecord) -> None:
        record_usage(self.conn, record)

    @_operation
    def save_state(self, session_id: str, state: bytes) -> None:
        save_state(self.conn, session_id, state)

    @_operation
    def load_session(self, session_id: str) -> SessionRecord | None:
        return load_session(self.conn, session_id)

    @_operation
    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None,
                      archived: bool | None = None) -> list[SessionRecord]:
        return list_sessions(self.conn, cwd, after, limit, archived)

    @_operation
    def load_state(self, session_id: str) -> bytes | None:
        return load_state(self.conn, session_id)

    @_operation
    def history_page(self, session_id: str, after: HistoryPosition | None, max_entries: int, max_bytes: int,
                     turn_id: str | None = None) -> HistoryPage:
        return history_page(self.conn, session_id, after, max_entries, max_bytes, turn_id)

    def history(self, session_id: str) -> list[bytes]:
        """Every stored update's JSON, oldest first, read a page at a time (statedb.history)."""
        entries: list[bytes] = []
        after: HistoryPosition | None = None
        while True:
            page = self.history_page(session_id, after, 10_000, 1 << 24)
            entries.extend(entry.update for entry in page.entries)
            if page.after is None:
                return entries
            after = page.after

    @_operation
    def turns(self, session_id: str) -> list[StoredTurn]:
        return turns(self.conn, session_id)

    @_operation
    def turn_page(self, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
        return turn_page(self.conn, session_id, start, limit, newest_first)

    @_operation
    def turn_count(self, session_id: str) -> int:
        return turn_count(self.conn, session_id)

    @_operation
    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return usage(self.conn, session_id)


def _backend_identity(conn: psycopg.Connection[Any]) -> tuple[int, Any] | None:
    """The connection's server process: (pid, backend_start), to recognise it once the connection is lost."""
    try:
        row = conn.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
    except psycopg_module().Error:
        return None
    return (row[0], row[1]) if row is not None else None


def _end_stale_backend(conn: psycopg.Connection[Any], old: tuple[int, Any] | None, name: str) -> None:
    """End the server process of a lost connection should it still live (a network cut the server
    has not noticed): it still holds this process's session locks, maybe an open transaction's row
    locks too. Matched by pid and start time, so it is that process and no other."""
    if old is None:
        return
    args = "pid, 5000" if conn.info.server_version >= 140000 else "pid"  # 14: wait up to 5 s for it to end
    try:
        conn.execute(f"SELECT pg_terminate_backend({args}) FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
                     old).fetchall()
    except psycopg_module().Error as exc:
        if conn.closed:
            raise
        log.info("could not end the lost connection's server process %d on %s: %s", old[0], name, exc)


# -- writes ----------------------------------------------------------------------------------------
# The history rows a delete may free (statedb._FREED_BY_DELETE): a turn's rows live while any turn,
# of any session, has that history_turn; those of the session's turns no other session shares go.
_FREED_BY_DELETE = f"""SELECT mine.history_turn FROM {SCHEMA}.turns AS mine WHERE mine.session_id = %s
    AND NOT EXISTS (SELECT 1 FROM {SCHEMA}.turns AS other WHERE other.history_turn = mine.history_turn
                    AND other.session_id <> mine.session_id)"""


def save_session(conn: psycopg.Connection[Any], record: SessionRecord) -> None:
    conn.execute(
        f"""INSERT INTO {SCHEMA}.sessions ({_SESSION_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,
               additional_directories = excluded.additional_directories, title = excluded.title,
               mode_id = excluded.mode_id, config = excluded.config, updated_at = excluded.updated_at,
               archived = excluded.archived, forked_from = excluded.forked_from""",
        (_key_column(record.session_id, "session id"), _b(record.cwd), _json(record.additional_directories), _b(record.title),
         _b(record.mode_id), _json(record.config), float(record.updated_at), bool(record.archived),
         _b(record.forked_from)),
    )


def delete_session(conn: psycopg.Connection[Any], queue: PurgeQueue, session_id: str, max_history_rows: int | None = None) -> bool:
    """Forget a session, its turns and its state at once (its history is read through its turns:
    unreadable from now on); its usage records stay (statedb.delete_session).

    A history row goes once no turn refers to it: the rows of the session's turns that no other
    session's turn shares (_FREED_BY_DELETE, keyed on history_turn, so a fork deleted last frees
    its deleted source's rows too). Without `max_history_rows` they go now; with it, they are
    queued under the session (PurgeQueue), at most that many go now, and True says some are left
    for `purge_history`."""
    key = _b(session_id)
    conn.execute(f"DELETE FROM {SCHEMA}.sessions WHERE session_id = %s", (key,))
    if max_history_rows is None:
        conn.execute(f"DELETE FROM {SCHEMA}.history WHERE turn IN ({_FREED_BY_DELETE})", (key,))
    else:
        freed = conn.execute(
            f"""SELECT DISTINCT freed.history_turn FROM ({_FREED_BY_DELETE}) AS freed
                WHERE EXISTS (SELECT 1 FROM {SCHEMA}.history h WHERE h.turn = freed.history_turn)""", (key,),
        ).fetchall()
        if freed:
            queue.add(session_id, [turn for (turn,) in freed])
    conn.execute(f"DELETE FROM {SCHEMA}.turns WHERE session_id = %s", (key,))
    conn.execute(f"DELETE FROM {SCHEMA}.session_state WHERE session_id = %s", (key,))
    if max_history_rows is None:
        return False
    return purge_history(conn, queue, session_id, max_history_rows)


def purge_history(conn: psycopg.Connection[Any], queue: PurgeQueue, session_id: str, max_rows: int) -> bool:
    """Delete up to `max_rows` of the history rows queued under `session_id` (by delete_session or
    orphaned_history), a queued turn's rows in order; True when more are left (statedb.purge_history)."""
    left = max_rows
    for _ in range(max(max_rows, 1)):
        turn = queue.first(session_id)
        if turn is None:
            return False
        if left > 0:
            deleted = conn.execute(
                f"""DELETE FROM {SCHEMA}.history WHERE id IN (
                        SELECT id FROM {SCHEMA}.history WHERE turn = %s ORDER BY seq LIMIT %s)""", (turn, left))
            left -= max(deleted.rowcount, 0)
        if conn.execute(f"SELECT 1 FROM {SCHEMA}.history WHERE turn = %s LIMIT 1", (turn,)).fetchone() is not None:
            return True  # this turn has rows left: `left` is spent
        queue.remove(session_id, turn)
        if left <= 0:
            break
    return queue.first(session_id) is not None


def orphaned_history(conn: psycopg.Connection[Any], queue: PurgeQueue) -> str | None:
    """A session that wrote history rows no turn refers to any more (a process ended while, or
    before, purging them), with every such turn of it queued for `purge_history`; None when there
    are none. The search reads the index of history (turn, seq), probing turns_by_history."""
    row = conn.execute(
        f"""SELECT h.session_id FROM {SCHEMA}.history h
            WHERE h.turn = (SELECT o.turn FROM {SCHEMA}.history o
                            WHERE NOT EXISTS (SELECT 1 FROM {SCHEMA}.turns t WHERE t.history_turn = o.turn) LIMIT 1)
            LIMIT 1"""
    ).fetchone()
    if row is None:
        return None
    turns = conn.execute(
        f"""SELECT DISTINCT h.turn FROM {SCHEMA}.history h WHERE h.session_id = %s
            AND NOT EXISTS (SELECT 1 FROM {SCHEMA}.turns t WHERE t.history_turn = h.turn)""", (row[0],),
    ).fetchall()
    if not turns:
        return None  # purged meanwhile by another process
    writer = _str(row[0])
    queue.add(writer, [turn for (turn,) in turns])
    return writer


def _insert_pieces(conn: psycopg.Connection[Any], session_key: bytes | None, turn: int, seq: int, updates: Sequence[bytes]) -> None:
    """Store `updates` as rows of at most statedb.PIECE_ROW_BYTES from piece number `seq` (statedb._insert_pieces)."""
    limit = statedb.PIECE_ROW_BYTES
    rows: list[tuple[bytes | None, int, int, bytes]] = []
    start, size = 0, 0
    for end, update in enumerate(updates):
        if end > start and size + len(update) > limit:
            rows.append((session_key, turn, seq, _joined(updates[start:end])))
            seq, start, size = seq + 1, end, 0
        size += len(update) + 1
    if start < len(updates):
        rows.append((session_key, turn, seq, _joined(updates[start:])))
    insert = f"INSERT INTO {SCHEMA}.history (session_id, turn, seq, entries) VALUES (%s, %s, %s, %s)"
    if len(rows) == 1:
        conn.execute(insert, rows[0])
    elif rows:
        with conn.cursor() as cursor:
            cursor.executemany(insert, rows)


def _aborted(conn: psycopg.Connection[Any]) -> bool:
    return bool(conn.info.transaction_status == psycopg_module().pq.TransactionStatus.INERROR)


def begin_turn(conn: psycopg.Connection[Any], session_id: str, turn_id: str, started_at: float, prompt: Sequence[bytes]) -> None:
    """A new turn, its history its own (history_turn = its id), and its prompt (piece 0); a prompt
    that cannot be stored leaves the turn incomplete; a turn begun twice is refused."""
    session_key = _key_column(session_id, "session id")
    if len(session_key) + len(_key_column(turn_id, "turn id")) > MAX_KEY_BYTES:
        raise statedb.RefusedRecord(f"the session and turn ids are over {MAX_KEY_BYTES} bytes together")
    row = conn.execute(
        f"""WITH new AS (SELECT nextval(pg_get_serial_sequence('{SCHEMA}.turns', 'id')) AS id)
            INSERT INTO {SCHEMA}.turns (id, session_id, turn_id, started_at, history_turn)
            SELECT id, %s, %s, %s, id FROM new
            ON CONFLICT (session_id, turn_id) DO NOTHING RETURNING id""",
        (session_key, _b(turn_id), float(started_at)),
    ).fetchone()
    if row is None:
        raise statedb.RefusedRecord(f"turn {turn_id!r} was already begun in session {session_id!r}")
    try:
        _insert_pieces(conn, session_key, row[0], 0, prompt)
    except Exception:  # ok: mark the turn, then re-raise for the caller to count and log
        if not _aborted(conn):
            conn.execute(f"UPDATE {SCHEMA}.turns SET complete = false WHERE id = %s", (row[0],))
        raise


def append_history(conn: psycopg.Connection[Any], session_id: str, turn_id: str, updates: Sequence[bytes]) -> None:
    """The next piece of a running turn; one that cannot be stored leaves the turn incomplete.
    A turn a fork copied has ended and shares its source's rows: it takes no more pieces."""
    row = conn.execute(
        f"""SELECT t.id, t.history_turn, (SELECT max(h.seq) FROM {SCHEMA}.history h WHERE h.turn = t.id)
            FROM {SCHEMA}.turns t WHERE t.session_id = %s AND t.turn_id = %s""",
        (_b(session_id), _b(turn_id)),
    ).fetchone()
    if row is None:
        raise statedb.RefusedRecord(f"no turn {turn_id!r} was begun in session {session_id!r} (or the session was deleted)")
    turn, history_turn, last = row
    if history_turn != turn:
        raise statedb.RefusedRecord(f"turn {turn_id!r} of session {session_id!r} was copied by a fork: it takes no more history")
    try:
        _insert_pieces(conn, _b(session_id), turn, 0 if last is None else last + 1, updates)
    except Exception:  # ok: mark the turn, then re-raise for the caller to count and log
        if not _aborted(conn):
            conn.execute(f"UPDATE {SCHEMA}.turns SET complete = false WHERE id = %s", (turn,))
        raise


def end_turn(conn: psycopg.Connection[Any], session_id: str, turn_id: str, outcome: TurnOutcome, ended_at: float | None = None) -> None:
    row = conn.execute(
        f"""UPDATE {SCHEMA}.turns SET stop_reason = %s, error = %s, ended_at = %s
            WHERE session_id = %s AND turn_id = %s RETURNING id""",
        (_b(outcome.stop_reason), _b(outcome.error), float(time.time() if ended_at is None else ended_at),
         _b(session_id), _b(turn_id)),
    ).fetchone()
    if row is None:
        raise statedb.RefusedRecord(f"no turn {turn_id!r} was begun in session {session_id!r} (or the session was deleted)")


def fork_history(conn: psycopg.Connection[Any], source_id: str, fork_id: str) -> None:
    """Give `fork_id` every turn of `source_id` that has ended, in the source's order, reading the
    same history rows (history_turn): no history row is copied, and the fork's turns keep them
    alive after the source is deleted. A turn still running is left out. A fork that has one of
    those turns already gets none of them (as SQLite's failing INSERT)."""
    row = conn.execute(
        f"""WITH source AS (
                SELECT id, turn_id, started_at, ended_at, stop_reason, error, complete, history_turn
                FROM {SCHEMA}.turns WHERE session_id = %(source)s AND ended_at IS NOT NULL),
            clash AS (
                SELECT 1 FROM {SCHEMA}.turns f JOIN source ON source.turn_id = f.turn_id
                WHERE f.session_id = %(fork)s LIMIT 1),
            copied AS (
                INSERT INTO {SCHEMA}.turns (session_id, turn_id, started_at, ended_at, stop_reason, error, complete, history_turn)
                SELECT %(fork)s, turn_id, started_at, ended_at, stop_reason, error, complete, history_turn FROM source
                WHERE NOT EXISTS (SELECT 1 FROM clash) ORDER BY id
                ON CONFLICT (session_id, turn_id) DO NOTHING RETURNING 1)
            SELECT EXISTS (SELECT 1 FROM clash), (SELECT count(*) FROM copied)""",
        {"source": _b(source_id), "fork": _key_column(fork_id, "session id")},
    ).fetchone()
    if row is not None and row[0]:
        raise statedb.RefusedRecord(f"session {fork_id!r} already has turns of the same ids as {source_id!r}'s: none was copied")


def mark_incomplete(conn: psycopg.Connection[Any], session_id: str, turn_id: str) -> None:
    conn.execute(f"UPDATE {SCHEMA}.turns SET complete = false WHERE session_id = %s AND turn_id = %s",
                 (_b(session_id), _b(turn_id)))


def record_usage(conn: psycopg.Connection[Any], record: UsageRecord) -> None:
    """Insert, or replace the record with the same usage_id (the "running" one of admission)."""
    conn.execute(
        f"""INSERT INTO {SCHEMA}.usage (usage_id, session_id, request_id, stop_reason, started_at, duration,
                input_bytes, output_bytes, input_tokens, output_tokens, recorded_at, pid)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (usage_id) DO UPDATE SET stop_reason = excluded.stop_reason,
                duration = excluded.duration, input_bytes = excluded.input_bytes,
                output_bytes = excluded.output_bytes, input_tokens = excluded.input_tokens,
                output_tokens = excluded.output_tokens, recorded_at = excluded.recorded_at""",
        (
            _key_column(record.usage_id, "usage id"), _key_column(record.session_id, "session id"), _b(record.request_id),
            _b(record.stop_reason), float(record.started_at), float(record.duration),
            _int64(record.input_bytes, "input_bytes"), _int64(record.output_bytes, "output_bytes"),
            _int64(record.input_tokens, "input_tokens"), _int64(record.output_tokens, "output_tokens"),
            float(record.recorded_at), _int64(os.getpid() if record.pid is None else record.pid, "pid"),
        ),
    )


def save_state(conn: psycopg.Connection[Any], session_id: str, state: bytes) -> None:
    conn.execute(
        f"""INSERT INTO {SCHEMA}.session_state (session_id, state) VALUES (%s, %s)
            ON CONFLICT (session_id) DO UPDATE SET state = excluded.state""",
        (_key_column(session_id, "session id"), bytes(state)),
    )


# -- reads -----------------------------------------------------------------------------------------
def load_session(conn: psycopg.Connection[Any], session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM {SCHEMA}.sessions WHERE session_id = %s",
                       (_b(session_id),), binary=True).fetchone()
    return _session(row) if row is not None else None


def list_sessions(conn: psycopg.Connection[Any], cwd: str | None = None, after: tuple[float, str] | None = None,
                  limit: int | None = None, archived: bool | None = None) -> list[SessionRecord]:
    """Most recently updated first; `after` is the (updated_at, session_id) of the last row seen."""
    clauses: list[str] = []
    args: list[Any] = []
    if archived is not None:
        clauses.append("archived = %s")
        args.append(bool(archived))
    if cwd is not None:
        clauses.append("cwd = %s")
        args.append(_b(cwd))
    if after is not None:
        clauses.append("(updated_at, session_id) < (%s, %s)")
        args.extend((float(after[0]), _b(after[1])))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {_SESSION_COLUMNS} FROM {SCHEMA}.sessions {where} ORDER BY updated_at DESC, session_id DESC"
    if limit is not None:
        sql += " LIMIT %s"
        args.append(limit)
    return [_session(row) for row in conn.execute(sql, args, binary=True).fetchall()]


def load_state(conn: psycopg.Connection[Any], session_id: str) -> bytes | None:
    row = conn.execute(f"SELECT state FROM {SCHEMA}.session_state WHERE session_id = %s",
                       (_b(session_id),), binary=True).fetchone()
    return bytes(row[0]) if row is not None else None


def history_page(conn: psycopg.Connection[Any], session_id: str, after: HistoryPosition | None, max_entries: int,
                 max_bytes: int, turn_id: str | None = None) -> HistoryPage:
    """Stored updates from `after` on (of one turn, with `turn_id`): at most `max_entries`, and no
    more than `max_bytes` of updates unless the first alone is larger (statedb.history_page).

    The session's turns are walked in id order, each turn's rows read through its history_turn in
    seq order, both along an index, nothing sorted; rows are fetched HISTORY_FETCH_ROWS at most at a
    time, so a page holds at most that many rows beyond its entries, whatever the length of the
    session. A position is a history row's id and an update's index in it."""
    key = _b(session_id)
    start = _resume(conn, key, after, turn_id)
    if start is None:
        return HistoryPage([], None)
    piece, skip = (after.piece, after.index) if after is not None else (0, 0)
    entries: list[HistoryEntry] = []
    size = 0
    for turn_row, row_id, row_turn, text in _history_rows(conn, key, start, turn_id is not None):
        if not text:
            continue
        updates = bytes(text).split(b"\n")
        index = skip if turn_row == start[0] and row_id == piece else 0
        while index < len(updates):
            update = updates[index]
            if entries and (len(entries) >= max_entries or size + len(update) > max_bytes):
                return HistoryPage(entries, HistoryPosition(row_id, index))
            entries.append(HistoryEntry(row_turn, update))
            size += len(update)
            index += 1
    return HistoryPage(entries, None)


def _resume(conn: psycopg.Connection[Any], key: bytes | None, after: HistoryPosition | None,
            turn_id: str | None) -> tuple[int, int] | None:
    """Where a page starts: the session's turns.id and the piece number (seq) in it; None when
    there is nothing to read (no such turn, or a position no turn of the session reads)."""
    if turn_id is not None:
        row = conn.execute(
            f"""SELECT t.id, (SELECT h.seq FROM {SCHEMA}.history h WHERE h.id = %s AND h.turn = t.history_turn)
                FROM {SCHEMA}.turns t WHERE t.session_id = %s AND t.turn_id = %s""",
            (after.piece if after is not None else None, key, _b(turn_id)),
        ).fetchone()
        if row is None or (after is not None and row[1] is None):
            return None
        return row[0], row[1] if after is not None else 0
    if after is None:
        return 0, 0
    row = conn.execute(
        f"""SELECT (SELECT min(t.id) FROM {SCHEMA}.turns t WHERE t.history_turn = h.turn AND t.session_id = %s), h.seq
            FROM {SCHEMA}.history h WHERE h.id = %s""",
        (key, after.piece),
    ).fetchone()
    return (row[0], row[1]) if row is not None and row[0] is not None else None


def _history_rows(conn: psycopg.Connection[Any], key: bytes | None, start: tuple[int, int],
                  one_turn: bool) -> Iterator[tuple[int, int, str, bytes]]:
    """(turns.id, history row id, turn id, entries) of the session's rows from `start` on (only that
    turn's, `one_turn`), in turn then seq order, fetched a few rows at a time (4, doubling up to
    HISTORY_FETCH_ROWS): a small page reads little, a long read few round trips."""
    turn_filter = "t.id = %(turn_row)s" if one_turn else "t.id >= %(turn_row)s"
    position = start
    fetch = 4
    while True:
        rows = conn.execute(
            f"""SELECT t.id, h.seq, h.id, t.turn_id, h.entries
                FROM {SCHEMA}.turns t JOIN {SCHEMA}.history h ON h.turn = t.history_turn
                WHERE t.session_id = %(session)s AND {turn_filter} AND (t.id > %(turn_row)s OR h.seq >= %(seq)s)
                ORDER BY t.id, h.seq LIMIT %(limit)s""",
            {"session": key, "turn_row": position[0], "seq": position[1], "limit": fetch},
            binary=True,
        ).fetchall()
        for turn_row, _seq, row_id, row_turn, text in rows:
            yield turn_row, row_id, _str(row_turn), text
        if len(rows) < fetch:
            return
        position = (rows[-1][0], rows[-1][1] + 1)
        fetch = min(fetch * 2, HISTORY_FETCH_ROWS)


def turns(conn: psycopg.Connection[Any], session_id: str) -> list[StoredTurn]:
    return [_turn(row) for row in conn.execute(
        f"SELECT turn_id, started_at, stop_reason, error, complete FROM {SCHEMA}.turns WHERE session_id = %s ORDER BY id",
        (_b(session_id),), binary=True,
    ).fetchall()]


def turn_page(conn: psycopg.Connection[Any], session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
    order = "DESC" if newest_first else "ASC"
    return [_turn(row) for row in conn.execute(
        f"""SELECT turn_id, started_at, stop_reason, error, complete FROM {SCHEMA}.turns WHERE session_id = %s
            ORDER BY id {order} LIMIT %s OFFSET %s""",
        (_b(session_id), limit, start), binary=True,
    ).fetchall()]


def turn_count(conn: psycopg.Connection[Any], session_id: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.turns WHERE session_id = %s", (_b(session_id),)).fetchone()
    return int(row[0]) if row is not None else 0


def usage(conn: psycopg.Connection[Any], session_id: str | None = None) -> list[UsageRecord]:
    sql = f"""SELECT session_id, request_id, stop_reason, started_at, duration, input_bytes, output_bytes,
                     input_tokens, output_tokens, recorded_at, usage_id, pid FROM {SCHEMA}.usage"""
    args: tuple[Any, ...] = ()
    if session_id is not None:
        sql += " WHERE session_id = %s"
        args = (_b(session_id),)
    records = []
    for row in conn.execute(sql + " ORDER BY id", args, binary=True).fetchall():
        (sid, request_id, stop_reason, started_at, duration, input_bytes, output_bytes,
         input_tokens, output_tokens, recorded_at, usage_id, pid) = row
        records.append(UsageRecord(
            _str(sid), _str(request_id), _str(stop_reason), started_at, duration, input_bytes, output_bytes,
            input_tokens, output_tokens, recorded_at, usage_id=_str(usage_id), pid=pid,
        ))
    return records
