"""Notices, compaction and named tool calls (ACP stable v1 as the TypeScript SDK 2.4.0 speaks it):
`turn.notice` and `turn.compaction` reach only a client that advertised `session.notices` /
`session.compaction` (for any other they are a checked no-op), they are stored and replayed on
`session/load` to a client that advertised them, and `acp-green sessions show` shows them.
End to end through `acp-green serve`; every message is checked against the schemas at teardown."""

from __future__ import annotations

import sys
from typing import Any

from gevent import subprocess

from tests.helpers import said

NOTICES = ("--agent", "tests.surface_agents:NoticesAgent")
BOTH = {"session": {"notices": {}, "compaction": {}}}
NEW_KINDS = {"notice", "compaction_update", "compaction_summary_chunk"}


def _of_kinds(updates: list[dict[str, Any]], kinds: set[str]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] in kinds]


def _load(agent: Any, session_id: str) -> list[dict[str, Any]]:
    """session/load's replay: the updates of the session received before its response."""
    before = len(agent.updates(session_id))
    agent.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
    return agent.updates(session_id)[before:]


def test_a_notice_reaches_a_client_that_advertised_notices(launch):
    """`turn.notice` sends `notice` with its severity, title and description, and returns True."""
    agent = launch(*NOTICES)
    agent.initialize({"session": {"notices": {}}})
    sid = agent.new_session()
    agent.prompt(sid, "/notice warning Context is almost full").result()
    updates = agent.updates(sid)
    assert _of_kinds(updates, {"notice"}) == [{"sessionUpdate": "notice", "severity": "warning",
                                               "title": "Context is almost full", "description": "details here"}]
    assert said(updates) == "sent=True"


def test_without_the_capability_a_notice_is_a_no_op(launch):
    """A client that did not advertise `session.notices` (absent, null, or not an object) is sent no
    notice; the call returns False and the turn goes on."""
    for capabilities in ({}, {"session": None}, {"session": {"notices": None}}, {"session": {"notices": True}},
                         {"session": {"compaction": {}}}):
        agent = launch(*NOTICES)
        agent.initialize(capabilities)
        sid = agent.new_session()
        assert agent.prompt(sid, "/notice error Something broke").result() == {"stopReason": "end_turn"}
        assert _of_kinds(agent.updates(sid), {"notice"}) == [], capabilities
        assert said(agent.updates(sid)) == "sent=False"


def test_a_compaction_reaches_a_client_that_advertised_compaction(launch):
    """`turn.compaction` sends `compaction_update` in progress, its summary chunks, then `completed`
    with the whole summary, all under one id."""
    agent = launch(*NOTICES)
    agent.initialize({"session": {"compaction": {}}})
    sid = agent.new_session()
    agent.prompt(sid, "/compact c-1").result()
    text = {"type": "text", "text": "Summarised the chat"}
    assert _of_kinds(agent.updates(sid), NEW_KINDS) == [
        {"sessionUpdate": "compaction_update", "compactionId": "c-1", "status": "in_progress"},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c-1", "content": {"type": "text", "text": "Summarised "}},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c-1", "content": {"type": "text", "text": "the chat"}},
        {"sessionUpdate": "compaction_update", "compactionId": "c-1", "status": "completed", "summary": [text]},
    ]
    assert said(agent.updates(sid)) == "sent=[True, True, True, True]"


def test_without_the_capability_a_compaction_is_a_no_op(launch):
    """A client that advertised notices but not `session.compaction` is sent no compaction update."""
    agent = launch(*NOTICES)
    agent.initialize({"session": {"notices": {}}})
    sid = agent.new_session()
    agent.prompt(sid, "/compact").result()
    assert _of_kinds(agent.updates(sid), NEW_KINDS) == []
    assert said(agent.updates(sid)) == "sent=[False, False, False, False]"


def test_a_made_compaction_id_is_fresh(launch):
    """Without an id the runtime makes one; two compactions get two."""
    agent = launch(*NOTICES)
    agent.initialize(BOTH)
    sid = agent.new_session()
    agent.prompt(sid, "/compact").result()
    agent.prompt(sid, "/compact").result()
    ids = {u["compactionId"] for u in _of_kinds(agent.updates(sid), {"compaction_update"})}
    assert len(ids) == 2 and all(i.startswith("compaction_") for i in ids), ids


def test_tool_calls_carry_their_name(launch):
    """`name=` on `tool_call` and on an update goes out as the tool call's `name`."""
    agent = launch(*NOTICES)
    agent.initialize({})
    sid = agent.new_session()
    agent.prompt(sid, "/named").result()
    calls = _of_kinds(agent.updates(sid), {"tool_call", "tool_call_update"})
    assert [(u["sessionUpdate"], u.get("name")) for u in calls] == [("tool_call", "read_file"), ("tool_call_update", "read_file_v2")]


def test_notices_and_compaction_are_replayed_only_to_a_client_that_advertised_them(launch, tmp_path):
    """Stored like other updates: session/load replays them, in place, to a client with both
    capabilities; a client with neither gets the rest of the conversation without them."""
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, *NOTICES)
    first.initialize(BOTH)
    sid = first.new_session()
    first.prompt(sid, "/notice info Indexed the repo").result()
    first.prompt(sid, "/compact c-9").result()
    live = [u for u in first.updates(sid) if u["sessionUpdate"] in NEW_KINDS | {"agent_message_chunk"}]
    first.close()

    again = launch("--state-dir", state, *NOTICES)
    again.initialize(BOTH)
    replayed = [u for u in _load(again, sid) if u["sessionUpdate"] in NEW_KINDS | {"agent_message_chunk"}]
    assert replayed == live and len(_of_kinds(replayed, NEW_KINDS)) == 5
    again.close()

    plain = launch("--state-dir", state, *NOTICES)
    plain.initialize({})
    replayed = _load(plain, sid)
    assert _of_kinds(replayed, NEW_KINDS) == []
    assert said(replayed) == "sent=Truesent=[True, True, True, True]"
    plain.close()

    shown = subprocess.run([sys.executable, "-m", "acp_green", "sessions", "show", sid, "--state-dir", state],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "notice [info]: Indexed the repo (details here)" in shown.stdout
    assert "compaction: c-9 in_progress" in shown.stdout
    assert "compaction summary: c-9 Summarised " in shown.stdout
    assert "compaction: c-9 completed: Summarised the chat" in shown.stdout
