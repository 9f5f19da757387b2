"""`endpoint.Endpoint` on its own: blank lines and CRLF, each handler failure answered once with its
code, background slots (S9), admission refused over the hard limit or while shutting down, ids in
flight (S4), $/cancel_request, drain and refuse_unread at shutdown (S13, S14), the last-resort
guard, and the agent's own requests to the client (`ClientRequests`).

The endpoint is driven directly with a method table of its own and an in-memory outbound queue:
each line is handled exactly when the test hands it over, and every answer is checked for its id
and error code.
"""

from __future__ import annotations

import json
from typing import Any

import gevent
import pytest
from gevent.event import Event

from acp_green.rpc import wire
from acp_green.rpc.endpoint import Endpoint, Job, Kind, Outcome, Reply, Route
from acp_green.errors import ClientError, InvalidParams, RequestCancelled, TurnCancelled
from acp_green.rpc.transport import OutputLimits
from tests.helpers import wait_until

CANCELLED, INTERNAL, BUSY, INVALID_REQUEST, INVALID_PARAMS, NOT_FOUND = -32800, -32603, -32000, -32600, -32602, -32601


class MemoryOutbound:
    """Stands in for transport.Outbound: records every line, never blocks."""

    def __init__(self) -> None:
        self.limits = OutputLimits()
        self.queued_bytes = 0
        self.over_hard_limit = False
        self.messages: list[dict[str, Any]] = []
        self.arrived = Event()

    def put(self, data: bytes) -> None:
        self.messages.extend(json.loads(line) for line in data.splitlines())
        self.arrived.set()

    def answers(self, request_id: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m and m.get("id") == request_id
                and type(m.get("id")) is type(request_id)]

    def answer(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        found = wait_until(lambda: self.answers(request_id), timeout, f"the answer to {request_id!r}", self.arrived)
        assert len(found) == 1, found
        return found[0]


class FnJob(Job):
    def __init__(self, run: Any, on_cancel: Any = None, on_shutdown: Any = None) -> None:
        self._run = run
        self._on_cancel = on_cancel
        self._on_shutdown = on_shutdown
        self.settled: list[Outcome] = []

    def run(self) -> Any:
        return self._run()

    def settle(self, outcome: Outcome) -> Outcome:
        self.settled.append(outcome)
        return outcome

    def cancel(self) -> bool:
        return self._on_cancel() if self._on_cancel else False

    def shutdown(self) -> None:
        if self._on_shutdown:
            self._on_shutdown()


def _line(request_id: Any, method: str, params: Any = None) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def _raise(exc: BaseException) -> Any:
    raise exc


@pytest.fixture
def endpoint_and_out():
    made: list[Endpoint] = []

    def build(routes: dict[str, Route], **options: Any) -> tuple[Endpoint, MemoryOutbound]:
        out = MemoryOutbound()
        endpoint = Endpoint(out, routes, **options)  # type: ignore[arg-type]
        made.append(endpoint)
        return endpoint, out

    yield build
    for endpoint in made:
        endpoint.drain(2.0)
        assert not [g for g in endpoint.greenlets() if not g.dead]


def _background(job_factory: Any) -> Route:
    return Route(Kind.BACKGROUND, lambda params, request_id: job_factory(params))


def _control(handler: Any) -> Route:
    return Route(Kind.CONTROL, lambda params, request_id: handler(params))


def test_crlf_and_blank_lines_are_handled_like_plain_lines(endpoint_and_out):
    endpoint, out = endpoint_and_out({"ping": _control(lambda p: {"pong": True})})
    endpoint.handle_line(_line(1, "ping") + b"\r\n")
    endpoint.handle_line(b"  \r\n")
    endpoint.handle_line(b"\n")
    assert out.messages == [{"jsonrpc": "2.0", "id": 1, "result": {"pong": True}}]


def test_control_handler_failures_are_each_answered_once_with_their_code(endpoint_and_out):
    then_ran: list[str] = []
    routes = {
        "timeout": _control(lambda p: _raise(gevent.Timeout())),
        "exit": _control(lambda p: _raise(SystemExit(3))),
        "bug": _control(lambda p: _raise(KeyError("k"))),
        "params": _control(lambda p: _raise(InvalidParams("bad"))),
        "reply": _control(lambda p: Reply({"ok": 1}, lambda: then_ran.append("then"))),
        "reply-then-fails": _control(lambda p: Reply({"ok": 2}, lambda: _raise(RuntimeError("after")))),
    }
    endpoint, out = endpoint_and_out(routes)
    for number, method in enumerate(routes, 1):
        endpoint.handle_line(_line(number, method))
    codes = [out.answer(n).get("error", {}).get("code") for n in range(1, 7)]
    assert codes == [INTERNAL, INTERNAL, INTERNAL, INVALID_PARAMS, None, None]
    assert out.answer(1)["error"]["message"].startswith("Timed out")
    assert out.answer(2)["error"]["message"] == "Agent code tried to exit the process"
    assert out.answer(3)["error"]["message"].startswith("KeyError")
    assert out.answer(5)["result"] == {"ok": 1} and then_ran == ["then"]
    # `then` runs after the response is queued
    assert out.answer(6)["result"] == {"ok": 2}


def test_background_outcomes_map_to_one_answer_each(endpoint_and_out):
    routes = {
        "ok": _background(lambda p: FnJob(lambda: {"done": True})),
        "rpc": _background(lambda p: FnJob(lambda: _raise(InvalidParams("nope")))),
        "turn-cancelled": _background(lambda p: FnJob(lambda: _raise(TurnCancelled()))),
        "client-error": _background(lambda p: FnJob(lambda: _raise(ClientError("fs/read", {"code": 1, "message": "m"})))),
        "timeout": _background(lambda p: FnJob(lambda: _raise(gevent.Timeout()))),
        "exit": _background(lambda p: FnJob(lambda: _raise(SystemExit(1)))),
        "bug": _background(lambda p: FnJob(lambda: _raise(ValueError("v")))),
        "admission-rpc": Route(Kind.BACKGROUND, lambda params, rid: _raise(InvalidParams("at admission"))),
        "admission-bug": Route(Kind.BACKGROUND, lambda params, rid: _raise(ZeroDivisionError("z"))),
    }
    endpoint, out = endpoint_and_out(routes)
    for number, method in enumerate(routes, 1):
        endpoint.handle_line(_line(number, method))
    got = [out.answer(n) for n in range(1, len(routes) + 1)]
    assert got[0]["result"] == {"done": True}
    assert [g.get("error", {}).get("code") for g in got[1:]] == [
        INVALID_PARAMS, CANCELLED, INTERNAL, INTERNAL, INTERNAL, INTERNAL, INVALID_PARAMS, INTERNAL]
    assert got[4]["error"]["message"].startswith("Timed out")
    assert got[5]["error"]["message"] == "Agent code tried to exit the process"
    assert got[6]["error"]["message"].startswith("ValueError")
    assert got[8]["error"]["message"].startswith("ZeroDivisionError")
    assert endpoint.active == 0


def test_S9_background_slots_refuse_exactly_at_the_limit_and_free_on_answer(endpoint_and_out):
    release = Event()
    routes = {"wait": _background(lambda p: FnJob(lambda: release.wait() and "released"))}
    endpoint, out = endpoint_and_out(routes, max_background=2)
    for n in (1, 2, 3):
        endpoint.handle_line(_line(n, "wait"))
    assert out.answer(3)["error"]["code"] == BUSY
    assert endpoint.active == 2 and out.answers(1) == [] and out.answers(2) == []
    release.set()
    assert out.answer(1)["result"] == "released" and out.answer(2)["result"] == "released"
    endpoint.handle_line(_line(4, "wait"))
    assert out.answer(4)["result"] == "released"


def test_admission_refuses_while_output_is_over_the_hard_limit_or_shutting_down(endpoint_and_out):
    routes = {"work": _background(lambda p: FnJob(lambda: "ran"))}
    endpoint, out = endpoint_and_out(routes)
    out.over_hard_limit = True
    endpoint.handle_line(_line(1, "work"))
    assert out.answer(1)["error"]["code"] == BUSY
    out.over_hard_limit = False
    endpoint.admitting = False
    endpoint.handle_line(_line(2, "work"))
    assert out.answer(2)["error"]["code"] == CANCELLED


def test_an_id_in_flight_is_refused_and_the_first_request_still_answered(endpoint_and_out):
    release = Event()
    endpoint, out = endpoint_and_out({"wait": _background(lambda p: FnJob(lambda: release.wait() and "first"))})
    endpoint.handle_line(_line("a", "wait"))
    endpoint.handle_line(_line("a", "wait"))
    assert out.answer("a")["error"]["code"] == INVALID_REQUEST
    release.set()
    wait_until(lambda: len(out.answers("a")) >= 2, 10, "the first request's answer", out.arrived)
    assert [m.get("result") for m in out.answers("a")] == [None, "first"]


def test_cancel_request_kills_a_job_that_does_not_cancel_itself_and_answers_cancelled(endpoint_and_out):
    started = Event()
    job = FnJob(lambda: started.set() or gevent.sleep(60))
    endpoint, out = endpoint_and_out({"slow": _background(lambda p: job)})
    endpoint.handle_line(_line(7, "slow"))
    started.wait(10)
    endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}}).encode())
    assert out.answer(7)["error"]["code"] == CANCELLED
    assert endpoint.active == 0 and len(job.settled) == 1 and job.settled[0].killed


