"""Tool call ids are unique within a session (ACP `ToolCallId`): `turn.tool_call` without an id
makes one no tool call has had, even in an earlier process; an id the session already announced
is refused naming it; the demo never reuses one, so a client never mixes two turns' tool calls."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.agent import Agent, Turn
from acp_green.tools.rig.client import AcpClient, ClientPolicy
from tests.unit_harness import UnitConnection

CWD = "/work/project"


class AnnouncesAgent(Agent):
    """Announces one tool call per turn, with the id the prompt text gives (`auto`: none) and keeps what it raised."""

    name = "announces"

    def __init__(self) -> None:
        self.raised: list[BaseException] = []

    def prompt(self, turn: Turn) -> str:
        wanted = turn.text.strip()
        try:
            turn.tool_call(None if wanted == "auto" else wanted, f"Call {wanted}").complete()
        except ValueError as exc:
            self.raised.append(exc)
        return "end_turn"


def announced(conn: UnitConnection, session_id: str) -> list[str]:
    return [u["toolCallId"] for u in conn.sink.updates(session_id) if u["sessionUpdate"] == "tool_call"]


def test_an_id_used_earlier_in_the_session_is_refused_naming_it_and_nothing_is_sent(unit):
    agent = AnnouncesAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session(cwd=CWD)
    assert conn.result(conn.prompt(session_id, "t-1")) == {"stopReason": "end_turn"}
    sent = len(conn.sink.updates(session_id))
    assert conn.result(conn.prompt(session_id, "t-1")) == {"stopReason": "end_turn"}
    assert [str(e) for e in agent.raised] == [
        "tool_call: the tool call id 't-1' was already used in this session; ids must be unique within a session "
        "(omit the id to get a fresh one)"]
    assert [u for u in conn.sink.updates(session_id)[sent:] if u["sessionUpdate"] in ("tool_call", "tool_call_update")] == []
    other = conn.new_session(cwd=CWD)  # another session may use it
    assert conn.result(conn.prompt(other, "t-1")) == {"stopReason": "end_turn"}
    assert announced(conn, other) == ["t-1"] and len(agent.raised) == 1


def test_ids_the_runtime_makes_are_unique_across_turns_and_sessions(unit):
    agent = AnnouncesAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize()
    sessions = [conn.new_session(cwd=CWD) for _ in range(2)]
    for session_id in sessions * 3:
        assert conn.result(conn.prompt(session_id, "auto")) == {"stopReason": "end_turn"}
    ids = [i for s in sessions for i in announced(conn, s)]
    assert len(ids) == 6 == len(set(ids)) and agent.raised == []


# -- the demo, through the real CLI ------------------------------------------------------------------


def demo_tool_calls(agent: AcpClient, session_id: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call"]


def test_the_demo_gives_every_tool_call_of_a_session_its_own_id(launch):
    """Before, every `/write` was `write-1`: a client showed the previous turn's "Permission
    denied" on a fresh `/write`. Now each turn's tool call has its own id, and a refused write
    fails only its own tool call."""
    answers = iter(["reject", "allow"])

    def permission(client: AcpClient, request: dict[str, Any]) -> None:
        client.respond(request["id"], {"outcome": {"outcome": "selected", "optionId": next(answers)}})

    policy = ClientPolicy(files={f"{CWD}/in.txt": "body"}, handlers={"session/request_permission": permission})
    agent = launch("--ephemeral", policy=policy)
    agent.initialize()
    session_id = agent.new_session(cwd=CWD)
    for text in ("/read in.txt", "/read in.txt", "/write out.txt one", "/write out.txt two", "/diff a.txt", "/plan"):
        assert agent.prompt(session_id, text).result() == {"stopReason": "end_turn"}
    calls = demo_tool_calls(agent, session_id)
    ids = [c["toolCallId"] for c in calls]
    assert len(ids) == 5 == len(set(ids)), ids
    first_write, second_write = ids[2], ids[3]
    finals = {u["toolCallId"]: u for u in agent.updates(session_id) if u.get("status") in ("completed", "failed")}
    assert finals[first_write]["status"] == "failed" and finals[second_write]["status"] == "completed"
    asked = [r["params"]["toolCall"]["toolCallId"] for r in agent.agent_requests if r["method"] == "session/request_permission"]
    assert asked == [first_write, second_write]


@pytest.mark.parametrize("restarts", [1])
def test_ids_made_after_a_restart_differ_from_the_ones_a_loaded_session_shows(launch, tmp_path, restarts):
    """The memory of used ids lives with the live session; ids the runtime makes carry a tag
    unique to the process, so a session loaded into a new process never gets one it showed before."""
    state = str(tmp_path / "state")
    seen: list[str] = []
    session_id = None
    for _ in range(restarts + 1):
        agent = launch("--state-dir", state, policy=ClientPolicy(files={f"{CWD}/in.txt": "body"}))
        agent.initialize()
        if session_id is None:
            session_id = agent.new_session(cwd=CWD)
        else:
            agent.call("session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []})
        replayed = [c["toolCallId"] for c in demo_tool_calls(agent, session_id)]
        assert replayed == seen
        assert agent.prompt(session_id, "/read in.txt").result() == {"stopReason": "end_turn"}
        seen = [c["toolCallId"] for c in demo_tool_calls(agent, session_id)]
        agent.close_input()
        assert agent.wait_exit() == 0
    assert len(seen) == restarts + 1 == len(set(seen)), seen
