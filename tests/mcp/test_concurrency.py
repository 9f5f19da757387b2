"""MCP traffic in the mix with prompts: concurrency (S1), the shared 32 slots (S9), control always answered (S10)."""

from __future__ import annotations

from tests.mcp_helpers import SDK_TOOLS, call_tool, connect, initialize, provide, text_of

DEMO = "acp-green:demo"


def test_S1_long_prompt_runs_while_mcp_requests_complete(launch):
    """S1: a prompt that waits until cancelled does not hold up MCP traffic on the same connection."""
    agent = launch("--ephemeral", *provide("sdk", SDK_TOOLS))
    agent.initialize()
    session_id = agent.new_session()
    prompt = agent.prompt(session_id, "/wait")
    for server_id in (DEMO, "acp-green:sdk"):
        connection_id, _ = connect(agent, server_id)
        initialize(agent, connection_id)
        requests = [call_tool(agent, connection_id, "echo", {"text": f"t{i}"}) for i in range(5)]
        agent.send(*requests)
        assert [text_of(agent.pending_for(r).result()) for r in requests] == [f"t{i}" for i in range(5)]
        assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}
    assert not prompt.done
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}


def test_S9_S10_prompts_and_mcp_requests_share_32_slots_and_control_is_answered(launch):
    """S9: 16 prompts + 16 MCP requests fill the 32 slots; the next prompt, mcp/message or mcp/connect gets
    -32000 connection_busy at once; S10: control requests are still answered."""
    agent = launch("--ephemeral")
    agent.initialize()
    connection_id, _ = connect(agent, DEMO)
    initialize(agent, connection_id)
    sessions = [agent.new_session() for _ in range(17)]
    prompts = [agent.prompt(s, "/wait") for s in sessions[:16]]
    calls = [call_tool(agent, connection_id, "sleep", {"seconds": 600}, request_id=f"mcp-{i}") for i in range(16)]
    agent.send(*calls)
    refused = [
        agent.request("mcp/message", call_tool(agent, connection_id, "echo", {"text": "x"})["params"]),
        agent.prompt(sessions[16], "hello"),
        agent.request("mcp/connect", {"serverId": DEMO}),
    ]
    for pending in refused:
        error = pending.error()
        assert (error["code"], error["data"]["reason"]) == (-32000, "connection_busy")
    # S10: control requests are answered while every slot is taken.
    assert agent.call("session/set_mode", {"sessionId": sessions[0], "modeId": "code"}) == {}
    assert agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]
    assert not any(p.done for p in prompts) and not any(agent.pending_for(c).done for c in calls)
    # One prompt finishing frees one slot, which an MCP request can take.
    agent.cancel(sessions[0])
    assert prompts[0].result() == {"stopReason": "cancelled"}
    echo = call_tool(agent, connection_id, "echo", {"text": "in the freed slot"})
    agent.send(echo)
    assert text_of(agent.pending_for(echo).result()) == "in the freed slot"
    for session_id in sessions[1:16]:
        agent.cancel(session_id)
    assert all(p.result() == {"stopReason": "cancelled"} for p in prompts)
    assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}
    assert all(agent.pending_for(c).error()["code"] == -32800 for c in calls)