def test_cancel_request_leaves_a_cooperative_job_to_answer_by_itself(endpoint_and_out):
    stop = Event()
    job = FnJob(lambda: stop.wait(10) and "stopped early", on_cancel=lambda: stop.set() or True)
    endpoint, out = endpoint_and_out({"coop": _background(lambda p: job)})
    endpoint.handle_line(_line(8, "coop"))
    gevent.sleep(0)
    endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 8}}).encode())
    assert out.answer(8)["result"] == "stopped early"


def test_drain_asks_jobs_to_stop_then_kills_what_outlives_the_grace(endpoint_and_out):
    stop = Event()
    polite = FnJob(lambda: stop.wait(30) and "stopped", on_shutdown=stop.set)
    stubborn = FnJob(lambda: gevent.sleep(60))
    jobs = iter([polite, stubborn])
    endpoint, out = endpoint_and_out({"job": _background(lambda p: next(jobs))})
    endpoint.handle_line(_line(1, "job"))
    endpoint.handle_line(_line(2, "job"))
    gevent.sleep(0)
    assert endpoint.drain(0.2) == 1
    assert out.answer(1)["result"] == "stopped"
    assert out.answer(2)["error"]["code"] == CANCELLED
    assert endpoint.greenlets() == []


def test_refuse_unread_answers_requests_and_drops_the_rest(endpoint_and_out):
    release = Event()
    endpoint, out = endpoint_and_out({"wait": _background(lambda p: FnJob(lambda: release.wait() and "x"))})
    endpoint.handle_line(_line(1, "wait"))
    endpoint.refuse_unread(_line(1, "wait") + b"\n")
    endpoint.refuse_unread(_line(2, "wait") + b"\r\n")
    endpoint.refuse_unread(b'{"jsonrpc": "2.0", "method": "note"}\n')
    endpoint.refuse_unread(b"\n")
    endpoint.refuse_unread(b"{not json\n")
    endpoint.refuse_unread(b'{"jsonrpc": "1.0", "id": 3, "method": "m"}\n')
    assert out.messages[0] == {"jsonrpc": "2.0", "id": 1, "error": {"code": INVALID_REQUEST, "message": "Request id is already in flight"}}
    assert out.messages[1]["id"] == 2 and out.messages[1]["error"]["code"] == CANCELLED
    assert out.messages[2]["id"] is None and out.messages[2]["error"]["code"] == -32700
    assert out.messages[3]["id"] == 3 and out.messages[3]["error"]["code"] == INVALID_REQUEST
    assert len(out.messages) == 4
    release.set()


