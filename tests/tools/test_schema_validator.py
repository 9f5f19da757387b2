"""Tests of the ACP schema validator in acp_green.tools.rig.schema."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig.schema import AcpSchema, SchemaViolation, StreamChecker, default_schema, message_kind

SESSION = "sess-1"


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    """Build a JSON-RPC request."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: Any) -> dict[str, Any]:
    """Build a JSON-RPC notification."""
    return {"jsonrpc": "2.0", "method": method, "params": params}


def result(rid: Any, value: Any) -> dict[str, Any]:
    """Build a JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def chunk(text: str) -> dict[str, Any]:
    """A session/update notification carrying one agent_message_chunk."""
    return notification(
        "session/update",
        {"sessionId": SESSION, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}},
    )


INITIALIZE_REQUEST = request(
    0,
    "initialize",
    {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": False},
        "clientInfo": {"name": "test-client", "version": "0.0.1"},
    },
)
INITIALIZE_RESULT = {
    "protocolVersion": 1,
    "agentCapabilities": {
        "loadSession": False,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": False, "sse": False, "acp": True},
    },
    "authMethods": [],
    "agentInfo": {"name": "acp-green-demo", "version": "0.1.0"},
}
NEW_SESSION_RESULT = {
    "sessionId": SESSION,
    "modes": {
        "currentModeId": "ask",
        "availableModes": [
            {"id": "ask", "name": "Ask", "description": "Asks before acting"},
            {"id": "code", "name": "Code"},
        ],
    },
    "configOptions": [
        {
            "type": "select",
            "id": "model",
            "name": "Model",
            "currentValue": "fast",
            "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}],
        }
    ],
}


@pytest.fixture(scope="module")
def schema() -> AcpSchema:
    """The shared schema instance."""
    return default_schema()


def joined(problems: list[str]) -> str:
    """All problems as one string, for substring assertions."""
    return "\n".join(problems)


# --- valid messages pass -------------------------------------------------------------------


def test_default_schema_is_cached() -> None:
    """default_schema() loads the schemas once and returns the same instance."""
    assert default_schema() is default_schema()


def test_initialize_request_and_response_are_valid(schema: AcpSchema) -> None:
    """An initialize request and its response validate against InitializeRequest/InitializeResponse."""
    assert schema.problems(INITIALIZE_REQUEST) == []
    assert schema.problems(result(0, INITIALIZE_RESULT), request_method="initialize") == []


def test_session_new_response_with_modes_and_config_options_is_valid(schema: AcpSchema) -> None:
    """A session/new response carrying modes and configOptions is valid."""
    assert schema.problems(result(1, NEW_SESSION_RESULT), request_method="session/new") == []


def test_agent_message_chunk_update_is_valid(schema: AcpSchema) -> None:
    """A session/update agent_message_chunk notification validates against SessionNotification."""
    assert schema.problems(chunk("hello")) == []


def test_prompt_response_with_stop_reason_is_valid(schema: AcpSchema) -> None:
    """A session/prompt response with each stop reason is valid."""
    for reason in ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"):
        assert schema.problems(result(2, {"stopReason": reason}), request_method="session/prompt") == []


def test_error_response_is_valid(schema: AcpSchema) -> None:
    """An error response with integer code, string message and data is valid."""
    err = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "Invalid params", "data": {"x": 1}}}
    assert schema.problems(err, request_method="session/prompt") == []
    parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert schema.problems(parse_error) == []


def test_cancel_notifications_are_valid(schema: AcpSchema) -> None:
    """session/cancel and $/cancel_request validate as CancelNotification / CancelRequestNotification."""
    assert schema.problems(notification("session/cancel", {"sessionId": SESSION})) == []
    assert schema.problems(notification("$/cancel_request", {"requestId": 5})) == []
    assert schema.type_name("session/cancel", "Notification") == "CancelNotification"
    assert schema.type_name("$/cancel_request", "Notification") == "CancelRequestNotification"


def test_mcp_connect_request_from_agent_is_valid() -> None:
    """An agent's mcp/connect request (older unstable schema, handled by the client) and its response pass."""
    agent = StreamChecker("agent")
    client = StreamChecker("client")
    connect = request(10, "mcp/connect", {"serverId": "550e8400-e29b-41d4-a716-446655440000"})
    assert agent.observe(connect, from_sender=True) == []
    assert client.observe(connect, from_sender=False) == []
    assert client.observe(result(10, {"connectionId": "conn-1"}), from_sender=True) == []


