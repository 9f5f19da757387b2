"""Agent code reads its session's stored conversation (`turn.history()`) and keeps `session.state`,
across session/load, session/resume and restarts of the real CLI, and within one --ephemeral process."""

from __future__ import annotations

import json
from typing import Any

from acp_green.store import statedb
from tests.helpers import said, wait_until

AGENT = ("--agent", "tests.memory_agents:MemoryAgent")


def reply(agent, session_id: str, text: str) -> str:
    """What the agent said in answer to `text` (this turn's message chunks only)."""
    mark = len(agent.updates(session_id))
    assert agent.prompt(session_id, text).result() == {"stopReason": "end_turn"}
    return said(agent.updates(session_id)[mark:])


def reopen(agent, method: str, session_id: str) -> None:
    agent.call(method, {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})


WORK_TURN = {
    "prompt": "/work",
    "messages": [[True, "first part"], [True, "after the tool"]],
    "thoughts": ["pondering"],
    "tools": [["lookup", "completed", {"key": "k1"}, {"value": 1}, "found"]],
    "plans": [["look"]],
    "order": ["ConversationMessage", "ConversationMessage", "ConversationPlan", "ConversationToolCall", "ConversationMessage"],
    "stop": "end_turn",
}


def test_the_conversation_reads_back_the_same_after_restarts_load_and_resume(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, *AGENT)
    first.initialize()
    sid = first.new_session()
    assert reply(first, sid, "hello") == "ok: hello"
    reply(first, sid, "/work")
    live: list[dict[str, Any]] = json.loads(reply(first, sid, "/recall"))
    assert live == [
        {"index": 0, "prompt": "hello", "messages": [[True, "ok: hello"]], "thoughts": [], "tools": [], "plans": [],
         "order": ["ConversationMessage"], "stop": "end_turn"},
        {"index": 1, **WORK_TURN},
    ]
    assert first.close() == 0

    second = launch("--state-dir", state, *AGENT)
    second.initialize()
    reopen(second, "session/load", sid)
    after_load = json.loads(reply(second, sid, "/recall"))
    # The same turns, then the /recall turn of the first process.
    assert after_load[:2] == live and after_load[2]["prompt"] == "/recall" and after_load[2]["index"] == 2
    assert second.close() == 0

    third = launch("--state-dir", state, *AGENT)
    third.initialize()
    reopen(third, "session/resume", sid)
    newest_first = json.loads(reply(third, sid, "/recall-newest"))
    assert [t["index"] for t in newest_first] == [3, 2, 1, 0]
    assert newest_first[2:] == live[::-1]
    assert third.close() == 0


def stored_state(state_dir: str, session_id: str) -> Any:
    """The session's state as another process reads it from the database now."""
    conn = statedb.connect_existing(statedb.db_path(state_dir))
    assert conn is not None
    try:
        data = statedb.load_state(conn, session_id)
    finally:
        conn.close()
    return None if data is None else json.loads(data)


def test_state_is_stored_at_turn_end_and_restored_after_a_restart(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, *AGENT)
    first.initialize()
    sid = first.new_session()
    reply(first, sid, '/set name "Ada"')
    # Stored as the turn ended, while the process runs on (not only when it exits).
    wait_until(lambda: stored_state(state, sid) == {"name": "Ada"}, what="the state stored at the turn's end")
    reply(first, sid, '/set facts {"likes": ["tea", 1.5, null, true]}')
    assert first.close() == 0
    second = launch("--state-dir", state, *AGENT)
    second.initialize()
    reopen(second, "session/load", sid)
    assert json.loads(reply(second, sid, "/state")) == {"facts": {"likes": ["tea", 1.5, None, True]}, "name": "Ada"}
    assert second.close() == 0


def test_an_unstorable_value_is_logged_naming_the_key_and_nothing_else_is_lost(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, *AGENT)
    first.initialize()
    sid = first.new_session()
    reply(first, sid, "/set kept 1")
    # The agent's own check names the key in its code, and the turn goes on.
    assert reply(first, sid, "/check odd") == "refused: odd: session.state['odd'] cannot be stored: " \
        "not JSON-serialisable (TypeError: Object of type set is not JSON serializable)"
    reply(first, sid, "/unstorable broken")  # stored at the turn's end: logged, the previous state kept
    reply(first, sid, "after")
    assert first.close() == 0
    log = first.stderr_text()
    assert "ERROR" in log and "session.state['broken'] cannot be stored" in log and sid in log
    second = launch("--state-dir", state, *AGENT)
    second.initialize()
    reopen(second, "session/load", sid)
    # The state stored before the unstorable value; every turn, the broken one's included.
    assert json.loads(reply(second, sid, "/state")) == {"kept": 1}
    prompts = [t["prompt"] for t in json.loads(reply(second, sid, "/recall"))]
    assert prompts == ["/set kept 1", "/check odd", "/unstorable broken", "after", "/state"]
    assert second.close() == 0


def test_the_ephemeral_store_keeps_state_and_conversation_within_the_process(launch):
    agent = launch("--ephemeral", *AGENT)
    agent.initialize()
    sid = agent.new_session()
    reply(agent, sid, '/set name "Ada"')
    reply(agent, sid, "/work")
    agent.call("session/close", {"sessionId": sid})  # the live session (and its state dict) is gone
    reopen(agent, "session/load", sid)
    assert json.loads(reply(agent, sid, "/state")) == {"name": "Ada"}
    recalled = json.loads(reply(agent, sid, "/recall"))
    assert [t["prompt"] for t in recalled] == ['/set name "Ada"', "/work", "/state"]
    assert {k: v for k, v in recalled[1].items() if k != "index"} == WORK_TURN
    assert agent.close() == 0
