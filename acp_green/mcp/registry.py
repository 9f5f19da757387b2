"""The bridge registry of one ACP connection: provided servers, open connections, both directions.

Inbound (the peer connects to servers we provide): `mcp/connect`, `mcp/message`,
`mcp/disconnect` are background routes here. Outbound (agent code connects to servers the
client declared with `type: "acp"`): connections the client issued are recorded so the
`mcp/message` requests it sends back on them are dispatched like any background request; in the
newer shape (`acp_message`) there is no connection, and the client's `mcp/message` notifications
name one of our requests by `serverId` and `requestId`.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import gevent

from ..rpc import wire
from ..rpc.endpoint import Job, Outcome, background, notification
from ..errors import MethodNotFound, UnknownMcpConnection, UnknownMcpServer
from ..rpc.params import Params
from .acp_message import ClientShape
from .bridge import CLOSED, CONNECTING, Bridge, InProcessBridge, ProvidedServer, StdioBridge
from .tools import ToolServer

log = logging.getLogger(__name__)

#: How long `mcp/connect` waits for a launched server to answer its first ping.
CONNECT_TIMEOUT = 30.0
_CLOSED_MEMORY = 1024


def provided_servers(tool_servers: Sequence[ToolServer], commands: Sequence[tuple[str, Sequence[str]]]) -> list[ProvidedServer]:
    """Give every provided server a serverId; names must be unique (they are what users type)."""
    servers: list[ProvidedServer] = []
    seen: set[str] = set()
    for tools in tool_servers:
        if tools.name in seen:
            raise ValueError(f"two provided MCP servers are named {tools.name!r}")
        seen.add(tools.name)
        servers.append(ProvidedServer(tools.name, f"acp-green:{tools.name}", tools=tools))
    for name, argv in commands:
        if name in seen:
            raise ValueError(f"two provided MCP servers are named {name!r}")
        if not argv:
            raise ValueError(f"provided MCP server {name!r} has an empty command")
        seen.add(name)
        servers.append(ProvidedServer(name, f"acp-green:{name}", argv=tuple(argv)))
    return servers


def _message_fields(params: Any) -> tuple[str, str, dict[str, Any] | None]:
    """An `mcp/message`'s connectionId, inner method and inner params, checked (-32602)."""
    checked = Params(params, "mcp/message", required=True)
    connection_id = checked.required("connectionId", str)
    return connection_id, checked.required("method", str), checked.optional("params", dict)


class ConnectJob(Job):
    """`mcp/connect`: starts the bridge in the background; answers once it can carry messages."""

    def __init__(self, registry: "McpRegistry", bridge: Bridge) -> None:
        self.registry = registry
        self.bridge = bridge

    def run(self) -> Any:
        return self.bridge.open(self.registry.connect_timeout)

    def settle(self, outcome: Outcome) -> Outcome:
        if outcome.error is not None or outcome.killed or outcome.cancelled:
            self.registry.retire(self.bridge)
        return outcome

    def cancel(self) -> bool:
        return False  # the endpoint answers -32800 and kills the greenlet; settle reaps the process

    def shutdown(self) -> None:
        self.registry.retire(self.bridge)  # a pending first ping fails at once instead of using the grace


class DisconnectJob(Job):
    """`mcp/disconnect`: closes the bridge and reaps its process before answering."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    def run(self) -> Any:
        self.bridge.close()
        return {}

    def cancel(self) -> bool:
        return True  # reaping is short; the normal answer stands


class PeerRequestJob(Job):
    """An MCP request the client's server sends us on an outbound connection."""

    def __init__(self, method: str, params: Any) -> None:
        self.method = method
        self.params = params

    def run(self) -> Any:
        if self.method == "ping":
            return {}
        if self.method == "roots/list":
            return {"roots": []}
        raise MethodNotFound(self.method)