def test_mcp_message_as_request_and_notification_is_valid() -> None:
    """The older mcp/message (with connectionId) passes as a request and as a notification, from
    either side, with any result: it is checked against the older unstable copy."""
    for sender in ("agent", "client"):
        checker = StreamChecker(sender)
        params = {"connectionId": "conn-1", "method": "tools/list", "params": {}}
        assert checker.observe(request(20, "mcp/message", params), from_sender=True) == []
        note = {"connectionId": "conn-1", "method": "notifications/initialized"}
        assert checker.observe(notification("mcp/message", note), from_sender=True) == []
        checker.observe(request(21, "mcp/message", params), from_sender=False)
        assert checker.observe(result(21, {"tools": []}), from_sender=True) == []
    schema = default_schema()
    older = {"connectionId": "conn-1", "method": "tools/list"}
    assert schema.type_name("mcp/message", "Request", older) == "MessageMcpRequest"
    assert schema.type_name("mcp/message", "Notification", older) == "MessageMcpNotification"
    assert schema.type_name("mcp/message", "Response", older) == "MessageMcpResponse"
    assert schema.side("mcp/message", older) == "both"
    assert schema.schemas_for("mcp/message", older) == ("older-unstable",)


NEW_MCP_MESSAGE = {"serverId": "srv-1", "requestId": "r-1", "method": "tools/list", "params": {}}


def test_the_newer_mcp_message_is_checked_against_the_newest_unstable_schema(schema: AcpSchema) -> None:
    """mcp/message with serverId + requestId (SDK 2.4.0's unstable schema): the agent sends it to the
    client, its answer wraps the inner outcome in `result` or `error`, and a bare MCP result fails."""
    assert schema.schemas_for("mcp/message", NEW_MCP_MESSAGE) == ("unstable",)
    assert schema.side("mcp/message", NEW_MCP_MESSAGE) == "client"
    agent = StreamChecker("agent")
    assert agent.observe(request(1, "mcp/message", NEW_MCP_MESSAGE), from_sender=True) == []
    client = StreamChecker("client")
    client.observe(request(1, "mcp/message", NEW_MCP_MESSAGE), from_sender=False)
    assert client.observe(result(1, {"result": {"tools": []}}), from_sender=True) == []
    client.observe(request(2, "mcp/message", NEW_MCP_MESSAGE), from_sender=False)
    bare = joined(client.observe(result(2, {"tools": []}), from_sender=True))
    assert "MessageMcpResponse, unstable schema" in bare, bare
    missing = joined(schema.problems(request(3, "mcp/message", {"serverId": "srv-1", "method": "ping"})))
    assert "MessageMcpRequest, unstable schema" in missing and "'requestId' is a required property" in missing


def test_an_older_mcp_message_answer_is_checked_by_the_shape_of_its_request() -> None:
    """A response to an older-shape mcp/message (connectionId) passes with a bare MCP result, as the
    older copy allows; the same result answering a newer-shape request is refused."""
    client = StreamChecker("client")
    client.observe(request(5, "mcp/message", {"connectionId": "c", "method": "tools/list"}), from_sender=False)
    assert client.observe(result(5, {"tools": []}), from_sender=True) == []
    schema = default_schema()
    assert schema.problems(result(6, {"tools": []}), request_method="mcp/message", request_params={"connectionId": "c", "method": "x"}) == []
    assert schema.problems(result(6, {"tools": []}), request_method="mcp/message", request_params=NEW_MCP_MESSAGE)


def test_extension_methods_pass_and_unknown_methods_are_reported(schema: AcpSchema) -> None:
    """Methods starting with `_` get an envelope check only; other unknown methods are reported."""
    assert schema.problems(request(30, "_acme/ping", {"anything": [1, 2]})) == []
    assert schema.problems(notification("_acme/event", None)) == []
    assert "unknown method 'acme/ping'" in joined(schema.problems(request(31, "acme/ping", {})))


