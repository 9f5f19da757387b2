"""The endpoint's method table (`MethodTable.add_feature`): one handler per method — a request
method or a notification named by two features is a wiring error, and the first stays."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.rpc import wire
from acp_green.rpc.endpoint import Endpoint, control, notification
from tests.endpoint.test_protocol_shape import Recorder


class Pings:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.notes: list[Any] = []

    @control("ping")
    def ping(self, params: Any, request_id: Any) -> Any:
        return self.answer

    @notification("note")
    def note(self, params: Any) -> None:
        self.notes.append(params)


class OtherNote:
    @notification("note")
    def note(self, params: Any) -> None:
        raise AssertionError("the second handler must not be registered")


def test_a_request_method_named_twice_is_a_wiring_error_and_the_first_handler_stays():
    out = Recorder()
    endpoint = Endpoint(out)  # type: ignore[arg-type]
    endpoint.add_feature(Pings("first"))
    with pytest.raises(ValueError, match="ping has two handlers"):
        endpoint.add_feature(Pings("second"))
    endpoint.handle(wire.Request(1, "ping", None))
    assert out.answer(1)["result"] == "first"


def test_a_notification_named_twice_is_a_wiring_error_and_the_first_handler_stays():
    endpoint = Endpoint(Recorder())  # type: ignore[arg-type]
    first = Pings("first")
    endpoint.add_feature(first)
    with pytest.raises(ValueError, match="note has two handlers"):
        endpoint.add_feature(OtherNote())
    endpoint.handle(wire.Notification("note", {"n": 1}))
    assert first.notes == [{"n": 1}]
