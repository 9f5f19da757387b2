"""Workloads W7 and W8, which measure what only acp_green offers: a big stored history's replay, MCP.

Both take the acp-green serve command the bench was given and add what they need (a state
directory, a provided MCP server). A W8 leg that cannot run here (no `mcp` SDK for the server)
is reported as skipped with the reason, not as a failure.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess
from gevent.event import Event

from .conn import AgentConn, AgentFailed, Call
from .stats import percentile
from .workloads import AGENT_ENV, Metrics, Sizes, ping_until

PEER_AGENTS = Path(__file__).resolve().parent / "peer_agents"
MCP_SERVER = PEER_AGENTS / "mcp_echo_server.py"
MCP_SDK_CLIENT = PEER_AGENTS / "mcp_sdk_client.py"


class Skipped(Exception):
    """This workload (or leg) cannot run here; the message says why in one line."""


def persistent(command: Sequence[str], state_dir: str) -> list[str]:
    """The serve command keeping its state in `state_dir` instead of memory."""
    kept = [arg for arg in command if arg != "--ephemeral"]
    return [*kept, "--state-dir", state_dir]


# -- W7 ----------------------------------------------------------------------------------------
def split_pings(pings: Sequence[Call], before: int, load: Call) -> tuple[list[Call], list[Call]]:
    """The answered pings sent before the first replayed update was read (whenever their answer
    came: one held behind the load's admission may be answered after a short replay), and those
    sent after it and answered while updates were still replayed (before the load's answer)."""
    answered = [c for c in pings if c.done]
    opening = [c for c in answered if c.chunks_at_send == before]
    during = [c for c in answered if c.chunks_at_send > before and c.answered_pos < load.answered_pos]
    return opening, during


def w7_replay(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W7: session/load of a stored N-chunk session in a fresh process, while set_mode pings
    another session; replay rate (updates/s, load written → load answered), ping latencies while
    updates are replayed, and the slowest ping before the first update (the store opening)."""
    with tempfile.TemporaryDirectory(prefix="acp-bench-w7-") as state:
        serve = persistent(command, state)
        with AgentConn(serve, env=AGENT_ENV) as conn:  # build the history (not timed)
            conn.initialize(sizes.timeout)
            (big,) = conn.new_sessions(1)
            conn.wait(conn.send("session/prompt", conn.prompt_params(big, f"/stream {sizes.w7_chunks} {sizes.chunk_size}")), sizes.timeout)
        with AgentConn(serve, keep_limit=0, env=AGENT_ENV) as conn:
            conn.start_reader()
            conn.initialize(sizes.timeout)
            (idle,) = conn.new_sessions(1)
            done = Event()
            pings: list[Call] = []
            before = conn.scanner.chunks
            load = conn.send("session/load", {"sessionId": big, "cwd": "/tmp", "mcpServers": []})
            conn.on_response = lambda call: done.set() if call is load else None
            pinger = gevent.spawn(ping_until, conn, idle, sizes.w2_ping_interval, done, pings)
            conn.wait(load, sizes.timeout)
            pinger.join(timeout=5)
            pinger.kill()
            replayed = conn.scanner.chunks - before
            for call in pings:
                try:
                    conn.wait(call, 30.0)
                except AgentFailed:
                    pass
            # A fresh process opens its store in the background and the load's admission, in the
            # receive loop, waits for it: pings sent before the first replayed update came back are
            # that wait, reported apart from the replay's.
            opening_calls, during = split_pings(pings, before, load)
            opening = [c.latency * 1000 for c in opening_calls]
            rtts = [c.latency * 1000 for c in during]
            return {
                "opening_ping_max_ms": max(opening, default=0.0),
                "pings_before_first_update": float(len(opening)),
                "replay_updates_per_s": replayed / load.latency,
                "replay_seconds": load.latency,
                "replayed_chunks": float(replayed),
                "ping_p50_ms": percentile(rtts, 50),
                "ping_p99_ms": percentile(rtts, 99),
                "pings_answered_during_replay": float(len(during)),
            }


# -- W8 ----------------------------------------------------------------------------------------
def mcp_python() -> str:
    """A Python that has the official `mcp` SDK (this one, or the bench cache's python-sdk venv)."""
    if importlib.util.find_spec("mcp") is not None:
        return sys.executable
    from .peers import default_cache_dir

    cached = default_cache_dir() / "python-sdk" / "bin" / "python"
    if cached.is_file():
        return str(cached)
    raise Skipped("the official `mcp` SDK is not installed (pip install 'acp-green[bench]', or --install-peers)")


def w8_mcp(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W8: `tools/call` of one `echo` tool on an MCP server built on the official SDK: through the
    ACP bridge (mcp/message), from a turn over stdio and over HTTP (prompt round trips, beside a
    turn with no tool call), and directly from the official SDK client."""
    python = mcp_python()
    server = [python, str(MCP_SERVER)]
    calls = sizes.w8_calls
    metrics: Metrics = {}
    serve = [*command, "--provide-mcp", "echo=" + " ".join(_quoted(server))]
    with tempfile.TemporaryDirectory(prefix="acp-bench-w8-") as scratch:
        port_file = os.path.join(scratch, "port")
        http = subprocess.Popen([*server, "--http", port_file], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{_wait_port(port_file, http, sizes.timeout)}/mcp"
            with AgentConn(serve, env=AGENT_ENV) as conn:
                result = conn.initialize(sizes.timeout).response["result"]  # type: ignore[index]
                (provided,) = [s for s in result["_meta"]["acpGreen"]["providedMcpServers"] if s["name"] == "echo"]
                metrics.update(_over_acp(conn, provided["serverId"], calls, sizes.timeout))
                declared = [{"name": "stdio", "command": server[0], "args": server[1:], "env": []},
                            {"type": "http", "name": "http", "url": url, "headers": []}]
                (sid,) = [conn.call("session/new", {"cwd": "/tmp", "mcpServers": declared}, sizes.timeout)["sessionId"]]
                metrics.update(_prompt_rtts(conn, sid, "no_tool", "/think", calls, sizes.timeout))
                for name in ("stdio", "http"):
                    metrics.update(_prompt_rtts(conn, sid, name, f'/mcp {name} echo {{"text": "hi"}}', calls, sizes.timeout))
        finally:
            http.kill()
            http.wait()
    metrics.update(_sdk_direct(server, calls, sizes.timeout))
    return metrics


def _over_acp(conn: AgentConn, server_id: str, calls: int, timeout: float) -> Metrics:
    connection = conn.call("mcp/connect", {"serverId": server_id}, timeout)["connectionId"]

    def message(method: str, params: Any) -> Any:
        return conn.call("mcp/message", {"connectionId": connection, "method": method, "params": params}, timeout)

    message("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "acp-green-bench", "version": "0"}})
    conn.notify("mcp/message", {"connectionId": connection, "method": "notifications/initialized"})
    message("tools/call", {"name": "echo", "arguments": {"text": "warm-up"}})
    rtts = []
    for n in range(calls):
        started = time.perf_counter()
        answer = message("tools/call", {"name": "echo", "arguments": {"text": f"call {n}"}})
        rtts.append((time.perf_counter() - started) * 1000)
        if answer.get("isError"):
            raise AgentFailed(f"W8: tools/call over ACP failed: {answer}")
    conn.call("mcp/disconnect", {"connectionId": connection}, timeout)
    return {"acp_p50_ms": percentile(rtts, 50), "acp_p99_ms": percentile(rtts, 99)}


def _prompt_rtts(conn: AgentConn, sid: str, name: str, text: str, calls: int, timeout: float) -> Metrics:
    conn.call("session/prompt", conn.prompt_params(sid, text), timeout)  # warm-up: the server's first use
    rtts = []
    for _ in range(calls):
        call = conn.send("session/prompt", conn.prompt_params(sid, text))
        conn.wait(call, timeout)
        rtts.append(call.latency * 1000)
    return {f"{name}_p50_ms": percentile(rtts, 50), f"{name}_p99_ms": percentile(rtts, 99)}


def _sdk_direct(server: list[str], calls: int, timeout: float) -> Metrics:
    import json

    done = subprocess.run([server[0], str(MCP_SDK_CLIENT), str(calls), *server], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise AgentFailed(f"W8: the SDK client failed: {done.stderr.strip()[-300:]}")
    rtts = json.loads(done.stdout)["rtt_ms"]
    return {"sdk_direct_p50_ms": percentile(rtts, 50), "sdk_direct_p99_ms": percentile(rtts, 99)}


def _wait_port(port_file: str, process: Any, timeout: float) -> int:
    with gevent.Timeout(timeout, AgentFailed("W8: the HTTP MCP server did not start")):
        while not os.path.exists(port_file):
            if process.poll() is not None:
                raise AgentFailed(f"W8: the HTTP MCP server exited ({process.returncode})")
            gevent.sleep(0.02)
    with open(port_file) as handle:
        return int(handle.read())


def _quoted(argv: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(arg) for arg in argv]