def test_stream_checker_follows_a_whole_turn() -> None:
    """A full client/agent exchange seen from the agent's side raises no problem."""
    agent = StreamChecker("agent")
    assert agent.observe(INITIALIZE_REQUEST, from_sender=False) == []
    assert agent.observe(result(0, INITIALIZE_RESULT), from_sender=True) == []
    agent.observe(request(1, "session/new", {"cwd": "/tmp", "mcpServers": []}), from_sender=False)
    assert agent.observe(result(1, NEW_SESSION_RESULT), from_sender=True) == []
    agent.observe(request("p-1", "session/prompt", {"sessionId": SESSION, "prompt": [{"type": "text", "text": "hi"}]}), from_sender=False)
    assert agent.observe(chunk("he"), from_sender=True) == []
    assert agent.observe(chunk("llo"), from_sender=True) == []
    assert agent.observe(result("p-1", {"stopReason": "end_turn"}), from_sender=True) == []
    assert agent.pending_peer_requests == {}


# --- malformed messages are rejected, naming what is wrong ---------------------------------


def test_update_without_session_update_is_rejected(schema: AcpSchema) -> None:
    """Proves the validator rejects a malformed message (an update lacking `sessionUpdate`)."""
    bad = chunk("hello")
    del bad["params"]["update"]["sessionUpdate"]
    problems = schema.problems(bad)
    assert problems, "a session/update without sessionUpdate must be rejected"
    assert "sessionUpdate" in joined(problems)
    assert "params.update" in joined(problems)


def test_prompt_response_with_unknown_stop_reason_is_rejected(schema: AcpSchema) -> None:
    """A session/prompt result with stopReason "done" is rejected and the problem names stopReason."""
    problems = schema.problems(result(2, {"stopReason": "done"}), request_method="session/prompt")
    assert problems
    assert "result.stopReason" in joined(problems)
    assert '"done"' in joined(problems)
    assert "PromptResponse" in joined(problems)


def test_initialize_response_with_string_protocol_version_is_rejected(schema: AcpSchema) -> None:
    """An initialize result whose protocolVersion is a string is rejected."""
    bad = dict(INITIALIZE_RESULT, protocolVersion="1")
    problems = schema.problems(result(0, bad), request_method="initialize")
    assert problems
    assert "result.protocolVersion" in joined(problems)
    assert "integer" in joined(problems)


def test_id_true_is_rejected(schema: AcpSchema) -> None:
    """A boolean id is not a JSON-RPC id, in a request and in a response."""
    problems = schema.problems(request(True, "session/new", {"cwd": "/", "mcpServers": []}))
    assert "id must be an integer, a string or null" in joined(problems)
    assert "id must be" in joined(schema.problems(result(True, {"stopReason": "end_turn"})))
    checker = StreamChecker("agent")
    checker.observe(request(1, "session/prompt", {"sessionId": SESSION, "prompt": []}), from_sender=False)
    assert "id must be" in joined(checker.observe(result(True, {"stopReason": "end_turn"}), from_sender=True))


def test_response_with_result_and_error_is_rejected(schema: AcpSchema) -> None:
    """A response must carry exactly one of result and error."""
    both = {"jsonrpc": "2.0", "id": 4, "result": {}, "error": {"code": -32603, "message": "x"}}
    assert "both result and error" in joined(schema.problems(both))
    neither = {"jsonrpc": "2.0", "id": 4}
    assert "neither result nor error" in joined(schema.problems(neither))


def test_malformed_error_object_is_rejected(schema: AcpSchema) -> None:
    """An error object needs an integer (non-bool) code and a string message."""
    bad = {"jsonrpc": "2.0", "id": 5, "error": {"code": "-32603", "message": 7}}
    text = joined(schema.problems(bad))
    assert "error.code must be an integer" in text
    assert "error.message must be a string" in text
    assert "error.code" in joined(schema.problems({"jsonrpc": "2.0", "id": 5, "error": {"code": True, "message": "x"}}))
    assert "error must be an object" in joined(schema.problems({"jsonrpc": "2.0", "id": 5, "error": "boom"}))


