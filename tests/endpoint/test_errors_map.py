"""The one exception-to-error mapping (errors.error_for) and peers' errors (PeerError) keeping their code."""

from __future__ import annotations

import sys
import textwrap

import gevent
import pytest
from gevent import GreenletExit

from acp_green import errors
from acp_green.rpc.endpoint import outcome_of
from acp_green.errors import (
    AuthRequired,
    ClientError,
    ConnectionBusy,
    InvalidParams,
    InvalidRequest,
    LineTooLong,
    McpConnectFailed,
    McpError,
    McpServerExited,
    MethodNotFound,
    OutputBacklog,
    ParseError,
    PeerError,
    RequestCancelled,
    SessionBusy,
    TooManyMcpServers,
    TurnCancelled,
    UnknownMcpConnection,
    UnknownMcpServer,
    UnknownSession,
    error_for,
)
from acp_green.mcp.bridge import ProvidedServer, StdioBridge
from acp_green.mcp.client import AcpChannel
from tests.helpers import wait_until


@pytest.mark.parametrize("exc, code, reason", [
    (ParseError("Parse error: x"), -32700, None),
    (InvalidRequest("bad"), -32600, None),
    (LineTooLong("long"), -32600, "line_too_long"),
    (MethodNotFound("x/y"), -32601, None),
    (InvalidParams("p"), -32602, None),
    (UnknownSession("s"), -32002, "unknown_session"),
    (SessionBusy("s"), -32000, "session_busy"),
    (ConnectionBusy(4), -32000, "connection_busy"),
    (OutputBacklog(9), -32000, "output_backlog"),
    (AuthRequired(), -32000, "auth_required"),
    (RequestCancelled(), -32800, None),
    (UnknownMcpServer("x"), -32602, "unknown_mcp_server"),
    (UnknownMcpConnection("c"), -32602, "unknown_connection"),
    (TooManyMcpServers("session/new", 9, 8), -32602, "too_many_mcp_servers"),
    (McpConnectFailed("no"), -32603, "mcp_connect_failed"),
    (McpServerExited("gone"), -32603, "mcp_server_exited"),
    (McpError(-32042, "the server's own"), -32042, None),
], ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else None)
def test_each_error_class_answers_with_its_own_code(exc, code, reason):
    error = error_for(exc).to_wire()
    assert error["code"] == code
    assert error.get("data", {}).get("reason") == reason


@pytest.mark.parametrize("exc, code, message", [
    (TurnCancelled(), -32800, "Request cancelled"),
    (GreenletExit(), -32800, "Request cancelled"),
    (gevent.Timeout(1.5), -32603, "Timed out: 1.5 seconds"),
    (SystemExit(3), -32603, "Agent code tried to exit the process"),
    (ValueError("bad\nvalue"), -32603, "ValueError: bad value"),
    (ClientError("fs/read_text_file", {"code": -32002, "message": "Resource not found"}),
     -32603, "fs/read_text_file failed: Resource not found (-32002)"),
])
def test_what_is_not_an_error_of_ours_answers_in_one_line(exc, code, message):
    assert error_for(exc, "a test").to_wire() == {"code": code, "message": message}


def test_the_endpoint_answers_through_the_one_mapping(monkeypatch):
    seen = []
    monkeypatch.setattr("acp_green.rpc.endpoint.error_for", lambda exc, doing: seen.append(exc) or RequestCancelled("mapped"))
    raised = KeyError("k")
    assert outcome_of(raised, "a test").error.message == "mapped" and seen == [raised]
    assert outcome_of(TurnCancelled(), "a test").cancelled and outcome_of(GreenletExit(), "a test").killed


def test_both_peers_errors_are_peer_errors_carrying_code_message_and_data():
    client = ClientError("x", {"code": -32002, "message": "missing", "data": {"uri": "/a"}})
    server = McpError.from_wire({"code": -32050, "message": "nope", "data": "why"})
    for error, code, message, data in ((client, -32002, "missing", {"uri": "/a"}), (server, -32050, "nope", {"value": "why"})):
        assert isinstance(error, PeerError)
        assert (error.code, error.message, error.data) == (code, message, data)
    assert ClientError("x", {"code": "bad", "message": "m"}).code == errors.INTERNAL_ERROR


def test_a_client_error_on_an_mcp_channel_is_the_mcp_error_with_the_clients_code():
    def call_client(method, params, token=None, timeout=None):
        raise ClientError(method, {"code": -32002, "message": "Resource not found", "data": {"details": "no such file"}})

    channel = AcpChannel(call_client, lambda method, params: None, "conn-1")
    with pytest.raises(McpError) as info:
        channel.request("resources/read", {"uri": "/x"})
    assert info.value.to_wire() == {"code": -32002, "message": "Resource not found", "data": {"details": "no such file"}}


# A provided stdio server that asks us "sampling/x" when told "go" and reports what it was answered.
ASKING = textwrap.dedent('''
    import json, sys
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif message.get("method") == "go":
            send({"jsonrpc": "2.0", "id": "q", "method": "sampling/x", "params": {}})
        elif message.get("id") == "q":
            send({"jsonrpc": "2.0", "method": "answered", "params": message})
''')


def test_a_peer_error_relayed_to_an_mcp_server_keeps_the_peers_code_and_data(tmp_path):
    script = tmp_path / "asking.py"
    script.write_text(ASKING)
    answers: list[dict] = []

    def call_client(method, params, token=None):
        raise ClientError(method, {"code": -32002, "message": "Not here", "data": {"details": "the client said why"}})

    def notify_client(method, params):
        if params.get("method") == "answered":
            answers.append(params["params"])

    bridge = StdioBridge("c1", ProvidedServer("asking", "acp-green:asking", argv=(sys.executable, str(script))),
                         call_client, notify_client, lambda bridge: None)
    bridge.open(timeout=30)
    try:
        bridge.admit_notification("go", {})
        wait_until(lambda: answers, timeout=30, what="the server's report of our answer")
        assert answers[0]["error"] == {"code": -32002, "message": "Not here", "data": {"details": "the client said why"}}
    finally:
        bridge.close()
