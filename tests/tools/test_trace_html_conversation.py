"""`acp-green trace html` reads a trace as a conversation, without a browser: per session and in
order, the prompts, the replies joined, thoughts, tool calls with status, permissions and their
answers, plans and errors; the agent's ERROR lines and tracebacks on stderr are errors; no text of
the trace (hostile, or holding lone surrogates) breaks the page. The page in a browser:
test_trace_html_browser.py."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from acp_green.tools.trace.html import build_timeline, load_events, render_page, write_html
from tests.trace_samples import HOSTILE, PAYLOADS, TraceBuilder, hostile_conversation, stderr_errors, three_sessions


def data_block(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def kinds(section: dict[str, Any]) -> list[str]:
    return [entry["k"] for entry in section["entries"]]


def visible(text: str) -> str:
    """A string as the page shows it: each lone surrogate as the text \\udXXX."""
    return re.sub("[\ud800-\udfff]", lambda found: f"\\u{ord(found.group()):04x}", text)


def test_the_sample_reads_as_a_conversation_per_session_in_order():
    builder, _expected = three_sessions()
    timeline = build_timeline(builder.events)
    connection, a, b, c = timeline.conversation
    assert kinds(a) == ["request", "prompt", "thought", "tool", "permission", "request", "reply", "end", "prompt", "reply", "end"]
    assert [e.get("text") for e in a["entries"] if e["k"] in ("prompt", "thought", "reply")] == [
        "read README", "reading", "The README says: project", "again", "Start"]
    tool, permission = a["entries"][3], a["entries"][4]
    assert (tool["title"], tool["statuses"]) == ("read README.md", ["in_progress"])
    assert (permission["title"], permission["outcome"], permission["answer"]) == ("read README.md", "ok", "Allow")
    assert a["entries"][7]["answer"] == "end_turn" and a["cwd"] == "/work/project"
    assert (a["entries"][10]["outcome"], a["entries"][10]["ev"]) == ("open", a["entries"][8]["ev"])  # never answered
    # B: three chunks joined into one reply, the cancel between, the chunk after it, the turn ended cancelled.
    assert kinds(b) == ["request", "prompt", "reply", "cancel", "reply", "end"]
    assert b["entries"][2]["text"] == "1 2 3 " and b["entries"][5]["outcome"] == "cancelled"
    assert [(e["k"], e.get("text")) for e in c["entries"][1:3]] == [("prompt", "hi"), ("reply", HOSTILE)]
    assert (c["entries"][3]["outcome"], c["entries"][3]["answer"]) == ("error", "error -32603 Internal error")
    assert kinds(connection) == ["request", "log", "error", "request"]
    assert connection["entries"][2]["text"] == "invalid UTF-8: {\"jsonrpc\": \"2.0\", \\xff}"
    # Every event of a session's entries is one of that session's marks' events (a link from one to the other).
    in_lane = {i for m in timeline.marks if m.lane == 1 for i in m.events}
    assert {i for e in a["entries"] for i in e["ev"]} <= in_lane


def update(t: TraceBuilder, sid: str, **fields: Any) -> None:
    t.notify("agent", "session/update", {"sessionId": sid, "update": fields})


def test_tool_calls_plans_permissions_and_messages_are_followed_to_their_end():
    t = TraceBuilder()
    t.request("client", 1, "session/new", {"cwd": "/w", "mcpServers": []})
    t.answer("agent", 1, {"sessionId": "s"})
    t.request("client", 2, "session/prompt", {"sessionId": "s", "prompt": [
        {"type": "text", "text": "fix it "}, {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"}]})
    update(t, "s", sessionUpdate="available_commands_update", availableCommands=[{"name": "wait"}])
    update(t, "s", sessionUpdate="available_commands_update", availableCommands=[{"name": "wait"}, {"name": "stream"}])
    update(t, "s", sessionUpdate="session_info_update", title="Fixing a.py")
    update(t, "s", sessionUpdate="plan", entries=[{"content": "read", "status": "pending", "priority": "high"}])
    update(t, "s", sessionUpdate="plan", entries=[{"content": "read", "status": "completed", "priority": "high"}])
    update(t, "s", sessionUpdate="tool_call", toolCallId="t1", title="edit a.py", kind="edit", status="pending")
    t.request("agent", 0, "session/request_permission", {"sessionId": "s", "toolCall": {"toolCallId": "t1"},
                                                         "options": [{"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
    t.answer("client", 0, {"outcome": {"outcome": "cancelled"}})
    update(t, "s", sessionUpdate="tool_call_update", toolCallId="t1", status="in_progress")
    update(t, "s", sessionUpdate="tool_call_update", toolCallId="t1", status="completed", locations=[{"path": "/w/a.py"}],
           content=[{"type": "content", "content": {"type": "text", "text": "done"}}])
    for message_id, text in (("m1", "Fixed "), ("m1", "it."), ("m2", "Anything else?")):
        update(t, "s", sessionUpdate="agent_message_chunk", messageId=message_id, content={"type": "text", "text": text})
    t.answer("agent", 2, {"stopReason": "end_turn"})
    section = build_timeline(t.events).conversation[1]
    assert kinds(section) == ["request", "prompt", "info", "info", "plan", "tool", "permission", "reply", "reply", "end"]
    prompt, commands, title, plan, tool, permission, first, second = section["entries"][1:9]
    assert prompt["text"] == "fix it [link a.py file:///w/a.py]"
    assert (commands["count"], commands["text"]) == (2, "/wait /stream")
    assert (title["text"], section["title"]) == ("title: Fixing a.py", "Fixing a.py")
    assert (plan["revisions"], plan["items"]) == (2, [["completed", "read", "high"]])
    assert (tool["kind"], tool["status"], tool["statuses"]) == ("edit", "completed", ["pending", "in_progress", "completed"])
    assert (tool["content"], tool["locations"], len(tool["ev"])) == ("done", ["/w/a.py"], 3)
    assert (permission["title"], permission["outcome"], permission["options"][0][1]) == ("edit a.py", "cancelled", "Reject")
    assert (first["text"], second["text"]) == ("Fixed it.", "Anything else?")


def test_the_agents_error_lines_and_tracebacks_on_stderr_are_errors_each_with_all_its_lines():
    builder, seqs = stderr_errors()
    timeline = build_timeline(builder.events)
    logs = [m for m in timeline.marks if "log" in m.classes.split()]
    errors = [m for m in logs if "error" in m.classes.split()]
    # The ERROR line and the traceback after it are one error; the thread's traceback another.
    assert [m.events[0] for m in errors] == seqs and [len(m.events) for m in errors] == [5, 3]
    assert errors[0].label.endswith("… ValueError: no doors") and errors[1].label.endswith("KeyError: 'clock'")
    assert [m.classes for m in logs if "error" not in m.classes.split()] == ["mark tick log", "mark tick log log-warn", "mark tick log"]
    entries = [e for e in timeline.conversation[0]["entries"] if e["k"] == "error"]
    assert [e["ev"][0] for e in entries] == seqs and entries[1]["text"].splitlines()[-1] == "KeyError: 'clock'"
    # Every error of the page: the two on stderr, and the prompt's error answer.
    assert sum("error" in m.classes.split() for m in timeline.marks) == 3


def test_hostile_text_everywhere_in_the_conversation_never_becomes_markup():
    page = render_page(build_timeline(hostile_conversation().events), PAYLOADS[1])
    assert page.count("<script") == 2 and page.count("</script>") == 2
    outside = page.replace(re.search(r'id="trace-data">(.*?)</script>', page, re.S).group(1), "")
    assert not re.search(r"<(img|svg|textarea|title>[^A])|<!--|onload|onerror|onmouseover", outside.replace("<title>ACP trace</title>", ""))
    data = data_block(page)
    section = data["conversation"][1]
    assert data["lanes"][1]["session"] == PAYLOADS[1] and section["title"] == PAYLOADS[2]
    reply = next(e for e in section["entries"] if e["k"] == "reply")
    assert reply["text"] == "".join(PAYLOADS)


def test_a_lone_surrogate_in_a_session_id_is_shown_as_its_escape(tmp_path):
    path = tmp_path / "surrogate.jsonl"
    t = TraceBuilder()
    t.request("client", 1, "session/prompt", {"sessionId": "\ud800", "prompt": [{"type": "text", "text": "x\udfff"}]})
    t.write(path)
    assert b"\\ud800" in path.read_bytes()  # the file holds the JSON escape, as a recorder writes it
    out = tmp_path / "surrogate.html"
    write_html(path, out)
    data = data_block(out.read_bytes().decode("utf-8"))
    assert data["lanes"][1]["session"] == "\\ud800" and data["conversation"][1]["entries"][0]["text"] == "x\\udfff"


def test_an_event_line_nested_deeper_than_python_reads_is_skipped(tmp_path, caplog):
    path = tmp_path / "deep.jsonl"
    deep = ('{"ts": 0.1, "type": "notification", "from": "agent", "to": "client", "method": "x", "params": '
            + "[" * 100_000 + "]" * 100_000 + "}")
    path.write_text('{"ts": 0, "type": "trace", "component": "agent", "level": "info", "message": "a"}\n' + deep + "\n")
    with caplog.at_level(logging.WARNING):
        events = load_events(path)
    assert [e["type"] for e in events] == ["trace"] and "skipped 1 lines" in caplog.text
    write_html(path, tmp_path / "deep.html")


def test_numbers_json_cannot_write_keep_the_pages_data_json(tmp_path):
    """NaN, Infinity and 1e400 (Python's json reads them) would make the data block no JSON, and the page blank."""
    path = tmp_path / "nan.jsonl"
    path.write_text('{"ts": 0, "type": "trace", "component": "agent", "level": "info", "message": "x", "fields": {"n": NaN}}\n'
                    '{"ts": 1e400, "type": "notification", "from": "agent", "to": "client", "method": "session/update",'
                    ' "params": {"sessionId": "s", "update": {"sessionUpdate": "usage_update", "used": -Infinity}}}\n')
    out = tmp_path / "nan.html"
    write_html(path, out)

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in the page's data")

    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', out.read_text(), re.S).group(1), parse_constant=refuse)
    assert data["events"][0]["fields"] == {"n": "NaN"} and data["duration"] == 0.0
    assert data["events"][1]["params"]["update"]["used"] == "-Infinity"
    # Events made in Python (not read from a file) with an infinite time: drawn at the time before.
    made = [{"ts": 1.0, "type": "trace", "message": "a"}, {"ts": float("inf"), "type": "trace", "message": "b"}]
    page = render_page(build_timeline(made), "made")
    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', page, re.S).group(1), parse_constant=refuse)
    assert [event["ts"] for event in data["events"]] == [1.0, 1.0]


def test_the_page_of_a_trace_is_what_it_was_for_the_timeline(tmp_path: Path):
    """The conversation leaves the timeline as it was: lanes, marks and events of the sample."""
    builder, expected = three_sessions()
    timeline = build_timeline(load_events(builder.write(tmp_path / "t.jsonl")))
    data = data_block(render_page(timeline, "t.jsonl"))
    assert len(data["conversation"]) == len(data["lanes"]) == 1 + len(expected.sessions)
    assert len(data["marks"]) == len(timeline.marks) and len(data["events"]) == len(builder.events)