def test_envelope_problems_are_rejected(schema: AcpSchema) -> None:
    """Wrong jsonrpc version, non-string method and unclassifiable objects are rejected."""
    assert "jsonrpc" in joined(schema.problems({"jsonrpc": "1.0", "method": "session/cancel", "params": {"sessionId": "s"}}))
    assert "method must be a string" in joined(schema.problems({"jsonrpc": "2.0", "id": 1, "method": 5}))
    assert "neither a request" in joined(schema.problems({"jsonrpc": "2.0"}))
    assert "id must be" in joined(schema.problems(request(1.5, "session/cancel")))


def test_request_params_are_checked_against_the_request_type(schema: AcpSchema) -> None:
    """A request's params are validated against the $defs type of its method."""
    problems = schema.problems(request(6, "session/prompt", {"sessionId": SESSION}))
    assert "PromptRequest" in joined(problems) and "'prompt' is a required property" in joined(problems)
    assert "params is missing" in joined(schema.problems(request(6, "session/prompt")))


def test_notification_method_sent_as_request_is_rejected(schema: AcpSchema) -> None:
    """session/cancel is a notification; sent with an id it is rejected (and vice versa for session/prompt)."""
    assert "no request type" in joined(schema.problems(request(7, "session/cancel", {"sessionId": SESSION})))
    assert "no notification type" in joined(schema.problems(notification("session/prompt", {"sessionId": SESSION, "prompt": []})))


def test_unstable_methods_use_the_unstable_schema(schema: AcpSchema) -> None:
    """session/fork is validated against schema.unstable.json alone; mcp/connect (gone from it) against
    the older unstable copy, whose required serverId is enforced."""
    assert schema.schemas_for("session/fork") == ("unstable",)
    fork = joined(schema.problems(request(8, "session/fork", {"cwd": "/"})))
    assert "ForkSessionRequest, unstable schema" in fork and "'sessionId' is a required property" in fork
    problems = schema.problems(request(8, "mcp/connect", {"acpId": "old-name"}))
    assert "ConnectMcpRequest, older-unstable schema" in joined(problems)
    assert "'serverId' is a required property" in joined(problems)
    bad = notification("mcp/message", {"connectionId": "conn-1"})
    assert "MessageMcpNotification" in joined(schema.problems(bad))
    assert "'method' is a required property" in joined(schema.problems(bad))


USAGE = {"totalTokens": 30, "inputTokens": 10, "outputTokens": 20}


def test_stable_methods_pass_the_stable_and_the_unstable_schema(schema: AcpSchema) -> None:
    """Testing layers: a stable method is checked against both schemas; an unstable-only one against its own."""
    assert schema.schemas_for("session/prompt") == ("stable", "unstable")
    assert schema.schemas_for("initialize") == ("stable", "unstable")
    assert schema.schemas_for("mcp/connect") == ("older-unstable",)
    assert schema.schemas_for("mcp/disconnect") == ("older-unstable",)
    assert schema.schemas_for("acme/ping") == ()
    good = result(2, {"stopReason": "end_turn", "usage": USAGE})
    assert schema.problems(good, request_method="session/prompt") == []


def test_unstable_only_fields_of_stable_methods_are_checked(schema: AcpSchema) -> None:
    """Valid under the stable schema, invalid under the unstable one: PromptResponse.usage and
    mcpCapabilities.acp are typed only there, and the problem names the unstable schema."""
    bad_usage = result(2, {"stopReason": "end_turn", "usage": {**USAGE, "totalTokens": "many"}})
    assert schema.validator("stable", "PromptResponse").is_valid(bad_usage["result"])  # stable leaves `usage` open
    problems = schema.problems(bad_usage, request_method="session/prompt")
    assert problems == ["session/prompt result (PromptResponse, unstable schema): at result.usage.totalTokens: 'many' is not of type 'integer'"]
    bad_acp = {**INITIALIZE_RESULT, "agentCapabilities": {**INITIALIZE_RESULT["agentCapabilities"], "mcpCapabilities": {"acp": "yes"}}}
    problems = schema.problems(result(0, bad_acp), request_method="initialize")
    assert problems == ["initialize result (InitializeResponse, unstable schema): at result.agentCapabilities.mcpCapabilities.acp: 'yes' is not of type 'boolean'"]
    checker = StreamChecker("agent")
    checker.observe(request(0, "initialize", INITIALIZE_REQUEST["params"]), from_sender=False)
    assert "InitializeResponse, unstable schema" in joined(checker.observe(result(0, bad_acp), from_sender=True))


