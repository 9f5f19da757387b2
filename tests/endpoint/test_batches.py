"""JSON-RPC 2.0 batches at the endpoint: refused -32600 byte for byte as before while
`accept_batches` is False (ACP v1); once it is True (ACP v2), each member is handled as if it came
alone, in order, and the answers to its requests leave as one array line, in member order, once
the last is known — a background member's included, however it ends (result, $/cancel_request,
the drain at shutdown, a reader killed mid-batch).

The endpoint is driven directly with a method table of its own; `accept_batches` is set by hand,
as the ACP layer sets it when a connection negotiates v2.
"""

from __future__ import annotations

import json
from typing import Any

import gevent
import pytest
from gevent.event import Event
from hypothesis import HealthCheck, given, settings, strategies as st

from acp_green.errors import ClientError
from acp_green.rpc import wire
from acp_green.rpc.endpoint import Endpoint, Kind, Reply, Route
from acp_green.rpc.transport import OutputLimits
from tests.endpoint.test_endpoint import FnJob
from tests.helpers import wait_until

CANCELLED, BUSY, INVALID_REQUEST, INVALID_PARAMS, NOT_FOUND = -32800, -32000, -32600, -32602, -32601
V1_REFUSAL = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Batch requests are not supported"}}\n'


class LineOutbound:
    """Stands in for transport.Outbound: keeps every line as queued, never blocks."""

    def __init__(self) -> None:
        self.limits = OutputLimits()
        self.queued_bytes = 0
        self.over_hard_limit = False
        self.lines: list[bytes] = []
        self.arrived = Event()

    def put(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data  # one line per put
        self.lines.append(data)
        self.arrived.set()

    @property
    def values(self) -> list[Any]:
        return [json.loads(line) for line in self.lines]

    def wait_lines(self, count: int, what: str) -> list[Any]:
        wait_until(lambda: len(self.lines) >= count, 10, what, self.arrived)
        return self.values


def _message(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _note(method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def _batch(*members: Any) -> bytes:
    return json.dumps(list(members)).encode()


def _ids(array: list[dict[str, Any]]) -> list[Any]:
    return [answer["id"] for answer in array]


class Table:
    """A method table that records what ran, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.release = Event()

    def routes(self) -> dict[str, Route]:
        def echo(params: Any, _id: Any) -> Any:
            self.ran.append(f"echo {params}")
            return params

        def after(params: Any, _id: Any) -> Reply:
            self.ran.append("after")
            return Reply("replied", lambda: self.ran.append("after's step"))

        def wait(params: Any, _id: Any) -> FnJob:
            self.ran.append("wait admitted")
            return FnJob(lambda: self.release.wait() and "released")

        def block(params: Any, _id: Any) -> Any:
            self.ran.append("block")
            gevent.sleep(30)

        return {"echo": Route(Kind.CONTROL, echo), "after": Route(Kind.CONTROL, after),
                "wait": Route(Kind.BACKGROUND, wait), "block": Route(Kind.CONTROL, block)}


@pytest.fixture
def batching():
    made: list[Endpoint] = []

    def build(accept: bool = True, **options: Any) -> tuple[Endpoint, LineOutbound, Table]:
        out, table = LineOutbound(), Table()
        endpoint = Endpoint(out, table.routes(), notifications={"note": lambda p: table.ran.append(f"note {p}")},  # type: ignore[arg-type]
                            **options)
        endpoint.accept_batches = accept
        made.append(endpoint)
        return endpoint, out, table

    yield build
    for endpoint in made:
        endpoint.drain(2.0)
        assert not [g for g in endpoint.greenlets() if not g.dead]


# -- v1: refused exactly as before ----------------------------------------------------------------
@pytest.mark.parametrize("line", [b"[]", _batch(_message(1, "echo", [1])), _batch(_note("note"), 1, [2]), b"[[]]"],
                         ids=["empty", "one", "mixed", "nested"])
def test_while_batches_are_not_accepted_a_batch_is_refused_byte_for_byte_as_in_v1(batching, line):
    """ACP v1: a JSON array gets one -32600, id null, the same bytes as ever, and no member runs."""
    endpoint, out, table = batching(accept=False)
    endpoint.handle_line(line)
    endpoint.refuse_unread(line + b"\n")
    assert out.lines == [V1_REFUSAL, V1_REFUSAL] and table.ran == []


# -- v2: handled member by member, answered as one array ----------------------------------------
def test_members_run_in_order_and_their_answers_leave_as_one_array_in_member_order(batching):
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(_message("a", "echo", [1]), _note("note", [2]), _message(3, "echo", {"x": 3}),
                                _message(4, "nope"), _message(5, "after")))
    assert table.ran == ["echo [1]", "note [2]", "echo {'x': 3}", "after", "after's step"]
    assert len(out.lines) == 1
    (array,) = out.values
    assert _ids(array) == ["a", 3, 4, 5]
    assert array[0]["result"] == [1] and array[1]["result"] == {"x": 3} and array[3]["result"] == "replied"
    assert array[2]["error"]["code"] == NOT_FOUND


def test_a_reply_step_runs_only_after_the_array_holding_its_response_is_queued(batching):
    """A post-response step (session/new's first updates) follows its response (S5): in a batch,
    the array that holds it — which waits here for a background member."""
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(_message(1, "after"), _message(2, "wait")))
    gevent.sleep(0.01)
    assert out.lines == [] and "after's step" not in table.ran
    table.release.set()
    (array,) = out.wait_lines(1, "the batch's answer")
    assert _ids(array) == [1, 2] and array[1]["result"] == "released"
    assert table.ran[-1] == "after's step"


def test_a_batch_of_notifications_and_responses_is_not_answered(batching):
    endpoint, out, table = batching()
    waiter = gevent.spawn(endpoint.client.call, "client/do", {})
    wait_until(lambda: out.lines, 10, "the agent's request", out.arrived)
    endpoint.handle_line(_batch(_note("note", [1]), {"jsonrpc": "2.0", "id": 0, "result": {"ok": 1}},
                                {"jsonrpc": "2.0", "id": 999, "result": None}, _note("unknown")))
    assert table.ran == ["note [1]"]
    assert waiter.get(timeout=10) == {"ok": 1}
    assert [json.loads(line)["method"] for line in out.lines] == ["client/do"]  # only the agent's own request


def test_an_empty_batch_gets_one_invalid_request_error_not_an_array(batching):
    endpoint, out, _ = batching()
    endpoint.handle_line(b"[]")
    endpoint.handle_line(b" [ ] ")
    for value in out.values:
        assert value["id"] is None and value["error"]["code"] == INVALID_REQUEST
        assert "empty batch" in value["error"]["message"]
    assert len(out.lines) == 2


def test_a_batch_over_the_member_bound_is_refused_whole_naming_the_bound(batching):
    endpoint, out, table = batching()
    members = [_message(i, "echo", [i]) for i in range(wire.MAX_BATCH_MEMBERS + 1)]
    endpoint.handle_line(_batch(*members))
    (error,) = out.values
    assert error["id"] is None and error["error"]["code"] == INVALID_REQUEST
    assert str(wire.MAX_BATCH_MEMBERS) in error["error"]["message"] and table.ran == []
    endpoint.handle_line(_batch(*members[:-1]))  # at the bound: handled
    assert len(out.values[1]) == wire.MAX_BATCH_MEMBERS


def test_once_its_held_answers_pass_the_output_hard_limit_a_batch_refuses_its_further_requests(batching):
    """Answers held for the array are not in the output queue, whose limits pace line by line: past
    the hard limit a batch's further requests are refused -32000 `batch_too_large` without running."""
    endpoint, out, table = batching()
    out.limits = OutputLimits(hard_limit=1000)
    endpoint.handle_line(_batch(*[_message(n, "echo", ["x" * 400]) for n in range(1, 5)], _note("note", [5]),
                                _message(6, "echo", [6])))
    (array,) = out.values
    assert [a.get("error", {}).get("data", {}).get("reason") for a in array] == [None, None, None, "batch_too_large", "batch_too_large"]
    assert array[3]["error"]["code"] == BUSY and array[3]["error"]["data"]["heldBytes"] > 1000
    assert table.ran == ["echo ['" + "x" * 400 + "']"] * 3 + ["note [5]"]


def test_invalid_members_each_get_their_own_error_in_the_array(batching):
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(1, [_message(9, "echo")], {"jsonrpc": "1.0", "id": "old", "method": "echo"},
                                {"jsonrpc": "2.0", "id": 1.5, "method": "echo"}, _message(2, "echo", [2]),
                                _message(3, "echo", {"n": 1e400}), _note("note", {"n": 1e400})).replace(b"Infinity", b"1e400"))
    (array,) = out.values
    assert [(a["id"], a.get("error", {}).get("code")) for a in array] == [
        (None, INVALID_REQUEST), (None, INVALID_REQUEST), ("old", INVALID_REQUEST), (None, INVALID_REQUEST),
        (2, None), (3, INVALID_PARAMS)]
    assert "do not nest" in array[1]["error"]["message"]
    assert table.ran == ["echo [2]"]  # the notification with an unrepresentable number is dropped, never run


def test_a_malformed_answer_in_a_batch_fails_its_waiter_and_is_not_answered(batching):
    endpoint, out, _ = batching()
    def call() -> Any:
        try:
            return endpoint.client.call("client/do", {})
        except ClientError as exc:
            return exc

    waiter = gevent.spawn(call)
    wait_until(lambda: out.lines, 10, "the agent's request", out.arrived)
    endpoint.handle_line(_batch({"jsonrpc": "2.0", "id": 0, "result": 1, "error": {"code": 1}},
                                _message(1, "echo", [1])))
    assert "malformed answer" in str(waiter.get(timeout=10))
    assert _ids(out.values[-1]) == [1]


def test_the_array_waits_for_a_background_member_and_is_sent_once(batching):
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(_message(1, "wait"), _message(2, "echo", [2])))
    gevent.sleep(0.01)
    assert out.lines == [] and endpoint.active == 1
    endpoint.handle_line(json.dumps(_message(3, "echo", [3])).encode())  # a line after it is answered at once
    assert out.values == [{"jsonrpc": "2.0", "id": 3, "result": [3]}]
    table.release.set()
    values = out.wait_lines(2, "the batch's answer")
    assert _ids(values[1]) == [1, 2] and values[1][0]["result"] == "released"
    gevent.sleep(0.01)
    assert len(out.lines) == 2


@pytest.mark.parametrize("same_batch", [False, True], ids=["later-line", "same-batch"])
def test_cancel_request_of_a_member_answers_it_cancelled_in_the_array(batching, same_batch):
    endpoint, out, _ = batching()
    cancel = _note("$/cancel_request", {"requestId": "w"})
    if same_batch:
        endpoint.handle_line(_batch(_message("w", "wait"), _message(2, "echo", [2]), cancel))
    else:
        endpoint.handle_line(_batch(_message("w", "wait"), _message(2, "echo", [2])))
        assert out.lines == []
        endpoint.handle_line(json.dumps(cancel).encode())
    (array,) = out.wait_lines(1, "the batch's answer")
    assert _ids(array) == ["w", 2] and array[0]["error"]["code"] == CANCELLED
    assert endpoint.active == 0
    gevent.sleep(0.01)
    assert len(out.lines) == 1


def test_S9_each_background_member_takes_a_slot(batching):
    endpoint, out, table = batching(max_background=2)
    endpoint.handle_line(_batch(*[_message(n, "wait") for n in (1, 2, 3)]))
    assert endpoint.active == 2 and out.lines == []
    table.release.set()
    (array,) = out.wait_lines(1, "the batch's answer")
    assert [a.get("error", {}).get("code") for a in array] == [None, None, BUSY]


def test_a_duplicate_id_in_one_batch_is_refused_as_in_flight(batching):
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(_message(7, "wait"), _message(7, "wait")))
    table.release.set()
    (array,) = out.wait_lines(1, "the batch's answer")
    assert _ids(array) == [7, 7] and array[0]["result"] == "released" and array[1]["error"]["code"] == INVALID_REQUEST


def test_S13_drain_at_shutdown_answers_a_waiting_member_in_the_array_exactly_once(batching):
    endpoint, out, table = batching()
    endpoint.handle_line(_batch(_message(1, "echo", [1]), _message(2, "wait")))
    assert endpoint.drain(0.1) == 1
    (array,) = out.values
    assert _ids(array) == [1, 2] and array[1]["error"]["code"] == CANCELLED


def test_S13_a_reader_killed_mid_batch_refuses_the_members_left_and_answers_one_array(batching):
    """Shutdown kills the receive loop inside a control member: it is answered, the members not
    handled yet are refused as unread lines are (-32800; notifications dropped), in the one array."""
    endpoint, out, table = batching()
    reader = gevent.spawn(endpoint.handle_line, _batch(_message(1, "echo", [1]), _message(2, "block"),
                                                      _message(3, "echo", [3]), _note("note"), _message(4, "wait")))
    wait_until(lambda: "block" in table.ran, 10, "the blocking member to run")
    reader.kill(block=True, timeout=5)
    (array,) = out.values
    assert _ids(array) == [1, 2, 3, 4]
    assert array[0]["result"] == [1] and [a["error"]["code"] for a in array[1:]] == [CANCELLED] * 3
    assert table.ran == ["echo [1]", "block"] and endpoint.active == 0


def test_S13_a_batch_read_but_never_dispatched_is_refused_member_by_member(batching):
    endpoint, out, table = batching()
    endpoint.refuse_unread(_batch(_message(1, "echo"), _note("note"), 5, _message(2, "wait")) + b"\n")
    endpoint.refuse_unread(b"[]\n")
    array, empty = out.values
    assert [(a["id"], a["error"]["code"]) for a in array] == [(1, CANCELLED), (None, INVALID_REQUEST), (2, CANCELLED)]
    assert empty["error"]["code"] == INVALID_REQUEST and table.ran == []


def test_the_members_of_a_batch_yield_between_them_like_lines(batching):
    """A long batch does not hold the hub: a greenlet it admitted runs before the batch ends."""
    endpoint, out, table = batching()
    seen_during: list[int] = []
    endpoint.routes["count"] = Route(Kind.CONTROL, lambda p, _id: seen_during.append(len(table.ran)))
    endpoint.routes["quick"] = Route(Kind.BACKGROUND, lambda p, _id: FnJob(lambda: table.ran.append("quick ran")))
    endpoint.handle_line(_batch(_message(1, "quick"), *[_message(n, "count") for n in range(2, 5)]))
    assert "quick ran" in table.ran and seen_during[-1] == 1  # it ran between members
    (array,) = out.wait_lines(1, "the batch's answer")
    assert _ids(array) == [1, 2, 3, 4]


# -- the boundary, generated -----------------------------------------------------------------------
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False))
_bad_id = st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)), st.lists(st.integers(), max_size=2))
_Member = tuple[str, Any]  # (kind, a function of the member's unique id to the member)

