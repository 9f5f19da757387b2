"""A `session.state` the agent clears after the session came back from the store is stored cleared:
`.clear()`, `del`, and a new dict assigned through the agent's view of the session
(`turn.session.state = {}`: agent.SessionView.state is the session's own, which the registry stores).
Through SQLite, with the serving process restarted between the write and the clear."""

from __future__ import annotations

import json

import pytest

from acp_green.agent import SessionView
from acp_green.sessions import SessionRegistry
from acp_green.store.base import MemoryStore
from tests.agent.test_conversation_memory import reply, stored_state

AGENT = ("--agent", "tests.state_agents:StateAgent")
CLEARS = ["/clear", "/reset", "/del secret"]


@pytest.mark.parametrize("clear", CLEARS)
@pytest.mark.parametrize("method", ["session/load", "session/resume", None])
def test_a_state_cleared_after_a_restart_is_stored_cleared(launch, tmp_path, clear, method):
    """`method` reopens the session in the second process (None: the prompt alone revives it)."""
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, *AGENT)
    first.initialize()
    sid = first.new_session()
    assert reply(first, sid, '/set secret "s3cr3t"') == '{} -> {"secret": "s3cr3t"}'
    assert first.close() == 0
    assert stored_state(state, sid) == {"secret": "s3cr3t"}

    second = launch("--state-dir", state, *AGENT)
    second.initialize()
    if method is not None:
        second.call(method, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    # The first turn after the revival: the state decoded from the store, then cleared.
    assert reply(second, sid, clear) == '{"secret": "s3cr3t"} -> {}'
    assert second.close() == 0
    assert stored_state(state, sid) == {}

    third = launch("--state-dir", state, *AGENT)
    third.initialize()
    assert reply(third, sid, "/state") == "{} -> {}"
    assert third.close() == 0


def test_a_state_replaced_in_a_live_session_is_stored(launch, tmp_path):
    """No revival: a new dict assigned through `turn.session` is what the turn's end stores."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state, *AGENT)
    agent.initialize()
    sid = agent.new_session()
    reply(agent, sid, '/set secret "s"')
    assert reply(agent, sid, "/reset") == '{"secret": "s"} -> {}'
    assert reply(agent, sid, '/set other 1') == '{} -> {"other": 1}'  # the next turn sees the new dict
    assert agent.close() == 0
    assert stored_state(state, sid) == {"other": 1}


@pytest.mark.parametrize("how", ["clear", "assign"])
def test_the_registry_stores_a_state_cleared_after_revival(how):
    store = MemoryStore()
    sessions = SessionRegistry(store, idle_timeout=1.0)
    session = sessions.create("/tmp", [], [])
    session.state["secret"] = "s"
    assert sessions.evict_idle(now=session.last_active + 10) == [session.session_id]  # stored as it goes
    assert store.load_state(session.session_id) == b'{"secret":"s"}'
    revived = sessions.get(session.session_id)
    view = SessionView.of(revived)  # what agent code holds
    assert view.state == {"secret": "s"}
    if how == "clear":
        view.state.clear()
    else:
        view.state = {}
    assert revived.state == {} and SessionView.of(revived).state == {}
    assert sessions.store_state(revived)
    assert store.load_state(session.session_id) == b"{}"
