"""`acp-green trace check`: a clean trace of the demo passes; each kind of broken rule is reported
with the lines that show it and the lines around them (exit 1); a hostile client's trace and a
damaged file are reported without a crash."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.tools.trace.check import check_trace, json_report, text_report
from acp_green.tools.trace.read import read_lines, read_trace
from acp_green.tools.trace.show import render, timeline
from tests.tools.trace_files import (agent_line, client_line, demo_run, find, message_of, read_events, trace_cli,
                                     wire_event, write_trace)


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("trace")
    return demo_run(where / "demo.jsonl", str(where / "written.txt"))


def check(path: Path, *options: str) -> tuple[int, dict[str, Any], str]:
    """(exit code, the --json report, the text report)."""
    as_json = trace_cli("check", "--json", *options, str(path))
    as_text = trace_cli("check", *options, str(path))
    assert as_json.returncode == as_text.returncode, (as_json.stderr, as_text.stderr)
    assert "Traceback" not in as_json.stderr + as_text.stderr
    return as_json.returncode, json.loads(as_json.stdout), as_text.stdout


def test_a_clean_trace_of_the_demo_passes(demo_trace: Path):
    code, report, text = check(demo_trace)
    assert code == 0, text
    assert report["ok"] and report["violations"] == [] and report["messages"] > 30
    assert report["protocolVersions"] == [1] and report["notes"] == []
    assert text.splitlines()[0].endswith(f"OK in {report['messages']} messages ({report['lines']} lines)")


def _response_of(request_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("type") == "response" and e["from"] == "agent" and e["id"] == request_id


def _prompt(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("method") == "session/prompt" and e["params"]["prompt"][0]["text"].startswith(text)


def _session_of_prompt(events: list[dict[str, Any]], text: str) -> str:
    return events[find(events, _prompt(text))]["params"]["sessionId"]


def answered_twice(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(3))
    events.insert(at + 1, copy.deepcopy(events[at]))
    return "one_response_per_request", at + 2


def update_after_response(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(7))
    session = _session_of_prompt(events, "hello there")
    update = {"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}}}}
    events.insert(at + 1, agent_line(update, events[at]["ts"]))
    return "no_update_after_response", at + 2


def notification_answered(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, lambda e: e.get("method") == "session/cancel")
    events.insert(at + 1, agent_line({"jsonrpc": "2.0", "id": None, "result": {}}, events[at]["ts"]))
    return "no_response_to_notification", at + 2


def cancel_answered_with_an_error(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(5))
    events[at] = agent_line({"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": "boom"}}, events[at]["ts"])
    return "cancelled_answers_cancelled", at + 1


def agent_breaks_the_schema(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(3))
    events[at] = agent_line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "bogus"}}, events[at]["ts"])
    return "schema", at + 1


def client_breaks_the_schema(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _prompt("hello there"))
    message = message_of(events[at])
    del message["params"]["prompt"]
    events[at] = client_line(message, events[at]["ts"])
    return "schema", at + 1


def agent_writes_garbage(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(3))
    events.insert(at, wire_event(events[at]["ts"], "agent", b"oops, a log line on stdout"))
    return "valid_json_rpc", at + 1


def request_never_answered(events: list[dict[str, Any]]) -> tuple[str, int]:
    at = find(events, _response_of(3))
    request = find(events, lambda e: e.get("type") == "request" and e["from"] == "client" and e["id"] == 3)
    del events[at]
    return "one_response_per_request", request + 1


VIOLATIONS = [answered_twice, update_after_response, notification_answered, cancel_answered_with_an_error,
              agent_breaks_the_schema, client_breaks_the_schema, agent_writes_garbage, request_never_answered]


@pytest.mark.parametrize("breaking", VIOLATIONS, ids=[f.__name__ for f in VIOLATIONS])
def test_each_broken_rule_is_quoted_with_its_line_and_the_lines_around_it(demo_trace: Path, tmp_path: Path, breaking):
    events = read_events(demo_trace)
    rule, line = breaking(events)
    path = write_trace(tmp_path / "broken.jsonl", events)
    code, report, text = check(path)
    assert code == 1
    found = [v for v in report["violations"] if v["rule"] == rule and line in v["lines"]]
    assert found, report["violations"]
    context = [c["line"] for c in found[0]["context"]]
    assert {line - 1, line, line + 1} <= set(context)
    assert [c["marked"] for c in found[0]["context"] if c["line"] == line] == [True]
    quoted = text.splitlines()
    assert any(row.startswith("line ") and f"] {rule}: " in row for row in quoted), text
    assert any(row.startswith("  > ") and row.split()[1] == str(line) for row in quoted), text
    assert any(row.split()[:1] == [str(line + 1)] for row in quoted), text


def test_a_long_prompt_that_answers_end_turn_after_its_cancel_is_a_violation(demo_trace: Path, tmp_path: Path):
    events = read_events(demo_trace)
    at = find(events, _response_of(5))
    events[at] = agent_line({"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "end_turn"}}, events[at]["ts"])
    path = write_trace(tmp_path / "ended.jsonl", events)
    assert check(path)[0] == 0  # a prompt may finish before its cancel mattered
    code, report, _ = check(path, "--long-prompt", "/wait")
    assert code == 1
    assert [(v["rule"], at + 1 in v["lines"]) for v in report["violations"]] == [("cancelled_answers_cancelled", True)]


def test_a_hostile_clients_trace_and_a_damaged_file_are_reported_without_a_crash(demo_trace: Path, tmp_path: Path):
    events = read_events(demo_trace)[:3]  # the header, initialize and its answer
    deep = b"[" * 10_000 + b"]" * 10_000
    hostile = [b"not json at all", b"\xff\xfe{\"jsonrpc\"", deep, b'[{"jsonrpc": "2.0", "method": "x"}]']
    for raw in hostile:
        events.append(client_line(raw, 1.0))
        events.append(agent_line({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, 1.0))
    events.append(b'{"ts": 2.0, "type": "request", "from": "client", "to": "agent", "raw": "' + b"[" * 10_000 + b'\n')
    events.append(b"[" * 10_000 + b"]" * 10_000 + b"\n")
    events.append(b'{"ts": 3.0, "type": "notifi')  # the last line, cut short by a crash
    path = write_trace(tmp_path / "hostile.jsonl", events)
    assert base64.b64encode(b"\xff\xfe{\"jsonrpc\"").decode() in path.read_text()
    code, report, text = check(path)
    assert code == 1
    client_lines = sorted(line for v in report["violations"] if v["side"] == "client" for line in v["lines"])
    assert client_lines == [4, 6, 8, 10]
    assert all(v["rule"] == "valid_json_rpc" for v in report["violations"] if v["side"] == "client")
    damaged = [v for v in report["violations"] if v["rule"] == "unreadable_line"]
    assert [v["lines"] for v in damaged] == [[12], [13], [14]]
    assert "truncated last line" in damaged[-1]["detail"]
    assert not [v for v in report["violations"] if v["side"] == "agent"], "the agent answered each line -32700, as it must"
    shown = trace_cli("show", str(path))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    assert shown.stdout.count("not a message") == 3 and shown.stdout.count("-> batch of 1: ") == 1  # v1's violation, still a batch
    assert shown.stdout.count("<- answer with id null: ERROR -32700 Parse error") == 4
    assert '  >      6  client->agent \\xff\\xfe{"jsonrpc"' in text.splitlines()  # the bytes as they were, escaped


def _negotiating(events: list[dict[str, Any]], version: Any) -> list[dict[str, Any]]:
    at = find(events, _response_of(1))
    answer = message_of(events[at])
    answer["result"]["protocolVersion"] = version
    events[at] = agent_line(answer, events[at]["ts"])
    return events


def test_a_trace_that_negotiated_v2_is_validated_against_the_v2_draft(demo_trace: Path, tmp_path: Path):
    _, report, text = check(write_trace(tmp_path / "v2.jsonl", _negotiating(read_events(demo_trace), 2)))
    assert report["protocolVersions"] == [2]
    assert report["notes"] == ["protocolVersion 2: validated against the ACP v2 draft schema"]
    assert "note: protocolVersion 2: validated against the ACP v2 draft schema" in text


def test_a_version_without_a_schema_says_what_was_not_checked(demo_trace: Path, tmp_path: Path):
    events = _negotiating(read_events(demo_trace), 3)
    at = find(events, _response_of(3))
    events[at] = agent_line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "bogus"}}, events[at]["ts"])
    code, report, text = check(write_trace(tmp_path / "v3.jsonl", events))
    assert code == 0, text  # nothing validated the bogus stopReason: said so, not passed off as checked
    assert report["notes"] == ["not checked: no ACP schema here for protocolVersion 3: invariants only"]


def test_a_conductors_trace_is_checked_hop_by_hop(tmp_path: Path):
    """The Rust conductor's events (no raw line, no seq) between client, proxy:0 and agent: each hop is
    a connection of its own, the proxy the client of the agent."""
    def hop(sender, receiver, kind, ts, **fields):
        return {"ts": ts, "type": kind, "from": sender, "to": receiver, **({"protocol": "acp"} if kind != "response" else {}), **fields}

    init = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}
    answer = {"protocolVersion": 1, "agentCapabilities": {"loadSession": False}, "authMethods": []}
    chunk = {"sessionId": "s0", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}
    prompt = {"sessionId": "s0", "prompt": [{"type": "text", "text": "Hello"}]}
    events = []
    for (a, b), base in ((("client", "proxy:0"), 0), (("proxy:0", "agent"), 100)):
        events += [hop(a, b, "request", 0.1, id=base + 1, method="initialize", params=init),
                   hop(b, a, "response", 0.2, id=base + 1, is_error=False, payload=answer),
                   hop(a, b, "request", 0.3, id=base + 2, method="session/new", params={"cwd": "/w", "mcpServers": []}),
                   hop(b, a, "response", 0.4, id=base + 2, is_error=False, payload={"sessionId": "s0"}),
                   hop(a, b, "request", 0.5, id=base + 3, method="session/prompt", params=prompt),
                   hop(b, a, "notification", 0.6, method="session/update", params=chunk),
                   hop(b, a, "response", 0.7, id=base + 3, is_error=False, payload={"stopReason": "end_turn"})]
    events.append(hop("agent", "proxy:0", "notification", 0.8, method="session/update", params=chunk))
    path = tmp_path / "conductor.jsons"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    code, report, _ = check(path)
    assert report["protocolVersions"] == [1, 1] and report["messages"] == 15
    assert code == 1
    assert [(v["side"], v["rule"], v["lines"]) for v in report["violations"]] == [("agent", "no_update_after_response", [14, 15])]


def test_a_file_that_cannot_be_read_is_said_in_one_line(tmp_path: Path):
    for command in ("check", "show"):
        done = trace_cli(command, str(tmp_path / "missing.jsonl"))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.strip() == f"Error: cannot read {tmp_path / 'missing.jsonl'}: No such file or directory"


_METHODS = ["initialize", "session/new", "session/prompt", "session/update", "session/cancel", "session/request_permission",
            "fs/read_text_file", "terminal/create", "$/cancel_request", "_x/y"]
_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["s1", "/tmp/a", "a", "cancelled", "end_turn"]),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                          st.sampled_from(["sessionId", "prompt", "update", "sessionUpdate", "text", "type", "stopReason",
                                           "protocolVersion", "toolCallId", "status", "path", "requestId", "content"]), inner, max_size=4),
                      max_leaves=12)
_MESSAGE = st.fixed_dictionaries({"jsonrpc": st.just("2.0")}, optional={
    "id": st.one_of(st.integers(0, 4), st.none(), st.just("a"), st.just([1])), "method": st.sampled_from(_METHODS),
    "params": _VALUE, "result": _VALUE, "error": _VALUE})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["client", "agent"]), _MESSAGE | st.binary(max_size=20)), max_size=14))
def test_check_and_show_never_raise_on_any_messages(exchanged):
    lines = []
    for i, (sender, message) in enumerate(exchanged):
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        lines.append(json.dumps({**wire_event(i / 10, sender, raw), "seq": i}).encode() + b"\n")
    trace = read_lines(lines)
    report = check_trace(trace, ["/wait"])
    text_report("t", trace, report)
    json.dumps(json_report("t", trace, report))
    list(render(trace, timeline(trace), "t"))
    list(render(trace, timeline(trace, session="s1", grep="a"), "t"))


def test_a_session_update_whose_params_are_a_list_is_a_schema_finding(demo_trace: Path, tmp_path: Path):
    events = read_events(demo_trace)
    at = find(events, _response_of(3))
    events.insert(at, agent_line({"jsonrpc": "2.0", "method": "session/update", "params": [1]}, events[at]["ts"]))
    code, report, _ = check(write_trace(tmp_path / "list-params.jsonl", events))
    assert code == 1
    assert {(v["rule"], tuple(v["lines"])) for v in report["violations"]} == {("schema", (at + 1,))}


def test_a_message_the_invariant_checker_cannot_follow_is_reported(demo_trace: Path, tmp_path: Path, monkeypatch):
    """The rig's checker follows live agents; should some shape still make it raise, the check
    names the line and goes on instead of ending with a traceback."""
    from acp_green.tools.rig.invariant_prompts import PromptTurns

    def cannot_follow(self, record, message):  # type: ignore[no-untyped-def]
        if message.get("params", {}).get("sessionId") == "odd":
            raise KeyError("odd")
        return original(self, record, message)

    original = PromptTurns.session_update
    monkeypatch.setattr(PromptTurns, "session_update", cannot_follow)
    events = read_events(demo_trace)
    at = find(events, _response_of(3))
    events.insert(at, agent_line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "odd"}}, events[at]["ts"]))
    path = write_trace(tmp_path / "odd.jsonl", events)
    report = check_trace(read_trace(str(path)))
    assert ("unfollowable", (at + 1,)) in {(f.rule, tuple(f.lines)) for f in report.violations}


def test_a_trace_of_another_format_version_says_so(demo_trace: Path, tmp_path: Path):
    events = read_events(demo_trace)
    events[0]["fields"]["format"] = "acp-green-trace/9"
    _, report, _ = check(write_trace(tmp_path / "v9.jsonl", events))
    assert report["notes"] == ['the trace says its format is "acp-green-trace/9": read as acp-green-trace/1']


def test_an_advisory_is_listed_apart_and_never_fails_the_check(demo_trace: Path, tmp_path: Path):
    """A tool call left open when its prompt answered: what real clients trip on, a warning only."""
    events = read_events(demo_trace)
    closing = find(events, lambda e: e.get("method") == "session/update" and e["params"]["update"]["sessionUpdate"] == "tool_call_update")
    del events[closing]
    answer = find(events, _response_of(4))
    code, report, text = check(write_trace(tmp_path / "open-tool.jsonl", events))
    assert code == 0 and report["violations"] == []
    assert [(a["rule"], a["lines"][-1]) for a in report["advisories"]] == [("tool_calls_finished", answer + 1)]
    assert ", 1 advisory warning(s) in " in text.splitlines()[0]
    assert f"line {answer + 1}: advisory [agent] tool_calls_finished: " in text


def test_a_session_level_update_between_turns_is_no_violation(demo_trace: Path, tmp_path: Path):
    """ACP lets session-level updates (commands, session info, usage) come between turns; only a
    turn's own updates after its prompt's response break the rule."""
    events = read_events(demo_trace)
    at = find(events, _response_of(7))
    session = _session_of_prompt(events, "hello there")
    update = {"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": session, "update": {"sessionUpdate": "session_info_update", "title": "renamed"}}}
    events.insert(at + 1, agent_line(update, events[at]["ts"]))
    code, report, _ = check(write_trace(tmp_path / "between.jsonl", events))
    assert (code, report["violations"]) == (0, [])


def test_a_line_nested_deeper_than_the_decoder_takes_is_rightly_answered_32700_with_id_null(demo_trace: Path, tmp_path: Path):
    """Python's json reads 600 levels, acp_green's decoder (and the trace reader) no more than 512: such a
    line is garbage to the agent, which answers -32700 with id null. An agent whose parser takes it may
    answer its id instead: neither answer is a violation; the client's line stays the client's fault."""
    events = read_events(demo_trace)[:3]  # the header, initialize and its answer
    for rid, depth in ((50, 513), (51, 600), (52, 900)):
        raw = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "x"})[:-1] + ', "params": ' + "[" * depth + "]" * depth + "}"
        events.append({"ts": 1.0, "type": "line", "from": "client", "to": "agent", "error": "nesting deeper than 512 levels", "raw": raw})
        answer = ({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}} if rid == 52 else
                  {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: nesting deeper than 512 levels"}})
        events.append(agent_line(answer, 1.0))
    events.append(client_line({"jsonrpc": "2.0", "id": 53, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}, 2.0))
    events.append(agent_line({"jsonrpc": "2.0", "id": 53, "result": {"sessionId": "s"}}, 2.0))
    events.append({"ts": 3.0, "type": "trace", "component": "recorder", "level": "info", "message": "exit",
                   "fields": {"exit": 0, "signal": None}})
    code, report, text = check(write_trace(tmp_path / "deep.jsonl", events))
    assert [(v["side"], v["rule"], v["lines"]) for v in report["violations"]] == [
        ("client", "valid_json_rpc", [line]) for line in (4, 6, 8)], text
