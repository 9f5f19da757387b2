"""Places for MCP servers that are starting, shared fairly between the sessions that start them.

Starting a server is CPU-heavy, so only a few start at once in this process. The places are
handed out round-robin by owner (a session): when one frees, it goes to the next session that
waits, not to the oldest waiter, so a session that declares dozens of servers that never answer
delays another session's server by at most one turn of the places, never by its whole queue.

A place is for a start that uses the CPU: once a started server's process group has been (nearly)
idle for IDLE_LOOKS looks in a row (`wait_while_busy`, reading /proc), its place goes on, even if
the server has not answered `initialize` yet. A server that never answers (a mute one) waits for
its reply without holding anything, so thirty sessions of mute servers delay another session's
server by a few looks each, not by STAGGER each (30 s). Where /proc cannot be read, a place is
held for the stagger, as before.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable

import gevent
from gevent.event import Event

#: How often a starting server's CPU use is looked at.
IDLE_LOOK = 0.05
#: Looks in a row a start must be idle in before its place goes on.
IDLE_LOOKS = 2
#: The share of one CPU, at most, a start uses while it is idle (waiting for its stdin, a socket).
IDLE_SHARE = 0.2
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


class GroupCpu:
    """What the processes of each process group are doing, from one pass over /proc, shared by
    every caller within `max_age` seconds (one pass serves every starting place)."""

    def __init__(self, max_age: float = IDLE_LOOK / 2) -> None:
        self.max_age = max_age
        self._taken = -max_age
        self._groups: dict[int, tuple[int, bool]] | None = None

    def use(self, group: int) -> tuple[int, bool] | None:
        """For process group `group`: the clock ticks its living processes have used, and whether
        one of them runs or waits to run (or for the disk) right now; None without /proc."""
        now = time.monotonic()
        if now - self._taken >= self.max_age:
            self._groups = _scan_groups()
            self._taken = now
        return None if self._groups is None else self._groups.get(group, (0, False))


#: States of a process that is starting, not waiting for a peer: running or runnable (R: a start
#: waiting for a CPU uses no time yet, but will) and uninterruptible disk waits (D: reading its code).
_BUSY_STATES = (b"R", b"D")


def _scan_groups() -> dict[int, tuple[int, bool]] | None:
    """Process group -> (utime + stime of its living processes, whether one is busy); a few µs a
    process; None without /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    groups: dict[int, tuple[int, bool]] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{entry}/stat", os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.read(fd, 1024)
            finally:
                os.close(fd)
        except OSError:  # gone meanwhile
            continue
        fields = data[data.rfind(b")") + 2:].split()  # after the command, which may hold anything
        if len(fields) > 12:
            group = int(fields[2])
            ticks, busy = groups.get(group, (0, False))
            groups[group] = (ticks + int(fields[11]) + int(fields[12]), busy or fields[0] in _BUSY_STATES)
    return groups


_cpu = GroupCpu()


def wait_while_busy(group: Callable[[], int | None], longest: float, *, look: float = IDLE_LOOK,
                    share: float = IDLE_SHARE, cpu: GroupCpu | None = None) -> bool:
    """Wait until process group `group()` (None until the server is launched) has been idle in
    IDLE_LOOKS looks in a row (True), or for `longest` seconds (False). Idle: none of its
    processes runs, waits to run or waits for the disk, and since the last look it used at most
    `share` of a CPU (a start waiting for a CPU on a busy machine is not idle)."""
    cpu = cpu or _cpu
    allowed = share * look * _TICKS_PER_SECOND
    deadline = time.monotonic() + longest
    last: int | None = None
    idle = 0
    while (left := deadline - time.monotonic()) > 0:
        gevent.sleep(min(look, left))
        leader = group()
        use = cpu.use(leader) if leader is not None else None
        if use is None:
            continue  # not launched yet, or no /proc: the stagger decides
        ticks, busy = use
        idle = idle + 1 if last is not None and not busy and ticks - last <= allowed else 0
        if idle >= IDLE_LOOKS:
            return True
        last = ticks
    return False
