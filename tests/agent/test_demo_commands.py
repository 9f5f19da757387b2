"""Demo commands: the demo's slash commands live in one registry, from which both
the advertised `available_commands_update` and the dispatch come; the demo table of docs/SERVE.md
is the contract for the names."""

from __future__ import annotations

import re

import pytest

from acp_green.demo import DEMO_COMMANDS, DemoAgent, SlashCommands
from tests.helpers import REPO, said, wait_until

SERVING_GUIDE = str(REPO / "docs" / "SERVE.md")


def _documented_demo_commands() -> list[str]:
    """The slash commands named in the first column of docs/SERVE.md's demo prompt-grammar table."""
    text = open(SERVING_GUIDE, encoding="utf-8").read()
    table = text.split("## The demo agent", 1)[1].split("\n\n| prompt text |", 1)[1].split("\n\n", 1)[0]
    names: list[str] = []
    for row in table.splitlines():
        first_cell = row.split("|")[1]
        names += re.findall(r"`/([a-z]+)", first_cell)
    return names


def _advertised(inprocess) -> list[dict]:
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    sid = client.new_session()
    updates = wait_until(lambda: [u for u in client.updates(sid) if u["sessionUpdate"] == "available_commands_update"],
                         what="available_commands_update")
    return updates[0]["availableCommands"]


def test_every_advertised_command_has_its_handler_and_every_handler_is_advertised(inprocess):
    """What goes on the wire is the registry: no advertised name falls back to echo, no handler
    is hidden, and the names are docs/SERVE.md's demo table, in its order."""
    advertised = [c["name"] for c in _advertised(inprocess)]
    assert [name for name in advertised if DEMO_COMMANDS.handler(name) is None] == []
    assert advertised == [c.name for c in DEMO_COMMANDS]
    assert advertised == _documented_demo_commands()


def test_the_advertised_commands_on_the_wire_are_unchanged(inprocess):
    """The wire form of the demo's commands (name, description, input hint) stays what clients saw."""
    assert _advertised(inprocess) == [
        {"name": "stream", "description": "Stream N numbered chunks of SIZE bytes", "input": {"hint": "N [SIZE]"}},
        {"name": "sleep", "description": "Wait SECONDS (cancellable)", "input": {"hint": "SECONDS"}},
        {"name": "wait", "description": "Wait until cancelled"},
        {"name": "read", "description": "Read a file through the client", "input": {"hint": "PATH"}},
        {"name": "write", "description": "Write a file through the client, after asking", "input": {"hint": "PATH TEXT"}},
        {"name": "mcp", "description": "Call a tool on an MCP server of this session", "input": {"hint": "SERVER TOOL [JSON]"}},
        {"name": "term", "description": "Run a command in a client terminal and report its exit code", "input": {"hint": "COMMAND [ARGS...]"}},
        {"name": "diff", "description": "Propose a change to a file, shown as a diff", "input": {"hint": "PATH"}},
        {"name": "ask", "description": "Ask the user a question with a form and repeat the answer", "input": {"hint": "QUESTION"}},
        {"name": "fail", "description": "Raise an error inside the agent"},
        {"name": "plan", "description": "Show a plan"},
        {"name": "think", "description": "Show some reasoning"},
        {"name": "image", "description": "Describe the images sent with this prompt"},
        {"name": "notice", "description": "Send a notice (when the client shows notices)", "input": {"hint": "[info|warning|error] TITLE"}},
        {"name": "compact", "description": "Report a context compaction with its summary (when the client shows them)"},
        {"name": "longtool", "description": "A tool call that runs SECONDS; a client may cancel it alone", "input": {"hint": "SECONDS"}},
    ]


def test_a_name_cannot_be_registered_twice():
    commands = SlashCommands()
    commands("go", "first")(lambda agent, turn, args: "end_turn")
    with pytest.raises(ValueError, match="/go is registered twice"):
        commands("go", "second")(lambda agent, turn, args: "end_turn")
    assert [c.description for c in commands] == ["first"]


def test_a_registered_command_is_dispatched_and_an_unknown_one_is_echoed(inprocess):
    """`/stream 2 8` runs the stream handler; `/nosuch x` is not a command, so it is echoed."""
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, "/stream 2 8").result() == {"stopReason": "end_turn"}
    assert client.prompt(sid, "/nosuch x").result() == {"stopReason": "end_turn"}
    assert said(client.updates(sid)) == "0:......1:....../nosuch x"


NEW_KINDS = ("notice", "compaction_update", "compaction_summary_chunk")


def _demo_turn(inprocess, capabilities: dict, text: str) -> tuple[list[dict], str]:
    """One demo prompt: the notice/compaction updates it sent, and what it said."""
    client = inprocess(DemoAgent()).client
    client.initialize(capabilities)
    sid = client.new_session()
    assert client.prompt(sid, text).result() == {"stopReason": "end_turn"}
    updates = client.updates(sid)
    return [u for u in updates if u["sessionUpdate"] in NEW_KINDS], said(updates)


@pytest.mark.parametrize("capabilities, text, sent, reply", [
    ({"session": {"notices": {}}}, "/notice warning Disk almost full",
     [{"sessionUpdate": "notice", "severity": "warning", "title": "Disk almost full", "description": "Sent by the demo's /notice"}],
     "sent a warning notice"),
    ({}, "/notice Just so you know", [], "info: Just so you know (the client did not advertise session.notices)"),
])
def test_notice_sends_a_notice_or_says_it_as_a_message(inprocess, capabilities, text, sent, reply):
    """`/notice warning T` is a notice to a client that shows notices; any other client gets the
    text as a message (ACP's fallback), saying why."""
    assert _demo_turn(inprocess, capabilities, text) == (sent, reply)


def test_compact_reports_a_compaction_to_a_client_that_shows_them(inprocess):
    sent, text = _demo_turn(inprocess, {"session": {"compaction": {}}}, "/compact")
    compaction_id = sent[0]["compactionId"]
    assert [(u["sessionUpdate"], u.get("status")) for u in sent] == [
        ("compaction_update", "in_progress"), ("compaction_summary_chunk", None), ("compaction_summary_chunk", None),
        ("compaction_update", "completed")]
    assert {u["compactionId"] for u in sent} == {compaction_id} and text == f"compaction {compaction_id} completed"
    assert sent[-1]["summary"] == [{"type": "text", "text": "The demo compacted nothing: this is its summary."}]


def test_compact_tells_a_client_that_shows_no_compaction_that_none_was_reported(inprocess):
    sent, text = _demo_turn(inprocess, {"session": {"notices": {}}}, "/compact")
    assert sent == [] and text == "the client did not advertise session.compaction: no compaction reported"
