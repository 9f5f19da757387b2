"""Resident memory of a process and its descendants, from /proc."""

from __future__ import annotations

import os


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


def tree_rss_bytes(pid: int) -> int:
    """VmRSS of `pid` plus every descendant (an agent launched through a wrapper counts whole)."""
    total = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        total += rss_bytes(current)
        todo.extend(children(current))
    return total
