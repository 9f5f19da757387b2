"""`StoreThread`: the one OS thread that owns the database connection (SQLite or PostgreSQL,
database.py) and runs the typed operations (operations.py) queued for it.

It drains whatever is queued and applies it, in queue order, as one transaction: a burst of
writes (the pieces of a streaming turn among them) costs one commit, and a read sees every
write queued before it. Answers go back through the hub's thread-safe callback. A write that
fails because of its own record (a value the database cannot bind, a row too big:
`Database.is_record_error`) is not a disk failure: it is logged at ERROR and counted in
`failed_writes` (a history piece also marks its turn incomplete), and the rest of its batch and
every later write, of every session, still reach the disk. A failure the disk may recover from
keeps the writes waiting (`WaitingWrites`); only a database that is unusable for good (corrupt,
not a database) is replaced by memory: what it still holds is read back into a MemoryStore,
a warning goes to stderr, and memory serves from then on.

Reads never wait long: serving takes the write lock with a short busy timeout (a lock held
elsewhere is a failure retried later, and reads in WAL mode do not need it), a batch holds at
most MAX_BATCH_BYTES of history, and a deleted session's history is purged in steps of
operations.PURGE_ROWS rows between batches (`HistoryPurge`).
"""

from __future__ import annotations

import logging
from typing import Any

from gevent.event import AsyncResult
from gevent.monkey import get_original

from .backlog import HistoryBacklog
from .base import MemoryStore
from .database import Database, DatabaseOpener
from .operations import PURGE_ROWS, Close, DeleteSession, Operation, Write
from .turns import HistoryPosition, TurnOutcome
from .waiting_writes import HELD, WaitingWrites

log = logging.getLogger(__name__)

# The real thread and queue even when monkey-patched (the default of `serve`), which would turn
# them into greenlet primitives.
_start_new_thread = get_original("_thread", "start_new_thread")
_SimpleQueue = get_original("queue", "SimpleQueue")
_Empty = get_original("queue", "Empty")

MAX_BATCH = 1000
MAX_BATCH_BYTES = 8 << 20  # history one transaction takes at most (unless one piece alone is larger)

Queued = tuple[Operation | Close, AsyncResult | None]  # an operation and where its answer goes
Results = list[tuple[Any, BaseException | None]]  # (value, error) of each operation of a batch


