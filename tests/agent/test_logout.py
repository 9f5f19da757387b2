"""Logout: routed to `Agent.logout`, advertised only by an agent that implements it,
and a logged-out connection must authenticate again. End to end through `acp-green serve`; every
message is schema-checked at teardown."""

from __future__ import annotations

import pytest

from acp_green.tools.rig.client import RpcErrorResponse
from tests.helpers import said

AGENT = "--agent"


def _caps(launch, *args: str) -> dict:
    agent = launch(*args)
    return agent.initialize()["agentCapabilities"]


def test_logout_is_advertised_only_by_an_agent_that_implements_it(launch):
    """`agentCapabilities.auth.logout` is `{}` for an agent overriding `logout`; absent otherwise
    (the demo, and an agent with auth methods but no logout)."""
    assert _caps(launch, AGENT, "tests.surface_agents:LogsOutAgent")["auth"] == {"logout": {}}
    assert "auth" not in _caps(launch, AGENT, "tests.agents:NeedsAuthAgent")
    assert "auth" not in _caps(launch)


def test_a_logged_out_connection_must_authenticate_again(launch):
    """logout answers {} after the agent's hook ran; session/new is then -32000 auth_required until
    `authenticate` succeeds again, and an existing session's prompt is refused the same way."""
    agent = launch(AGENT, "tests.surface_agents:LogsOutAgent")
    agent.initialize()
    agent.call("authenticate", {"methodId": "token"})
    sid = agent.new_session()
    assert agent.call("logout", {}) == {}
    with pytest.raises(RpcErrorResponse) as refused:
        agent.new_session()
    assert (refused.value.code, refused.value.reason) == (-32000, "auth_required")
    with pytest.raises(RpcErrorResponse) as prompt_refused:
        agent.prompt(sid, "hi").result()
    assert prompt_refused.value.reason == "auth_required"
    agent.call("authenticate", {"methodId": "token"})
    assert agent.prompt(sid, "hi").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)) == "logouts: 1"


def test_logout_without_auth_methods_leaves_sessions_open(launch):
    """An agent with no auth methods never requires `authenticate`, logged out or not (params may be absent)."""
    agent = launch(AGENT, "tests.surface_agents:LogsOutWithoutAuthAgent")
    agent.initialize()
    assert agent.call("logout") == {}
    sid = agent.new_session()
    assert agent.prompt(sid, "hi").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)) == "logouts: 1"


def test_logout_is_method_not_found_when_the_agent_does_not_implement_it(launch):
    """-32601, and nothing changes: the connection stays authenticated."""
    agent = launch(AGENT, "tests.agents:NeedsAuthAgent")
    agent.initialize()
    agent.call("authenticate", {"methodId": "token"})
    with pytest.raises(RpcErrorResponse) as missing:
        agent.call("logout", {})
    assert missing.value.code == -32601
    assert agent.new_session().startswith("sess_")
