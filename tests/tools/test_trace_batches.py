"""A JSON-RPC batch line in a trace: written as one `batch` event (its exact raw line once, its
members described in order), read back as a batch, checked member by member under ACP v2 and
as a violation under v1, where batches do not exist."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from acp_green.tools.trace.check import check_trace
from acp_green.tools.trace.read import read_trace
from acp_green.tracing import wire_event
from tests.tools.trace_files import DEMO, read_events, write_trace

BATCH = b'[{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}, {"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}]'


def served(tmp_path: Path, version: int, batch: bytes = BATCH) -> Path:
    """A trace `serve --trace` wrote of a client that negotiated `version`, then sent `batch`."""
    path = tmp_path / f"v{version}.jsonl"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": version}}
    if version == 2:
        init["params"].update(info={"name": "t", "version": "1"}, capabilities={})
    else:
        init["params"].update(clientCapabilities={})
    stdin = json.dumps(init).encode() + b"\n" + batch + b"\n"
    subprocess.run([*DEMO, "--trace", str(path)], input=stdin, capture_output=True, timeout=60, check=True)
    return path


def test_a_batch_line_is_one_batch_event_keeping_its_raw_line_and_each_members_fields_in_order():
    event = wire_event(BATCH, "client")
    assert event["type"] == "batch" and event["raw"] == BATCH.decode()
    assert [(m["type"], m["id"], m["method"]) for m in event["members"]] == [
        ("request", 2, "session/list"), ("request", 3, "session/list")]
    assert all("raw" not in m and "from" not in m for m in event["members"])
    odd = wire_event(b'[{"jsonrpc":"2.0","id":1,"result":{}}, 7]', "agent")
    assert [m["type"] for m in odd["members"]] == ["response", "line"] and "is an object" in odd["members"][1]["error"]
    assert wire_event(b"[]", "client")["type"] == "line"


def test_a_v2_clients_batch_and_its_answer_are_traced_as_batches_and_check_clean(tmp_path: Path):
    path = served(tmp_path, 2)
    events = read_events(path)
    batches = [e for e in events if e["type"] == "batch"]
    assert [(e["from"], len(e["members"])) for e in batches] == [("client", 2), ("agent", 2)]
    assert batches[0]["raw"].encode() == BATCH
    assert [e["seq"] for e in events] == list(range(len(events)))
    trace = read_trace(path)
    assert [e.kind for e in trace.wire] == ["request", "response", "batch", "batch"]
    assert [m["id"] for m in trace.wire[2].message] == [2, 3]
    report = check_trace(trace)
    assert report.ok and not report.advisories, report.violations


def test_a_v2_batch_is_checked_member_by_member(tmp_path: Path):
    bad = b'[{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}, {"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":7}}]'
    report = check_trace(read_trace(served(tmp_path, 2, bad)))
    found = [(f.side, f.rule) for f in report.violations]
    assert ("client", "schema") in found, report.violations
    line = next(f.lines for f in report.violations if f.side == "client")
    assert line == (4,)  # line 1 is the header


def test_a_batch_under_v1_is_a_violation_on_its_line(tmp_path: Path):
    report = check_trace(read_trace(served(tmp_path, 1)))
    assert [(f.side, f.rule, f.lines) for f in report.violations] == [("client", "valid_json_rpc", (4,))]
    assert "ACP v1 does not allow" in report.violations[0].detail


def test_an_agents_batch_under_v1_is_the_agents_violation(tmp_path: Path):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}}
    lines: list[dict[str, Any]] = [
        {"ts": 0.0, "type": "request", "from": "client", "to": "agent", "raw": json.dumps(init)},
        {"ts": 0.1, "type": "response", "from": "agent", "to": "client", "raw": json.dumps(answer)},
        {"ts": 0.2, "type": "request", "from": "client", "to": "agent", "raw": '{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}'},
        {"ts": 0.3, "type": "line", "from": "agent", "to": "client", "raw": '[{"jsonrpc":"2.0","id":2,"result":{"sessions":[]}}]'},
    ]
    trace = read_trace(write_trace(tmp_path / "agent.jsonl", lines))
    assert trace.wire[3].kind == "batch"  # a trace written before batch events reads its batch lines so too
    assert [(f.side, f.rule, f.lines) for f in check_trace(trace).violations if f.side == "agent"][0][:2] == ("agent", "valid_json_rpc")


def test_a_batch_event_without_raw_is_rebuilt_from_its_members(tmp_path: Path):
    members = [{"type": "request", "id": 5, "method": "session/list", "params": {}}, {"type": "line", "error": "x"}]
    trace = read_trace(write_trace(tmp_path / "c.jsonl", [{"ts": 0.0, "type": "batch", "from": "client", "to": "agent",
                                                         "members": members}]))
    event = trace.wire[0]
    assert event.kind == "batch" and event.message[0]["id"] == 5 and event.message[0]["method"] == "session/list"
    assert event.message[1] is None
