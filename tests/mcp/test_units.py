"""Unit tests of the MCP parts: the in-process tool server, the registry's errors, the CLI option,
the schema check of mcp/* messages, and session-scoped servers ending with their session (S7)."""

from __future__ import annotations

import click
import pytest

from acp_green.cli import parse_provide_mcp
from acp_green.demo import DemoAgent
from acp_green.errors import McpError, TurnCancelled, UnknownMcpConnection
from acp_green.mcp import Tool, ToolServer
from acp_green.mcp.registry import McpRegistry, provided_servers
from acp_green.rig.schema import default_schema
from acp_green.sessions import CancelToken
from tests.helpers import wait_gone
from tests.mcp_helpers import SDK_TOOLS, stdio_entry


def _tools() -> ToolServer:
    def fail(call):
        raise ValueError("broken tool")

    def slow(call):
        call.sleep(600)
        return "never"

    return ToolServer("t", [Tool("fail", fail), Tool("slow", slow), Tool("data", lambda call: {"n": call.arguments["n"]})])


def test_tool_server_speaks_mcp():
    server = _tools()
    token = CancelToken()
    init = server.handle("initialize", {"protocolVersion": "2025-06-18"}, token)
    assert init["protocolVersion"] == "2025-06-18" and init["capabilities"] == {"tools": {"listChanged": False}}
    assert server.handle("initialize", {"protocolVersion": "1999-01-01"}, token)["protocolVersion"] == "2025-11-25"
    assert [t["name"] for t in server.handle("tools/list", None, token)["tools"]] == ["fail", "slow", "data"]
    failed = server.handle("tools/call", {"name": "fail"}, token)
    assert failed["isError"] is True and "broken tool" in failed["content"][0]["text"]
    assert server.handle("tools/call", {"name": "data", "arguments": {"n": 3}}, token)["structuredContent"] == {"result": {"n": 3}}
    with pytest.raises(McpError) as info:
        server.handle("tools/call", {"name": "nope"}, token)
    assert info.value.code == -32602
    with pytest.raises(McpError) as info:
        server.handle("resources/list", None, token)
    assert info.value.code == -32601
    token.set()
    with pytest.raises(TurnCancelled):
        server.handle("tools/call", {"name": "slow"}, token)


def test_S7_message_for_a_not_yet_connected_connection_is_refused():
    """S7: until mcp/connect has answered, the connection refuses messages (an error, never a hang)."""
    registry = McpRegistry(provided_servers([_tools()], []), call_client=None, notify_client=None)
    registry.admit_connect({"serverId": "acp-green:t"}, 1)  # admitted, not yet run
    (connection_id,) = registry.bridges
    with pytest.raises(UnknownMcpConnection) as info:
        registry.admit_message({"connectionId": connection_id, "method": "ping"}, 2)
    assert info.value.data["state"] == "connecting"
    with pytest.raises(UnknownMcpConnection):
        registry.on_message_notification({"connectionId": connection_id, "method": "notifications/initialized"})


def test_provided_server_names_must_be_unique():
    with pytest.raises(ValueError):
        provided_servers([_tools()], [("t", ("cmd",))])


def test_provide_mcp_option_is_split_like_a_shell():
    assert parse_provide_mcp(("fs=npx -y 'server fs' --root /tmp",)) == (("fs", ("npx", "-y", "server fs", "--root", "/tmp")),)
    for bad in ("noequals", "=cmd", "x=", "x='unclosed"):
        with pytest.raises(click.BadParameter):
            parse_provide_mcp((bad,))
    with pytest.raises(click.BadParameter):
        parse_provide_mcp(("a=x", "a=y"))


def test_schema_check_rejects_malformed_mcp_messages():
    """Testing layers: the unstable-schema check of mcp/* can fail."""
    schema = default_schema()
    assert schema.problems({"jsonrpc": "2.0", "id": 1, "result": {}}, request_method="mcp/connect")
    assert not schema.problems({"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "c"}}, request_method="mcp/connect")
    assert schema.problems({"jsonrpc": "2.0", "method": "mcp/message", "params": {"method": "x"}})
    assert schema.problems({"jsonrpc": "2.0", "id": 2, "method": "mcp/message", "params": {"connectionId": "c", "method": "x", "params": 3}})


def test_S7_session_servers_are_reaped_when_the_session_is_dropped(inprocess):
    """S7: a session's stdio MCP servers stop when the session ends (the registry's drop runs its closers)."""
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    session_id = client.new_session(mcp_servers=[stdio_entry("st", SDK_TOOLS)])
    assert client.prompt(session_id, "/mcp st pid").result() == {"stopReason": "end_turn"}
    pid = int(client.updates(session_id)[-2]["content"]["text"])
    protocol = harness.server.protocol
    assert protocol.session_mcp[session_id].pids() == {"st": pid}
    harness.server.sessions.drop(session_id)
    assert wait_gone(pid)
    assert session_id not in protocol.session_mcp
