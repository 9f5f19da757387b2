"""The protocol's shared pieces: one exception-to-answer mapping, one params checker, one route table.

protocol shape: the endpoint maps whatever a control handler, an admission, a
background job or a settle raised through `outcome_of` alone, so each path answers the same
exception with the same error; ACP and MCP-over-ACP methods read their params through
`Params` alone, so a client gets the same words for the same mistake; features register
their routes on an endpoint that exists before them.
"""

from __future__ import annotations

import json
from typing import Any

import gevent
import pytest
from gevent import GreenletExit
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import protocol
from acp_green.context import ConnectionContext
from acp_green.demo import DemoAgent
from acp_green.rpc.endpoint import Endpoint, Job, Kind, Outcome, Route, background, control, notification
from acp_green.errors import ClientError, InvalidParams, TurnCancelled
from acp_green.rpc.params import Params
from acp_green.sessions import SessionRegistry
from acp_green.store import MemoryStore
from acp_green.rpc.transport import OutputLimits
from tests.helpers import wait_until

CANCELLED, INTERNAL, INVALID_PARAMS = -32800, -32603, -32602


class Recorder:
    """An outbound queue that keeps every line, decoded."""

    def __init__(self) -> None:
        self.limits = OutputLimits()
        self.queued_bytes = 0
        self.over_hard_limit = False
        self.messages: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.messages.extend(json.loads(line) for line in data.splitlines())

    def answer(self, request_id: int) -> dict[str, Any]:
        found = wait_until(lambda: [m for m in self.messages if m.get("id") == request_id and "method" not in m],
                           10, f"the answer to {request_id}")
        assert len(found) == 1, found
        return found[0]


class Raises(Job):
    """A job whose run, or whose settle, raises `exc`."""

    def __init__(self, exc: BaseException, *, in_settle: bool = False) -> None:
        self.exc = exc
        self.in_settle = in_settle
        self.settled: list[Outcome] = []

    def run(self) -> Any:
        if self.in_settle:
            return "ran"
        raise self.exc

    def settle(self, outcome: Outcome) -> Outcome:
        self.settled.append(outcome)
        if self.in_settle:
            raise self.exc
        return outcome


def _raise(exc: BaseException) -> Any:
    raise exc


def _line(request_id: int, method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}).encode()


# What each exception answers, on every path that may see it: (code, the message's start).
MAPPED = [
    pytest.param(InvalidParams("bad field"), INVALID_PARAMS, "bad field", id="RpcError"),
    pytest.param(TurnCancelled(), CANCELLED, "Request cancelled", id="TurnCancelled"),
    pytest.param(ClientError("fs/read_text_file", {"code": 1, "message": "no"}), INTERNAL,
                 "fs/read_text_file failed: no (1)", id="ClientError"),
    pytest.param(gevent.Timeout(), INTERNAL, "Timed out", id="Timeout"),
    pytest.param(SystemExit(3), INTERNAL, "Agent code tried to exit the process", id="SystemExit"),
    pytest.param(KeyError("k"), INTERNAL, "KeyError: 'k'", id="Exception"),
]


@pytest.mark.parametrize(("exc", "code", "message"), MAPPED)
def test_control_admission_background_and_settle_answer_an_exception_alike(exc, code, message):
    """One outcome mapping: the same exception gets the same answer whether a control
    handler, an admission, a background job or a job's settle raised it."""
    out = Recorder()
    routes = {
        "control": Route(Kind.CONTROL, lambda params, rid: _raise(exc)),
        "admission": Route(Kind.BACKGROUND, lambda params, rid: _raise(exc)),
        "background": Route(Kind.BACKGROUND, lambda params, rid: Raises(exc)),
    }
    paths = list(routes)
    if isinstance(exc, Exception):  # settle is only ever guarded against Exception, as before
        routes["settle"] = Route(Kind.BACKGROUND, lambda params, rid: Raises(exc, in_settle=True))
        paths.append("settle")
    endpoint = Endpoint(out, routes)  # type: ignore[arg-type]
    for number, method in enumerate(paths, 1):
        endpoint.handle_line(_line(number, method))
    for number, method in enumerate(paths, 1):
        error = out.answer(number)["error"]
        assert (error["code"], error["message"][: len(message)]) == (code, message), method
    assert endpoint.active == 0


