"""The SQLite store: one dedicated thread owns the connection.

Greenlets and hub callbacks put work on a thread-safe queue and never touch the disk. Writes
return at once. Reads carry a gevent AsyncResult that the store thread resolves through the
hub's thread-safe callback, so the asking greenlet waits cooperatively. The thread drains
whatever is queued and applies it, in queue order, as one transaction: a burst of writes (the
pieces of a streaming turn among them) costs one commit, and a read sees every write queued
before it. Each queued item is a typed operation (operations.py) that knows whether it writes
and whether it is handed over at once. If the disk fails under us (full, I/O error, read-only,
corrupt), the thread copies what it can still read into a MemoryStore, warns on stderr, and
serves from memory from then on. A write that fails because of its own record (a value SQLite
cannot bind, a row too big: `statedb.is_record_error`) is not a disk failure: it is logged at
ERROR and counted in `failed_writes` (a history piece also marks its turn incomplete), and the
rest of its batch and every later write, of every session, still reach the disk.

A failure the disk may recover from (full, I/O error, read-only, the write lock held by
another process) does not give the database up: the batch rolls back, its writes wait in
memory, in order, with every later write, and are retried with backoff (RETRY_FIRST doubling to
RETRY_MAX) until a transaction takes them all; each failed attempt counts in `retries` and
`waiting_writes` says how many wait (both in `_acp_green/stats`). Meanwhile reads are answered
from what the disk holds, with the waiting session saves and deletes applied (a session
created meanwhile is listed and loads); history and usage written meanwhile show once they are
written, and a `sync` answers once they are. Only a database that is unusable for good (corrupt,
not a database) is replaced by memory. At close, writes that still wait are retried for
CLOSE_RETRY, then counted in `failed_writes` and said at ERROR.

Reads never wait long: serving takes the write lock with a short busy timeout (a lock held
elsewhere is a failure retried later, as above, and reads in WAL mode do not need it), a batch
holds at most MAX_BATCH_BYTES of history, and a deleted session's history is purged in steps of
statedb.PURGE_ROWS rows between batches (the session and its turns go at once, so nothing of it can be
read meanwhile; rows left by a process killed mid-purge are found and purged at the next start).

History waiting for the store thread is bounded: the bytes of history handed over and not yet
committed (on the hub, in the queue, in the batch being written) never exceed
`history_backlog_bytes` (unless one piece alone is larger and nothing else waits). Long before that, a turn that streams faster than the disk commits is
held back: `wait_for_history_room`, called from the turn's greenlet, waits while more than
`history_room_bytes` are behind, so the backlog, and the process's memory, stay small whatever
the turn's length. Writes never block the hub, and a cancelled turn stops waiting, so a piece
can still arrive over the bound: it is dropped, counted in `failed_writes`, said at ERROR once
per turn (and how much, when it ends), and its turn marked incomplete. That only happens when
the disk stalls (another process holding the write lock for long).
"""

from __future__ import annotations

import copy
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import AsyncResult, Event
from gevent.monkey import get_original

from . import private, statedb, statelock
from .base import MemoryStore
from .operations import (
    AppendHistory, BeginTurn, Close, DeleteSession, EndTurn, ForkHistory, History, ListSessions, ListTurns, LoadSession,
    LoadState, MarkIncomplete, Operation, Read, ReadHistoryPage, ReadTurnPage, RecordUsage, SaveSession, SaveState, Sync,
    Usage, Write,
)
from .session_record import SessionRecord
from .turns import HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

if TYPE_CHECKING:
    from ..rpc.cancel import CancelToken

log = logging.getLogger(__name__)

# The real thread, queue, lock and sleep even when monkey-patched (the default of `serve`), which
# would turn them into greenlet primitives.
_start_new_thread = get_original("_thread", "start_new_thread")
_SimpleQueue = get_original("queue", "SimpleQueue")
_Empty = get_original("queue", "Empty")
_Lock = get_original("threading", "Lock")
_sleep = get_original("time", "sleep")  # the store thread's own pause; patched, it would start a hub there

