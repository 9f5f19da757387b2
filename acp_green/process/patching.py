"""gevent monkey-patching for a process that serves one agent: when it is safe, and doing it.

Serving patches by default (`acp-green serve`, `serve_stdio`), so that an agent's plain blocking
calls (time.sleep, sockets, requests, httpx, the openai and anthropic clients, subprocess) yield
to the other greenlets instead of freezing the connection. Importing acp_green never patches.

Patching is only right before anything it replaces is in use: an `ssl.SSLContext` made before
(an SDK client built at import) keeps unpatched sockets, and a thread already running keeps
real locks. This module imports nothing at its top, so the command line can call it first.

A process that serves unpatched records why (`patch_for_serving`), so that the block watchdog's
WARNING can say it, with the fix, when blocking code then holds every session.
"""

from __future__ import annotations

import sys
from typing import Any

#: What an unpatched process is told to do instead (the block watchdog's WARNING says it).
FIX = ("call gevent.monkey.patch_all() before any other import in the entry script (as the entry.py of a project "  # ok: advice text
       "made by `acp-green new` does), or serve with `acp-green serve --agent module:Class`, which patches before "
       "importing the agent")
#: The reason recorded for a process told not to patch.
OPTED_OUT = "patching was turned off (--no-monkey-patch, or monkey_patch=False)"

# Why this process serves unpatched, recorded when serving starts; None: patched, or not recorded.
_why_unpatched: list[str] | None = None


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


def patch_for_serving(monkey_patch: bool) -> list[str]:
    """Patch a process about to serve one agent unless it is patched already, `monkey_patch` is
    False, or patching now is unsafe; the reasons it was unsafe ([] otherwise). Why the process
    stays unpatched, if it does, is recorded for `unpatched_advice`."""
    global _why_unpatched
    if is_patched():
        _why_unpatched = None
        return []
    if not monkey_patch:
        _why_unpatched = [OPTED_OUT]
        return []
    reasons = reasons_not_to_patch()
    if reasons:
        _why_unpatched = reasons
        return reasons
    patch_process()
    _why_unpatched = None
    return []


def unpatched_advice() -> str:
    """What a warning about blocking code says of this unpatched process: why it is not patched
    (as recorded when serving started) and how to patch it."""
    why = _why_unpatched
    if why == [OPTED_OUT]:
        return (f"this process is not monkey-patched ({OPTED_OUT}), so sleeps, sockets and subprocesses block every "
                "session: serve without it unless the agent is written for gevent throughout")
    because = f" (serving could not patch it: {'; '.join(why)})" if why else ""
    return f"this process is not monkey-patched{because}, so sleeps, sockets and subprocesses block every session: {FIX}"
