"""Finding an MCP server's descendants wherever they went, by a mark in their environment.

A server is started in its own session and process group, so the group can be killed as a
whole. A descendant that calls `setsid()` leaves that group, and once its parent exits it is
nobody's child we know: cgroups need privileges we do not have, and PR_SET_CHILD_SUBREAPER would
reparent such orphans to the agent (a process-wide change) without saying whose they were. So
every server gets `ACP_GREEN_MCP_MARK=<agent pid>.<serial>` in its environment, which its
descendants inherit whatever session or parent they end up with, and `kill_marked` kills every
living process of our user whose `/proc/PID/environ` carries that mark. The limit: a descendant
started with a cleared environment (`env -i`) is not found.
"""

from __future__ import annotations

import itertools
import os
import signal

MARK_VARIABLE = "ACP_GREEN_MCP_MARK"
_serial = itertools.count(1)


def new_mark() -> str:
    """A mark no other server of this agent carries."""
    return f"{os.getpid()}.{next(_serial)}"


def kill_marked(mark: str, signum: int = signal.SIGKILL) -> list[int]:
    """Send `signum` to every process of our user that carries `mark`; their pids (none without /proc)."""
    needle = f"\0{MARK_VARIABLE}={mark}\0".encode()
    uid, me = os.getuid(), os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    signalled = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            if needle in b"\0" + environ:
                os.kill(int(entry), signum)
                signalled.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return signalled
