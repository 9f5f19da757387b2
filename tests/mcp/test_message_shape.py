"""The two MCP-over-ACP shapes toward a server the client declares (`type: "acp"`), on the unit
layer (tests/unit_harness.py), and the `message` shape's boundary (acp_green/mcp/acp_message.py).

- `connect` (older schema): mcp/connect, mcp/message on a connectionId, mcp/disconnect;
- `message` (the sdk-2.4.0 schema): mcp/message by serverId + requestId, one inner outcome per
  response; chosen for a client that answers mcp/connect -32601, and kept for its connection.

Every mcp/* message the agent sends is checked against the schema of the shape it belongs to
(the shared copies: `mcp_helpers.message_shape_schema`, `connect_shape_schema`)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import gevent
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.demo import DemoAgent
from acp_green.errors import InvalidParams, McpError, UnknownMcpConnection, one_line
from acp_green.mcp.acp_message import (
    BACKEND_FAILED,
    MCP_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    ClientShape,
    inner_outcome,
)
from acp_green.mcp.registry import McpRegistry
from acp_green.rpc import wire
from tests.helpers import wait_until
from tests.mcp_helpers import connect_shape_schema, mcp_problems, message_shape_schema
from acp_green.tools.rig.client import Record
from tests.unit_harness import UnitConnection, unit  # noqa: F401 - `unit` is a fixture

ECHO = {"content": [{"type": "text", "text": "hosted answer"}], "isError": False}
OLD_ANSWERS = {
    "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "proj", "version": "1"}},
    "tools/call": ECHO,
}


class ShapedClient:
    """The client side of the unit connection, speaking one shape; answers later, never inside the agent's put."""

    def __init__(self, conn: UnitConnection, shape: str, outcome: Any = None) -> None:
        self.conn = conn
        self.shape = shape
        self.outcome = outcome if outcome is not None else {"result": ECHO}
        self.hold = False
        self.held: list[dict[str, Any]] = []
        self.cancelled: list[Any] = []
        conn.sink.listeners.append(self.answer)

    def answer(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "$/cancel_request":
            self.cancelled.append(message["params"]["requestId"])
            gevent.spawn(self.error, message["params"]["requestId"], {"code": -32800, "message": "Request cancelled"})
            return
        if "id" not in message or method is None:
            return
        if method == "mcp/connect":
            if self.shape == "message":  # the newest SDK has no such method
                gevent.spawn(self.error, message["id"], {"code": -32601, "message": "Method not found"})
            elif self.shape == "refusing":
                gevent.spawn(self.error, message["id"], {"code": -32602, "message": "unknown serverId"})
            else:
                gevent.spawn(self.conn.respond, message["id"], {"connectionId": "client-conn-1"})
        elif method == "mcp/message":
            if self.shape == "connect":
                gevent.spawn(self.conn.respond, message["id"], OLD_ANSWERS[message["params"]["method"]])
            elif self.hold:
                self.held.append(message)
            elif isinstance(self.outcome, dict) and "code" in self.outcome and "message" in self.outcome:
                gevent.spawn(self.error, message["id"], self.outcome)  # an outer (binding) error
            else:
                gevent.spawn(self.conn.respond, message["id"], self.outcome)
        elif method == "mcp/disconnect":
            gevent.spawn(self.conn.respond, message["id"], {})

    def error(self, request_id: Any, error: dict[str, Any]) -> None:
        self.conn.records.append(Record(time.monotonic(), "out", b"", {"jsonrpc": "2.0", "id": request_id, "error": error}))
        self.conn.endpoint.handle(wire.Response(request_id, None, error))


def tool_update(conn: UnitConnection, session_id: str) -> dict[str, Any]:
    return [u for u in conn.sink.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]


def tool_text(conn: UnitConnection, session_id: str) -> str:
    return str(tool_update(conn, session_id)["content"][0]["content"]["text"])


def run_mcp(conn: UnitConnection, session_id: str, server: str = "proj") -> None:
    assert conn.result(conn.prompt(session_id, f'/mcp {server} echo {{"text": "x"}}')) == {"stopReason": "end_turn"}


def acp_entry(name: str, server_id: str) -> dict[str, Any]:
    return {"type": "acp", "name": name, "serverId": server_id}


def test_a_client_that_answers_mcp_connect_32601_is_reached_in_the_message_shape(unit):
    """The rule: mcp/connect first; -32601 (no such method) means the client speaks the message
    shape, so the tool call goes as mcp/message {serverId, requestId, method, params with the
    MCP 2026-07-28 _meta}, without an inner initialize; the shape is kept for the ACP connection
    (a second session's server is reached without a second probe), and each request has its own
    requestId. Each mcp/message validates against the sdk-2.4.0 schema; the one probe against the older one."""
    conn: UnitConnection = unit(DemoAgent())
    client = ShapedClient(conn, "message")
    conn.initialize()
    first = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    run_mcp(conn, first)
    assert tool_update(conn, first)["status"] == "completed" and tool_text(conn, first) == "hosted answer"
    run_mcp(conn, first)
    second = conn.new_session(mcp_servers=[acp_entry("other", "srv-2")])
    run_mcp(conn, second, "other")
    assert tool_text(conn, second) == "hosted answer"
    [probe] = conn.sink.requests("mcp/connect")
    assert probe["params"] == {"serverId": "srv-1"}
    assert mcp_problems(probe, connect_shape_schema()) == []
    messages = conn.sink.requests("mcp/message")
    assert [(m["params"]["serverId"], m["params"]["method"]) for m in messages] == [
        ("srv-1", "tools/call"), ("srv-1", "tools/call"), ("srv-2", "tools/call")]
    assert len({m["params"]["requestId"] for m in messages}) == 3
    meta = messages[0]["params"]["params"]["_meta"]
    assert meta[META_PROTOCOL_VERSION] == MCP_PROTOCOL_VERSION and meta[META_CLIENT_CAPABILITIES] == {}
    assert messages[0]["params"]["params"]["name"] == "echo"
    for message in messages:
        assert mcp_problems(message, message_shape_schema()) == []
        assert mcp_problems(message, connect_shape_schema()) != []  # the shapes really differ
    assert conn.call("session/close", {"sessionId": first}) == {}
    gevent.sleep(0.05)
    assert not conn.sink.requests("mcp/disconnect") and client.held == []


def test_a_client_that_accepts_mcp_connect_keeps_the_connect_shape(unit):
    """Older clients: mcp/connect is answered, so the session keeps connect/message/disconnect;
    every mcp/* message the agent sends validates against the older schema (and not the newest)."""
    conn: UnitConnection = unit(DemoAgent())
    ShapedClient(conn, "connect")
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    run_mcp(conn, session_id)
    assert tool_text(conn, session_id) == "hosted answer"
    assert conn.call("session/close", {"sessionId": session_id}) == {}
    wait_until(lambda: conn.sink.requests("mcp/disconnect"), what="mcp/disconnect", changed=conn.sink.changed)
    sent = [r.message for r in conn.records if r.direction == "in" and str(r.message.get("method", "")).startswith("mcp/")]
    assert [(m["method"], "id" in m) for m in sent] == [
        ("mcp/connect", True), ("mcp/message", True), ("mcp/message", False), ("mcp/message", True), ("mcp/disconnect", True)]
    for message in sent:
        assert mcp_problems(message, connect_shape_schema()) == [], message
    assert mcp_problems(sent[3], message_shape_schema()) != []


def test_another_refusal_of_mcp_connect_fails_the_call_and_does_not_switch_shapes(unit):
    """Only -32601 means "no such method": any other refusal of mcp/connect fails the tool call as
    before ("the client refused mcp/connect"), and the next call probes again."""
    conn: UnitConnection = unit(DemoAgent())
    ShapedClient(conn, "refusing")
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    run_mcp(conn, session_id)
    assert tool_update(conn, session_id)["status"] == "failed"
    assert "the client refused mcp/connect for 'proj': unknown serverId" in tool_text(conn, session_id)
    run_mcp(conn, session_id)
    assert len(conn.sink.requests("mcp/connect")) == 2 and not conn.sink.requests("mcp/message")


def test_a_client_that_accepted_mcp_connect_is_not_switched_by_a_later_32601(unit):
    """The shape is learnt once: a client that answered mcp/connect speaks the connect shape, so a
    later -32601 to mcp/connect (for another server) fails that call like any refusal, and no
    message-shape mcp/message is sent."""
    conn: UnitConnection = unit(DemoAgent())
    client = ShapedClient(conn, "connect")
    conn.initialize()
    first = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    run_mcp(conn, first)
    assert tool_text(conn, first) == "hosted answer"
    client.shape = "message"  # from now on it answers mcp/connect -32601
    second = conn.new_session(mcp_servers=[acp_entry("other", "srv-2")])
    run_mcp(conn, second, "other")
    assert tool_update(conn, second)["status"] == "failed"
    assert "the client refused mcp/connect for 'other'" in tool_text(conn, second)
    assert all("connectionId" in m["params"] for m in conn.sink.requests("mcp/message"))


def test_a_notification_naming_a_connection_is_read_in_the_connect_shape_even_with_a_server_id() -> None:
    """Only a notification without `connectionId` is of the message shape: one naming a connection
    is relayed on it (here an unknown one: refused as such), whatever else it carries."""
    registry = _registry()
    registry.client_shape.active.add(("srv", "r-1"))
    with pytest.raises(UnknownMcpConnection):
        registry.on_message_notification({"connectionId": "conn-9", "serverId": "srv", "requestId": "r-1",
                                          "method": "notifications/progress", "params": {}})


@pytest.mark.parametrize(("outcome", "expected"), [
    ({"error": {"code": -32602, "message": "Unknown tool: echo"}}, "Unknown tool: echo"),
    ({"result": None, "error": {"code": 1, "message": "ignored"}}, None),  # result wins, even null
    ({}, "without an MCP outcome"),
    ({"error": None}, "without an MCP outcome"),
    ({"error": {"code": "1", "message": "x"}}, "without an MCP outcome"),
    ({"code": -33001, "message": "MCP server registration unavailable"}, "MCP server registration unavailable"),
])
def test_message_shape_outcomes_reach_the_turn(unit, outcome: Any, expected: str | None):
    """The one inner outcome: an inner error fails the tool call with the server's words; a
    response with no valid outcome is a binding failure (-33002); an outer ACP error (-33001: no
    such server registered) fails it with the client's words."""
    conn: UnitConnection = unit(DemoAgent())
    ShapedClient(conn, "message", outcome)
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    run_mcp(conn, session_id)
    update = tool_update(conn, session_id)
    if expected is None:
        assert update["status"] == "completed"
    else:
        assert update["status"] == "failed" and expected in tool_text(conn, session_id)


def test_cancelling_a_turn_cancels_its_message_shape_request_with_cancel_request(unit):
    """S12 in the message shape: a session/cancel during a tool call sends $/cancel_request for
    the outer mcp/message (the shape has no inner notification); the turn ends cancelled."""
    conn: UnitConnection = unit(DemoAgent())
    client = ShapedClient(conn, "message")
    client.hold = True
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    prompt = conn.prompt(session_id, '/mcp proj sleep {"seconds": 600}')
    wait_until(lambda: client.held, what="the held mcp/message", changed=conn.sink.changed)
    conn.notify("session/cancel", {"sessionId": session_id})
    assert conn.result(prompt) == {"stopReason": "cancelled"}
    wait_until(lambda: client.cancelled, what="$/cancel_request", changed=conn.sink.changed)
    assert client.cancelled == [client.held[0]["id"]]
    assert not [m for m in conn.sink.requests("mcp/message") if "id" not in m]


def test_client_notifications_and_requests_in_the_message_shape(unit, caplog):
    """Client->agent in the message shape: an mcp/message notification naming one of our requests
    (progress) or none is taken quietly, never answered (S6); the schema gives the client no
    mcp/message request to the agent, and one with serverId instead of connectionId gets -32602."""
    conn: UnitConnection = unit(DemoAgent())
    client = ShapedClient(conn, "message")
    client.hold = True
    conn.initialize()
    session_id = conn.new_session(mcp_servers=[acp_entry("proj", "srv-1")])
    prompt = conn.prompt(session_id, '/mcp proj echo {"text": "x"}')
    wait_until(lambda: client.held, what="the held mcp/message", changed=conn.sink.changed)
    held = client.held[0]
    progress = {"serverId": "srv-1", "requestId": held["params"]["requestId"], "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 0.5}}
    with caplog.at_level(logging.DEBUG, logger="acp_green.mcp.registry"):
        conn.notify("mcp/message", progress)
        conn.notify("mcp/message", {**progress, "requestId": "nobody"})
    taken, dropped = [r.getMessage() for r in caplog.records if "notifications/progress" in r.getMessage()]
    assert "dropped" not in taken and "no such request in flight: dropped" in dropped  # one of ours is in flight
    conn.respond(held["id"], {"result": ECHO})
    assert conn.result(prompt) == {"stopReason": "end_turn"}
    error = conn.error(conn.request("mcp/message", {"serverId": "acp-green:demo", "requestId": "r1", "method": "tools/list"}))
    assert error["code"] == -32602 and "connectionId" in error["message"]


# -- the boundary, property-tested ---------------------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
CARRIERS = JSON | st.fixed_dictionaries({}, optional={"result": JSON, "error": JSON | st.fixed_dictionaries(
    {"code": JSON | st.integers(), "message": JSON | st.text()}, optional={"data": JSON}), "_meta": JSON})


def _valid_error(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("code"), int) and not isinstance(value.get("code"), bool)
            and isinstance(value.get("message"), str))


@settings(max_examples=300, deadline=None)
@given(CARRIERS)
def test_any_response_carrier_gives_its_result_or_one_mcp_error(carrier: Any) -> None:
    """The message shape's response boundary: whatever the client answers, the turn gets the inner
    result when `result` is there (it wins, null included), the server's own error for a valid
    `error`, and otherwise -33002 naming the missing outcome; never another exception."""
    if isinstance(carrier, dict) and "result" in carrier:
        assert inner_outcome(carrier) == carrier["result"]
        return
    with pytest.raises(McpError) as raised:
        inner_outcome(carrier)
    if isinstance(carrier, dict) and _valid_error(carrier.get("error")):
        assert (raised.value.code, raised.value.message) == (carrier["error"]["code"], one_line(carrier["error"]["message"]))
    else:
        assert raised.value.code == BACKEND_FAILED and "without an MCP outcome" in raised.value.message


def _registry() -> McpRegistry:
    return McpRegistry([], call_client=lambda *a, **k: None, notify_client=lambda *a: None)


#: Strings half the time, so that most examples get past some fields and fail on one.
FIELD = st.text(max_size=10) | JSON
INNER = st.none() | st.dictionaries(st.text(max_size=8), JSON, max_size=3) | JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server_id=FIELD, request_id=FIELD, method=FIELD, inner=INNER)
def test_a_client_notification_with_any_server_or_request_id_is_taken_or_refused_as_params(
        server_id: Any, request_id: Any, method: Any, inner: Any) -> None:
    """The message shape's notification boundary: serverId and requestId must be strings (and the
    inner method a string, its params an object or null), else InvalidParams (-32602, logged, never
    answered: S6); a well-formed one naming no request in flight is dropped without error."""
    registry = _registry()
    registry.client_shape.active.add(("srv", "r-1"))
    params = {"serverId": server_id, "requestId": request_id, "method": method, "params": inner}
    well_formed = (isinstance(server_id, str) and isinstance(request_id, str) and isinstance(method, str)
                   and (inner is None or isinstance(inner, dict)))
    if well_formed:
        registry.on_message_notification(params)
    else:
        with pytest.raises(InvalidParams):
            registry.on_message_notification(params)
    assert registry.client_shape.active == {("srv", "r-1")}