OPEN_TIMEOUT = 60.0  # migrations wait for other processes' write locks
# A read is answered within this or fails (StoreUnavailable): the receive loop never waits longer
# on the store. Reads never wait on another process's lock (SERVE_BUSY_TIMEOUT_MS) nor behind a
# long delete (PURGE_ROWS), so only a stalled disk reaches it.
READ_TIMEOUT = 10.0
SERVE_BUSY_TIMEOUT_MS = 100  # once open, a write lock held elsewhere is retried, not waited for
RETRY_FIRST = 0.05  # seconds before the first retry of writes the disk could not take; doubles...
RETRY_MAX = 2.0  # ...up to this
CLOSE_RETRY = 5.0  # at close, writes that wait are retried this long, then given up (said at ERROR)
WAITING_WRITES_LIMIT = 100_000  # writes kept for a disk that fails; further ones are dropped and counted
MAX_BATCH_BYTES = 8 << 20  # history one transaction takes at most (unless one piece alone is larger)
ROOM_POLL = 0.5  # seconds between checks of a producer waiting for room
CLOSE_TIMEOUT = 10.0  # bounded exit (S13) even when another process holds the database
MAX_BATCH = 1000
# A write whose type is not `at_once` (session saves: set_mode, set_config_option...; pieces of
# history) waits on the hub (its type's `hub_wait`: 5 ms for a save) before it is handed to the
# store thread, so a burst of control requests costs one hand-off (one thread wake-up, one GIL
# round trip) instead of one each. An `at_once` write (a turn's beginning and outcome, a usage
# record, a delete) is put on the queue in the call that makes it, with
# whatever waits before it, so its commit never waits on the hub. It is not committed yet: that
# is the store thread's next transaction, which a SIGKILL can still beat (the prompt's response
# does not wait for it). What is committed survives a SIGKILL, and a read's answer (load, list,
# history, usage, sync) leaves only after every write queued before it is committed. Reads, sync
# and close hand over what is waiting first, so ordering holds.
# Pieces of history waiting on the hub are handed over once this many bytes wait, before the
# timer: a fast stream is handed over in bounded bursts.
HANDOFF_BYTES = 1 << 20
HISTORY_BACKLOG_BYTES = 64 << 20  # history handed to the store and not committed yet (see above)
HISTORY_ROOM_BYTES = 8 << 20  # above this much uncommitted history a streaming turn waits (see above)
_HELD = object()  # a sync answered once the writes that wait are written


class StoreUnavailable(Exception):
    """The store thread did not answer in time, or the store is closed."""


