"""A turn's terminal once released (`Terminal.release`, the `with` block's end): `terminal/release`
is sent exactly once, the turn no longer counts it as open, and any later use raises
TerminalReleased without a request reaching the client. TurnTerminals driven directly, with a
client that records what it is sent."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.rpc.cancel import CancelToken
from acp_green.terminals import TerminalReleased, TurnTerminals


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[str] = []  # awaited requests
        self.sent: list[tuple[str, Any]] = []  # requests sent without waiting

    def call(self, method: str, params: Any, token: Any = None, timeout: Any = None, on_late_result: Any = None) -> Any:
        self.calls.append(method)
        if method == "terminal/create":
            return {"terminalId": "term-1"}
        return {"output": "", "truncated": False}

    def send(self, method: str, params: Any) -> None:
        self.sent.append((method, params["terminalId"]))


def test_a_released_terminal_is_released_once_and_refuses_every_later_use():
    client = RecordingClient()
    terminals = TurnTerminals("sess-1", CancelToken(), client.call, client.send)
    with terminals.create("make", ["test"]) as terminal:
        terminal.output()
        assert terminals.open == [terminal]
    assert client.sent == [("terminal/release", "term-1")]
    assert terminal.released and terminals.open == []
    terminal.release()
    terminals.close()
    assert client.sent == [("terminal/release", "term-1")], "released twice"
    for use in (terminal.output, terminal.wait_for_exit, terminal.kill):
        with pytest.raises(TerminalReleased):
            use()
    assert client.calls == ["terminal/create", "terminal/output"]


def test_a_late_terminal_is_killed_and_released_and_a_late_answer_naming_none_sends_nothing():
    """`release_late` (a terminal/create answered after the turn stopped waiting): the terminal it
    names is killed, then released; an answer without a string terminalId made nothing to name."""
    client = RecordingClient()
    terminals = TurnTerminals("sess-1", CancelToken(), client.call, client.send)
    for made_nothing in ({}, None, {"terminalId": 7}, ["term-x"]):
        terminals.release_late(made_nothing)
    assert client.sent == []
    terminals.release_late({"terminalId": "term-late"})
    assert client.sent == [("terminal/kill", "term-late"), ("terminal/release", "term-late")]
