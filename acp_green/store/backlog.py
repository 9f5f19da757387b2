"""`HistoryBacklog`: history handed to the store thread and not committed yet, and the room a
streaming turn waits for.

The hub adds what it hands over (`took`); the store thread gives it back once committed or given
up (`release`). `ThreadedStore` refuses a piece that would take the backlog over `bound` (unless
nothing else waits), and long before that a streaming turn waits in `wait_for_room`, in its own
greenlet, while more than `room_bytes` are behind: the backlog, and the process's memory, stay
small whatever the turn's length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gevent.event import Event
from gevent.monkey import get_original

if TYPE_CHECKING:
    from ..rpc.cancel import CancelToken

# The real lock even when monkey-patched: the store thread is a real thread.
_Lock = get_original("threading", "Lock")

ROOM_POLL = 0.5  # seconds between checks of a producer waiting for room


class HistoryBacklog:
    """Bytes of history between the hub and a commit, and the wake-up of a producer waiting for room.

    `bytes` is changed under a real lock (the hub adds, the store thread subtracts); `_room` is
    a gevent Event, so the store thread sets it only through the hub's thread-safe callback.
    """

    def __init__(self, hub: Any, bound: int, room_bytes: int) -> None:
        self._hub = hub
        self.bound = bound  # over this a further piece is dropped (see ThreadedStore.append_history)
        self.room_bytes = room_bytes  # over this a streaming turn waits
        self._lock = _Lock()
        self.bytes = 0
        self._room = Event()  # set when a waiting producer may go on
        self._room.set()
        self.room_wanted = False  # a producer waits: the thread wakes it once the backlog is small

    def took(self, held: int) -> None:
        """The hub handed `held` bytes of history over (on the hub)."""
        if held:
            with self._lock:
                self.bytes += held

    def would_overflow(self, size: int) -> bool:
        """A piece of `size` would take the backlog over its bound; one larger than the bound
        alone is taken when nothing else waits (its caller holds it anyway)."""
        return bool(self.bytes) and self.bytes + size > self.bound

    def has_room(self) -> bool:
        """No more than `room_bytes` wait: a producer goes on."""
        return self.bytes <= self.room_bytes

    def release(self, committed: int) -> None:
        """History bytes that left the backlog, committed or given up (on the store thread)."""
        if not committed:
            return
        with self._lock:
            self.bytes -= committed
        if self.room_wanted and self.bytes <= self.room_bytes:
            self.room_wanted = False
            self._hub.loop.run_callback_threadsafe(self._room.set)

    def wait_for_room(self, cancelled: CancelToken | None, holding: Callable[[], bool]) -> None:
        """Hold the calling greenlet (never the hub) while over `room_bytes`, `holding()` is true
        and `cancelled` is not set."""
        remove = cancelled.on_cancel(self._room.set) if cancelled is not None else None
        try:
            while self.bytes > self.room_bytes and holding():
                if cancelled is not None and cancelled.is_set():
                    return
                self._room.clear()
                self.room_wanted = True
                if self.bytes <= self.room_bytes:
                    return
                self._room.wait(ROOM_POLL)  # the poll also covers a wake-up lost between threads
        finally:
            if remove is not None:
                remove()

    def wake(self) -> None:
        """Every waiting producer looks again (on the hub): the store closed."""
        self._room.set()

    def wake_from_thread(self) -> None:
        """Every waiting producer looks again (from the store thread): the store serves from memory."""
        self._hub.loop.run_callback_threadsafe(self._room.set)
