"""Trace files for the trace tools' tests, written per docs/TRACES.md from a rig run's records
(or from hand-made lines), the way a recorder would have written them."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from acp_green.tools.rig.client import AgentProcess, ClientPolicy, Record


def wire_event(ts: float, sender: str, raw: bytes, *, newline: bool = True) -> dict[str, Any]:
    """The event of one line (without its newline) that `sender` wrote."""
    event: dict[str, Any] = {"ts": round(ts, 6), "from": sender, "to": "agent" if sender == "client" else "client"}
    try:
        text = raw.decode("utf-8")
        event["raw"] = text
    except UnicodeDecodeError:
        event["raw_b64"] = base64.b64encode(raw).decode("ascii")
        event.update(type="line", error="invalid UTF-8")
        return event
    if not newline:
        event["newline"] = False
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        event.update(type="line", error="invalid JSON")
        return event
    if not isinstance(message, dict) or not ({"method", "id", "result", "error"} & set(message)):
        event.update(type="line", error="not a JSON-RPC message")
        return event
    params = message.get("params")
    session = params.get("sessionId") if isinstance(params, dict) and isinstance(params.get("sessionId"), str) else None
    if "method" in message:
        event.update(type="request" if "id" in message else "notification", protocol="acp", method=message["method"],
                     session=session, params=params)
        if "id" in message:
            event["id"] = message["id"]
    else:
        error = "error" in message
        event.update(type="response", id=message.get("id"), is_error=error, payload=message.get("error" if error else "result"))
    return event


def record_lines(record: Record) -> list[bytes]:
    """The lines one rig record stands for: what the rig client wrote or read."""
    if record.message is not None and not record.raw:
        return [json.dumps(record.message).encode()]  # exactly what AcpClient.send writes
    raw = record.raw
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def events_from_records(records: Sequence[Record], command: list[str] | None = None, exit_code: int | None = 0) -> list[dict[str, Any]]:
    """A recorder's events for a rig run: header, every line both ways, footer."""
    start = records[0].t if records else 0.0
    events: list[dict[str, Any]] = [{"ts": 0.0, "type": "trace", "component": "recorder", "level": "info",
                                     "message": "recording", "fields": {"format": "acp-green-trace/1", "command": command,
                                                                        "started": "2026-12-01T00:00:00Z", "pid": None}}]
    for record in records:
        sender = "client" if record.direction == "out" else "agent"
        for line in record_lines(record):
            events.append(wire_event(record.t - start, sender, line))
    end = (records[-1].t - start) if records else 0.0
    events.append({"ts": round(end, 6), "type": "trace", "component": "recorder", "level": "info", "message": "agent exited",
                   "fields": {"exit": exit_code, "signal": None}})
    return events


def write_trace(path: Path, events: Iterable[dict[str, Any] | bytes]) -> Path:
    """Write events (dicts, numbered with `seq`) or raw lines as they are."""
    with open(path, "wb") as handle:
        for seq, event in enumerate(events):
            if isinstance(event, bytes):
                handle.write(event)
                continue
            handle.write(json.dumps({**event, "seq": seq}).encode() + b"\n")
    return path


ACP_GREEN = [sys.executable, "-m", "acp_green"]
DEMO = [*ACP_GREEN, "serve", "--ephemeral"]


def trace_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`acp-green trace ARGS...` as a user runs it."""
    return subprocess.run([*ACP_GREEN, "trace", *args], capture_output=True, text=True, timeout=timeout)


def demo_run(path: Path, written_to: str) -> Path:
    """A trace of a rig run against the demo agent: a stream, a permission and a file write, a
    /wait cancelled, on one session; a second session with one echo."""
    agent = AgentProcess(DEMO, ClientPolicy())
    try:
        agent.initialize()
        session = agent.new_session()
        agent.prompt(session, "/stream 12").result()
        agent.prompt(session, f"/write {written_to} hello").result()
        waiting = agent.prompt(session, "/wait")
        agent.wait_for(lambda: agent.updates(session), what="the session's first update")
        agent.cancel(session)
        assert waiting.result()["stopReason"] == "cancelled"
        other = agent.new_session()
        agent.prompt(other, "hello there").result()
        agent.close_input()
        code = agent.wait_exit()
    finally:
        agent.close()
    return write_trace(path, events_from_records(agent.records, DEMO, code))


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def find(events: list[dict[str, Any]], predicate: Any) -> int:
    """The index of the first event `predicate` accepts (its line in the file is index + 1)."""
    return next(i for i, e in enumerate(events) if predicate(e))


def message_of(event: dict[str, Any]) -> dict[str, Any]:
    return json.loads(event["raw"])


def agent_line(message: dict[str, Any], ts: float) -> dict[str, Any]:
    return wire_event(ts, "agent", json.dumps(message).encode())


def client_line(message: dict[str, Any] | bytes, ts: float) -> dict[str, Any]:
    return wire_event(ts, "client", message if isinstance(message, bytes) else json.dumps(message).encode())