def test_a_result_json_cannot_carry_is_answered_as_an_internal_error(endpoint_and_out):
    endpoint, out = endpoint_and_out({"nan": _control(lambda p: {"x": float("nan")})})
    endpoint.handle_line(_line(1, "nan"))
    error = out.answer(1)["error"]
    assert error["code"] == INTERNAL and error["message"].startswith("Result not encodable")


def test_unknown_method_and_bad_cancel_params_and_unknown_notifications(endpoint_and_out, caplog):
    endpoint, out = endpoint_and_out({})
    method = "nope/" + "x" * 300
    endpoint.handle_line(_line(1, method))
    error = out.answer(1)["error"]
    assert error == {"code": NOT_FOUND, "message": "Method not found: " + method[:199] + "…"}
    caplog.set_level("WARNING", logger="acp_green.rpc.endpoint")
    for params in ([], {"requestId": 1.5}, {}):
        endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}).encode())
    endpoint.handle_line(b'{"jsonrpc": "2.0", "method": "unknown/note"}')
    assert len(out.messages) == 1, "notifications are never answered"
    # A malformed $/cancel_request is the client's mistake (a warning), never a handler failure.
    warnings = [r.getMessage() for r in caplog.records if r.name == "acp_green.rpc.endpoint"]
    assert warnings == ["bad $/cancel_request notification: $/cancel_request needs a requestId"] * 3


