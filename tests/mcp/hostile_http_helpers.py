"""Hostile HTTP MCP servers in processes of their own (tests/mcp_servers/hostile_http.py), and the
worst control latency of an agent while one of them acts."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HOSTILE_HTTP = str(Path(__file__).resolve().parent.parent / "mcp_servers" / "hostile_http.py")


@contextmanager
def hostile_servers(count: int, mode: str, *args: str) -> Iterator[list[int]]:
    """`count` hostile servers acting as `mode` says; yields their ports; killed at the end."""
    procs = [subprocess.Popen([sys.executable, HOSTILE_HTTP, mode, *args], stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    try:
        yield [int(proc.stdout.readline()) for proc in procs]  # type: ignore[union-attr]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def http_entry(name: str, url: str) -> dict[str, Any]:
    return {"type": "http", "name": name, "url": url, "headers": []}


def worst_control_latency(agent: Any, seconds: float) -> tuple[float, int]:
    """`session/list` sent one after another for `seconds`: the longest wait for an answer, and how many were answered."""
    worst, answered = 0.0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent = time.monotonic()
        agent.call("session/list", {}, timeout=120)
        worst = max(worst, time.monotonic() - sent)
        answered += 1
    return worst, answered


def tool_update(agent: Any, session_id: str) -> dict[str, Any]:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]


def tool_text(agent: Any, session_id: str) -> str:
    return tool_update(agent, session_id)["content"][0]["content"]["text"]
