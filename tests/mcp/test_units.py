"""Unit tests of the MCP parts: the in-process tool server (initialize, tools/list, tools/call), the
registry's errors and the bridges it forgets, the CLI option, the schema check of mcp/* messages,
and a session's servers: in-process, declared, starting at once, ending with their session (S7)."""

from __future__ import annotations

import importlib.util
import os

import click
import gevent
import pytest

from acp_green.rpc.cancel import CancelToken
from acp_green.cli import parse_provide_mcp
from acp_green.demo import DemoAgent
from acp_green.errors import McpError, McpUnavailable, TurnCancelled, UnknownMcpConnection
from acp_green.mcp import Tool, ToolServer
from acp_green.mcp import session as mcp_session
from acp_green.mcp.bridge import ProvidedServer
from acp_green.mcp.registry import McpRegistry, provided_servers
from acp_green.mcp.session import SessionMcp
from acp_green.mcp.tools import PROTOCOL_VERSIONS, ToolCall, tool_result
from acp_green.tools.rig.schema import default_schema
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


# -- the in-process tool server: initialize, tools/list, tools/call -------------------------------
def _server() -> ToolServer:
    def add(call: ToolCall) -> int:
        return call.arguments["a"] + call.arguments["b"]

    def broken(call: ToolCall) -> None:
        raise KeyError("missing")

    def waits(call: ToolCall) -> str:
        call.sleep(10)
        return "woke"

    return ToolServer("calc", [
        Tool("add", add, "adds", {"type": "object", "required": ["a", "b"]}),
        Tool("broken", broken), Tool("waits", waits), Tool("text", lambda call: "plain"),
    ], version="9", instructions="be nice")


def test_tool_server_initialize_negotiates_the_protocol_version():
    server = _server()
    answer = server.handle("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0]}, CancelToken())
    assert answer == {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {"tools": {"listChanged": False}},
                      "serverInfo": {"name": "calc", "version": "9"}, "instructions": "be nice"}
    assert server.handle("initialize", {"protocolVersion": "1999-01-01"}, CancelToken())["protocolVersion"] == PROTOCOL_VERSIONS[-1]
    assert "instructions" not in ToolServer("bare", []).handle("initialize", None, CancelToken())
    assert server.handle("ping", None, CancelToken()) == {}
    listed = server.handle("tools/list", {}, CancelToken())["tools"]
    assert listed[0] == {"name": "add", "description": "adds", "inputSchema": {"type": "object", "required": ["a", "b"]}}
    assert [t["name"] for t in listed] == ["add", "broken", "waits", "text"]
    with pytest.raises(McpError) as info:
        server.handle("resources/list", {}, CancelToken())
    assert info.value.code == -32601


def test_tool_calls_answer_results_errors_and_cancellation():
    server = _server()
    token = CancelToken()
    assert server.handle("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, token) == {
        "content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}, "isError": False}
    assert server.handle("tools/call", {"name": "text"}, token) == {"content": [{"type": "text", "text": "plain"}], "isError": False}
    failed = server.handle("tools/call", {"name": "broken", "arguments": {}}, token)
    assert failed == {"content": [{"type": "text", "text": "KeyError: 'missing'"}], "isError": True}
    for params in ({"name": "nope"}, {"name": 5}, {"name": "add", "arguments": [1]}):
        with pytest.raises(McpError) as info:
            server.handle("tools/call", params, token)
        assert info.value.code == -32602
    cancel = CancelToken()
    gevent.spawn_later(0.05, cancel.set)
    with pytest.raises(TurnCancelled):
        server.handle("tools/call", {"name": "waits"}, cancel)
    assert tool_result({"content": [], "isError": True}) == {"content": [], "isError": True}


# -- a session's MCP servers: in-process, declared, starting at once ------------------------------
def _session_mcp(servers: list[dict], provided: dict[str, ProvidedServer] | None = None) -> SessionMcp:
    def refuse(*args, **kwargs):
        raise AssertionError("no client call expected")

    return SessionMcp("s1", None, servers, provided or {}, refuse, refuse, lambda connection_id, name: None)


def test_provided_in_process_tools_are_reached_through_a_loopback_session():
    """A provided server with in-process tools is served in this process, no child started."""
    mcp = _session_mcp([], {"calc": ProvidedServer("calc", "calc-id", tools=_server())})
    session = mcp.get("calc", CancelToken())
    assert session.call_tool("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
    assert mcp.get("calc", CancelToken()) is session and mcp.stdio == {}
    mcp.close()


def test_a_closed_session_refuses_every_server():
    mcp = _session_mcp([], {"calc": ProvidedServer("calc", "calc-id", tools=_server())})
    mcp.close()
    with pytest.raises(McpUnavailable, match="the session has ended"):
        mcp.get("calc", CancelToken())


def test_a_declared_stdio_server_without_a_command_is_unavailable_with_why():
    mcp = _session_mcp([{"name": "bad", "command": ""}, {"name": "worse", "command": "x", "args": [1]}])
    mcp.start()
    assert mcp.stdio == {}
    with pytest.raises(McpUnavailable, match="'bad' failed to start: no command"):
        mcp.get("bad", CancelToken())
    with pytest.raises(McpUnavailable, match="args must be a list of strings"):
        mcp.get("worse", CancelToken())
    mcp.close()


def test_a_starting_place_is_given_back_once_however_often_released():
    before = mcp_session._starting.free
    place = mcp_session._StartingPlace("s1")
    assert mcp_session._starting.free == before - 1
    place.release()
    place.release()
    assert mcp_session._starting.free == before


def test_at_least_two_servers_start_at_once_even_on_one_core(monkeypatch):
    """STARTING_AT_ONCE is read at import: load the module afresh as if on a one-core machine."""
    for cores in (1, None):
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        spec = importlib.util.spec_from_file_location("acp_green.mcp._session_probe", mcp_session.__file__)
        probe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe)
        assert probe.STARTING_AT_ONCE == 2


# -- the registry forgets an open bridge only by closing it (S7) ----------------------------------
def test_a_forgotten_open_bridge_is_closed_and_its_id_reported_closed():
    """S7: once the registry forgets an open bridge, the bridge itself is closed, not left open."""
    registry = McpRegistry(provided_servers([_server()], []), call_client=None, notify_client=None)
    job = registry.admit_connect({"serverId": "acp-green:calc"}, 1)
    job.run()
    (bridge,) = registry.bridges.values()
    assert bridge.state == "open"
    registry.forget(bridge)
    assert bridge.state == "closed" and registry.bridges == {}
    with pytest.raises(UnknownMcpConnection) as info:
        registry.admit_message({"connectionId": bridge.connection_id, "method": "ping"}, 2)
    assert info.value.data["state"] == "closed"


# A provided stdio server: answers ping, reports every message as "seen", asks us "sampling/x"
# when told "go", and never answers "hang".