def test_S9_an_endpoint_admits_32_background_requests_by_default(endpoint_and_out):
    """The documented --max-background default, 32, is also the endpoint's own."""
    release = Event()
    endpoint, out = endpoint_and_out({"wait": _background(lambda p: FnJob(lambda: release.wait() and "ok"))})
    for n in range(1, 34):
        endpoint.handle_line(_line(n, "wait"))
    assert out.answer(33)["error"]["code"] == BUSY
    assert endpoint.active == 32 and len(out.messages) == 1
    release.set()


def test_client_requests_resolve_by_id_fail_on_error_and_after_close(endpoint_and_out):
    endpoint, out = endpoint_and_out({})
    client = endpoint.client
    results: dict[str, Any] = {}

    def ask(name: str, method: str) -> None:
        try:
            results[name] = client.call(method, {"n": name})
        except BaseException as exc:  # noqa: BLE001 - the test inspects what was raised
            results[name] = exc

    first = gevent.spawn(ask, "first", "fs/read_text_file")
    second = gevent.spawn(ask, "second", "fs/write_text_file")
    gevent.sleep(0)
    sent = [m for m in out.messages if m.get("method", "").startswith("fs/")]
    assert [m["id"] for m in sent] == [0, 1] and len(client) == 2
    endpoint.handle(wire.Response(99, {"stray": True}))  # unknown id: ignored
    endpoint.handle(wire.Response(1, None, {"code": -32002, "message": "denied"}))
    endpoint.handle(wire.Response(0, {"content": "text"}))
    gevent.joinall([first, second], timeout=10)
    assert results["first"] == {"content": "text"}
    assert isinstance(results["second"], ClientError) and results["second"].code == -32002
    assert len(client) == 0
    client.close(RequestCancelled("closing"))
    with pytest.raises(RequestCancelled):
        client.call("fs/read_text_file", {})


def test_client_request_with_a_set_token_is_refused_and_cancel_releases_the_wait(endpoint_and_out):
    from acp_green.rpc.cancel import CancelToken

    endpoint, out = endpoint_and_out({})
    done = CancelToken()
    done.set()
    with pytest.raises(TurnCancelled):
        endpoint.client.call("fs/read_text_file", {}, token=done)
    assert out.messages == []
    token = CancelToken()
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            endpoint.client.call("session/request_permission", {}, token)
        except TurnCancelled as exc:
            raised.append(exc)

    waiter = gevent.spawn(ask)
    gevent.sleep(0)
    token.set()
    waiter.join(10)
    assert len(raised) == 1
    assert out.messages[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}
    with pytest.raises(gevent.Timeout):
        endpoint.client.call("fs/read_text_file", {}, timeout=0.05)
    assert out.messages[-1]["method"] == "$/cancel_request" and out.messages[-1]["params"] == {"requestId": 1}
    assert len(endpoint.client) == 0


def test_invalid_request_with_a_readable_id_is_answered_with_that_id(endpoint_and_out):
    """-32600 echoes the request's id when it could be read (id null only when it could not)."""
    endpoint, out = endpoint_and_out({})
    endpoint.handle_line(b'{"jsonrpc": "1.0", "id": 5, "method": "m"}')
    endpoint.handle_line(b'{"jsonrpc": "2.0", "id": "s", "method": ""}')
    assert out.answer(5)["error"]["code"] == INVALID_REQUEST
    assert out.answer("s")["error"]["code"] == INVALID_REQUEST
    assert len(out.messages) == 2


def test_a_long_id_in_flight_is_named_in_at_most_60_characters(endpoint_and_out):
    release = Event()
    endpoint, out = endpoint_and_out({"wait": _background(lambda p: FnJob(lambda: release.wait() and "x"))})
    long_id = 7 ** 100  # 85 digits
    endpoint.handle_line(_line(long_id, "wait"))
    endpoint.handle_line(_line(long_id, "wait"))
    refused = out.answer(long_id)["error"]
    assert refused["message"] == f"Request id {str(long_id)[:59]}… is already in flight"
    release.set()


def test_an_error_whose_data_json_cannot_carry_is_still_answered_with_its_code(endpoint_and_out):
    endpoint, out = endpoint_and_out({"odd": _control(lambda p: _raise(InvalidParams("odd data", data={"x": {1, 2}})))})
    endpoint.handle_line(_line(1, "odd"))
    assert out.answer(1)["error"] == {"code": INVALID_PARAMS, "message": "'odd data'"}


