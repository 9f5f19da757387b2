"""Features register their routes: what `Endpoint.add_feature` promises beyond one
handler per method — an override in a subclass replaces its base's handler, and a second
fallback is a wiring error."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.rpc import wire
from acp_green.rpc.endpoint import Endpoint, Kind, Route, control, fallback
from tests.endpoint.test_protocol_shape import Recorder
from tests.endpoint.test_rpc_plumbing import mcp_link  # noqa: F401  (a fixture)


class Base:
    @control("ping")
    def ping(self, params: Any, request_id: Any) -> Any:
        return "base"


class Derived(Base):
    @control("ping")
    def ping(self, params: Any, request_id: Any) -> Any:
        return "derived"


def test_an_overriding_handler_in_a_subclass_is_the_one_registered():
    """add_feature reads the MRO: a subclass that re-marks a method replaces its base's
    handler — one registration, no 'two handlers' error, and the override answers."""
    out = Recorder()
    endpoint = Endpoint(out)  # type: ignore[arg-type]
    endpoint.add_feature(Derived())
    endpoint.handle(wire.Request(1, "ping", None))
    assert out.answer(1)["result"] == "derived"


class Extensions:
    @fallback
    def lookup(self, method: str) -> Route | None:
        return Route(Kind.CONTROL, lambda params, request_id: method) if method.startswith("_") else None


def test_a_second_fallback_is_a_wiring_error_and_the_first_one_stays():
    """One fallback per endpoint: a second, from a feature or given at construction, raises
    ValueError when it is registered, and the first keeps routing."""
    out = Recorder()
    endpoint = Endpoint(out)  # type: ignore[arg-type]
    first = Extensions()
    endpoint.add_feature(first)
    with pytest.raises(ValueError, match="two fallback routes"):
        endpoint.add_feature(Extensions())
    assert endpoint.fallback == first.lookup
    given = Endpoint(Recorder(), fallback=lambda method: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two fallback routes"):
        given.add_feature(Extensions())


def test_shut_down_fails_every_wait_for_the_client_at_once_S13():
    """S13: a wait for the client that no session token covers (an MCP relay's, say) ends at
    shutdown with "The connection is closing", before the grace, and nothing has to be killed."""
    import gevent

    from acp_green.errors import RequestCancelled
    from tests.unit_harness import UnitConnection

    connection = UnitConnection()
    connection.initialize()
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            connection.endpoint.client.call("x/ask", {})
        except RequestCancelled as exc:
            raised.append(exc)

    waiter = gevent.spawn(ask)
    gevent.sleep(0)
    assert connection.sink.requests("x/ask")
    assert connection.close(grace=5.0) == 0
    waiter.join(timeout=10)
    assert [exc.message for exc in raised] == ["The connection is closing"]


def test_a_wait_without_cancel_on_timeout_is_forgotten_quietly():
    """JSON-RPC plumbing once: `OutgoingRequests.wait(cancel_on_timeout=False)` — the
    MCP link's wait without a token — raises the timeout, tells the peer nothing and forgets the
    request; the default tells the peer (one cancel) and forgets it too."""
    import gevent

    from acp_green.rpc.outgoing import OutgoingRequests

    cancels: list[int] = []
    requests = OutgoingRequests(lambda *a: None, lambda request_id, reason: cancels.append(request_id), lambda m, e: RuntimeError())
    quiet = requests.start("m", {})
    try:
        requests.wait(quiet, timeout=0.01, cancel_on_timeout=False)
    except gevent.Timeout:
        pass
    assert cancels == [] and len(requests) == 0
    told = requests.start("m", {})
    try:
        requests.wait(told, timeout=0.01)
    except gevent.Timeout:
        pass
    assert cancels == [told.id] and len(requests) == 0


def test_mcp_link_timeout_without_a_token_tells_the_server_nothing(mcp_link):
    """JSON-RPC plumbing once: JsonRpcLink.wait cancels on timeout only when a token
    was given; without one the call is forgotten and the server gets no `notifications/cancelled`
    (the echo after it proves every earlier message has been seen)."""
    import gevent

    from acp_green.rpc.cancel import CancelToken

    quiet = mcp_link.start_request("hang", {})
    try:
        mcp_link.wait(quiet, timeout=0.05)
    except gevent.Timeout:
        pass
    assert mcp_link.request("echo", {"n": 1}, timeout=30) == {"n": 1}
    cancels = [n.params for n in mcp_link.notes if n.params.get("method") == "notifications/cancelled"]
    assert cancels == []
    told = mcp_link.start_request("hang", {})
    try:
        mcp_link.wait(told, CancelToken(), timeout=0.05)
    except gevent.Timeout:
        pass
    assert mcp_link.request("echo", {"n": 2}, timeout=30) == {"n": 2}
    cancels = [n.params["params"] for n in mcp_link.notes if n.params.get("method") == "notifications/cancelled"]
    assert cancels == [{"requestId": told.id, "reason": "timed out"}]
