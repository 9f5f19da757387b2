"""One params checker, one outcome mapping: hostile params and ids at every method.

Whatever a client puts in the params of any ACP or MCP-over-ACP method — wrong types, huge or
lone-surrogate strings, nested junk — each request is answered exactly once, and never with
-32603: a refusal of the client's input is the client's error (-32602 and its kin), an internal
error would mean a handler tripped on it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire
from tests.helpers import wait_until
from tests.unit_harness import UnitConnection

METHODS = [
    "initialize", "authenticate", "session/new", "session/load", "session/resume", "session/list", "session/delete",
    "session/close", "session/set_mode", "session/set_config_option", "session/prompt",
    "mcp/connect", "mcp/message", "mcp/disconnect",
]
NOTIFICATIONS = ["session/cancel", "$/cancel_request", "mcp/message"]
FIELDS = [
    "sessionId", "cwd", "mcpServers", "additionalDirectories", "prompt", "protocolVersion", "clientCapabilities",
    "clientInfo", "methodId", "modeId", "configId", "value", "cursor", "connectionId", "serverId", "acpId", "method",
    "params", "requestId",
]
LIVE = object()  # stands for the id of a live session, so checks past sessionId are reached

# Strings with lone surrogates (what a \udXXX escape decodes to), and long ones.
texts = st.one_of(
    st.text(st.characters(blacklist_categories=()), max_size=12),
    st.sampled_from(["/", "/tmp", "relative", "\ud800", "/tmp/\udce9", "x" * 100_000, "", "ask", "code", "model",
                     "echo-fast", "/stream 2", "_acp_green/stats"]),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([10**30, -(10**30), 2**63, -0, 1.0, 0.5, -1e308]),
    st.floats(allow_nan=False, allow_infinity=False), texts,
)
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                    max_leaves=8)
field_value = st.one_of(junk, st.just(LIVE), st.lists(st.fixed_dictionaries({"type": texts, "text": junk}), max_size=2))
params_strategy = st.one_of(
    st.none(), junk, st.dictionaries(st.sampled_from(FIELDS), field_value, max_size=5),
)
ids = st.one_of(st.integers(), st.text(st.characters(blacklist_categories=()), max_size=8), st.sampled_from([0, 10**40, -(2**63)]))


def _substitute(value: Any, live: str) -> Any:
    if value is LIVE:
        return live
    if isinstance(value, dict):
        return {k: _substitute(v, live) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, live) for v in value]
    return value


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(calls=st.lists(st.tuples(st.sampled_from(METHODS + NOTIFICATIONS), params_strategy, st.booleans(), ids),
                      min_size=1, max_size=6))
def test_any_params_of_any_method_get_one_answer_and_never_an_internal_error(calls):
    connection = UnitConnection()
    try:
        connection.initialize()
        live = connection.new_session()
        start = len(connection.sink.messages)
        sent: list[Any] = []
        for method, params, as_notification, request_id in calls:
            params = _substitute(params, live)
            if method in NOTIFICATIONS and as_notification:
                connection.notify(method, params)
            elif method not in NOTIFICATIONS or method == "mcp/message":
                if any(wire.id_key(request_id) == wire.id_key(s) for s in sent):
                    continue  # a duplicate id in flight is refused elsewhere (S4)
                sent.append(connection.request(method, params, request_id))
        for request_id in sent:
            response = wait_until(
                lambda: next((m for m in connection.sink.messages[start:]
                              if "method" not in m and wire.id_key(m["id"]) == wire.id_key(request_id)), None),
                10.0, f"the response to {request_id!r}", connection.sink.changed)
            error = response.get("error")
            assert error is None or error["code"] != -32603, (request_id, response)
        answered = [m for m in connection.sink.messages[start:] if "method" not in m]
        for request_id in sent:
            matching = [m for m in answered if wire.id_key(m["id"]) == wire.id_key(request_id)]
            assert len(matching) == 1, (request_id, matching)
    finally:
        connection.close()


# -- responses to the agent's own requests ---------------------------------------------------------
reply_ids = st.sampled_from(["0.0", "true", "false", '"0"', "-0", "null", str(10**40), "[0]", '{"id":0}', "1", "0"])
reply_bodies = st.one_of(
    junk.map(lambda v: {"result": v}),
    st.fixed_dictionaries({"error": st.dictionaries(st.sampled_from(["code", "message", "data"]), junk, max_size=3)}),
    st.just({"result": {"content": "the file"}}),
)


@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(replies=st.lists(st.tuples(reply_ids, reply_bodies), min_size=1, max_size=5))
def test_replies_with_foreign_duplicate_or_junk_ids_and_bodies_leave_one_answer_per_prompt_S4(replies):
    """S4: the agent's request to the client (id 0) is settled by the first reply whose id is
    exactly 0 — not 0.0, true, "0", [0] — whatever its body; every other reply is dropped (a
    reply with an invalid id is answered once with id null, never by the prompt's id), and the
    prompt is answered exactly once, end_turn."""
    connection = UnitConnection()
    try:
        connection.initialize(capabilities={"fs": {"readTextFile": True}})
        session_id = connection.new_session()
        prompt_id = connection.prompt(session_id, "/read /etc/hostname", request_id="p")
        asked = wait_until(lambda: connection.sink.requests("fs/read_text_file"), 10.0, "the read request", connection.sink.changed)
        assert asked[0]["id"] == 0
        for reply_id, body in replies:
            line = wire.encode({"jsonrpc": "2.0", **body}).replace(b'"jsonrpc":"2.0"', b'"jsonrpc":"2.0","id":' + reply_id.encode(), 1)
            connection.endpoint.handle_line(line)
        if not any(r in ("0", "-0") for r, _ in replies):
            assert not [m for m in connection.sink.responses() if m.get("id") == "p"]
            connection.endpoint.handle_line(b'{"jsonrpc":"2.0","id":0,"result":{"content":"late"}}')
        response = connection.sink.response(prompt_id)
        assert response["result"] == {"stopReason": "end_turn"}, response
        assert len(connection.sink.requests("fs/read_text_file")) == 1
    finally:
        connection.close()


inner_methods = st.sampled_from(["tools/call", "tools/list", "initialize", "ping", "resources/list", "notifications/initialized",
                                 "notifications/cancelled", "", "\ud800", "x" * 10_000])
inner_params = st.one_of(junk, st.fixed_dictionaries({"name": texts, "arguments": junk}),
                         st.fixed_dictionaries({"name": st.sampled_from(["echo", "add", "sleep"]), "arguments": junk}))


@settings(deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=st.lists(st.tuples(inner_methods, inner_params, st.booleans()), min_size=1, max_size=5))
def test_mcp_message_with_junk_inner_method_and_params_is_answered_once_never_internal_S7(messages):
    """S7: whatever an `mcp/message` carries to a provided in-process server, each request is
    answered once and a refusal is never -32603; notifications are never answered."""
    connection = UnitConnection()
    try:
        connection.initialize()
        server_id = connection.protocol.mcp.provided[0].server_id
        connection_id = connection.result(connection.request("mcp/connect", {"serverId": server_id}))["connectionId"]
        sent = []
        for index, (method, params, as_notification) in enumerate(messages):
            outer = {"connectionId": connection_id, "method": method, "params": params}
            if as_notification:
                connection.notify("mcp/message", outer)
            else:
                sent.append(connection.request("mcp/message", outer, request_id=f"m{index}"))
        for request_id in sent:
            response = connection.sink.response(request_id)
            assert "error" not in response or response["error"]["code"] != -32603, response
    finally:
        connection.close()


def test_mcp_routes_require_a_params_object_while_acp_methods_read_null_as_empty():
    """One params checker: `Params(..., required=True)` — the MCP-over-ACP routes
    refuse absent params as such (no field to name), where an ACP method such as session/list
    reads `null` params as an empty object."""
    connection = UnitConnection()
    try:
        connection.initialize()
        for method in ("mcp/connect", "mcp/message", "mcp/disconnect"):
            error = connection.error(connection.request(method, None))
            assert error["code"] == -32602 and error["message"] == f"{method}: params must be an object", error
            assert "data" not in error or "field" not in (error["data"] or {}), error
        assert connection.call("session/list", None) == {"sessions": []}
    finally:
        connection.close()
