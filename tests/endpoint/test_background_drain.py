"""Draining the endpoint's background requests (`BackgroundJobs.drain`) closes admission by
itself: whoever calls it, no background request is admitted afterwards (S13)."""

from __future__ import annotations

from typing import Any

from acp_green.rpc import wire
from acp_green.rpc.endpoint import Endpoint, Job, Kind, Route
from tests.endpoint.test_protocol_shape import Recorder


class Runs(Job):
    def __init__(self, ran: list[Any]) -> None:
        self.ran = ran

    def run(self) -> Any:
        self.ran.append(True)
        return "ran"


def test_after_a_drain_a_background_request_is_refused_as_shutting_down_and_never_runs():
    out = Recorder()
    ran: list[Any] = []
    endpoint = Endpoint(out, {"job": Route(Kind.BACKGROUND, lambda params, request_id: Runs(ran))})  # type: ignore[arg-type]
    assert endpoint.drain(0.1) == 0
    endpoint.handle(wire.Request(1, "job", None))
    assert out.answer(1)["error"] == {"code": -32800, "message": "The agent is shutting down"}
    assert ran == [] and endpoint.active == 0