class WaitingWrites:
    """The store thread's side of an outage: writes the disk cannot take now wait, in order, and are
    retried with backoff; reads are answered past them; at close they get their last tries.

    A base of `StoreThread`, run only by the store thread, like it."""

    path: str
    retries: int
    failed_writes: int
    _memory: MemoryStore | None
    _waiting: list[Write]
    _held_syncs: list[AsyncResult]
    _retry_at: float
    _retry_delay: float
    _outage: bool
    _outage_full: bool
    _outage_warned: bool
    # Defined by StoreThread: what a batch, a release of room and an answer to the hub are.
    _apply: Callable[[sqlite3.Connection, list[Operation]], list[tuple[Any, BaseException | None]]]
    _release: Callable[[int], None]
    _deliver: Callable[..., None]

    def _failed_now(self, exc: sqlite3.Error) -> None:
        """A transient failure (full, busy, I/O): count it, say it, retry later with backoff."""
        self.retries += 1
        self._retry_delay = min(max(self._retry_delay * 2, RETRY_FIRST), RETRY_MAX)
        self._retry_at = time.monotonic() + self._retry_delay
        if _is_busy(exc):
            log.info("state database busy; retrying in %.2fs (%d writes wait)", self._retry_delay, len(self._waiting))
        if not self._outage:
            self._outage = True
            self._outage_full = False
            self._outage_warned = not _is_busy(exc)
            if self._outage_warned:
                log.warning("state database %s cannot be written now (%s): keeping what waits in memory and retrying; "
                            "it is written once the disk works again", self.path, exc)

    def _while_waiting(self, conn: sqlite3.Connection, work: list[Operation]) -> list[tuple[Any, BaseException | None]]:
        """Writes join the waiting ones; reads are answered from the disk, the waiting session
        saves and deletes applied; a sync is answered once the waiting writes are written."""
        results: list[tuple[Any, BaseException | None]] = []
        for op in work:
            if isinstance(op, Write):
                if len(self._waiting) >= WAITING_WRITES_LIMIT:
                    self.failed_writes += 1
                    self._release(op.held_bytes())
                    if not self._outage_full:  # said once per outage; the count goes on in failed_writes
                        log.error("%d writes already wait for %s: dropping further writes until it takes them (%s of session %s first)",
                                  len(self._waiting), self.path, op.label, ascii(op.for_session()))
                        self._outage_full = True
                else:
                    self._waiting.append(op)
                results.append((None, None))
            elif isinstance(op, Sync):
                results.append((_HELD, None))
            else:
                try:
                    results.append((self._read_past_waiting(conn, op), None))
                except sqlite3.Error as exc:
                    results.append((None, StoreUnavailable(f"cannot read {self.path}: {exc}")))
        return results

    def _read_past_waiting(self, conn: sqlite3.Connection, op: Operation) -> Any:
        if isinstance(op, LoadSession):
            for write in reversed(self._waiting):
                if isinstance(write, SaveSession) and write.record.session_id == op.session_id:
                    return copy.deepcopy(write.record)
                if isinstance(write, DeleteSession) and write.session_id == op.session_id:
                    return None
        if isinstance(op, ListSessions):
            changes = [w for w in self._waiting if isinstance(w, (SaveSession, DeleteSession))]
            limit = None if op.limit is None else op.limit + len(changes)
            merged = MemoryStore()
            for record in statedb.list_sessions(conn, op.cwd, op.after, limit):
                merged.save_session(record)
            for write in changes:
                write.in_memory(merged)
            return merged.list_sessions(op.cwd, op.after, op.limit)
        return op.on_disk(conn)

    def _last_tries(self, conn: sqlite3.Connection) -> None:
        """At close: try the waiting writes until CLOSE_RETRY; what still cannot be written is lost, said at ERROR."""
        deadline = time.monotonic() + CLOSE_RETRY
        while self._waiting and self._memory is None and time.monotonic() < deadline:
            _sleep(max(min(self._retry_at - time.monotonic(), deadline - time.monotonic()), 0.0))
            self._retry_at = 0.0
            self._apply(conn, [])
        if self._waiting and self._memory is None:
            lost, self._waiting = self._waiting, []
            self.failed_writes += len(lost)
            self._release(sum(op.held_bytes() for op in lost))
            log.error("closing %s with %d writes it could not take (the disk still fails): they are lost", self.path, len(lost))
        held, self._held_syncs = self._held_syncs, []
        for result in held:
            self._deliver(result, error=StoreUnavailable(f"store {self.path} closed with writes it could not take"))