def test_unstable_only_variants_of_stable_methods_fail_the_stable_schema(schema: AcpSchema) -> None:
    """The other way round: an update kind only the unstable schema knows is reported against the stable one."""
    update = notification("session/update", {"sessionId": SESSION, "update": {"sessionUpdate": "plan_removed", "planId": "p1"}})
    assert schema.validator("unstable", "SessionNotification").is_valid(update["params"])
    problems = schema.problems(update)
    assert problems and all("(SessionNotification, stable schema)" in p for p in problems), problems
    assert '"plan_removed" is not one of' in joined(problems)


def test_a_problem_both_schemas_report_is_said_once(schema: AcpSchema) -> None:
    """A problem the stable and unstable schema both find is reported once, naming both."""
    problems = schema.problems(result(2, {"stopReason": "done"}), request_method="session/prompt")
    assert len(problems) == 1 and "(PromptResponse, stable and unstable schemas)" in problems[0], problems


TOKEN_FIELDS = ("totalTokens", "inputTokens", "outputTokens")


@settings(deadline=None, max_examples=60)
@given(st.fixed_dictionaries({name: st.one_of(st.integers(min_value=-5, max_value=2**63),
                                              st.text(max_size=3), st.none(), st.floats(allow_nan=False))
                              for name in TOKEN_FIELDS}))
def test_usage_verdict_comes_from_the_unstable_schema_alone(usage: dict[str, Any]) -> None:
    """Property: any `usage` passes the stable schema; the dual check reports it exactly when a token
    count is not a non-negative integer, and says the unstable schema failed."""
    schema = default_schema()
    answer = {"stopReason": "end_turn", "usage": usage}
    assert schema.validator("stable", "PromptResponse").is_valid(answer)
    # JSON Schema's "integer" admits 3.0: a number with no fractional part.
    valid = all(isinstance(v, (int, float)) and float(v).is_integer() and v >= 0 for v in usage.values())
    problems = schema.problems(result(2, answer), request_method="session/prompt")
    assert (problems == []) is valid, problems
    assert all("(PromptResponse, unstable schema)" in p for p in problems), problems


def test_check_raises_schema_violation(schema: AcpSchema) -> None:
    """check() raises SchemaViolation carrying the message and its problems."""
    bad = result(2, {"stopReason": "done"})
    with pytest.raises(SchemaViolation) as info:
        schema.check(bad, request_method="session/prompt")
    assert info.value.message_obj is bad
    assert info.value.problems and "stopReason" in str(info.value)
    schema.check(result(2, {"stopReason": "end_turn"}), request_method="session/prompt")


def test_stream_checker_rejects_response_to_unknown_id() -> None:
    """An agent response to an id the client never sent is reported."""
    agent = StreamChecker("agent")
    problems = agent.observe(result(99, {"stopReason": "end_turn"}), from_sender=True)
    assert "response to unknown id 99" in joined(problems)


def test_stream_checker_keeps_int_and_string_ids_apart() -> None:
    """A request with id 1 is not answered by a response with id "1", and each id is answered once."""
    agent = StreamChecker("agent")
    agent.observe(request(1, "session/prompt", {"sessionId": SESSION, "prompt": []}), from_sender=False)
    assert "response to unknown id \"1\"" in joined(agent.observe(result("1", {"stopReason": "end_turn"}), from_sender=True))
    assert agent.observe(result(1, {"stopReason": "end_turn"}), from_sender=True) == []
    again = agent.observe(result(1, {"stopReason": "end_turn"}), from_sender=True)
    assert "response to unknown id 1" in joined(again) and "already answered" in joined(again)


def test_stream_checker_validates_result_by_the_answered_method() -> None:
    """The result of a response is validated against the Response type of the request it answers."""
    agent = StreamChecker("agent")
    agent.observe(request(3, "session/new", {"cwd": "/", "mcpServers": []}), from_sender=False)
    problems = agent.observe(result(3, {"stopReason": "end_turn"}), from_sender=True)
    assert "NewSessionResponse" in joined(problems) and "'sessionId' is a required property" in joined(problems)


