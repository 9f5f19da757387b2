"""MCP-over-ACP rules on the unit layer (tests/unit_harness.py): bridges registered and forgotten,
relayed requests forgotten, cancellation of in-process tools, the client's own servers
disconnected at session end, and no process of a stdio server's group left behind (S7, S13)."""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import gevent

from acp_green.demo import DemoAgent
from acp_green.mcp.process import StdioProcess
from tests.agents import HoldsAToolCallAgent
from tests.helpers import process_gone, wait_until
from tests.mcp_helpers import INIT_PARAMS, RECORDER
from tests.unit_harness import UnitConnection, unit  # noqa: F401 - `unit` is a fixture

DEMO_SERVER = "acp-green:demo"
REC_SERVER = "acp-green:rec"


def _message(conn: UnitConnection, connection_id: str, method: str, params: Any = None, request_id: Any = None) -> Any:
    inner: dict[str, Any] = {"connectionId": connection_id, "method": method}
    if params is not None:
        inner["params"] = params
    return conn.request("mcp/message", inner, request_id)


def test_S7_mcp_disconnect_unregisters_the_connection_at_once(unit):
    """S7: mcp/disconnect forgets its connection in receive order: an mcp/message handled right
    after it (before the disconnect has run) gets unknown_connection, state "closed", and the
    registry keeps no bridge for it."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    connection_id = conn.call("mcp/connect", {"serverId": DEMO_SERVER})["connectionId"]
    assert conn.result(_message(conn, connection_id, "ping")) == {}
    disconnect = conn.request("mcp/disconnect", {"connectionId": connection_id})
    late = _message(conn, connection_id, "ping")  # no yield in between: the disconnect has not run
    error = conn.error(late)
    assert (error["code"], error["data"]["reason"], error["data"]["state"]) == (-32602, "unknown_connection", "closed")
    assert conn.result(disconnect) == {}
    assert conn.protocol.mcp.bridges == {}


def _rec_connection(unit) -> tuple[UnitConnection, str]:
    conn: UnitConnection = unit(DemoAgent(), provide_mcp=(("rec", (sys.executable, RECORDER)),))
    conn.initialize()
    connection_id = conn.call("mcp/connect", {"serverId": REC_SERVER})["connectionId"]
    conn.result(_message(conn, connection_id, "initialize", INIT_PARAMS))
    return conn, connection_id


def test_S7_relayed_requests_are_forgotten_once_answered(unit):
    """S7: the map from ACP request ids to requests relayed to a stdio server is emptied as each one
    is answered (or cancelled), so a long-lived bridge does not grow."""
    conn, connection_id = _rec_connection(unit)
    bridge = conn.protocol.mcp.bridges[connection_id]
    calls = [_message(conn, connection_id, "tools/call", {"name": "echo", "arguments": {"text": f"t{i}"}}) for i in range(3)]
    slow = _message(conn, connection_id, "tools/call", {"name": "sleep", "arguments": {"seconds": 600}}, request_id="slow")
    for call in calls:
        conn.result(call)
    assert list(bridge.by_request) == [(True, "slow")]
    conn.notify("$/cancel_request", {"requestId": "slow"})
    assert conn.error(slow)["code"] == -32800
    assert bridge.by_request == {}


def test_S7_a_crashed_stdio_bridge_is_unregistered(unit):
    """S7: a stdio server that exits by itself takes its bridge out of the registry (its id is then
    remembered as closed), by the time its pending requests are answered."""
    conn, connection_id = _rec_connection(unit)
    crash = _message(conn, connection_id, "tools/call", {"name": "crash", "arguments": {}})
    assert conn.error(crash)["data"]["reason"] == "mcp_server_exited"
    assert connection_id not in conn.protocol.mcp.bridges
    error = conn.error(_message(conn, connection_id, "ping"))
    assert error["data"]["state"] == "closed"


def test_S7_cancel_request_sets_an_in_process_tool_calls_token(unit):
    """S7: $/cancel_request for an mcp/message to an in-process tool sets that call's token (the tool
    can see it and clean up), besides answering -32800."""
    agent = HoldsAToolCallAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize()
    connection_id = conn.call("mcp/connect", {"serverId": "acp-green:probe"})["connectionId"]
    held = _message(conn, connection_id, "tools/call", {"name": "hold", "arguments": {}}, request_id="held")
    assert agent.started.wait(10)
    conn.notify("$/cancel_request", {"requestId": "held"})
    assert conn.error(held)["code"] == -32800
    wait_until(lambda: agent.token_set_when_it_ended, what="the tool to end")
    assert agent.token_set_when_it_ended == [True]


def test_S7_client_hosted_acp_server_is_disconnected_when_the_session_ends(unit):
    """S7 outbound: an `acp` server the client hosts is connected on first use (agent->client
    mcp/connect) and, when the session ends, the agent sends mcp/disconnect for that connection."""
    conn: UnitConnection = unit(DemoAgent())
    inner_answers = {
        "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "proj", "version": "1"}},
        "tools/call": {"content": [{"type": "text", "text": "hosted answer"}], "isError": False},
    }

    def answer(message: dict[str, Any]) -> None:
        if "id" not in message or "method" not in message:
            return
        method = message["method"]
        if method == "mcp/connect":
            result: Any = {"connectionId": "client-conn-1"}
        elif method == "mcp/message":
            result = inner_answers[message["params"]["method"]]
        elif method == "mcp/disconnect":
            result = {}
        else:
            return
        gevent.spawn(conn.respond, message["id"], result)  # a client answers later, never inside the agent's put

    conn.sink.listeners.append(answer)
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[{"type": "acp", "name": "proj", "serverId": "srv-1"}])
    assert conn.result(conn.prompt(session_id, '/mcp proj echo {"text": "x"}')) == {"stopReason": "end_turn"}
    assert [r["params"] for r in conn.sink.requests("mcp/connect")] == [{"serverId": "srv-1"}]
    assert not conn.sink.requests("mcp/disconnect")
    assert conn.call("session/close", {"sessionId": session_id}) == {}
    [disconnect] = wait_until(lambda: conn.sink.requests("mcp/disconnect"), what="mcp/disconnect", changed=conn.sink.changed)
    assert disconnect["params"] == {"connectionId": "client-conn-1"}


_SPAWNS_A_GRANDCHILD = """
import json, subprocess, sys
child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps({"jsonrpc": "2.0", "method": "grandchild", "params": {"pid": child.pid}}), flush=True)
sys.stdin.read()
"""


def test_S13_no_grandchild_of_a_stdio_server_survives_its_close():
    """S7/S13: closing a stdio MCP server signals its whole process group: a grandchild it started
    (here a `sleep` that does not hold the server's stdout) does not outlive it."""
    seen: list[dict[str, Any]] = []
    process = StdioProcess([sys.executable, "-c", _SPAWNS_A_GRANDCHILD], lambda line: seen.append(json.loads(line)), name="spawner")
    grandchild = None
    try:
        wait_until(lambda: seen, what="the grandchild's pid")
        grandchild = seen[0]["params"]["pid"]
        assert not process_gone(grandchild)
        process.close()
        assert process.exited.is_set()
        wait_until(lambda: process_gone(grandchild), what=f"grandchild {grandchild} to be killed")
    finally:
        if grandchild is not None and not process_gone(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        process.close()
        if grandchild is not None:
            try:
                os.waitpid(grandchild, os.WNOHANG)  # ours only if this process is a subreaper
            except ChildProcessError:
                pass
