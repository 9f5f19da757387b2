"""`acp-green trace show`: a known trace as a timeline per session, requests paired with their
answers and latency, updates folded, errors and cancels marked; --session and --grep; styles only
on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from tests.tools.trace_files import ACP_GREEN, agent_line, client_line, trace_cli, write_trace


def _request(request_id, method, params):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _result(request_id, result):
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _chunk(session, text):
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}


def _prompt(request_id, session, text):
    return _request(request_id, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]})


@pytest.fixture
def known_trace(tmp_path: Path) -> Path:
    header = {"ts": 0.0, "type": "trace", "component": "recorder", "level": "info", "message": "recording",
              "fields": {"format": "acp-green-trace/1", "command": ["my-agent", "--fast"], "started": "2026-12-01T10:00:00Z", "pid": 42}}
    events = [
        header,
        client_line(_request(1, "initialize", {"protocolVersion": 1}), 0.0),
        agent_line(_result(1, {"protocolVersion": 1}), 0.010),
        client_line(_request(2, "session/new", {"cwd": "/w", "mcpServers": []}), 0.020),
        agent_line(_result(2, {"sessionId": "sess-a"}), 0.025),
        client_line(_request(3, "session/new", {"cwd": "/w", "mcpServers": []}), 0.030),
        agent_line(_result(3, {"sessionId": "sess-b"}), 0.031),
        client_line(_prompt(4, "sess-a", "/stream 3"), 0.100),
        *[agent_line(_chunk("sess-a", f"{i}:"), 0.101 + i / 1000) for i in range(3)],
        agent_line(_result(4, {"stopReason": "end_turn"}), 0.140),
        client_line(_prompt(5, "sess-a", "/wait"), 0.200),
        agent_line(_chunk("sess-a", "waiting"), 0.210),
        agent_line(_chunk("sess-a", "still"), 0.220),
        agent_line(_request(0, "session/request_permission", {"sessionId": "sess-a", "toolCall": {"toolCallId": "t", "title": "Edit x"},
                                                              "options": [{"optionId": "allow-once", "name": "Allow", "kind": "allow_once"}]}), 0.300),
        client_line({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}, 0.350),
        client_line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess-a"}}, 0.400),
        agent_line(_result(5, {"stopReason": "cancelled"}), 1.400),
        client_line(_prompt(6, "sess-b", "hello \x1b]0;pwned\x07"), 1.500),
        agent_line({"jsonrpc": "2.0", "id": 6, "error": {"code": -32603, "message": "boom"}}, 1.600),
        {"ts": 1.7, "type": "trace", "component": "agent", "level": "info", "message": "warning: low disk"},
        {"ts": 1.8, "type": "trace", "component": "recorder", "level": "info", "message": "agent exited", "fields": {"exit": 0, "signal": None}},
    ]
    return write_trace(tmp_path / "known.jsonl", events)


def show(path: Path, *options: str) -> list[str]:
    done = trace_cli("show", str(path), *options)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout, "no styles when the output is no terminal"
    return done.stdout.splitlines()


def test_the_timeline_pairs_folds_and_marks(known_trace: Path):
    lines = show(known_trace)
    text = "\n".join(lines)
    assert lines[0] == f"{known_trace}  command: my-agent --fast  started 2026-12-01T10:00:00Z  exit 0"
    sections = [line for line in lines if line and not line.startswith(" ")]
    assert sections[1:] == ["connection", "session sess-a", "session sess-b"]
    expected = [
        "     0.000  -> initialize #1  => protocolVersion 1  10.0 ms",
        "     0.020  -> session/new #2  => sess-a  5.0 ms",
        '     0.100  -> session/prompt #4 "/stream 3"  => end_turn  40.0 ms',
        "     0.101      <- 3 agent_message_chunk",
        '     0.200  -> session/prompt #5 "/wait"  => cancelled  1.20 s',
        "     0.210      <- 2 agent_message_chunk",
        '     0.300      <- session/request_permission #0 "Edit x"  => allow-once  50.0 ms',
        "     0.400      -> session/cancel  CANCEL",
        '     1.500  -> session/prompt #6 "hello \\x1b]0;pwned\\x07"  => ERROR -32603 boom  100.0 ms',
        "     1.700  [agent info] warning: low disk",
    ]
    for row in expected:
        assert row in lines, f"{row!r} not in\n{text}"
    assert lines.index(expected[2]) < lines.index(expected[3]) < lines.index(expected[4])
    assert lines.index("session sess-a") < lines.index(expected[1]) < lines.index(expected[2]) < lines.index("session sess-b")


def test_session_and_grep_keep_only_what_they_name(known_trace: Path):
    only_b = show(known_trace, "--session", "sess-b")
    assert "session sess-b" in only_b and not any("sess-a" in line for line in only_b)
    assert any("=> ERROR -32603 boom" in line for line in only_b)
    assert "connection" not in only_b
    streamed = show(known_trace, "--grep", "/stream")
    assert [line for line in streamed if line.startswith(" ")] == ['     0.100  -> session/prompt #4 "/stream 3"  => end_turn  40.0 ms']
    answered = show(known_trace, "--grep", "boom")  # an answer that matches shows its request
    assert any('session/prompt #6' in line for line in answered) and not any("#4" in line for line in answered)


def test_styles_on_a_terminal(known_trace: Path):
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([*ACP_GREEN, "trace", "show", str(known_trace)], stdout=follower, stderr=subprocess.PIPE, timeout=60)
        os.close(follower)
        follower = -1
        output = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0, done.stderr
    assert b"\x1b[31m" in output and b"CANCEL" in output  # errors in red
    assert b"\x1b]0;pwned" not in output, "the agent's own escapes are never sent to the terminal"


def test_messages_of_any_shape_are_shown(tmp_path: Path):
    """A prompt block whose text is a number, an update of no known kind, params that are a list,
    a method that is no string: shown as they are, never a crash."""
    events = [
        client_line({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [{"type": "text", "text": 5}]}}, 0.1),
        agent_line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": 7}}}, 0.2),
        agent_line({"jsonrpc": "2.0", "method": "session/update", "params": [1]}, 0.3),
        agent_line({"jsonrpc": "2.0", "id": 2, "method": 9}, 0.4),
        agent_line({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": ["x"]}}, 0.5),
    ]
    lines = show(write_trace(tmp_path / "odd.jsonl", events))
    assert '     0.100  -> session/prompt #1 "5"  => ok  400.0 ms' in lines
    assert "     0.200      <- 1 ?" in lines


def test_show_and_check_agree_with_the_shared_sample_trace(tmp_path: Path):
    """The three-session sample the page's tests draw (tests/trace_samples.py): the timeline shows what
    the page shows, and check finds the one line that is no message."""
    from tests.trace_samples import three_sessions

    sample, expected = three_sessions()
    path = sample.write(tmp_path / "three.jsonl")
    lines = show(path)
    assert [line.removeprefix("session ") for line in lines if line.startswith("session ")] == list(expected.sessions)
    text = "\n".join(lines)
    assert text.count("=> no answer") == expected.unanswered
    assert text.count("CANCEL") == expected.cancels and text.count("=> cancelled") == expected.cancelled
    assert text.count("=> ERROR") == expected.error_answers and text.count("not a message") == expected.bad_lines
    checked = trace_cli("check", "--json", str(path))
    report = json.loads(checked.stdout)
    assert checked.returncode == 1
    assert [(v["side"], v["rule"]) for v in report["violations"]] == [("client", "valid_json_rpc")]
