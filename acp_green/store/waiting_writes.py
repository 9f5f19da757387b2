"""`WaitingWrites`: the store thread's side of an outage the disk may recover from.

A failure the disk may recover from (full, I/O error, read-only, the write lock held by another
process) does not give the database up: the batch rolls back, its writes wait here in memory, in
order, with every later write, and are retried with backoff (RETRY_FIRST doubling to RETRY_MAX)
until a transaction takes them all; each failed attempt counts in `retries`. Meanwhile reads are
answered from what the disk holds, with the waiting session saves and deletes applied (a session
created meanwhile is listed and loads); history and usage written meanwhile show once they are
written, and a `sync` answers once they are. At close, writes that still wait are retried for
CLOSE_RETRY, then counted in `dropped` and said at ERROR. At most WAITING_WRITES_LIMIT wait;
further ones are dropped, counted and said at ERROR once per outage.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gevent.event import AsyncResult
from gevent.monkey import get_original

from .base import MemoryStore
from .operations import (
    ClaimSession, DeleteSession, ListSessions, LoadSession, Operation, ReleaseSession, SaveSession, StoreUnavailable, Sync, Write,
)

if TYPE_CHECKING:
    from .database import Database

log = logging.getLogger(__name__)

# The store thread's own pause: patched, it would start a hub on that thread.
_sleep = get_original("time", "sleep")

RETRY_FIRST = 0.05  # seconds before the first retry of writes the disk could not take; doubles...
RETRY_MAX = 2.0  # ...up to this
CLOSE_RETRY = 5.0  # at close, writes that wait are retried this long, then given up (said at ERROR)
WAITING_WRITES_LIMIT = 100_000  # writes kept for a disk that fails; further ones are dropped and counted
HELD = object()  # the answer of a sync that waits until the waiting writes are written

Answer = Callable[..., None]  # StoreThread.answer: resolve an AsyncResult through the hub


class WaitingWrites:
    """Writes the disk cannot take now, in order, retried with backoff; run by the store thread only.

    While writes wait, every later write joins them (never overtakes them), so what reaches the
    disk is always a prefix of what was queued, in queue order.
    """

    def __init__(self, path: str, release: Callable[[int], None], answer: Answer) -> None:
        self._path = path
        self._release = release  # gives history bytes back to the backlog
        self._answer = answer
        self._writes: list[Write] = []
        self._held_syncs: list[AsyncResult] = []
        self._retry_at = 0.0
        self._retry_delay = 0.0
        self._outage = False  # the disk refuses writes now
        self._outage_warned = False  # ...and it was said at WARNING (not a lock held elsewhere)
        self._outage_full = False  # ...and WAITING_WRITES_LIMIT of them wait: further ones are dropped
        self.retries = 0  # transactions the disk refused for now and retried
        self.dropped = 0  # writes lost: over the limit, or still waiting at close

    @property
    def count(self) -> int:
        """How many writes wait (read from the hub too: one len of a list)."""
        return len(self._writes)

    def writes(self) -> list[Write]:
        """The waiting writes, in order, to run before anything newer."""
        return list(self._writes)

    def retry_due(self) -> bool:
        """Writes wait and their next try is due."""
        return bool(self._writes) and time.monotonic() >= self._retry_at

    def holding_back(self) -> bool:
        """Writes wait and their next try is not due yet: answer past them."""
        return bool(self._writes) and time.monotonic() < self._retry_at

    def retry_in(self) -> float:
        """Seconds until the next try (0 when due)."""
        return max(self._retry_at - time.monotonic(), 0.0)

    def failed(self, exc: BaseException, busy: bool) -> None:
        """A transient failure (full, `busy`: a lock held elsewhere, I/O, a server gone): count
        it, say it, retry later with backoff."""
        self.retries += 1
        self._retry_delay = min(max(self._retry_delay * 2, RETRY_FIRST), RETRY_MAX)
        self._retry_at = time.monotonic() + self._retry_delay
        if busy:
            log.info("state database busy; retrying in %.2fs (%d writes wait)", self._retry_delay, len(self._writes))
        if not self._outage:
            self._outage = True
            self._outage_full = False
            self._outage_warned = not busy
            if self._outage_warned:
                log.warning("state database %s cannot be written now (%s): keeping what waits in memory and retrying; "
                            "it is written once the disk works again", self._path, exc)

    def answer_meanwhile(self, db: Database, work: list[Operation]) -> list[tuple[Any, BaseException | None]]:
        """Writes join the waiting ones; reads are answered from the disk, the waiting session
        saves and deletes applied; a sync's answer is HELD until the waiting writes are written."""
        results: list[tuple[Any, BaseException | None]] = []
        for op in work:
            if isinstance(op, Write):
                self._keep(op)
                results.append((None, None))
            elif isinstance(op, Sync):
                results.append((HELD, None))
            else:
                try:
                    results.append((self._read_past(db, op), None))
                except db.failures as exc:
                    results.append((None, StoreUnavailable(f"cannot read {self._path}: {exc}")))
        return results

    def hold_sync(self, result: AsyncResult | None) -> None:
        """Answer this sync once the waiting writes are written (or given up)."""
        if result is not None:
            self._held_syncs.append(result)

    def written(self, committed_bytes: int) -> None:
        """A transaction took the waiting writes (and `committed_bytes` of history with what came
        after them): the outage, if any, is over and the held syncs are answered."""
        written = len(self._writes)
        self._writes = []
        self._release(committed_bytes)  # before the syncs: a sync's answer sees the backlog given back
        if self._outage:
            self._outage = False
            # WARNING when the outage was said at WARNING; a lock held elsewhere for a moment is INFO.
            log.log(logging.WARNING if self._outage_warned else logging.INFO,
                    "state database %s is written again: the %d writes that waited are stored (%d failed attempts)",
                    self._path, written, self.retries)
        self._retry_delay = 0.0
        self.answer_held()

    def take(self) -> list[Write]:
        """Every waiting write, for a store that replaces the disk; none wait here any more."""
        writes, self._writes = self._writes, []
        return writes

    def answer_held(self, error: BaseException | None = None) -> None:
        """Answer the held syncs: done, or `error`."""
        held, self._held_syncs = self._held_syncs, []
        for result in held:
            self._answer(result, error=error)

    def last_tries(self, retry: Callable[[], object]) -> None:
        """At close: `retry` the waiting writes until CLOSE_RETRY; what still cannot be written is
        lost, said at ERROR; the held syncs are answered either way."""
        deadline = time.monotonic() + CLOSE_RETRY
        while self._writes and time.monotonic() < deadline:
            _sleep(max(min(self._retry_at - time.monotonic(), deadline - time.monotonic()), 0.0))
            self._retry_at = 0.0
            retry()
        if self._writes:
            lost, self._writes = self._writes, []
            self.dropped += len(lost)
            self._release(sum(op.held_bytes() for op in lost))
            log.error("closing %s with %d writes it could not take (the disk still fails): they are lost", self._path, len(lost))
        self.answer_held(StoreUnavailable(f"store {self._path} closed with writes it could not take"))

    def _keep(self, op: Write) -> None:
        if len(self._writes) < WAITING_WRITES_LIMIT:
            self._writes.append(op)
            return
        self.dropped += 1
        self._release(op.held_bytes())
        if not self._outage_full:  # said once per outage; the count goes on in `dropped`
            log.error("%d writes already wait for %s: dropping further writes until it takes them (%s of session %s first)",
                      len(self._writes), self._path, op.label, ascii(op.for_session()))
            self._outage_full = True

    def _read_past(self, db: Database, op: Operation) -> Any:
        if isinstance(op, ClaimSession):
            # A release of this session still waiting would let it go once written, while it is
            # live here again: the claim takes its place (the session never stopped being ours).
            self._writes = [w for w in self._writes if not (isinstance(w, ReleaseSession) and w.session_id == op.session_id)]
        if isinstance(op, LoadSession):
            for write in reversed(self._writes):
                if isinstance(write, SaveSession) and write.record.session_id == op.session_id:
                    return copy.deepcopy(write.record)
                if isinstance(write, DeleteSession) and write.session_id == op.session_id:
                    return None
        if isinstance(op, ListSessions):
            changes = [w for w in self._writes if isinstance(w, (SaveSession, DeleteSession))]
            limit = None if op.limit is None else op.limit + len(changes)
            merged = MemoryStore()
            for record in db.list_sessions(op.cwd, op.after, limit):
                merged.save_session(record)
            for write in changes:
                write.in_memory(merged)
            return merged.list_sessions(op.cwd, op.after, op.limit)
        return op.on_disk(db)

