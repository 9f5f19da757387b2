"""Hostile input on a connection that negotiated ACP v2: params of every v2 method, and batches.

Whatever a v2 client sends — junk params of initialize, session/new, prompt, resume (replayFrom),
close, set_config_option, auth/login, tool_call/cancel and the others, or batches that nest,
mix kinds, repeat ids, hold an initialize — each request is answered exactly once, never with
-32603, the connection lives on, and every message the agent wrote passes the v2 schema.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire
from tests.endpoint.test_hostile_params import LIVE, _substitute, ids, junk, texts
from tests.helpers import invariant_problems, wait_until
from tests.unit_harness import UnitConnection

V2_METHODS = [
    "initialize", "session/new", "session/list", "session/delete", "session/resume", "session/close",
    "session/set_config_option", "session/prompt", "auth/login", "auth/logout", "tool_call/cancel", "terminal/cancel",
    "session/fork", "session/archive", "session/unarchive", "session/set_title", "session/status",
]
NOTIFICATIONS = ["session/cancel", "$/cancel_request"]
FIELDS = [
    "sessionId", "cwd", "mcpServers", "additionalDirectories", "prompt", "protocolVersion", "capabilities", "info",
    "methodId", "configId", "type", "value", "cursor", "replayFrom", "toolCallId", "terminalId", "title", "requestId",
]
replay_from = st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["start", "_later", "", "START"])}), junk)
prompts = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "resource_link", "x"]), "text": texts}),
                   max_size=2)
field_value = st.one_of(junk, st.just(LIVE), replay_from, prompts, st.sampled_from([2, 1, 0, 65535, 65536, "2", "mode", "code"]))
params_strategy = st.one_of(st.none(), junk, st.dictionaries(st.sampled_from(FIELDS), field_value, max_size=5))
calls_strategy = st.lists(st.tuples(st.sampled_from(V2_METHODS + NOTIFICATIONS), params_strategy, st.booleans(), ids),
                          min_size=1, max_size=6)
SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def v2_connection() -> tuple[UnitConnection, str]:
    connection = UnitConnection()
    assert connection.call("initialize", {"protocolVersion": 2, "capabilities": {}})["protocolVersion"] == 2
    return connection, connection.call("session/new", {"cwd": "/tmp"})["sessionId"]


def message(method: str, params: Any, as_notification: bool, request_id: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not as_notification:
        out["id"] = request_id
    if params is not None:
        out["params"] = params
    return out


def check_answers(connection: UnitConnection, start: int, sent: list[Any]) -> None:
    """Each request answered once by its id (ids repeated in a batch: once per request), never -32603;
    the connection still answers; what the agent wrote passes the v2 schema and the invariants."""
    wanted = Counter(wire.id_key(i) for i in sent)

    def answered() -> Counter[Any]:
        return Counter(wire.id_key(m["id"]) for m in connection.sink.messages[start:] if "method" not in m and "id" in m)

    wait_until(lambda: all(answered()[k] >= n for k, n in wanted.items()), 10.0, "every request answered",
               connection.sink.changed)
    for response in connection.sink.messages[start:]:
        if "method" not in response:
            assert (response.get("error") or {}).get("code") != -32603, response
    counted = answered()
    assert all(counted[k] == n for k, n in wanted.items()), (wanted, counted)
    marker = connection.request("session/list", {}, "marker: no member has this id")
    assert "sessions" in connection.result(marker)
    connection.close()
    if len(wanted) == len(sent):  # the checks pair an answer with its request by id: only unique ids say which
        assert connection.schema_problems() == []
        assert invariant_problems(connection.records, complete=True) == []


@SETTINGS
@given(calls=calls_strategy)
def test_any_params_of_any_v2_method_get_one_answer_never_internal_and_valid_v2(calls):
    connection, live = v2_connection()
    start = len(connection.sink.messages)
    sent: list[Any] = []
    try:
        for method, params, as_notification, request_id in calls:
            params = _substitute(params, live)
            if method in NOTIFICATIONS or as_notification:
                connection.notify(method, params)
            elif not any(wire.id_key(request_id) == wire.id_key(s) for s in sent):
                sent.append(connection.request(method, params, request_id))
        check_answers(connection, start, sent)
    finally:
        connection.close()


members = st.one_of(
    st.tuples(st.sampled_from(V2_METHODS + NOTIFICATIONS), params_strategy, st.booleans(), ids),
    st.sampled_from([[], [1], {}, 1, "x", None, {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": 7, "result": {}},
                     [{"jsonrpc": "2.0", "id": 8, "method": "session/list"}]]),
)


@SETTINGS
@given(batch=st.lists(members, min_size=1, max_size=6), first_line=st.booleans())
def test_any_v2_batch_gets_one_answer_per_request_never_internal_and_valid_v2(batch, first_line):
    """Batches that nest, mix requests, notifications, responses and junk, repeat ids or hold an
    initialize; sent as the connection's first line (refused: v1 takes no batch) or after v2's initialize."""
    if first_line:
        connection = UnitConnection()
        live = "sess_unknown"
    else:
        connection, live = v2_connection()
    start = len(connection.sink.messages)
    sent: list[Any] = []
    lines: list[Any] = []
    try:
        for member in batch:
            if isinstance(member, tuple):
                method, params, as_notification, request_id = member
                built = message(method, _substitute(params, live), as_notification or method in NOTIFICATIONS, request_id)
                if "id" in built:
                    sent.append(request_id)
                lines.append(built)
            else:
                lines.append(member)
        if first_line:
            connection.batch(*lines)
            [refusal] = connection.sink.messages[start:]
            assert refusal["id"] is None and refusal["error"]["code"] == -32600, refusal
            connection.call("initialize", {"protocolVersion": 2, "capabilities": {}})
            connection.close()
            assert connection.schema_problems() == []
            return
        connection.batch(*lines)
        check_answers(connection, start, sent)
    finally:
        connection.close()
