"""The junk bound of mcp/peer.McpPeer: the MAX_JUNK-th message that cannot be served stops the
link, not one earlier and not one later."""

from __future__ import annotations

from typing import Any

from acp_green.mcp import peer as peer_module
from acp_green.mcp.peer import McpPeer


class _Counted(McpPeer):
    """The core with a transport that sends nothing and records when it is flooded."""

    def __init__(self) -> None:
        super().__init__("counted")
        self.floods: list[Any] = []

    def _send_request(self, request_id: int, method: str, params: Any, data: bytes) -> None:
        pass

    def _send(self, data: bytes, what: str) -> None:
        pass

    def _flooded(self, error: Any) -> None:
        self.floods.append(error)
        super()._flooded(error)


def test_the_link_stops_exactly_at_the_max_junk_th_unservable_message():
    peer = _Counted()
    for _ in range(peer_module.MAX_JUNK - 1):
        peer.receive(b"not json at all")
    assert peer.floods == [] and not peer.flooded
    peer.receive(b"not json at all")
    assert len(peer.floods) == 1 and peer.flooded
    assert peer.floods[0].data["limit"] == peer_module.MAX_JUNK
    peer.receive(b"not json at all")
    assert len(peer.floods) == 1
