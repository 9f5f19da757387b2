"""Fair sharing of the hub between greenlets that stream and everything else.

A greenlet that yields with `gevent.sleep(0)` is queued as a hub callback, and gevent runs
callbacks — including ones queued while running them — for up to the switch interval (5 ms)
before it polls for I/O again. With many streaming prompts that starves the reader: a cancel
would wait behind every stream's slice. So streaming code calls `yield_if_due()`, which lets
all streams together run for at most `budget` seconds per hub iteration, then parks the caller
on a timer: timers fire only after the next I/O poll, so the reader and writer get their turn.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Protocol

import gevent
from gevent.hub import Waiter

DEFAULT_BUDGET = 0.002  # seconds of streaming work per hub iteration, all streams together
_AFTER_NEXT_POLL = 1e-6  # any positive sleep is a timer, served after the next I/O poll


class FairShare:
    """Bounds the streaming work done between two polls of the hub for I/O.

    Once an iteration's budget is spent, callers wait in one line, first come first served;
    after the next poll the line is let through while the new budget lasts, and the rest wait
    on. So however many streams there are, they do `budget` of work per iteration between them
    and no more: a stream woken only to find the budget spent would cost a switch for nothing,
    and a stream let through for one more line each would make the budget grow with their number.
    """

    __slots__ = ("budget", "_loop", "_iteration", "_started", "_line", "_timer")

    def __init__(self, budget: float = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self._loop = gevent.get_hub().loop
        self._iteration = -1
        self._started = 0.0
        self._line: deque[Waiter] = deque()
        self._timer: Any = None

    def yield_if_due(self) -> None:
        """Return at once while this iteration's budget lasts; otherwise wait in line for a later one."""
        iteration = self._loop.iteration
        now = time.monotonic()
        if iteration != self._iteration and not self._line:
            self._iteration = iteration
            self._started = now
        elif self._line or now - self._started >= self.budget:
            self._wait_in_line()

    def _wait_in_line(self) -> None:
        waiter = Waiter()
        self._line.append(waiter)
        if self._timer is None:
            self._timer = self._loop.timer(_AFTER_NEXT_POLL)
            self._timer.start(self._let_through)
        try:
            waiter.get()
        finally:
            if self._line and waiter in self._line:  # killed while waiting: out of the line
                self._line.remove(waiter)

    def _let_through(self) -> None:
        """In the hub, after a poll: wake those waiting, in order, while this iteration's budget lasts."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.close()
        self._iteration = self._loop.iteration
        self._started = time.monotonic()
        line = self._line
        while line:
            if time.monotonic() - self._started >= self.budget:
                self._timer = self._loop.timer(_AFTER_NEXT_POLL)
                self._timer.start(self._let_through)
                return
            line.popleft().switch(None)  # runs that stream until it waits again


_shares: dict[int, FairShare] = {}


def share() -> FairShare:
    """The FairShare of the current thread's hub."""
    hub = gevent.get_hub()
    found = _shares.get(id(hub))
    if found is None or found._loop is not hub.loop:
        found = _shares[id(hub)] = FairShare()
    return found


class UpdateChannel(Protocol):
    """Where a stream's lines go: the connection's outbound queue, seen from a producer."""

    @property
    def over_high_water(self) -> bool: ...

    def put(self, data: bytes) -> None: ...

    def wait_below_high_water(self, cancelled: Any = None) -> None: ...


class PacedProducer:
    """One stream's way onto the outbound queue: the path every turn update and replayed update takes.

    After queuing a line it waits while the backlog is over its high-water mark,
    released early only by `released_by` (or shutdown); otherwise it yields its fair share.
    """

    __slots__ = ("channel", "released_by", "_fair")

    def __init__(self, channel: UpdateChannel, released_by: Any = None) -> None:
        self.channel = channel
        self.released_by = released_by
        self._fair = share()

    def send(self, line: bytes) -> None:
        """Queue `line`, then wait for the backlog or yield, as above."""
        channel = self.channel
        channel.put(line)
        if channel.over_high_water:
            channel.wait_below_high_water(self.released_by)
        else:
            self._fair.yield_if_due()