class StoreThread:
    """The OS thread that owns the connection: the hub only `put`s work and reads counters.

    Every other method runs on that thread. A write's answer is None; a read's is sent through
    `answer` only after every write before it is committed.
    """

    def __init__(self, opener: DatabaseOpener, hub: Any, backlog: HistoryBacklog) -> None:
        self.path = opener.name
        self._opener = opener
        self._hub = hub
        self._queue: Any = _SimpleQueue()
        self._backlog = backlog
        self.waiting = WaitingWrites(self.path, backlog.release, self.answer)
        self._purge = HistoryPurge(self.path)
        self._memory: MemoryStore | None = None  # set when the disk proved unusable
        self.transactions = 0  # committed write transactions, for tests and diagnostics
        self._refused_records = 0  # writes dropped for their own content

    def start(self) -> AsyncResult:
        """Start the thread; the result is set once the database is open, or to why it is not."""
        opened = AsyncResult()
        _start_new_thread(self._main, (opened,))
        return opened

    def put(self, work: Queued) -> None:
        """Queue work for the thread; never blocks, safe from anywhere."""
        self._queue.put(work)

    @property
    def degraded(self) -> bool:
        """The database proved unusable: memory serves from now on."""
        return self._memory is not None

    @property
    def failed_writes(self) -> int:
        """Writes the thread dropped: refused for their content, over the waiting bound, lost at close."""
        return self._refused_records + self.waiting.dropped

    def answer(self, result: AsyncResult | None, value: Any = None, error: BaseException | None = None) -> None:
        """Resolve `result` on the hub (gevent objects are not thread-safe)."""
        if result is None:
            return
        if error is not None:
            self._hub.loop.run_callback_threadsafe(result.set_exception, error)
        else:
            self._hub.loop.run_callback_threadsafe(result.set, value)

    def _main(self, opened: AsyncResult) -> None:
        try:
            db = self._opener.open()
        except BaseException as exc:  # ok: every failure to open is reported; the thread then ends
            self.answer(opened, error=exc)
            return
        self.answer(opened)
        closed: AsyncResult | None = None
        try:
            closed = self._serve(db)
        finally:
            try:
                db.close()  # its session locks last: the next owner finds everything committed
            except Exception:  # ok: said; closing goes on
                log.exception("closing %s failed", self.path)
            # Only now: whoever waits in close() may reopen the database, or exit.
            self.answer(closed)

    def _idle_wait(self) -> float | None:
        """How long the thread may wait for work: until the next retry, none when a purge step
        is due, forever when nothing is pending."""
        if self._memory is None and self.waiting.count:
            return self.waiting.retry_in()
        if self._memory is None and self._purge.pending():
            return 0.0
        return None

    def _serve(self, db: Database) -> AsyncResult | None:
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
            if work or self.waiting.retry_due():
                results = self._apply(db, [op for op, _ in work])
                for (_op, result), (value, error) in zip(work, results):
                    if value is HELD:
                        self.waiting.hold_sync(result)
                    else:
                        self.answer(result, value, error)
            elif not closing:
                self._purge.step(db)
            if closing:
                self.waiting.last_tries(lambda: self._apply(db, []))
                return batch[-1][1]

    def _apply(self, db: Database, work: list[Operation]) -> Results:
        """Run the waiting writes then `work` in order, writes in one transaction that commits
        before any answer leaves; when the disk cannot take them now, keep the writes waiting
        and answer the reads from what the disk holds."""
        if self._memory is not None:
            return [self._call(op, self._memory) for op in work]
        if self.waiting.holding_back():
            return self.waiting.answer_meanwhile(db, work)
        waiting = self.waiting.writes()
        ops: list[Operation] = [*waiting, *work]
        try:
            if waiting:
                db.reconnect()  # a retry: a connection lost in the failure is opened again first
            results = self._transaction(db, ops, any(isinstance(op, Write) for op in ops))
        except db.failures as exc:
            if db.is_unusable(exc):
                memory = self._fall_back(db, exc)
                return [self._call(op, memory) for op in work]
            self.waiting.failed(exc, db.is_busy(exc))
            return self.waiting.answer_meanwhile(db, work)
        for op, (value, _error) in zip(ops, results):
            if isinstance(op, DeleteSession) and value:
                self._purge.add(op.session_id)  # its history goes in bounded steps, between batches
        self.waiting.written(sum(op.held_bytes() for op in ops))
        return results[len(waiting):]

    def _transaction(self, db: Database, work: list[Operation], writes: bool) -> Results:
        if writes:
            db.begin_write()  # the write lock first: no upgrade deadlocks
        results = []
        try:
            for op in work:
                results.append(self._call(op, None, db))
            if writes:
                db.commit()
                self.transactions += 1
        except BaseException:  # ok: roll back, then re-raise
            if db.in_transaction:
                db.rollback()
            raise
        return results

    def _call(self, op: Operation, memory: MemoryStore | None, db: Database | None = None) -> tuple[Any, BaseException | None]:
        """One operation; a failing database aborts the batch, a failing record only this one."""
        try:
            if memory is not None:
                return op.in_memory(memory), None
            assert db is not None, "an operation runs on the database only inside a transaction"
            if isinstance(op, Write) and db.lost(op.for_session()):
                self._refused_records += 1  # said at ERROR once, when it was lost (database.py)
                return None, None
            return op.on_disk(db), None
        except Exception as exc:
            if db is not None and not db.is_record_error(exc):  # on memory, every error is the record's
                raise
            if isinstance(op, Write):  # dropped for its own content: said at ERROR, counted; the store goes on
                self._refused_records += 1
                log.error("dropped a %s of session %s: %s: %s", op.label, ascii(op.for_session()), type(exc).__name__, exc)
            return None, exc

    def _fall_back(self, db: Database, exc: BaseException) -> MemoryStore:
        """Serve from memory from now on, starting from what the database still holds and the
        writes that waited."""
        memory = read_back(db, self.path)
        waiting = self.waiting.take()
        for op in waiting:
            self._call(op, memory)
        self._backlog.release(sum(op.held_bytes() for op in waiting))
        self._memory = memory
        self._purge.stop()
        self._backlog.wake_from_thread()  # from memory, nothing waits for the disk
        self.waiting.answer_held()
        log.warning(
            "state database %s is unusable (%s): keeping sessions, history and usage in memory "
            "from now on; what happens next will not survive a restart",
            self.path, exc,
        )
        return memory


