"""`ThreadedStore`: a database store on the hub; one dedicated OS thread owns the connection.

The same store serves SQLite (`sqlite.SqliteStore`) and PostgreSQL (`postgres.PostgresStore`):
only the `Database` the store thread opens differs (database.py).

Greenlets and hub callbacks hand typed operations (operations.py) to the store thread
(store_thread.py) and never touch the disk. Writes return at once. Reads carry a gevent
AsyncResult that the store thread resolves through the hub's thread-safe callback, so the asking
greenlet waits cooperatively. The thread applies what is queued in batches, one transaction
each; if the disk fails for a while its writes wait and are retried (waiting_writes.py); if the
database is unusable for good memory serves from then on.

A write that is not `at_once` (session saves: set_mode, set_config_option...; pieces of history)
waits on the hub (its type's `hub_wait`: 5 ms for a save) before it is handed to the store
thread (`WriteHandoff`), so a burst of control requests costs one hand-off (one thread wake-up,
one GIL round trip) instead of one each. An `at_once` write (a turn's beginning and outcome, a
usage record, a delete) is put on the queue in the call that makes it, with whatever waits
before it, so its commit never waits on the hub. It is not committed yet: that is the store
thread's next transaction; a prompt's response waits for it (`Committed`, at most 1 s, and not
while the disk refuses writes). What is committed survives a SIGKILL, and a read's answer (load, list, history, usage,
sync) leaves only after every write queued before it is committed. Reads, sync and close hand
over what is waiting first, so ordering holds.

History waiting for the store thread is bounded (backlog.py): the bytes of history handed over
and not yet committed (on the hub, in the queue, in the batch being written) never exceed
`history_backlog_bytes` (unless one piece alone is larger and nothing else waits). Long before
that, a turn that streams faster than the disk commits is held back: `wait_for_history_room`,
called from the turn's greenlet, waits while more than `history_room_bytes` are behind. Writes
never block the hub, and a cancelled turn stops waiting, so a piece can still arrive over the
bound: it is dropped, counted in `failed_writes`, said at ERROR once per turn (and how much,
when it ends), and its turn marked incomplete. That only happens when the disk stalls (another
process holding the write lock for long).
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import AsyncResult

from .database import DatabaseOpener, StoreOpenError
from .backlog import HistoryBacklog
from .operations import (
    AppendHistory, BeginTurn, ClaimSession, Close, Committed, DeleteSession, EndTurn, ForkHistory, History, ListSessions, ListTurns,
    LoadSession, LoadState, MarkIncomplete, OwnNewSession, Read, ReadHistoryPage, ReadTurnPage, RecordUsage,
    ReleaseSession, SaveSession, SaveState, StoreUnavailable, Sync, Usage, Write,
)
from .session_record import SessionRecord
from .store_thread import Queued, StoreThread
from .turns import HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

if TYPE_CHECKING:
    from ..rpc.cancel import CancelToken

__all__ = ["StoreUnavailable", "ThreadedStore"]

log = logging.getLogger(__name__)

OPEN_TIMEOUT = 60.0  # migrations wait for other processes' write locks
# A read is answered within this or fails (StoreUnavailable): the receive loop never waits longer
# on the store. Reads never wait on another process's lock nor behind a long delete, so only a
# stalled disk reaches it.
READ_TIMEOUT = 10.0
CLOSE_TIMEOUT = 10.0  # bounded exit (S13) even when another process holds the database
# Pieces of history waiting on the hub are handed over once this many bytes wait, before the
# timer: a fast stream is handed over in bounded bursts.
HANDOFF_BYTES = 1 << 20
HISTORY_BACKLOG_BYTES = 64 << 20  # history handed to the store and not committed yet (see above)
HISTORY_ROOM_BYTES = 8 << 20  # above this much uncommitted history a streaming turn waits (see above)


class ThreadedStore:
    """Sessions, history and the usage ledger in a database, served by one store thread.

    Its methods run on the hub (greenlets and hub callbacks) and never touch the disk; it holds
    the thread (`StoreThread`), the writes waiting on the hub (`WriteHandoff`) and the bound on
    uncommitted history (`HistoryBacklog`).
    """

    def __init__(
        self,
        opener: DatabaseOpener,
        *,
        history_backlog_bytes: int = HISTORY_BACKLOG_BYTES,
        history_room_bytes: int = HISTORY_ROOM_BYTES,
    ) -> None:
        """Open the database on the store thread (StoreOpenError, or the opener's own error, if it cannot be)."""
        self.path = opener.name
        self._hub = gevent.get_hub()
        self._backlog = HistoryBacklog(self._hub, history_backlog_bytes, history_room_bytes)
        self._thread = StoreThread(opener, self._hub, self._backlog)
        self._handoff = WriteHandoff(self._hub, self._thread.put)
        self._short_turns: dict[tuple[str, str], list[int]] = {}  # turns with dropped pieces: [pieces, bytes]
        self._closed = False
        self._dropped = 0  # writes dropped on the hub: after close, or over the backlog's bound
        opened = self._thread.start()
        try:
            opened.get(timeout=OPEN_TIMEOUT)  # re-raises why the database could not be opened
        except gevent.Timeout:
            self._thread.put((Close(), None))  # should it open after all, it closes again
            raise StoreOpenError(f"opening {self.path} took longer than {OPEN_TIMEOUT:.0f}s") from None

    # -- counters ------------------------------------------------------------------------------
    @property
    def degraded(self) -> bool:
        """True once the database proved unusable and the store serves from memory for good."""
        return self._thread.degraded

    @property
    def waiting_writes(self) -> int:
        """Writes the disk could not take yet (full, busy, I/O error), kept and retried."""
        return self._thread.waiting.count

    @property
    def retries(self) -> int:
        """Transactions the disk refused for now (full, busy, I/O) and retried."""
        return self._thread.waiting.retries

    @property
    def failed_writes(self) -> int:
        """Writes dropped, each said at ERROR, on the hub or by the store thread."""
        return self._dropped + self._thread.failed_writes

    @property
    def transactions(self) -> int:
        """Committed write transactions, for tests and diagnostics."""
        return self._thread.transactions

    @property
    def backlog_bytes(self) -> int:
        """History handed over and not committed yet."""
        return self._backlog.bytes

    def health(self) -> dict[str, Any]:
        """The store's counters for `_acp_green/stats` (see docs/RELIABILITY.md)."""
        return {"storeInMemory": self.degraded, "storeWaitingWrites": self.waiting_writes, "storeRetries": self.retries}

    # -- handing work to the store thread --------------------------------------------------------
    def _write(self, op: Write, held: int | None = None) -> None:
        """Queue a write (`held`: its history bytes, when already counted); never blocks, safe from hub callbacks."""
        if self._closed:
            self._dropped += 1
            log.error("store %s is closed; dropping a %s", self.path, op.label)
            return
        held = op.held_bytes() if held is None else held
        self._backlog.took(held)
        self._handoff.write(op, held)

    def _read(self, op: Read) -> Any:
        if self._closed:
            raise StoreUnavailable(f"store {self.path} is closed")
        self._handoff.flush()
        result = AsyncResult()
        self._thread.put((op, result))
        try:
            return result.get(timeout=READ_TIMEOUT)
        except gevent.Timeout:
            raise StoreUnavailable(f"store {self.path} did not answer within {READ_TIMEOUT:.0f}s") from None

    # -- writes ----------------------------------------------------------------------------------
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
        if self._backlog.would_overflow(size) and not self._closed:
            self._drop_piece(session_id, turn_id, size)
            return
        self._write(piece, size)

    def wait_for_history_room(self, cancelled: CancelToken | None = None) -> None:
        """Hold the calling greenlet while more than `history_room_bytes` of history wait to be
        committed: a streaming turn's back-pressure from the disk.

        Returns at once on the hub (which must never wait), once `cancelled` is set, and when
        the store is closed or serves from memory. While the disk refuses writes (full, locked
        elsewhere) a streaming turn waits here until they are written again, or it is cancelled.
        """
        if self._backlog.has_room() or gevent.getcurrent() is self._hub:
            return
        self._handoff.flush()  # pieces still waiting on the hub are behind too: give them to the thread
        self._backlog.wait_for_room(cancelled, lambda: not self._closed and not self._thread.degraded)

    def _drop_piece(self, session_id: str, turn_id: str, size: int) -> None:
        self._dropped += 1
        dropped = self._short_turns.get((session_id, turn_id))
        if dropped is None:
            dropped = self._short_turns[(session_id, turn_id)] = [0, 0]
            log.error(
                "the store is %d bytes behind (the bound is %d): dropping history of turn %s of session %s; "
                "the turn is marked incomplete", self._backlog.bytes, self._backlog.bound, ascii(turn_id), ascii(session_id),
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

    def fork_history(self, source_id: str, fork_id: str) -> None:
        self._write(ForkHistory(source_id, fork_id))

    # -- session ownership -------------------------------------------------------------------------
    def claim_session(self, session_id: str) -> str | None:
        """Take a stored session for this process: None once ours, else who holds it (a process
        that lives; the lock dies with it). Waits cooperatively, like a read."""
        return self._read(ClaimSession(session_id))

    def own_new_session(self, session_id: str) -> None:
        """Take a session this process has just made, before anything of it is written."""
        self._write(OwnNewSession(session_id))

    def release_session(self, session_id: str) -> None:
        """Let a session go once every write made for it before is committed."""
        self._write(ReleaseSession(session_id))

    # -- reads -----------------------------------------------------------------------------------
    def load_state(self, session_id: str) -> bytes | None:
        return self._read(LoadState(session_id))

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

    def wait_committed(self) -> bool:
        """Wait until every write queued so far is committed (True), unless the disk refuses
        writes now: then at once (False), the writes waiting to be retried."""
        return bool(self._read(Committed()))

    def close(self) -> None:
        """Commit everything queued, close the database and end the thread (S16: before exit)."""
        if self._closed:
            return
        self._handoff.flush()
        done = AsyncResult()
        self._thread.put((Close(), done))
        self._closed = True
        self._backlog.wake()
        try:
            done.get(timeout=CLOSE_TIMEOUT)
        except gevent.Timeout:
            log.error("the store thread did not finish writing %s within %.0fs", self.path, CLOSE_TIMEOUT)


class WriteHandoff:
    """Writes waiting on the hub to be handed to the store thread, in order; hub only.

    An `at_once` write, or HANDOFF_BYTES of waiting history, hands everything over now; any
    other waits at most its type's `hub_wait`, so a burst costs one hand-off.
    """

    def __init__(self, hub: Any, put: Callable[[Queued], None]) -> None:
        self._hub = hub
        self._put = put
        self._writes: list[tuple[Write, None]] = []
        self._bytes = 0
        self._timer: Any = None
        self._due = 0.0  # when the timer fires (the hub loop's clock)

    def write(self, op: Write, held: int) -> None:
        """Keep `op` (holding `held` bytes of history) until its time comes to be handed over."""
        self._bytes += held
        self._writes.append((op, None))
        if op.at_once or self._bytes >= HANDOFF_BYTES:
            self.flush()
            return
        due = self._hub.loop.now() + op.hub_wait
        if self._timer is None or due < self._due:  # the write that may wait least decides
            if self._timer is not None:
                self._timer.close()
            self._timer, self._due = self._hub.loop.timer(op.hub_wait), due
            self._timer.start(self.flush)

    def flush(self) -> None:
        """Hand every waiting write to the store thread, in order."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.close()
        writes, self._writes = self._writes, []
        self._bytes = 0
        for work in writes:
            self._put(work)
