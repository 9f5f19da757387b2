"""TurnTerminals.close: the turn's open terminals are released, and no terminal starts afterwards
(no `terminal/create` reaches the client)."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.rpc.cancel import CancelToken
from acp_green.terminals import TurnTerminals


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.sent: list[tuple[str, Any]] = []

    def call(self, method: str, params: Any, token: Any = None, timeout: Any = None, on_late_result: Any = None) -> Any:
        self.calls.append(method)
        return {"terminalId": f"term-{len(self.calls)}"}

    def send(self, method: str, params: Any) -> None:
        self.sent.append((method, params["terminalId"]))


def test_a_closed_turn_releases_its_terminals_and_starts_no_more() -> None:
    client = RecordingClient()
    terminals = TurnTerminals("sess-1", CancelToken(), client.call, client.send)
    terminals.create("make")
    terminals.close()
    assert client.sent == [("terminal/release", "term-1")]
    with pytest.raises(RuntimeError, match="turn has ended"):
        terminals.create("make", ["again"])
    assert client.calls == ["terminal/create"], "a terminal was started after the turn ended"
