"""The junk bound of mcp/peer.McpPeer: the MAX_JUNK-th message that cannot be served stops the
link, not one earlier and not one later."""

from __future__ import annotations

from typing import Any

from acp_green.mcp import peer as peer_module
from acp_green.mcp.peer import McpPeer


class _Counted(McpPeer):
    """The core with a transport that sends nothing and records when it is flooded."""

    def __init__(self) -> None:
        self.floods: list[Any] = []
        super().__init__("counted", lambda request_id, method, params, data: None, lambda data, what: None,
                         on_flooded=self.floods.append)


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
