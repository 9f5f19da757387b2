"""Places for MCP servers that are starting, shared fairly between the sessions that start them.

Starting a server is CPU-heavy, so only a few start at once in this process. The places are
handed out round-robin by owner (a session): when one frees, it goes to the next session that
waits, not to the oldest waiter, so a session that declares dozens of servers that never answer
delays another session's server by at most one turn of the places, never by its whole queue.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from gevent.event import Event


class FairPlaces:
    """`size` places; waiters are served one owner at a time, in turn."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size
        self._waiting: OrderedDict[str, deque[Event]] = OrderedDict()  # owner -> its waiters, in arrival order

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    def acquire(self, owner: str) -> None:
        """Take a place, waiting for one to be handed to `owner`'s turn if none is free."""
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        ticket = Event()
        queue = self._waiting.setdefault(owner, deque())
        queue.append(ticket)
        try:
            ticket.wait()
        except BaseException:  # ok: re-raised; killed while waiting (the session ended)
            if ticket.is_set():
                self.release()  # a place was handed to us: pass it on
            else:
                queue.remove(ticket)
                if not queue and self._waiting.get(owner) is queue:
                    del self._waiting[owner]
            raise

    def release(self) -> None:
        """Give a place back: to the first waiter of the next owner in turn, else to the pool."""
        if not self._waiting:
            self.free += 1
            return
        owner, queue = next(iter(self._waiting.items()))
        ticket = queue.popleft()
        if queue:
            self._waiting.move_to_end(owner)  # its next waiter comes after every other owner's
        else:
            del self._waiting[owner]
        ticket.set()
