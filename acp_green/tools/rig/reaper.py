"""Finding processes an agent left behind, and blaming each on the agent it descends from.

An orphan is reparented (to init, or to the nearest child subreaper), so a walk of the agent's
children after it exits finds nothing. The rig therefore makes itself a child subreaper
(prctl PR_SET_CHILD_SUBREAPER) so orphans stay visible and are reaped by us, but being our child
says nothing about which agent a process came from: several agents run at once and the rig
launches new ones all the time. A process is blamed on an agent only on evidence of descent:

- it is in the agent's session or process group (only the agent's lineage can be: the kernel
  keeps a session's id from being reused while any member lives);
- it was seen (pid and start time) among the agent's descendants while the agent ran, or it is
  in a session or group led by such a process;
- its environment, fixed at its exec and inherited down every fork, carries the run mark the
  rig put in the agent's environment (this finds a double-forked daemon whose middle process
  was never seen).

A process the rig launched itself is never blamed on another agent.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import uuid
from dataclasses import dataclass
from typing import Any

from gevent import subprocess

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
_enabled = False
# Agents the rig launched and has not reaped yet: never blamed as another agent's orphan.
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


# The variable the rig sets in every agent it launches to mark that run's descendants.
RUN_MARK = "ACP_GREEN_RIG_RUN"


def new_run_mark() -> str:
    """A fresh, unguessable mark for one agent run."""
    return uuid.uuid4().hex


def with_run_mark(env: dict[str, str] | None, mark: str) -> dict[str, str]:
    """The environment to launch an agent with: `env` (or ours) plus the run's mark."""
    return {**(os.environ if env is None else env), RUN_MARK: mark}


def carries_mark(pid: int, mark: str) -> bool:
    """Whether the process was started with this run's mark in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read(1 << 20)
    except OSError:  # gone, or another user's process
        return False
    return f"{RUN_MARK}={mark}".encode() in environ.split(b"\0")


class Tracker:
    """Remembers what an agent started, to find it again once the agent is gone."""

    def __init__(self, agent_pid: int, mark: str | None = None) -> None:
        self.agent_pid = agent_pid
        self.mark = mark
        # (pid, start) of every descendant seen while the agent ran: a pid alone may be reused.
        self.known: dict[tuple[int, int], ProcInfo] = {}
        LAUNCHED.add(agent_pid)
        info = proc_info(agent_pid)
        self.agent_start = info.start if info is not None else 0

    def snapshot(self, processes: list[ProcInfo] | None = None) -> None:
        """Record the agent's current descendants (call while it runs)."""
        for info in descendants(self.agent_pid, processes):
            self.known[(info.pid, info.start)] = info

    def survivors(self) -> list[ProcInfo]:
        """Processes descended from this agent that are still alive (see the module's rules)."""
        processes = all_processes()
        alive = {p.pid: p for p in processes}
        agent_now = alive.get(self.agent_pid)
        # Ids of sessions and groups only this agent's lineage can hold: its own (unless its pid
        # now names another process, whose session that would be) and those of known descendants.
        leaders: dict[int, int] = {} if agent_now is not None and agent_now.start != self.agent_start \
            else {self.agent_pid: self.agent_start}
        for pid, start in self.known:
            now = alive.get(pid)
            if now is None or now.start == start:
                leaders[pid] = start
        found: dict[int, ProcInfo] = {}
        for info in descendants(self.agent_pid, processes) if agent_now is not None and agent_now.start == self.agent_start else []:
            found[info.pid] = info
        for info in processes:
            if info.pid == self.agent_pid or info.start < self.agent_start:
                continue
            if (info.pid, info.start) in self.known:
                found[info.pid] = info
            elif any(leader in leaders and info.start >= leaders[leader] for leader in (info.sid, info.pgid)):
                found[info.pid] = info
            elif self.mark is not None and carries_mark(info.pid, self.mark):
                found[info.pid] = info
        # Another agent the rig launched is that agent's business, never this one's orphan. No
        # evidence above points at one today (each is the rig's child, in a session of its own,
        # with its own mark): this guards the rule, tested where descent does hold
        # (tests/test_reaper_launched.py).
        others = LAUNCHED - {self.agent_pid}
        return sorted((p for p in found.values() if p.pid not in others), key=lambda p: p.pid)


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