def test_an_outer_error_reaches_agent_code_as_an_mcp_error_with_the_clients_code() -> None:
    """A binding failure the client answers (-33001: no such server registered) is what agent
    code's call_tool raises: an McpError keeping the client's code and words, not a ClientError
    (which would be the agent's own -32603 if it escaped)."""
    from acp_green.errors import ClientError
    from acp_green.mcp.acp_message import ServerIdChannel
    from acp_green.mcp.client import McpClientSession

    def refuse(method: str, params: Any, **_: Any) -> Any:
        raise ClientError(method, {"code": -33001, "message": "MCP server registration unavailable", "data": {"serverId": "srv"}})

    shape = ClientShape()
    session = McpClientSession("proj", ServerIdChannel(refuse, "srv", shape))
    session.initialize()
    with pytest.raises(McpError) as raised:
        session.call_tool("echo", {})
    assert (raised.value.code, raised.value.message) == (-33001, "MCP server registration unavailable")
    assert shape.active == set()  # the request is no longer in flight


def test_the_outcome_schema_agrees_with_inner_outcome_on_examples() -> None:
    """The boundary as the sdk-2.4.0 schema writes it: what MessageMcpResponse accepts (result
    present, or a valid error) is what inner_outcome turns into a result or the server's error."""
    for carrier in ({"result": None}, {"result": {"a": 1}, "_meta": None}, {"error": {"code": -1, "message": "m", "data": None}}):
        assert mcp_problems({"result": carrier}, message_shape_schema(), answers="mcp/message") == [], json.dumps(carrier)
    for carrier in ({}, {"error": None}, {"error": {"code": 1.5, "message": "m"}}, {"_meta": {}}):
        assert mcp_problems({"result": carrier}, message_shape_schema(), answers="mcp/message") != [], json.dumps(carrier)
        with pytest.raises(McpError) as raised:
            inner_outcome(carrier)
        assert raised.value.code == BACKEND_FAILED
