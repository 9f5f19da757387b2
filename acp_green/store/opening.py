"""`OpeningStore`: the store while it opens in the background; writes wait in order, reads wait for it.

`acp-green serve` answers `initialize` before the store is opened (importing sqlite3, creating
the state directory, migrating the database take longer than the answer itself). Until the
store is open, writes are kept here in call order, each as the caller handed it over (a copy of
the record and of the update list, so a later change to a live record is not stored unless it
is saved again); they reach the store, in that order, before anything else does. A read waits
cooperatively for the store, so it sees every write made before it. Once open, every call is
passed straight on.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import AsyncResult, Event

if TYPE_CHECKING:
    from ..rpc.cancel import CancelToken
    from ..usage import UsageRecord
    from .base import Store
    from .session_record import SessionRecord
    from .turns import HistoryPage, HistoryPosition, StoredTurn, TurnOutcome

log = logging.getLogger(__name__)

class OpeningStore:
    """A Store whose real store is made by `opener` in a greenlet started by `open_soon` (or by
    the first read); `close` before anything needed it opens nothing."""

    def __init__(self, opener: Callable[[], Store]) -> None:
        self._opener = opener
        self._opened: AsyncResult = AsyncResult()
        self._opening: gevent.Greenlet | None = None
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self.store: Store | None = None  # the real store, once open

    # -- opening -------------------------------------------------------------------------------
    def open_soon(self) -> None:
        """Start opening the store in a greenlet of its own (once); never blocks."""
        if self._opening is None:
            self._opening = gevent.spawn(self._open)
            self._opening.name = "acp-store-open"

    def wait_open(self, cancelled: CancelToken | None = None) -> Store | None:
        """The open store, after waiting cooperatively; None if `cancelled` was set first."""
        if self.store is not None:
            return self.store
        self.open_soon()
        if cancelled is None:
            return self._opened.get()
        if cancelled.is_set():
            return None
        woken = Event()

        def on_open(_result: AsyncResult) -> None:
            woken.set()

        self._opened.rawlink(on_open)
        remove = cancelled.on_cancel(woken.set)
        try:
            woken.wait()
        finally:
            remove()
            self._opened.unlink(on_open)
        return self.store

    def _open(self) -> None:
        try:
            store = self._opener()
        except Exception:
            # open_store already falls back to memory for an unusable directory; this is a bug.
            log.exception("opening the store failed; keeping sessions and usage in memory only")
            from .base import MemoryStore

            store = MemoryStore()
        pending, self._pending = self._pending, []
        for name, args in pending:  # never switches: a write returns at once
            getattr(store, name)(*args)
        self.store = store
        self._opened.set(store)

    # -- writes: in call order, before or after the store is open --------------------------------
    def own_new_session(self, session_id: str) -> None:
        if self.store is not None:
            self.store.own_new_session(session_id)
        else:
            self._pending.append(("own_new_session", (session_id,)))

    def release_session(self, session_id: str) -> None:
        if self.store is not None:
            self.store.release_session(session_id)
        else:
            self._pending.append(("release_session", (session_id,)))

    def save_session(self, record: SessionRecord) -> None:
        if self.store is not None:
            self.store.save_session(record)
        else:
            self._pending.append(("save_session", (copy.deepcopy(record),)))

    def delete_session(self, session_id: str) -> None:
        if self.store is not None:
            self.store.delete_session(session_id)
        else:
            self._pending.append(("delete_session", (session_id,)))

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: list[bytes]) -> None:
        if self.store is not None:
            self.store.begin_turn(session_id, turn_id, started_at, prompt)
        else:
            self._pending.append(("begin_turn", (session_id, turn_id, started_at, list(prompt))))

    def append_history(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        if self.store is not None:
            self.store.append_history(session_id, turn_id, updates)
        else:
            self._pending.append(("append_history", (session_id, turn_id, list(updates))))

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome) -> None:
        if self.store is not None:
            self.store.end_turn(session_id, turn_id, outcome)
        else:
            self._pending.append(("end_turn", (session_id, turn_id, outcome)))

    def record_usage(self, record: UsageRecord) -> None:
        if self.store is not None:
            self.store.record_usage(record)
        else:
            self._pending.append(("record_usage", (copy.copy(record),)))

    def save_state(self, session_id: str, state: bytes) -> None:
        if self.store is not None:
            self.store.save_state(session_id, state)
        else:
            self._pending.append(("save_state", (session_id, bytes(state))))

    def fork_history(self, source_id: str, fork_id: str) -> None:
        if self.store is not None:
            self.store.fork_history(source_id, fork_id)
        else:
            self._pending.append(("fork_history", (source_id, fork_id)))

    def append_turn(self, session_id: str, entries: list[bytes], stop_reason: str | None = None) -> None:
        if self.store is not None:
            self.store.append_turn(session_id, entries, stop_reason)
        else:
            self._pending.append(("append_turn", (session_id, list(entries), stop_reason)))

    # -- reads: wait for the store ---------------------------------------------------------------
    def claim_session(self, session_id: str) -> str | None:
        return self._ready().claim_session(session_id)

    def load_session(self, session_id: str) -> SessionRecord | None:
        return self._ready().load_session(session_id)

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None,
                      archived: bool | None = None) -> list[SessionRecord]:
        return self._ready().list_sessions(cwd, after, limit, archived)

    def history_page(self, session_id: str, after: HistoryPosition | None, max_entries: int, max_bytes: int, turn_id: str | None = None) -> HistoryPage:
        return self._ready().history_page(session_id, after, max_entries, max_bytes, turn_id)

    def turns(self, session_id: str) -> list[StoredTurn]:
        return self._ready().turns(session_id)

    def history(self, session_id: str) -> list[bytes]:
        return self._ready().history(session_id)

    def turn_page(self, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
        return self._ready().turn_page(session_id, start, limit, newest_first)

    def load_state(self, session_id: str) -> bytes | None:
        return self._ready().load_state(session_id)

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return self._ready().usage(session_id)

    def wait_for_history_room(self, cancelled: CancelToken | None = None) -> None:
        """Before the store is open, history waits in memory here: a streaming turn waits for
        the store (or its cancellation) instead of piling it up. Never waits on the hub."""
        if self.store is None and gevent.getcurrent() is gevent.get_hub():
            return
        store = self.wait_open(cancelled)
        if store is not None:
            store.wait_for_history_room(cancelled)

    def sync(self) -> None:
        self._ready().sync()

    def wait_committed(self) -> bool:
        return self._ready().wait_committed()

    def _ready(self) -> Store:
        store = self.wait_open()
        assert store is not None
        return store

    # -- the rest ----------------------------------------------------------------------------------
    @property
    def failed_writes(self) -> int:
        return self.store.failed_writes if self.store is not None else 0

    def health(self) -> dict[str, Any]:
        """The open store's counters; none before it is open (never waits for it)."""
        health = getattr(self.store, "health", None)
        return health() if health is not None else {}

    def close(self) -> None:
        """Close the store; one never opened and never written to is left unopened."""
        if self.store is None and self._opening is None and not self._pending:
            return
        self._ready().close()

    def __getattr__(self, name: str) -> Any:
        """Anything else a particular store offers (`degraded`, `path`...): from the open store."""
        if name.startswith("__") or name in ("store", "_opener", "_opened", "_opening", "_pending", "health"):
            raise AttributeError(name)
        return getattr(self._ready(), name)