class HistoryPurge:
    """Deleted sessions' history, removed in bounded steps between batches, so reads never wait
    behind the delete of a long history; run by the store thread only.

    The session and its turns go at once, so nothing of it can be read meanwhile. Forks share
    history rows (statedb.fork_history), so a row goes only once no turn refers to it: the delete
    queues, under the deleted session, the rows its turns alone still referred to, whoever wrote
    them (a fork deleted after its source frees the source's rows too), and each step here
    removes up to PURGE_ROWS of them (`purge_history`). Rows no turn refers to that a process
    killed mid-purge left are found (`orphaned_history`) and purged at the next start.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._sessions: list[str] = []  # deleted sessions whose history rows are still being purged
        self._orphans_checked = False  # purged history a killed process left behind, once at start

    def add(self, session_id: str) -> None:
        self._sessions.append(session_id)

    def pending(self) -> bool:
        """A step is due."""
        return bool(self._sessions) or not self._orphans_checked

    def stop(self) -> None:
        """The disk is given up: nothing more to purge there."""
        self._sessions.clear()

    def step(self, db: Database) -> None:
        """One bounded step of deleting history whose session is gone."""
        try:
            if not self._sessions:
                self._orphans_checked = True
                orphan = db.orphaned_history()
                if orphan is not None:
                    self._sessions.append(orphan)
                    self._orphans_checked = False  # look again once this one is gone
                return
            db.begin_write()
            try:
                more = db.purge_history(self._sessions[0], PURGE_ROWS)
                db.commit()
            except BaseException:  # ok: roll back, then re-raise
                if db.in_transaction:
                    db.rollback()
                raise
            if not more:
                self._sessions.pop(0)
        except db.failures as exc:
            # Rows of a deleted session are unreachable already; the next start purges them.
            log.info("purging deleted history from %s failed (%s); the next start purges it", self._path, exc)
            self._orphans_checked = True
            self._sessions.clear()


def read_back(db: Database, path: str) -> MemoryStore:
    """What an unusable database still holds, as a MemoryStore (empty when nothing can be read)."""
    memory = MemoryStore()
    try:
        for record in db.list_sessions():
            memory.save_session(record)
            _copy_history(db, record.session_id, memory)
            state = db.load_state(record.session_id)
            if state is not None:
                memory.save_state(record.session_id, state)
        for usage in db.usage():
            memory.record_usage(usage)
    except db.failures as read_exc:
        log.warning("could not read back %s (%s); starting from an empty memory store", path, read_exc)
    return memory


def _copy_history(db: Database, session_id: str, memory: MemoryStore) -> None:
    """A session's turns and their history, read page by page into `memory`."""
    for turn in db.turns(session_id):
        memory.begin_turn(session_id, turn.turn_id, turn.started_at, [])
        after: HistoryPosition | None = None
        while True:
            page = db.history_page(session_id, after, 10_000, 1 << 22, turn.turn_id)
            memory.append_history(session_id, turn.turn_id, [entry.update for entry in page.entries])
            if page.after is None:
                break
            after = page.after
        if turn.stop_reason is not None:
            memory.end_turn(session_id, turn.turn_id, TurnOutcome(turn.stop_reason, turn.error))
        if not turn.complete:
            memory.mark_incomplete(session_id, turn.turn_id)