class McpRegistry:
    """Every MCP-over-ACP connection of one ACP connection."""

    def __init__(self, provided: Sequence[ProvidedServer], call_client: Callable[..., Any],
                 notify_client: Callable[[str, Any], None], *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.provided = list(provided)
        self._by_id = {server.server_id: server for server in self.provided}
        self.by_name = {server.name: server for server in self.provided}
        self.call_client = call_client
        self.notify_client = notify_client
        self.connect_timeout = connect_timeout
        self.bridges: dict[str, Bridge] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self.outbound: dict[str, str] = {}  # connectionId the client issued -> server name
        self._closers: set[gevent.Greenlet] = set()
        self.client_shape = ClientShape()  # which MCP-over-ACP shape the client speaks (acp_message)

    def announce(self) -> list[dict[str, Any]]:
        """The `providedMcpServers` list of the initialize result."""
        return [server.to_wire() for server in self.provided]

    # -- routes: background (a bridge may start a process, S7), sharing the slots (S9); admission
    # runs in the receive loop ---------------------------------------------------------------------
    @background("mcp/connect")
    def admit_connect(self, params: Any, _id: wire.RequestId) -> Job:
        checked = Params(params, "mcp/connect", required=True)
        key = "serverId" if "serverId" in checked.values else "acpId"  # acpId: the RFD's older name
        server_id = checked.required(key, str)
        server = self._by_id.get(server_id)
        if server is None:
            raise UnknownMcpServer(server_id)
        connection_id = f"mcpc-{uuid.uuid4().hex}"
        if server.tools is not None:
            bridge: Bridge = InProcessBridge(connection_id, server)
        else:
            bridge = StdioBridge(connection_id, server, self.call_client, self.notify_client, self._bridge_closed)
        self.bridges[connection_id] = bridge
        return ConnectJob(self, bridge)

    @background("mcp/message")
    def admit_message(self, params: Any, request_id: wire.RequestId) -> Job:
        connection_id, inner_method, inner = _message_fields(params)
        if connection_id in self.outbound:
            return PeerRequestJob(inner_method, inner)
        return self._open_bridge(connection_id).admit_request(request_id, inner_method, inner)

    @notification("mcp/message")
    def on_message_notification(self, params: Any) -> None:
        """An `mcp/message` notification: relayed at once, in receive order; never answered (S6)."""
        if isinstance(params, dict) and "connectionId" not in params and "serverId" in params:
            self._on_request_notification(params)
            return
        connection_id, inner_method, inner = _message_fields(params)
        if connection_id in self.outbound:
            log.debug("notification %s from the client's MCP server %s", inner_method, self.outbound[connection_id])
            return
        self._open_bridge(connection_id).admit_notification(inner_method, inner)

    def _on_request_notification(self, params: dict[str, Any]) -> None:
        """The `message` shape: the client's server tells about one of our requests in flight
        (progress); one naming no such request is dropped, as the schema says."""
        checked = Params(params, "mcp/message", required=True)
        route = (checked.required("serverId", str), checked.required("requestId", str))
        inner_method = checked.required("method", str)
        checked.optional("params", dict)
        known = "" if route in self.client_shape.active else " (no such request in flight: dropped)"
        log.debug("notification %s from the client's MCP server %s for request %s%s", inner_method, *route, known)

    # Never refused connection_busy: it frees the slots of the relays stuck on its server.
    @background("mcp/disconnect", frees_resources=True)
    def admit_disconnect(self, params: Any, _id: wire.RequestId) -> Job:
        connection_id = Params(params, "mcp/disconnect", required=True).required("connectionId", str)
        bridge = self._open_bridge(connection_id)
        self.forget(bridge)  # in receive order: later messages for it are refused as closed
        return DisconnectJob(bridge)

    def _open_bridge(self, connection_id: str) -> Bridge:
        bridge = self.bridges.get(connection_id)
        if bridge is None:
            state = "closed" if connection_id in self._closed else "unknown"
            raise UnknownMcpConnection(connection_id, state)
        if bridge.state != "open":
            raise UnknownMcpConnection(connection_id, bridge.state)
        return bridge

    # -- bookkeeping ---------------------------------------------------------------------------
    def forget(self, bridge: Bridge) -> None:
        """Remove a bridge, remembering its id as closed (for a clear error later)."""
        if bridge.state != CONNECTING:
            bridge.state = CLOSED
        if self.bridges.pop(bridge.connection_id, None) is not None:
            self._closed[bridge.connection_id] = None
            while len(self._closed) > _CLOSED_MEMORY:
                self._closed.popitem(last=False)

    def retire(self, bridge: Bridge) -> None:
        """Forget a bridge and close it in the background (never blocks); close_all waits for it."""
        self.forget(bridge)
        self.close_in_background(bridge.close)  # closing reaps a process: not in settle's caller

    def close_in_background(self, close: Callable[[], None]) -> None:
        """Run a closer that may wait for a process to exit off the caller's path; close_all joins it."""
        closer = gevent.spawn(close)
        self._closers.add(closer)
        closer.rawlink(self._closers.discard)

    def _bridge_closed(self, bridge: Bridge) -> None:
        """A bridge's server exited by itself."""
        self.forget(bridge)

    def add_outbound(self, connection_id: str, name: str) -> None:
        self.outbound[connection_id] = name

    def remove_outbound(self, connection_id: str) -> None:
        self.outbound.pop(connection_id, None)

    def close_all(self) -> None:
        """Close every bridge and reap every process they started (connection end, S13)."""
        bridges = list(self.bridges.values())
        for bridge in bridges:
            self.forget(bridge)
        closers = [gevent.spawn(bridge.close) for bridge in bridges] + list(self._closers)
        gevent.joinall(closers, timeout=10)
