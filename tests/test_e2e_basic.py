"""End-to-end through the real CLI over real pipes: the basic conversation."""

from __future__ import annotations

from tests.helpers import said


def test_initialize_and_new_session_in_one_write_S2(launch):
    """S2: `initialize` and `session/new` written together both succeed, in order."""
    agent = launch()
    init = agent.make_request("initialize", agent.initialize_params())
    new = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.send(init, new)
    assert agent.pending_for(init).result()["protocolVersion"] == 1
    session_id = agent.pending_for(new).result()["sessionId"]
    # A prompt written the moment the session/new response is read works.
    assert agent.prompt(session_id, "hello").result() == {"stopReason": "end_turn"}
    text = said(agent.updates(session_id))
    assert text == "hello"
