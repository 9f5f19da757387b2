"""Reading a trace file (acp_green/tools/trace/read.py): typed events from acp_green's traces and
the Rust conductor's, every unreadable line named with its number, and never an exception."""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.trace.read import Damage, Note, WireEvent, parse_line, read_lines


def line(event: dict) -> bytes:
    return json.dumps(event).encode() + b"\n"


def test_our_events_read_as_typed_events_with_their_line_numbers():
    raw = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
    trace = read_lines([
        line({"ts": 0, "type": "trace", "seq": 0, "component": "recorder", "level": "info", "message": "start",
              "fields": {"format": "acp-green-trace/1", "command": ["agent"], "started": "2026-01-01T00:00:00Z", "pid": 7}}),
        b"\n",
        line({"ts": 0.5, "type": "request", "seq": 1, "from": "client", "to": "agent", "raw": raw, "protocol": "acp", "id": 1,
              "method": "initialize", "session": None, "params": {"protocolVersion": 1}}),
        line({"ts": 0.6, "type": "line", "seq": 2, "from": "agent", "to": "client",
              "raw_b64": base64.b64encode(b"\xffgarbage").decode(), "error": "invalid UTF-8"}),
        line({"ts": 0.7, "type": "trace", "seq": 3, "component": "recorder", "level": "info", "message": "end",
              "fields": {"exit": 0, "signal": None}}),
    ])
    assert trace.damaged == [] and trace.lines == 5
    header, request, garbage, footer = trace.events
    assert isinstance(header, Note) and trace.header == header.fields and trace.footer == footer.fields
    assert isinstance(request, WireEvent) and request.line == 3 and request.seq == 1
    assert (request.kind, request.method, request.id, request.raw) == ("request", "initialize", 1, raw.encode())
    assert isinstance(garbage, WireEvent) and garbage.kind == "line" and garbage.raw == b"\xffgarbage"
    assert "UTF-8" in (garbage.why or "")
    assert trace.at(2) is None and trace.at(4) is garbage


def test_the_raw_line_is_what_passed_even_where_the_fields_say_otherwise():
    raw = '{"jsonrpc":"2.0","id":9,"result":{"stopReason":"cancelled"}}'
    event = parse_line(1, line({"ts": 1, "type": "response", "from": "agent", "to": "client", "raw": raw,
                                "id": 8, "is_error": True, "payload": {}}))
    assert isinstance(event, WireEvent)
    assert event.message == json.loads(raw) and event.kind == "response" and not event.is_error


def test_a_conductors_trace_without_our_fields_reads_with_rebuilt_messages():
    events = [
        {"ts": 0.0, "type": "request", "protocol": "acp", "from": "client", "to": "proxy:0", "id": "a1", "method": "session/new",
         "params": {"cwd": "/w", "mcpServers": []}},
        {"ts": 0.1, "type": "response", "from": "proxy:0", "to": "client", "id": "a1", "is_error": False, "payload": {"sessionId": "s"}},
        {"ts": 0.2, "type": "notification", "protocol": "acp", "from": "proxy:0", "to": "client", "method": "session/update",
         "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}},
        {"ts": 0.3, "type": "response", "from": "agent", "to": "proxy:0", "id": 4, "is_error": True, "payload": {"code": -32603, "message": "x"}},
    ]
    trace = read_lines([line(e) for e in events])
    request, answer, update, error = trace.wire
    assert request.message == {"jsonrpc": "2.0", "id": "a1", "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
    assert answer.message == {"jsonrpc": "2.0", "id": "a1", "result": {"sessionId": "s"}}
    assert update.session == "s" and update.raw is None and update.seq is None
    assert error.is_error and error.message["error"]["code"] == -32603
    assert (request.sender, request.receiver) == ("client", "proxy:0")


def test_every_unreadable_line_is_named_and_the_rest_still_read():
    good = line({"ts": 1, "type": "notification", "from": "client", "to": "agent",
                 "raw": '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}'})
    trace = read_lines([
        b"not json\n", good, b"[1, 2]\n", b"[" * 10_000 + b"]" * 10_000 + b"\n",
        line({"ts": "soon", "type": "request"}), line({"ts": 1, "type": "mystery"}),
        line({"ts": 1, "type": "request", "from": "client"}), line({"ts": 1, "type": "line", "from": "a", "to": "b", "raw_b64": "%%"}),
        good, b'{"ts": 2, "type": "requ',
    ])
    assert [e.line for e in trace.events] == [2, 9]
    assert [d.line for d in trace.damaged] == [1, 3, 4, 5, 6, 7, 8, 10]
    reasons = {d.line: d.reason for d in trace.damaged}
    assert "nesting" in reasons[4] and "unknown event type" in reasons[6] and "base64" in reasons[8]
    assert reasons[10].startswith("truncated last line")
    assert all(len(d.excerpt) <= 120 for d in trace.damaged)
    assert isinstance(parse_line(1, line({"ts": 10**400, "type": "trace"})), Damage)  # no float holds it


def test_a_clean_last_line_without_its_newline_still_reads():
    trace = read_lines([line({"ts": 1, "type": "trace", "component": "agent", "level": "info", "message": "bye"}).rstrip(b"\n")])
    assert trace.damaged == [] and isinstance(trace.events[0], Note) and trace.events[0].message == "bye"


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
_event_like = st.fixed_dictionaries(
    {"ts": st.one_of(st.floats(), st.integers(), st.text()), "type": st.sampled_from(["request", "response", "notification", "trace", "line", "x"])},
    optional={"from": _json, "to": _json, "raw": st.one_of(st.text(), _json), "raw_b64": st.one_of(st.text(), _json),
              "fields": _json, "message": _json, "id": _json, "params": _json, "payload": _json, "is_error": _json,
              "newline": _json, "seq": _json, "error": _json, "method": _json})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=200), _event_like.map(lambda e: json.dumps(e).encode() + b"\n")), max_size=12))
def test_reading_arbitrary_lines_never_raises(lines):
    trace = read_lines(lines)
    assert len(trace.events) + len(trace.damaged) <= len(lines)
    for event in trace.events:
        if isinstance(event, WireEvent):
            event.text(), event.session, event.method, event.is_error  # noqa: B018 - each must not raise