class StoreThread(WaitingWrites):
    """The store thread's side of `SqliteStore`: only the thread it starts runs these methods.

    It owns the connection, applies what is queued in batches (one transaction each), resolves
    reads through the hub, gives back room to a waiting producer as history is committed, keeps
    writes the disk cannot take now and retries them (its base, `WaitingWrites`), purges a deleted
    session's history in bounded steps, and falls back to memory when the database is unusable.
    """

    # Shared with the greenlet side; `SqliteStore.__init__` sets them before the thread starts.
    _hub: Any
    _queue: Any
    _backlog_lock: Any
    backlog_bytes: int
    history_room_bytes: int
    _room: Event
    _room_wanted: bool
    transactions: int
    _purging: list[str]
    _orphans_checked: bool

    def _deliver(self, result: AsyncResult | None, value: Any = None, error: BaseException | None = None) -> None:
        if result is None:
            return
        if error is not None:
            self._hub.loop.run_callback_threadsafe(result.set_exception, error)
        else:
            self._hub.loop.run_callback_threadsafe(result.set, value)

    def _thread_main(self, opened: AsyncResult, trace: Callable[[str], None] | None, page_limit: int | None, named_dir: bool) -> None:
        lock_fd: int | None = None
        try:
            private.prepare(self.path, named=named_dir)
            lock_fd = statelock.lock_state_dir(self.path)  # one serving process per state directory
            conn = statedb.connect(self.path, trace=trace, page_limit=page_limit)
            # Opening waited for other processes' locks; serving never waits long on one (see SqliteStore).
            conn.execute(f"PRAGMA busy_timeout = {SERVE_BUSY_TIMEOUT_MS}")
        except BaseException as exc:  # ok: every failure to open is reported; the thread then ends
            if lock_fd is not None:
                os.close(lock_fd)
            self._deliver(opened, error=exc)
            return
        self._deliver(opened)
        closed: AsyncResult | None = None
        try:
            closed = self._serve(conn)
        finally:
            try:
                conn.close()
            except sqlite3.Error:
                log.exception("closing %s failed", self.path)
            os.close(lock_fd)  # after the database: the next process finds everything committed
            # Only now: whoever waits in close() may reopen the database, or exit.
            self._deliver(closed)

    def _idle_wait(self) -> float | None:
        """How long the thread may wait for work: until the next retry, none when a purge step
        is due, forever when nothing is pending."""
        if self._memory is None and self._waiting:
            return max(self._retry_at - time.monotonic(), 0.0)
        if self._memory is None and (self._purging or not self._orphans_checked):
            return 0.0
        return None

    def _serve(self, conn: sqlite3.Connection) -> AsyncResult | None:
        """Apply queued work until close is asked; returns close's result, to answer once closed."""
        queue = self._queue
        while True:
            wait = self._idle_wait()
            try:
                batch = [queue.get(timeout=wait) if wait != 0.0 else queue.get_nowait()]
            except _Empty:
                batch = []
            size = sum(op.held_bytes() for op, _ in batch)
            while batch and len(batch) < MAX_BATCH and size < MAX_BATCH_BYTES and not isinstance(batch[-1][0], Close):
                try:
                    batch.append(queue.get_nowait())
                except _Empty:
                    break
                size += batch[-1][0].held_bytes()
            closing = bool(batch) and isinstance(batch[-1][0], Close)
            work = batch[:-1] if closing else batch
            if work or (self._waiting and time.monotonic() >= self._retry_at):
                results = self._apply(conn, [op for op, _ in work])
                for (_op, result), (value, error) in zip(work, results):
                    if value is _HELD:
                        self._held_syncs.append(result)
                    else:
                        self._deliver(result, value, error)
            elif not closing:
                self._purge_step(conn)
            if closing:
                self._last_tries(conn)
                return batch[-1][1]

    def _release(self, committed: int) -> None:
        """History bytes that left the backlog (committed, or given up): room for a waiting producer."""
        if not committed:
            return
        with self._backlog_lock:
            self.backlog_bytes -= committed
        if self._room_wanted and self.backlog_bytes <= self.history_room_bytes:
            self._room_wanted = False
            self._hub.loop.run_callback_threadsafe(self._room.set)

    def _apply(self, conn: sqlite3.Connection, work: list[Operation]) -> list[tuple[Any, BaseException | None]]:
        """Run the waiting writes then `work` in order, writes in one transaction that commits
        before any answer leaves; when the disk cannot take them now, keep the writes waiting
        and answer the reads from what the disk holds."""
        if self._memory is not None:
            return [self._call(op, self._memory) for op in work]
        if self._waiting and time.monotonic() < self._retry_at:
            return self._while_waiting(conn, work)
        waiting = self._waiting
        ops = waiting + work
        try:
            results = self._transaction(conn, ops, any(isinstance(op, Write) for op in ops))
        except sqlite3.Error as exc:
            if is_unusable(exc):
                memory = self._fall_back(conn, exc)
                return [self._call(op, memory) for op in work]
            self._failed_now(exc)
            return self._while_waiting(conn, work)
        self._waiting = []
        for op, (value, _error) in zip(ops, results):
            if isinstance(op, DeleteSession) and value:
                self._purging.append(op.session_id)  # its history goes in bounded steps, between batches
        self._release(sum(op.held_bytes() for op in ops))
        if self._outage:
            self._outage = False
            # WARNING when the outage was said at WARNING; a lock held elsewhere for a moment is INFO.
            log.log(logging.WARNING if self._outage_warned else logging.INFO,
                    "state database %s is written again: the %d writes that waited are stored (%d failed attempts)",
                    self.path, len(waiting), self.retries)
        self._retry_delay = 0.0
        held, self._held_syncs = self._held_syncs, []
        for result in held:
            self._deliver(result)
        return results[len(waiting):]

    def _purge_step(self, conn: sqlite3.Connection) -> None:
        """One bounded step of deleting history whose session is gone (between batches, so reads
        never wait behind the delete of a long history)."""
        try:
            if not self._purging:
                self._orphans_checked = True
                orphan = statedb.orphaned_history(conn)
                if orphan is not None:
                    self._purging.append(orphan)
                    self._orphans_checked = False  # look again once this one is gone
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                more = statedb.purge_history(conn, self._purging[0], statedb.PURGE_ROWS)
                conn.execute("COMMIT")
            except BaseException:  # ok: roll back, then re-raise
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if not more:
                self._purging.pop(0)
        except sqlite3.Error as exc:
            # Rows of a deleted session are unreachable already; the next start purges them.
            log.info("purging deleted history from %s failed (%s); the next start purges it", self.path, exc)
            self._orphans_checked = True
            self._purging.clear()

    def _transaction(self, conn: sqlite3.Connection, work: list[Operation], writes: bool) -> list[tuple[Any, BaseException | None]]:
        if writes:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock first: no upgrade deadlocks
        results = []
        try:
            for op in work:
                results.append(self._call(op, None, conn))
            if writes:
                conn.execute("COMMIT")
                self.transactions += 1
        except BaseException:  # ok: roll back, then re-raise
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results

    def _call(self, op: Operation, memory: MemoryStore | None, conn: sqlite3.Connection | None = None) -> tuple[Any, BaseException | None]:
        """One operation; a failing database aborts the batch, a failing record only this one."""
        try:
            if memory is not None:
                return op.in_memory(memory), None
            assert conn is not None, "an operation runs on the disk only inside a transaction"
            return op.on_disk(conn), None
        except Exception as exc:
            if not statedb.is_record_error(exc):
                raise
            return None, self._record_failed(op, exc)

    def _record_failed(self, op: Operation, exc: Exception) -> Exception:
        """A write dropped for its own content is said at ERROR and counted; the store goes on."""
        if isinstance(op, Write):
            self.failed_writes += 1
            log.error("dropped a %s of session %s: %s: %s", op.label, ascii(op.for_session()), type(exc).__name__, exc)
        return exc

    def _fall_back(self, conn: sqlite3.Connection, exc: BaseException) -> MemoryStore:
        """Serve from memory from now on, starting from what the database still holds and the
        writes that waited."""
        memory = MemoryStore()
        try:
            for record in statedb.list_sessions(conn):
                memory.save_session(record)
                _copy_history(conn, record.session_id, memory)
                state = statedb.load_state(conn, record.session_id)
                if state is not None:
                    memory.save_state(record.session_id, state)
            for usage in statedb.usage(conn):
                memory.record_usage(usage)
        except sqlite3.Error as read_exc:
            log.warning("could not read back %s (%s); starting from an empty memory store", self.path, read_exc)
        waiting, self._waiting = self._waiting, []
        for op in waiting:
            self._call(op, memory)
        self._release(sum(op.held_bytes() for op in waiting))
        self._memory = memory
        self._purging.clear()
        self._hub.loop.run_callback_threadsafe(self._room.set)  # from memory, nothing waits for the disk
        held, self._held_syncs = self._held_syncs, []
        for result in held:
            self._deliver(result)
        log.warning(
            "state database %s is unusable (%s): keeping sessions, history and usage in memory "
            "from now on; what happens next will not survive a restart",
            self.path, exc,
        )
        return memory


