"""Traces made for the trace tools' tests, written event by event in the trace format (docs/TRACES.md):
a known three-session conversation with every kind of mark, a session whose every text is hostile,
an agent that logs errors and tracebacks on stderr, and a long one of any size."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Text a hostile agent might send, to prove the viewers never treat trace text as markup.
HOSTILE = "</script><img src=x onerror=alert(1)>"
#: More of it, each setting window.__pwned if it ever runs: a script element, the end of an element
#: whose text is raw (textarea, title, style), an event handler, a comment that would swallow the page.
PAYLOADS = ("<script>window.__pwned=1</script>", "</textarea><script>window.__pwned=2</script>",
            "</title></style><img src=x onerror=\"window.__pwned=3\">", "<!--<script>window.__pwned=4//-->",
            "<svg onload=window.__pwned=5>", "\" onmouseover=\"window.__pwned=6\" x=\"")


@dataclass
class TraceBuilder:
    """Appends events as a recorder would: seq in order, ts rising, raw line and parsed fields both."""

    events: list[dict[str, Any]] = field(default_factory=list)
    now: float = 0.0

    def _add(self, event: dict[str, Any], after: float) -> dict[str, Any]:
        self.now += after
        event = {"ts": round(self.now, 6), "seq": len(self.events), **event}
        self.events.append(event)
        return event

    def wire(self, message: dict[str, Any], sender: str, after: float = 0.01) -> dict[str, Any]:
        raw = json.dumps(message, separators=(",", ":"))
        event: dict[str, Any] = {"from": sender, "to": "agent" if sender == "client" else "client", "raw": raw}
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        session = session if isinstance(session, str) else None
        if "method" in message and "id" in message:
            event.update(type="request", protocol="acp", id=message["id"], method=message["method"], session=session, params=params)
        elif "method" in message:
            event.update(type="notification", protocol="acp", method=message["method"], session=session, params=params)
        else:
            is_error = "error" in message
            event.update(type="response", id=message["id"], is_error=is_error, payload=message["error" if is_error else "result"])
        return self._add(event, after)

    def request(self, sender: str, rid: Any, method: str, params: dict[str, Any], after: float = 0.01) -> None:
        self.wire({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, sender, after)

    def answer(self, sender: str, rid: Any, result: Any, after: float = 0.01) -> None:
        self.wire({"jsonrpc": "2.0", "id": rid, "result": result}, sender, after)

    def fail(self, sender: str, rid: Any, code: int, message: str, after: float = 0.01) -> None:
        self.wire({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}, sender, after)

    def notify(self, sender: str, method: str, params: dict[str, Any], after: float = 0.01) -> None:
        self.wire({"jsonrpc": "2.0", "method": method, "params": params}, sender, after)

    def update(self, session: str, kind: str, text: str = "", after: float = 0.005) -> None:
        update: dict[str, Any] = {"sessionUpdate": kind}
        if kind.endswith("_chunk"):
            update["content"] = {"type": "text", "text": text}
        else:
            update.update(toolCallId="call-1", title=text or "read a file", status="in_progress")
        self.notify("agent", "session/update", {"sessionId": session, "update": update}, after)

    def bad_line(self, data: bytes, error: str, after: float = 0.01) -> None:
        try:
            body: dict[str, Any] = {"raw": data.decode("utf-8")}
        except UnicodeDecodeError:
            body = {"raw_b64": base64.b64encode(data).decode("ascii")}
        self._add({"type": "line", "from": "client", "to": "agent", **body, "error": error}, after)

    def note(self, component: str, level: str, message: str, fields: dict[str, Any] | None = None, after: float = 0.0) -> None:
        self._add({"type": "trace", "component": component, "level": level, "message": message,
                   **({"fields": fields} if fields is not None else {})}, after)

    def write(self, path: Path) -> Path:
        # As a recorder writes it: ASCII, so a lone surrogate in a string is the escape "\ud800" (valid JSON, not UTF-8).
        path.write_text("".join(json.dumps(e) + "\n" for e in self.events), encoding="ascii")
        return path


@dataclass(frozen=True)
class Expected:
    """What a viewer must show of a sample trace."""

    sessions: tuple[str, ...]
    requests: int  # request bars, every lane
    updates: int
    cancels: int  # session/cancel notifications
    cancelled: int  # prompts answered stopReason cancelled
    error_answers: int
    bad_lines: int
    unanswered: int
    hostile_seq: int  # the event whose text is HOSTILE


def three_sessions() -> tuple[TraceBuilder, Expected]:
    """initialize and session/list with no session; session A streams, asks a permission and reads a file;
    B is cancelled mid-prompt; C's prompt fails, and it says HOSTILE; one bad line; A's last prompt unanswered."""
    t = TraceBuilder()
    t.note("recorder", "info", "recording", {"format": "acp-green-trace/1", "command": ["acp-green", "serve"],
                                             "started": "2026-12-01T19:00:00Z", "pid": 4242})
    t.request("client", 0, "initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}})
    t.answer("agent", 0, {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}, after=0.02)
    t.note("agent", "info", "demo agent ready", after=0.001)
    for rid, sid in ((1, "sess-a"), (2, "sess-b"), (3, "sess-c")):
        t.request("client", rid, "session/new", {"cwd": "/work/project", "mcpServers": []})
        t.answer("agent", rid, {"sessionId": sid})
    t.request("client", 4, "session/prompt", {"sessionId": "sess-a", "prompt": [{"type": "text", "text": "read README"}]})
    t.request("client", 5, "session/prompt", {"sessionId": "sess-b", "prompt": [{"type": "text", "text": "count to 100"}]})
    t.update("sess-a", "agent_thought_chunk", "reading")
    t.update("sess-a", "tool_call", "read README.md")
    t.request("agent", 0, "session/request_permission", {"sessionId": "sess-a", "toolCall": {"toolCallId": "call-1"},
                                                         "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]})
    for n in range(3):
        t.update("sess-b", "agent_message_chunk", f"{n + 1} ")
    t.answer("client", 0, {"outcome": {"outcome": "selected", "optionId": "allow"}}, after=0.3)
    t.request("agent", 1, "fs/read_text_file", {"sessionId": "sess-a", "path": "/work/project/README.md"})
    t.notify("client", "session/cancel", {"sessionId": "sess-b"})
    t.answer("client", 1, {"content": "# project\n"}, after=0.02)
    t.update("sess-b", "agent_message_chunk", "4 ")
    t.answer("agent", 5, {"stopReason": "cancelled"})
    t.update("sess-a", "agent_message_chunk", "The README says: project")
    t.answer("agent", 4, {"stopReason": "end_turn"})
    t.request("client", 6, "session/prompt", {"sessionId": "sess-c", "prompt": [{"type": "text", "text": "hi"}]})
    t.update("sess-c", "agent_message_chunk", HOSTILE)
    hostile_seq = len(t.events) - 1
    t.fail("agent", 6, -32603, "Internal error")
    t.bad_line(b"{\"jsonrpc\": \"2.0\", \xff}", "invalid UTF-8")
    t.request("client", 7, "session/list", {})
    t.answer("agent", 7, {"sessions": [{"sessionId": s, "cwd": "/work/project"} for s in ("sess-a", "sess-b", "sess-c")]})
    t.request("client", 8, "session/prompt", {"sessionId": "sess-a", "prompt": [{"type": "text", "text": "again"}]})
    t.update("sess-a", "agent_message_chunk", "Start")
    t.note("recorder", "info", "agent exited", {"exit": None, "signal": "SIGTERM"}, after=0.2)
    expected = Expected(sessions=("sess-a", "sess-b", "sess-c"), requests=11, updates=9, cancels=1, cancelled=1,
                        error_answers=1, bad_lines=1, unanswered=1, hostile_seq=hostile_seq)
    return t, expected


def hostile_conversation() -> TraceBuilder:
    """A session whose every text is a payload: its id, its title, the prompt, the reply, a thought, a tool
    call's title and output, a permission and its options, a plan, an error, a line on stderr."""
    t = TraceBuilder()
    sid = PAYLOADS[1]
    t.request("client", 0, "initialize", {"protocolVersion": 1})
    t.answer("agent", 0, {"protocolVersion": 1})
    t.request("client", 1, "session/new", {"cwd": PAYLOADS[5], "mcpServers": []})
    t.answer("agent", 1, {"sessionId": sid})
    t.request("client", 2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PAYLOADS[0]}]})
    t.notify("agent", "session/update", {"sessionId": sid, "update": {"sessionUpdate": "session_info_update", "title": PAYLOADS[2]}})
    t.update(sid, "agent_thought_chunk", PAYLOADS[3])
    t.notify("agent", "session/update", {"sessionId": sid, "update": {
        "sessionUpdate": "tool_call", "toolCallId": PAYLOADS[4], "title": PAYLOADS[4], "kind": PAYLOADS[5], "status": PAYLOADS[0],
        "content": [{"type": "content", "content": {"type": "text", "text": PAYLOADS[1]}}], "locations": [{"path": PAYLOADS[2]}]}})
    t.request("agent", 0, "session/request_permission", {"sessionId": sid, "toolCall": {"toolCallId": PAYLOADS[4], "title": PAYLOADS[3]},
                                                         "options": [{"optionId": PAYLOADS[5], "name": PAYLOADS[0], "kind": "allow_once"}]})
    t.answer("client", 0, {"outcome": {"outcome": "selected", "optionId": PAYLOADS[5]}})
    t.notify("agent", "session/update", {"sessionId": sid, "update": {
        "sessionUpdate": "plan", "entries": [{"content": PAYLOADS[1], "status": PAYLOADS[2], "priority": PAYLOADS[3]}]}})
    for payload in PAYLOADS:
        t.update(sid, "agent_message_chunk", payload)
    t.note("agent", "info", "ERROR " + PAYLOADS[4])
    t.fail("agent", 2, -32603, PAYLOADS[2])
    return t