#: What each member is, for the oracle; its id comes from its place, so request ids are unique
#: and no member is refused as in flight: every answer is the member's own.
_members: st.SearchStrategy[_Member] = st.one_of(
    st.builds(lambda n: ("echo", lambda i: _message(i, "echo", [n])), st.integers(0, 9)),
    st.just(("unknown", lambda i: _message(i, "no/such"))),
    st.builds(lambda n: ("note", lambda i: _note("note", [n])), st.integers(0, 9)),
    st.just(("response", lambda i: {"jsonrpc": "2.0", "id": i, "result": None})),
    st.builds(lambda v: ("invalid", lambda i: v), _scalar),
    st.builds(lambda v: ("invalid", lambda i: v), st.recursive(st.lists(_scalar, max_size=2), lambda inner: st.lists(inner, max_size=2), max_leaves=4)),
    st.builds(lambda bad: ("invalid", lambda i: {"jsonrpc": "2.0", "id": bad, "method": "echo"}), _bad_id),
    st.just(("invalid-echo", lambda i: {"jsonrpc": "1.0", "id": i, "method": "echo"})),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(accept=st.booleans(), drawn=st.lists(st.tuples(_members, st.booleans()), max_size=12))
def test_any_batch_is_answered_by_the_rules_of_json_rpc_and_never_when_not_accepted(batching, accept, drawn):
    """Arrays of valid and invalid members (nested, empty, notifications, responses, requests):
    accepted, one array line with one answer per request or invalid member, in member order, with
    its id and code, and none for notifications and responses; nothing at all when no member is
    owed one; one error object for an empty array. Not accepted: the v1 refusal, nothing run."""
    members = [(kind, make(str(place) if textual else place)) for place, ((kind, make), textual) in enumerate(drawn)]
    endpoint, out, table = batching(accept=accept)
    endpoint.handle_line(_batch(*[m for _, m in members]))
    if not accept:
        assert out.lines == [V1_REFUSAL] and table.ran == []
        return
    if not members:
        assert len(out.values) == 1 and out.values[0]["error"]["code"] == INVALID_REQUEST
        return
    expected = []
    for kind, member in members:
        if kind == "echo":
            expected.append((member["id"], None))
        elif kind == "unknown":
            expected.append((member["id"], NOT_FOUND))
        elif kind == "invalid":
            expected.append((None, INVALID_REQUEST))
        elif kind == "invalid-echo":
            expected.append((member["id"], INVALID_REQUEST))
    assert table.ran == [f"{k} {m['params']}" for k, m in members if k in ("echo", "note")]
    if not expected:
        assert out.lines == []
        return
    (array,) = out.values
    assert [(a["id"], a.get("error", {}).get("code")) for a in array] == expected


# -- with the ACP protocol attached (tests/unit_harness.py) ----------------------------------------
# These connections negotiate v1 and set the flag by hand, as v2 negotiation sets it; so the rig
# sees an array answer on a v1 connection, which its stdout-hygiene check rightly names.
BY_HAND = pytest.mark.breaks_invariants("valid_json_rpc", reason="accept_batches set by hand on a connection that negotiated v1")


def _request(request_id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _array_answers(conn: Any) -> list[list[dict[str, Any]]]:
    return [r.message for r in conn.records if r.direction == "in" and isinstance(r.message, list)]


@BY_HAND
def test_acp_a_batch_waits_for_its_prompt_and_a_new_sessions_updates_follow_the_array_S5(unit):
    """The answer array waits for a long prompt (answered when a session/cancel ends it); the new
    session's first update (its commands) comes only after the array that gives its id."""
    conn = unit()
    conn.initialize()
    conn.endpoint.accept_batches = True
    running = conn.new_session()
    conn.batch(_request(10, "session/new", {"cwd": "/tmp", "mcpServers": []}),
               _request(11, "session/prompt", conn.prompt_params(running, "/sleep 30")),
               _request(12, "session/set_mode", {"sessionId": running, "modeId": "no-such-mode"}))
    gevent.sleep(0.05)
    assert _array_answers(conn) == [] and conn.sink.responses()[-1]["id"] != 10
    conn.notify("session/cancel", {"sessionId": running})
    assert conn.result(11)["stopReason"] == "cancelled"
    (array,) = _array_answers(conn)
    assert _ids(array) == [10, 11, 12] and "error" in array[2]
    created = array[0]["result"]["sessionId"]
    first_update = next(i for i, m in enumerate(conn.sink.messages)
                        if m.get("method") == "session/update" and m["params"]["sessionId"] == created)
    assert conn.sink.index_of_response(10) < first_update


@BY_HAND
def test_acp_S13_shutdown_answers_a_batch_holding_a_running_prompt_once_in_its_array(unit):
    conn = unit()
    conn.initialize()
    conn.endpoint.accept_batches = True
    session = conn.new_session()
    conn.batch(_request(20, "session/prompt", conn.prompt_params(session, "/sleep 30")),
               _request(21, "session/list", {}))
    gevent.sleep(0.05)
    assert _array_answers(conn) == []
    conn.close()
    (array,) = _array_answers(conn)
    assert _ids(array) == [20, 21] and array[0]["result"]["stopReason"] == "cancelled"
    assert [m.get("id") for m in conn.sink.responses()].count(20) == 1


def test_v2_a_prompt_in_a_batch_reports_running_before_anything_of_its_turn_S5(unit):
    """Under v2 a batch's prompt is acknowledged in the array, which waits for the other members,
    while the turn runs from the batch's next yield: its `running` and its echo go out at admission,
    before any of its updates, and its idle state_update is the last thing of it, never followed
    by a `running` (a client would think the session busy for ever)."""
    conn = unit()
    conn.call("initialize", {"protocolVersion": 2, "capabilities": {}})
    session = conn.call("session/new", {"cwd": "/tmp"})["sessionId"]
    start = len(conn.records)
    conn.batch(_request(70, "session/prompt", conn.prompt_params(session, "/stream 3")), _request(71, "session/list", {}))
    wait_until(lambda: any(u.get("state") == "idle" for u in conn.sink.updates(session)), what="the idle state_update")
    lines = [r.message for r in conn.records[start:] if r.direction == "in"]
    kinds = ["array" if isinstance(m, list) else m["params"]["update"]["sessionUpdate"] for m in lines]
    turn = [k for k in kinds if k not in ("array", "session_info_update")]
    assert turn[:2] == ["state_update", "user_message"] and turn[-1] == "state_update", kinds
    assert [u["state"] for u in conn.sink.updates(session) if u["sessionUpdate"] == "state_update"] == ["running", "idle"]
    (array,) = _array_answers(conn)
    assert _ids(array) == [70, 71] and "messageId" in array[0]["result"]
