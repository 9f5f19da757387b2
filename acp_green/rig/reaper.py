"""Finding processes an agent left behind.

An orphan is reparented (to init, or to the nearest child subreaper), so a walk of the agent's
children after it exits finds nothing. The rig therefore makes itself a child subreaper
(prctl PR_SET_CHILD_SUBREAPER): every orphan of an agent it launched becomes the rig's own
child, visible in /proc with our pid as its parent. Processes are attributed to an agent by
session id (agents run in their own session) or by the descendant snapshots taken while the
agent ran (a child that called setsid leaves the agent's session).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
from dataclasses import dataclass
from typing import Any

from gevent import subprocess

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
_enabled = False
# Pids the rig launched itself; any other child of the rig in a session of its own is an orphan
# some agent left behind (reparented to us because we are the subreaper).
LAUNCHED: set[int] = set()


def become_subreaper() -> bool:
    """Make this process a child subreaper; False where prctl is unavailable (not Linux)."""
    global _enabled
    if _enabled:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d", ctypes.get_errno())
            return False
    except (OSError, AttributeError):
        return False
    _enabled = True
    return True


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """The fields of /proc/PID/stat the rig needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    comm: str
    start: int = 0  # clock ticks after boot


def proc_info(pid: int) -> ProcInfo | None:
    """Read /proc/PID/stat; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may contain spaces or parentheses: split at the last ')'.
    head, _, rest = data.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    try:
        return ProcInfo(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0], comm, int(fields[19]))
    except (IndexError, ValueError):
        return None


def all_processes() -> list[ProcInfo]:
    """Every live (non-zombie) process visible in /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = proc_info(int(name))
            if info is not None and info.state != "Z":
                found.append(info)
    return found


def descendants(pid: int, processes: list[ProcInfo] | None = None) -> list[ProcInfo]:
    """Every live descendant of pid (children, grandchildren...)."""
    processes = all_processes() if processes is None else processes
    children: dict[int, list[ProcInfo]] = {}
    for info in processes:
        children.setdefault(info.ppid, []).append(info)
    out: list[ProcInfo] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child.pid)
    return out


class Tracker:
    """Remembers what an agent started, to find it again once the agent is gone."""

    def __init__(self, agent_pid: int) -> None:
        self.agent_pid = agent_pid
        self.known: dict[int, ProcInfo] = {}
        LAUNCHED.add(agent_pid)
        info = proc_info(agent_pid)
        self.agent_start = info.start if info is not None else 0

    def snapshot(self, processes: list[ProcInfo] | None = None) -> None:
        """Record the agent's current descendants (call while it runs)."""
        for info in descendants(self.agent_pid, processes):
            self.known[info.pid] = info

    def survivors(self) -> list[ProcInfo]:
        """Processes of this agent still alive: its session, its descendants, or ones seen earlier."""
        processes = all_processes()
        alive = {p.pid: p for p in processes}
        found: dict[int, ProcInfo] = {}
        for info in processes:
            if info.pid != self.agent_pid and (info.sid == self.agent_pid or info.pgid == self.agent_pid):
                found[info.pid] = info
        for info in descendants(self.agent_pid, processes):
            found[info.pid] = info
        me, my_session = os.getpid(), os.getsid(0)
        for info in processes:
            # Reparented to us after the agent (or its child) died, in a session of its own: an
            # orphan no walk of the agent's tree can find. Only ones started after this agent.
            if info.ppid == me and info.pid not in LAUNCHED and info.sid != my_session and info.start >= self.agent_start:
                found[info.pid] = info
        for pid, seen in self.known.items():
            now = alive.get(pid)
            # Same pid and same command: the process we saw, not a recycled pid.
            if now is not None and now.comm == seen.comm and pid != self.agent_pid:
                found[pid] = now
        return sorted(found.values(), key=lambda p: p.pid)


def kill_all(processes: list[ProcInfo]) -> None:
    """SIGKILL processes found by `survivors` (the rig cleans up after reporting)."""
    for info in processes:
        try:
            os.kill(info.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def end_process(proc: Any, pid: int, grace: float) -> int:
    """EOF to a child started in its own session, SIGKILL its group if it lingers, reap it.

    `proc` is a gevent.subprocess.Popen whose stdin the caller hands over here.
    """
    try:
        proc.stdin.close()
    except OSError:
        pass
    code: int | None
    try:
        code = proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        code = None
    try:
        os.killpg(pid, signal.SIGKILL)  # what it started in its group goes too
    except (ProcessLookupError, PermissionError):
        pass
    return proc.wait(timeout=10) if code is None else code