def test_a_kill_is_answered_once_on_each_path_and_only_the_reader_goes_on_dying():
    """One outcome mapping: GreenletExit in a control handler or an admission (the
    reader killed at shutdown) is answered -32800 and re-raised; a killed background job settles
    as killed and is answered -32800."""
    out = Recorder()
    job = Raises(GreenletExit())
    endpoint = Endpoint(out, {  # type: ignore[arg-type]
        "control": Route(Kind.CONTROL, lambda params, rid: _raise(GreenletExit())),
        "admission": Route(Kind.BACKGROUND, lambda params, rid: _raise(GreenletExit())),
        "background": Route(Kind.BACKGROUND, lambda params, rid: job),
    })
    for number, method in ((1, "control"), (2, "admission")):
        with pytest.raises(GreenletExit):
            endpoint.handle_line(_line(number, method))
        assert out.answer(number)["error"] == {"code": CANCELLED, "message": "The agent is shutting down"}
    endpoint.handle_line(_line(3, "background"))
    assert out.answer(3)["error"] == {"code": CANCELLED, "message": "Request cancelled"}
    assert [o.killed for o in job.settled] == [True]
    endpoint.drain(2)


# -- one params checker --------------------------------------------------------------------------
def _connection() -> tuple[Endpoint, Recorder]:
    out = Recorder()
    endpoint = Endpoint(out)  # type: ignore[arg-type]
    store = MemoryStore()
    protocol.attach(endpoint, DemoAgent(), ConnectionContext(), SessionRegistry(store, 1800.0), store)
    # Initialized, as every ACP client does first: other requests are refused before it.
    endpoint.handle_line(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}')
    return endpoint, out


@pytest.mark.parametrize(("method", "params", "field", "problem"), [
    ("session/delete", {"sessionId": 5}, "sessionId", "field 'sessionId' has the wrong type"),
    ("mcp/disconnect", {"connectionId": 5}, "connectionId", "field 'connectionId' has the wrong type"),
    ("mcp/message", {"connectionId": "c", "method": ["ping"]}, "method", "field 'method' has the wrong type"),
    ("mcp/message", {"connectionId": "c", "method": "ping", "params": 5}, "params", "field 'params' has the wrong type"),
    ("session/set_mode", {}, "sessionId", "missing required field 'sessionId'"),
    ("mcp/message", {"method": "ping"}, "connectionId", "missing required field 'connectionId'"),
    ("mcp/connect", {"serverId": None}, "serverId", "field 'serverId' has the wrong type"),
])
def test_acp_and_mcp_methods_refuse_a_field_in_the_same_words(method, params, field, problem):
    """One params checker: ACP and MCP-over-ACP methods name the method, then the field
    and what is wrong with it, in the same words, with the field in `data.field`."""
    endpoint, out = _connection()
    endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode())
    assert out.answer(1)["error"] == {"code": INVALID_PARAMS, "message": f"{method}: {problem}", "data": {"field": field}}


@pytest.mark.parametrize("method", ["initialize", "mcp/connect"])
def test_params_that_are_not_an_object_are_refused_alike(method):
    """One params checker: a params array gets the same refusal from ACP and MCP methods."""
    endpoint, out = _connection()
    endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": [1]}).encode())
    assert out.answer(1)["error"] == {"code": INVALID_PARAMS, "message": f"{method}: params must be an object"}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(deadline=None, max_examples=300)