def test_stream_checker_rejects_wrong_direction() -> None:
    """An agent must not send methods the agent handles, nor a client those the client handles."""
    agent = StreamChecker("agent")
    problems = agent.observe(request(1, "session/prompt", {"sessionId": SESSION, "prompt": []}), from_sender=True)
    assert "wrong direction: session/prompt is handled by the agent" in joined(problems)
    client = StreamChecker("client")
    assert "wrong direction" in joined(client.observe(chunk("x"), from_sender=True))
    assert "wrong direction" in joined(client.observe(request(2, "mcp/connect", {"serverId": "s"}), from_sender=True))
    assert agent.observe(notification("$/cancel_request", {"requestId": 1}), from_sender=True) == []
    assert client.observe(notification("$/cancel_request", {"requestId": 1}), from_sender=True) == []


def test_stream_checker_ignores_peer_problems_and_flags_reused_ids() -> None:
    """Peer messages yield no problems; the sender reusing a pending request id is reported."""
    agent = StreamChecker("agent")
    assert agent.observe({"jsonrpc": "1.0", "id": True}, from_sender=False) == []
    perm = {
        "sessionId": SESSION,
        "toolCall": {"toolCallId": "t1"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
    }
    assert agent.observe(request(0, "session/request_permission", perm), from_sender=True) == []
    assert "reused" in joined(agent.observe(request(0, "session/request_permission", perm), from_sender=True))
    agent.observe(result(0, {"outcome": {"outcome": "selected", "optionId": "ok"}}), from_sender=False)
    assert agent.observe(request(0, "session/request_permission", perm), from_sender=True) == []


def test_stream_checker_requires_a_known_sender() -> None:
    """sender must be "agent" or "client"."""
    with pytest.raises(ValueError):
        StreamChecker("server")


def test_message_kind() -> None:
    """message_kind classifies requests, notifications and responses."""
    assert message_kind(request(1, "x")) == "request"
    assert message_kind(notification("x", {})) == "notification"
    assert message_kind(result(1, None)) == "response"
    assert message_kind({"jsonrpc": "2.0"}) is None


def test_bad_content_inside_a_known_update_kind_is_rejected(schema: AcpSchema) -> None:
    """A chunk whose discriminator is right but whose content is wrong is still rejected."""
    bad = chunk("x")
    del bad["params"]["update"]["content"]["text"]
    assert "at params.update.content: 'text' is a required property" in joined(schema.problems(bad))
    wrong_type = chunk("x")
    wrong_type["params"]["update"]["content"]["type"] = "txt"
    assert "params.update.content.type" in joined(schema.problems(wrong_type))


def test_verdicts_match_plain_jsonschema(schema: AcpSchema) -> None:
    """The validator's speed-ups give the same valid/invalid verdicts as a plain Draft 2020-12 validator."""
    import json
    from importlib.resources import files

    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    root = json.loads((files("acp_green") / "schema" / "schema.json").read_text(encoding="utf-8"))
    registry = Registry().with_resource("urn:plain", DRAFT202012.create_resource(root))
    plain = Draft202012Validator({"$ref": "urn:plain#/$defs/SessionNotification"}, registry=registry)
    tool_call = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Read", "content": [{"type": "diff"}]}
    samples = [
        chunk("ok")["params"],
        {"sessionId": SESSION, "update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text"}}},
        {"sessionId": SESSION, "update": {"sessionUpdate": "plan", "entries": []}},
        {"sessionId": SESSION, "update": {"sessionUpdate": "plan", "entries": "no"}},
        {"sessionId": SESSION, "update": tool_call},
        {"sessionId": SESSION, "update": dict(tool_call, content=[{"type": "diff", "path": "/a", "newText": "b"}])},
        {"sessionId": SESSION, "update": {"sessionUpdate": "nope"}},
        {"sessionId": SESSION, "update": {"content": {"type": "text", "text": "x"}}},
    ]
    for params in samples:
        ours = schema.problems(notification("session/update", params))
        assert (ours == []) == plain.is_valid(params), (params, ours)