class SqliteStore(StoreThread):
    """Sessions, history and the usage ledger in `path`, served by one store thread.

    Its own methods run on the hub (greenlets and hub callbacks) and never touch the disk; the
    thread's are those of `StoreThread`.
    """

    def __init__(
        self,
        path: str,
        *,
        trace: Callable[[str], None] | None = None,
        page_limit: int | None = None,
        named_dir: bool = False,
        history_backlog_bytes: int = HISTORY_BACKLOG_BYTES,
        history_room_bytes: int = HISTORY_ROOM_BYTES,
    ) -> None:
        """Open `path` on the store thread; `named_dir`: the user chose its directory (--state-dir)."""
        self.path = path
        self._hub = gevent.get_hub()
        self._queue: Any = _SimpleQueue()
        self._unflushed: list[tuple[Write, None]] = []
        self._unflushed_bytes = 0
        self._flush_timer: Any = None
        self._flush_due = 0.0  # when the flush timer fires (the hub loop's clock)
        self.history_backlog_bytes = history_backlog_bytes
        self._backlog_lock = _Lock()  # the hub adds, the store thread subtracts once committed
        self.backlog_bytes = 0  # history handed over and not committed yet
        self.history_room_bytes = history_room_bytes
        self._room = Event()  # set when a waiting producer may go on (see wait_for_history_room)
        self._room.set()
        self._room_wanted = False  # a producer waits: the thread wakes it once the backlog is small
        self._short_turns: dict[tuple[str, str], list[int]] = {}  # turns with dropped pieces: [pieces, bytes]
        self._closed = False
        self._memory: MemoryStore | None = None  # set by the store thread when the disk fails
        self.transactions = 0  # committed write transactions, for tests and diagnostics
        self.failed_writes = 0  # writes dropped and logged at ERROR (written by the store thread)
        self.retries = 0  # transactions the disk refused for now (full, busy, I/O) and retried
        self._waiting: list[Write] = []  # writes the disk could not take yet, in order (store thread)
        self._held_syncs: list[AsyncResult] = []
        self._retry_at = 0.0
        self._retry_delay = 0.0
        self._outage = False  # the disk refuses writes now; they wait (store thread)
        self._outage_warned = False  # ...and it was said at WARNING (not a lock held elsewhere)
        self._outage_full = False  # ...and WAITING_WRITES_LIMIT of them wait: further ones are dropped
        self._purging: list[str] = []  # deleted sessions whose history rows are still being purged
        self._orphans_checked = False  # purged history a killed process left behind, once at start
        opened = AsyncResult()
        _start_new_thread(self._thread_main, (opened, trace, page_limit, named_dir))
        try:
            opened.get(timeout=OPEN_TIMEOUT)  # re-raises why the database could not be opened
        except gevent.Timeout:
            self._queue.put((Close(), None))  # should it open after all, it closes again
            raise statedb.StateDbError(f"opening {path} took longer than {OPEN_TIMEOUT:.0f}s") from None

    @property
    def degraded(self) -> bool:
        """True once the database proved unusable and the store serves from memory for good."""
        return self._memory is not None

    @property
    def waiting_writes(self) -> int:
        """Writes the disk could not take yet (full, busy, I/O error), kept and retried."""
        return len(self._waiting)

    def health(self) -> dict[str, Any]:
        """The store's counters for `_acp_green/stats` (see docs/RELIABILITY.md)."""
        return {"storeInMemory": self.degraded, "storeWaitingWrites": self.waiting_writes, "storeRetries": self.retries}

    # -- the greenlet side ---------------------------------------------------------------------
    def _write(self, op: Write) -> None:
        """Queue a write; never blocks, safe from hub callbacks."""
        if self._closed:
            self.failed_writes += 1
            log.error("store %s is closed; dropping a %s", self.path, op.label)
            return
        held = op.held_bytes()
        if held:
            with self._backlog_lock:
                self.backlog_bytes += held
            self._unflushed_bytes += held
        self._unflushed.append((op, None))
        if op.at_once or self._unflushed_bytes >= HANDOFF_BYTES:
            self._flush()
            return
        due = self._hub.loop.now() + op.hub_wait
        if self._flush_timer is None or due < self._flush_due:  # the write that may wait least decides
            if self._flush_timer is not None:
                self._flush_timer.close()
            self._flush_timer, self._flush_due = self._hub.loop.timer(op.hub_wait), due
            self._flush_timer.start(self._flush)

    def _flush(self) -> None:
        """Hand the waiting writes to the store thread, in order."""
        timer, self._flush_timer = self._flush_timer, None
        if timer is not None:
            timer.close()
        writes, self._unflushed = self._unflushed, []
        self._unflushed_bytes = 0
        for work in writes:
            self._queue.put(work)

    def _read(self, op: Read) -> Any:
        if self._closed:
            raise StoreUnavailable(f"store {self.path} is closed")
        self._flush()
        result = AsyncResult()
        self._queue.put((op, result))
        try:
            return result.get(timeout=READ_TIMEOUT)
        except gevent.Timeout:
            raise StoreUnavailable(f"store {self.path} did not answer within {READ_TIMEOUT:.0f}s") from None

    def save_session(self, record: SessionRecord) -> None:
        # A copy: the live record keeps changing on the hub while the thread encodes this one.
        self._write(SaveSession(copy.deepcopy(record)))

    def delete_session(self, session_id: str) -> None:
        for key in [key for key in self._short_turns if key[0] == session_id]:
            del self._short_turns[key]  # its turns end with it
        self._write(DeleteSession(session_id))

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: list[bytes]) -> None:
        self._write(BeginTurn(session_id, turn_id, started_at, list(prompt)))

    def append_history(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        """Queue a piece of a running turn, unless the backlog would go over its bound (see above)."""
        if not updates:
            return
        piece = AppendHistory(session_id, turn_id, list(updates))
        size = piece.held_bytes()
        # One piece larger than the bound is taken when nothing else waits: its caller holds it anyway.
        if self.backlog_bytes and self.backlog_bytes + size > self.history_backlog_bytes and not self._closed:
            self._drop_piece(session_id, turn_id, size)
            return
        self._write(piece)

    def wait_for_history_room(self, cancelled: CancelToken | None = None) -> None:
        """Hold the calling greenlet while more than `history_room_bytes` of history wait to be
        committed: a streaming turn's back-pressure from the disk.

        Returns at once on the hub (which must never wait), once `cancelled` is set, and when
        the store is closed or serves from memory. While the disk refuses writes (full, locked
        elsewhere) a streaming turn waits here until they are written again, or it is cancelled.
        """
        if self.backlog_bytes <= self.history_room_bytes or gevent.getcurrent() is self._hub:
            return
        self._flush()  # pieces still waiting on the hub are behind too: give them to the thread
        remove = cancelled.on_cancel(self._room.set) if cancelled is not None else None
        try:
            while self.backlog_bytes > self.history_room_bytes and not self._closed and self._memory is None:
                if cancelled is not None and cancelled.is_set():
                    return
                self._room.clear()
                self._room_wanted = True
                if self.backlog_bytes <= self.history_room_bytes:
                    return
                self._room.wait(ROOM_POLL)  # the poll also covers a wake-up lost between threads
        finally:
            if remove is not None:
                remove()

    def _drop_piece(self, session_id: str, turn_id: str, size: int) -> None:
        self.failed_writes += 1
        dropped = self._short_turns.get((session_id, turn_id))
        if dropped is None:
            dropped = self._short_turns[(session_id, turn_id)] = [0, 0]
            log.error(
                "the store is %d bytes behind (the bound is %d): dropping history of turn %s of session %s; "
                "the turn is marked incomplete", self.backlog_bytes, self.history_backlog_bytes, ascii(turn_id), ascii(session_id),
            )
            self._write(MarkIncomplete(session_id, turn_id))
        dropped[0] += 1
        dropped[1] += size

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome) -> None:
        dropped = self._short_turns.pop((session_id, turn_id), None)
        if dropped is not None:
            log.error("turn %s of session %s ended with %d pieces (%d bytes) of its history dropped",
                      ascii(turn_id), ascii(session_id), dropped[0], dropped[1])
        self._write(EndTurn(session_id, turn_id, outcome, time.time()))

    def append_turn(self, session_id: str, entries: list[bytes], stop_reason: str | None = None) -> None:
        """A whole turn at once (begin, one piece, end), handed over at once."""
        turn_id = uuid.uuid4().hex
        self._write(BeginTurn(session_id, turn_id, time.time(), list(entries)))
        if stop_reason is not None:
            self.end_turn(session_id, turn_id, TurnOutcome(stop_reason))

    def record_usage(self, record: UsageRecord) -> None:
        self._write(RecordUsage(record))

    def save_state(self, session_id: str, state: bytes) -> None:
        self._write(SaveState(session_id, bytes(state)))

    def load_state(self, session_id: str) -> bytes | None:
        return self._read(LoadState(session_id))

    def fork_history(self, source_id: str, fork_id: str) -> None:
        self._write(ForkHistory(source_id, fork_id))

    def turn_page(self, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
        return self._read(ReadTurnPage(session_id, start, limit, newest_first))

    def load_session(self, session_id: str) -> SessionRecord | None:
        return self._read(LoadSession(session_id))

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None,
                      archived: bool | None = None) -> list[SessionRecord]:
        return self._read(ListSessions(cwd, after, limit, archived))

    def history(self, session_id: str) -> list[bytes]:
        return self._read(History(session_id))

    def history_page(self, session_id: str, after: HistoryPosition | None, max_entries: int, max_bytes: int, turn_id: str | None = None) -> HistoryPage:
        return self._read(ReadHistoryPage(session_id, after, max_entries, max_bytes, turn_id))

    def turns(self, session_id: str) -> list[StoredTurn]:
        return self._read(ListTurns(session_id))

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return self._read(Usage(session_id))

    def sync(self) -> None:
        """Wait until every write queued so far is committed."""
        self._read(Sync())

    def close(self) -> None:
        """Commit everything queued, close the database and end the thread (S16: before exit)."""
        if self._closed:
            return
        self._flush()
        done = AsyncResult()
        self._queue.put((Close(), done))
        self._closed = True
        self._room.set()
        try:
            done.get(timeout=CLOSE_TIMEOUT)
        except gevent.Timeout:
            log.error("the store thread did not finish writing %s within %.0fs", self.path, CLOSE_TIMEOUT)



def _copy_history(conn: sqlite3.Connection, session_id: str, memory: MemoryStore) -> None:
    """A session's turns and their history, read page by page into `memory`."""
    for turn in statedb.turns(conn, session_id):
        memory.begin_turn(session_id, turn.turn_id, turn.started_at, [])
        after: HistoryPosition | None = None
        while True:
            page = statedb.history_page(conn, session_id, after, 10_000, 1 << 22, turn.turn_id)
            memory.append_history(session_id, turn.turn_id, [entry.update for entry in page.entries])
            if page.after is None:
                break
            after = page.after
        if turn.stop_reason is not None:
            memory.end_turn(session_id, turn.turn_id, TurnOutcome(turn.stop_reason, turn.error))
        if not turn.complete:
            memory.mark_incomplete(session_id, turn.turn_id)


def is_unusable(exc: sqlite3.Error) -> bool:
    """The database is unusable for good (corrupt, not a database); every other failure of the
    disk (full, I/O, read-only, busy) may go away and is retried."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(exc)
    return "malformed" in text or "not a database" in text


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)
