"""ClientRequests.resolve: a response nobody waits for is logged as ignored; an awaited one is not."""

from __future__ import annotations

import json
import logging
from typing import Any

import gevent
import pytest

from acp_green.rpc import wire
from acp_green.rpc.client_requests import ClientRequests


class _Out:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.messages.extend(json.loads(line) for line in data.splitlines())


def _ignored(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "ignoring a response" in r.getMessage()]


def test_only_a_response_nobody_waits_for_is_logged_as_ignored(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="acp_green.rpc.client_requests")
    client = ClientRequests(_Out())  # type: ignore[arg-type]
    waiter = gevent.spawn(client.call, "fs/read_text_file", {"path": "/x"})
    gevent.sleep(0)
    client.resolve(wire.Response(0, {"content": "hi"}))
    assert waiter.get(timeout=10) == {"content": "hi"}
    assert _ignored(caplog) == []
    client.resolve(wire.Response(7, {"content": "stray"}))
    assert _ignored(caplog) == ["ignoring a response to id 7, which the agent is not waiting for"]
