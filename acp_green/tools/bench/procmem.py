"""Resident memory and CPU time of a process and its descendants, from /proc."""

from __future__ import annotations

import os
from collections.abc import Callable


def children(pid: int) -> list[int]:
    """Direct children of `pid` (all its threads' children)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(p) for p in handle.read().split())
        except OSError:
            continue
    return found


def rss_bytes(pid: int) -> int:
    """VmRSS of one process in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_sum(pid: int, measure: Callable[[int], float]) -> float:
    """`measure` of `pid` plus every live descendant."""
    total = 0.0
    todo = [pid]
    while todo:
        current = todo.pop()
        total += measure(current)
        todo.extend(children(current))
    return total


def tree_rss_bytes(pid: int) -> int:
    """VmRSS of `pid` plus every descendant (an agent launched through a wrapper counts whole)."""
    return int(_tree_sum(pid, rss_bytes))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, all threads (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command name: state is field 3, utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of `pid` plus every live descendant."""
    return _tree_sum(pid, cpu_seconds)
