"""StdioBridge's routing, with a recording link in place of the MCP server process: only
`notifications/cancelled` naming a relayed request cancels it, every other notification is
passed on; a server's request reaching a bridge that is not open is refused on its link."""

from __future__ import annotations

from typing import Any

from acp_green.mcp.bridge import OPEN, ProvidedServer, StdioBridge
from acp_green.rpc import wire


class RecordingLink:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def notify(self, method: str, params: Any) -> None:
        self.events.append(("notify", method, params))

    def cancel(self, call: Any, reason: str) -> None:
        self.events.append(("cancel", call, reason))

    def respond(self, request_id: Any, result: Any = None, error: Any = None) -> None:
        self.events.append(("respond", request_id, error))


def _bridge(state: str) -> tuple[StdioBridge, RecordingLink]:
    bridge = StdioBridge("c1", ProvidedServer("fs", "acp-green:fs", argv=("unused",)), lambda *a, **k: None,
                         lambda method, params: None, lambda bridge: None)
    link = RecordingLink()
    bridge.link = link  # type: ignore[assignment]
    bridge.state = state
    return bridge, link


def test_only_cancelled_naming_a_relayed_request_cancels_it_other_notifications_pass_on() -> None:
    bridge, link = _bridge(OPEN)
    call = object()
    bridge.by_request[wire.id_key(5)] = call  # type: ignore[assignment]
    bridge.admit_notification("notifications/progress", {"requestId": 5, "progress": 1})
    assert link.events == [("notify", "notifications/progress", {"requestId": 5, "progress": 1})]
    bridge.admit_notification("notifications/cancelled", {"requestId": 5, "reason": "stop"})
    assert link.events[1:] == [("cancel", call, "stop")]


def test_a_server_request_to_a_bridge_not_open_is_refused_on_its_link() -> None:
    bridge, link = _bridge("closed")
    bridge._relay_request(wire.Request("q", "sampling/createMessage", {}))
    assert len(link.events) == 1
    kind, request_id, error = link.events[0]
    assert (kind, request_id) == ("respond", "q") and "not open" in error["message"]
