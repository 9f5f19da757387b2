"""gevent monkey-patching for a process that serves one agent: when it is safe, and doing it.

Serving patches by default (`acp-green serve`, `serve_stdio`), so that an agent's plain blocking
calls (time.sleep, sockets, requests, httpx, the openai and anthropic clients, subprocess) yield
to the other greenlets instead of freezing the connection. Importing acp_green never patches.

Patching is only right before anything it replaces is in use: an `ssl.SSLContext` made before
(an SDK client built at import) keeps unpatched sockets, and a thread already running keeps
real locks. This module imports nothing at its top, so the command line can call it first.
"""

from __future__ import annotations

import sys
from typing import Any


def is_patched() -> bool:
    """This process's sockets are gevent's (someone called patch_all, us or the agent's author)."""
    if "gevent.monkey" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("socket"))


def reasons_not_to_patch() -> list[str]:
    """Why patching now could leave blocking or broken objects behind; empty when it is safe."""
    reasons = []
    if "ssl" in sys.modules:
        reasons.append("ssl was imported already (an SSLContext made before patching keeps blocking sockets)")
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        reasons.append(f"{threading.active_count() - 1} other threads are running already")
    return reasons


def patch_process() -> None:
    """gevent's `patch_all()`: sleeps, sockets, ssl, select, subprocess, threads and locks
    become cooperative. Call before the agent is imported; see `reasons_not_to_patch`."""
    from importlib import metadata

    from gevent import monkey

    # patch_all announces each of its ~25 steps to gevent's plugins through
    # `importlib.metadata.entry_points(group=...)`, which reads the metadata of every installed
    # distribution each time: most of patching's start-up cost. The installed set cannot change
    # within the call, so it is read once and each lookup selects from it.
    every_entry_point: Any = metadata.entry_points()
    real_entry_points = metadata.entry_points

    def entry_points(**params: Any) -> Any:
        return every_entry_point.select(**params)

    setattr(metadata, "entry_points", entry_points)  # for the duration of patch_all only
    try:
        monkey.patch_all()  # ok: only a process that serves one agent calls this, before the agent is imported
    finally:
        setattr(metadata, "entry_points", real_entry_points)
