"""ACP v2's new client requests through `acp-green serve` over real pipes, initialized with
protocolVersion 2: one tool call cancelled while its turn goes on, login and logout, a terminal
cancel refused; and a version 1 connection that does not know them. Every message is checked
at teardown against the schema of the version the connection negotiated.

The assertions lean only on what this feature sends (the cancel's answers, the tool call's
`capabilities` and final status, the demo's words), not on how a v2 prompt is acknowledged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_green.tools.rig.client import AgentProcess, RpcErrorResponse

AGENT = "--agent"


def v2(agent: AgentProcess) -> None:
    assert agent.initialize(version=2)["protocolVersion"] == 2


def tool_updates(agent: AgentProcess, session_id: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(session_id) if u.get("sessionUpdate") in ("tool_call", "tool_call_update")]


def test_a_client_cancels_one_tool_call_and_the_turn_goes_on(launch):
    agent = launch()
    v2(agent)
    sid = agent.new_session()
    prompt = agent.prompt(sid, "/longtool 30")
    tool = agent.wait_for(lambda: next((u for u in tool_updates(agent, sid) if u.get("capabilities") == {"cancel": {}}), None),
                          what="a tool call advertising capabilities.cancel")
    tool_call_id = tool["toolCallId"]
    assert agent.call("tool_call/cancel", {"sessionId": sid, "toolCallId": tool_call_id}) == {}
    final = agent.wait_for(lambda: next((u for u in tool_updates(agent, sid)
                                         if u["toolCallId"] == tool_call_id and u.get("status") in ("failed", "cancelled")), None),
                           what="the tool call's final status")
    assert final.get("capabilities", "absent") is None  # no longer advertised
    prompt.result()  # answered without an error, however v2 acknowledges a prompt
    agent.wait_for(lambda: "the tool call was cancelled; the turn goes on" in json.dumps(agent.updates(sid)),
                   what="the demo saying the turn went on")
    with pytest.raises(RpcErrorResponse) as again:  # final now: no longer cancellable
        agent.call("tool_call/cancel", {"sessionId": sid, "toolCallId": tool_call_id})
    assert (again.value.code, again.value.reason) == (-32602, "not_cancellable")


def test_unknown_session_and_terminal(launch):
    agent = launch()
    v2(agent)
    sid = agent.new_session()
    with pytest.raises(RpcErrorResponse) as unknown:
        agent.call("tool_call/cancel", {"sessionId": "sess_nope", "toolCallId": "t"})
    assert (unknown.value.code, unknown.value.reason) == (-32002, "unknown_session")
    with pytest.raises(RpcErrorResponse) as terminal:
        agent.call("terminal/cancel", {"sessionId": sid, "terminalId": "term-1"})
    assert (terminal.value.code, terminal.value.reason) == (-32602, "not_cancellable")


def test_login_and_logout(launch):
    agent = launch(AGENT, "tests.surface_agents:LogsOutAgent")
    v2(agent)
    assert agent.call("auth/login", {"methodId": "token"}) == {}
    agent.new_session()
    assert agent.call("auth/logout", {}) == {}
    with pytest.raises(RpcErrorResponse) as refused:
        agent.new_session()
    assert (refused.value.code, refused.value.reason) == (-32000, "auth_required")


@pytest.mark.parametrize("method", ["auth/login", "auth/logout", "tool_call/cancel", "terminal/cancel"])
def test_a_version_1_connection_does_not_know_them(launch, method):
    agent = launch()
    assert agent.initialize(version=1)["protocolVersion"] == 1
    with pytest.raises(RpcErrorResponse) as missing:
        agent.call(method, {"sessionId": "s", "methodId": "m", "toolCallId": "t", "terminalId": "t"})
    assert missing.value.code == -32601