@given(fields=st.dictionaries(st.sampled_from(["n", "s", "other"]), JSON_VALUES, max_size=3))
def test_params_checks_accept_exactly_the_right_type_and_name_the_field(fields):
    """One params checker, property: `required` returns a value of the kind asked for
    (never a bool for an int) and otherwise refuses naming the field; `optional` also takes an
    absent or null field as its default."""
    checked = Params(fields, "m")
    for name, kind in (("n", int), ("s", str)):
        value = fields.get(name)
        right = isinstance(value, kind) and not isinstance(value, bool)
        try:
            assert checked.required(name, kind) is value and right
        except InvalidParams as exc:
            assert not right and exc.data == {"field": name}
            assert exc.message == (f"m: missing required field {name!r}" if name not in fields
                                   else f"m: field {name!r} has the wrong type")
        try:
            assert checked.optional(name, kind, "default") == (value if value is not None else "default")
            assert value is None or right
        except InvalidParams as exc:
            assert value is not None and not right and exc.data == {"field": name}


# -- features register their routes -------------------------------------------------------------
def test_attach_registers_every_acp_and_mcp_route_on_the_endpoint():
    """Protocol shape: the endpoint exists first; `attach` leaves it routing every ACP
    method and the MCP-over-ACP routes, control or background as S1/S2 say. Each route says
    which versions it serves: the table a v1 connection is served has none of v2's only."""
    endpoint = Endpoint(Recorder())  # type: ignore[arg-type]
    store = MemoryStore()
    protocol.attach(endpoint, DemoAgent(), ConnectionContext(), SessionRegistry(store, 1800.0), store)
    kinds = {method: route.kind for method, route in endpoint.routes.items()}  # as registered, before initialize
    v2_only = {"auth/login", "auth/logout", "tool_call/cancel", "terminal/cancel"}
    assert {m for m, r in endpoint.routes.items() if r.versions == {2}} == v2_only
    endpoint.handle_line(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}')
    assert set(endpoint.routes) == set(kinds) - v2_only
    assert kinds == {
        **dict.fromkeys(["initialize", "authenticate", "logout", "session/new", "session/resume", "session/list",
                         "session/delete", "session/close", "session/set_mode", "session/set_config_option",
                         # unstable (hidden by --stable-only)
                         "session/fork", "session/archive", "session/unarchive", "session/set_title",
                         "session/status",
                         # ACP v2 only (-32601 under a version 1 connection)
                         "auth/login", "auth/logout", "tool_call/cancel", "terminal/cancel"], Kind.CONTROL),
        # session/load: admitted in order like a control request, then its replay runs in the background
        **dict.fromkeys(["session/prompt", "session/load", "mcp/connect", "mcp/message", "mcp/disconnect"], Kind.BACKGROUND),
    }
    assert set(endpoint.notifications) == {"session/cancel", "mcp/message", "$/cancel_request"}
    assert endpoint.fallback is not None and endpoint.fallback("_acp_green/stats").kind is Kind.BACKGROUND
    assert endpoint.fallback("_unknown") is None and endpoint.fallback("session/new") is None


def test_a_method_registered_twice_is_a_wiring_error():
    """Protocol shape: two features claiming one method fail at wiring, not at run time."""
    class Control:
        @control("x")
        def x(self, params: Any, request_id: Any) -> Any:
            return "first"

    class Background:
        @background("x")
        def also_x(self, params: Any, request_id: Any) -> Any:
            return None

    class Notified:
        @notification("n")
        def n(self, params: Any) -> None:
            return None

    endpoint = Endpoint(Recorder())  # type: ignore[arg-type]
    endpoint.add_feature(Control())
    endpoint.add_feature(Notified())
    with pytest.raises(ValueError, match="x has two handlers"):
        endpoint.add_feature(Background())
    with pytest.raises(ValueError, match="n has two handlers"):
        endpoint.add_feature(Notified())


def test_the_unit_harness_ends_a_connection_through_the_shared_shut_down_S13_S16(unit):
    """S13, S16: closing a unit connection takes the server's own shutdown path (`shut_down`): a
    running prompt is cancelled, answered and recorded before close returns, not on a later hub turn."""
    conn = unit()
    conn.initialize()
    session_id = conn.new_session()
    request_id = conn.prompt(session_id, "/wait")
    assert session_id in conn.protocol.prompts
    assert conn.close() == 0
    answers = [m for m in conn.sink.responses() if m.get("id") == request_id]
    assert answers == [{"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "cancelled"}}]
    assert [u.stop_reason for u in conn.store.usage(session_id)] == ["cancelled"]