def stderr_errors() -> tuple[TraceBuilder, list[int]]:
    """A prompt that fails while the agent logs on stderr: an ERROR line with the traceback
    `logging.exception` writes after it, a warning, plain lines, and a traceback of its own
    (an uncaught exception in a thread). Returns the builder and the seq of each error's first line."""
    t = TraceBuilder()
    t.note("recorder", "info", "recording", {"format": "acp-green-trace/1", "command": ["my-agent"],
                                             "started": "2026-12-01T19:00:00Z", "pid": 7})
    t.request("client", 0, "initialize", {"protocolVersion": 1})
    t.answer("agent", 0, {"protocolVersion": 1})
    t.note("agent", "info", "acp-green INFO my_agent: ready", after=0.01)
    t.request("client", 1, "session/new", {"cwd": "/w", "mcpServers": []})
    t.answer("agent", 1, {"sessionId": "s1"})
    t.request("client", 2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "open the pod bay doors"}]})
    t.note("agent", "info", "acp-green WARNING my_agent: the model is slow", after=0.05)
    first = len(t.events)
    for line in ("acp-green ERROR my_agent: the turn failed", "Traceback (most recent call last):",
                 '  File "/srv/agent.py", line 12, in prompt', "    raise ValueError(\"no doors\")", "ValueError: no doors"):
        t.note("agent", "info", line, after=0.001)
    t.note("agent", "info", "retrying later", after=0.01)
    t.fail("agent", 2, -32603, "Internal error")
    second = len(t.events)
    for line in ("Traceback (most recent call last):", '  File "/srv/agent.py", line 40, in tick', "KeyError: 'clock'"):
        t.note("agent", "info", line, after=0.001)
    t.note("recorder", "info", "the agent exited with 1", {"exit": 1, "signal": None}, after=0.1)
    return t, [first, second]


def long_trace(events: int, sessions: int = 8) -> TraceBuilder:
    """About `events` events: sessions prompting in turn, each prompt streaming 40 updates."""
    t = TraceBuilder()
    t.note("recorder", "info", "recording", {"format": "acp-green-trace/1", "command": ["agent"], "started": "2026-12-01T19:00:00Z", "pid": 1})
    t.request("client", 0, "initialize", {"protocolVersion": 1})
    t.answer("agent", 0, {"protocolVersion": 1})
    rid = 1
    for s in range(sessions):
        t.request("client", rid, "session/new", {"cwd": "/w", "mcpServers": []})
        t.answer("agent", rid, {"sessionId": f"s{s}"})
        rid += 1
    while len(t.events) < events - 2:
        sid = f"s{rid % sessions}"
        t.request("client", rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        for n in range(min(40, max(0, events - 2 - len(t.events)))):
            t.update(sid, "agent_message_chunk", f"word {n} ", after=0.001)
        t.answer("agent", rid, {"stopReason": "end_turn"})
        rid += 1
    t.note("recorder", "info", "agent exited", {"exit": 0, "signal": None})
    return t