def test_the_last_resort_guard_answers_once_with_a_bounded_detail(endpoint_and_out):
    """Whatever escapes routing (here the fallback lookup) is answered -32603 with the request's
    id, its detail cut to 200 characters."""
    endpoint, out = endpoint_and_out({}, fallback=lambda method: _raise(RuntimeError("y" * 500)))
    endpoint.handle_line(_line(3, "anything"))
    message = out.answer(3)["error"]["message"]
    prefix = "Internal error while handling anything: "
    assert message.startswith(prefix) and out.answer(3)["error"]["code"] == INTERNAL
    detail = message[len(prefix):]
    assert detail == ("RuntimeError: " + "y" * 500)[:199] + "…"


class BrokenSettle(FnJob):
    def settle(self, outcome: Outcome) -> Outcome:
        raise RuntimeError("release failed")


def test_a_job_whose_settle_fails_is_still_answered_once_as_internal_error(endpoint_and_out):
    endpoint, out = endpoint_and_out({"job": _background(lambda p: BrokenSettle(lambda: "result lost"))})
    endpoint.handle_line(_line(1, "job"))
    error = out.answer(1)["error"]
    assert error == {"code": INTERNAL, "message": "RuntimeError: release failed"}
    assert endpoint.active == 0


def test_drain_goes_on_past_a_job_whose_shutdown_fails(endpoint_and_out):
    stop = Event()
    broken = FnJob(lambda: gevent.sleep(60), on_shutdown=lambda: _raise(RuntimeError("no")))
    polite = FnJob(lambda: stop.wait(30) and "stopped", on_shutdown=stop.set)
    jobs = iter([broken, polite])
    endpoint, out = endpoint_and_out({"job": _background(lambda p: next(jobs))})
    endpoint.handle_line(_line(1, "job"))
    endpoint.handle_line(_line(2, "job"))
    gevent.sleep(0)
    assert endpoint.drain(0.2) == 1
    assert out.answer(2)["result"] == "stopped"
    assert out.answer(1)["error"]["code"] == CANCELLED


def test_a_failing_notification_handler_is_contained(endpoint_and_out):
    seen: list[Any] = []
    endpoint, out = endpoint_and_out(
        {"ping": _control(lambda p: "pong")},
        notifications={"boom": lambda params: seen.append(params) or _raise(RuntimeError("handler bug"))},
    )
    endpoint.handle(wire.Notification("boom", {"n": 1}))
    endpoint.handle_line(_line(1, "ping"))
    assert seen == [{"n": 1}] and out.answer(1)["result"] == "pong"
    assert len(out.messages) == 1


class SwallowsKills(Job):
    """Agent code with a bare except around its wait: it ignores kills until told to stop."""

    def __init__(self) -> None:
        self.stop = Event()
        self.started = Event()
        self.kills = 0

    def run(self) -> Any:
        self.started.set()
        while not self.stop.is_set():
            try:
                self.stop.wait(30)
            except BaseException:  # noqa: BLE001 - the point of this agent
                self.kills += 1
        return "finally done"


def test_cancel_request_never_waits_for_the_killed_greenlet(endpoint_and_out):
    """$/cancel_request is handled in the receive loop: it answers -32800 and returns at once,
    even when agent code swallows the kill (the loop must not block on it)."""
    job = SwallowsKills()
    endpoint, out = endpoint_and_out({"stubborn": _background(lambda p: job)})
    endpoint.handle_line(_line(1, "stubborn"))
    job.started.wait(10)
    # The receive loop is a greenlet of its own here: handle_line contains whatever is raised in
    # it (a Timeout too), so a blocked call is seen from outside.
    loop = gevent.spawn(endpoint.handle_line, b'{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}')
    loop.join(10)
    blocked = not loop.dead
    job.stop.set()
    loop.join(10)
    assert not blocked, "the receive loop waited for the killed greenlet"
    assert out.answer(1)["error"]["code"] == CANCELLED
    for greenlet in endpoint.greenlets():
        greenlet.join(10)
    assert job.kills >= 1 and len(out.answers(1)) == 1


def test_S14_drain_answers_a_request_whose_greenlet_ignores_its_kill(endpoint_and_out):
    job = SwallowsKills()
    endpoint, out = endpoint_and_out({"stubborn": _background(lambda p: job)})
    endpoint.handle_line(_line(1, "stubborn"))
    job.started.wait(10)
    greenlet = endpoint.greenlets()[0]
    with gevent.Timeout(20, AssertionError("drain blocked on a greenlet that ignores its kill")):
        assert endpoint.drain(0.1) == 1
    assert out.answer(1)["error"]["code"] == CANCELLED and endpoint.active == 0
    job.stop.set()
    greenlet.join(10)
    assert greenlet.dead and len(out.answers(1)) == 1
