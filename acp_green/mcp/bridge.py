"""Inbound MCP-over-ACP bridges: one connection from the ACP peer to an MCP server we provide.

Every message is handed to the MCP side at admission, in receive order (S7): a stdio bridge
writes it to the child's single FIFO writer at once; an in-process bridge registers the call
and its token. Only the wait for the answer runs in a background greenlet, so requests
complete out of order while a notification never overtakes an earlier message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gevent
from gevent.greenlet import Greenlet

from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..rpc.endpoint import Job, Outcome
from ..errors import (
    InternalError,
    McpConnectFailed,
    McpError,
    McpServerExited,
    PeerError,
    RequestCancelled,
    TurnCancelled,
    error_for,
    one_line,
)
from ..rpc.outgoing import PendingRequest
from .tools import ToolServer

if TYPE_CHECKING:
    from .jsonrpc import JsonRpcLink

log = logging.getLogger(__name__)

CONNECTING, OPEN, CLOSED = "connecting", "open", "closed"


@dataclass(frozen=True, slots=True)
class ProvidedServer:
    """An MCP server this process provides over ACP: in-process tools or a stdio command."""

    name: str
    server_id: str
    tools: ToolServer | None = None
    argv: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "serverId": self.server_id}


class Bridge:
    """One MCP-over-ACP connection to a provided server."""

    def __init__(self, connection_id: str, server: ProvidedServer) -> None:
        self.connection_id = connection_id
        self.server = server
        self.state = CONNECTING

    @property
    def pid(self) -> int | None:
        return None

    def open(self, timeout: float) -> dict[str, Any]:
        """Make the bridge able to carry messages; returns the `mcp/connect` result."""
        raise NotImplementedError

    def admit_request(self, request_id: wire.RequestId, method: str, params: Any) -> Job:
        raise NotImplementedError

    def admit_notification(self, method: str, params: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the bridge and reap whatever it started; idempotent, may block briefly."""
        self.state = CLOSED


# -- in-process tool servers ------------------------------------------------------------------
class InProcessBridge(Bridge):
    """A bridge to a ToolServer running in this process."""

    def __init__(self, connection_id: str, server: ProvidedServer) -> None:
        super().__init__(connection_id, server)
        assert server.tools is not None
        self.tools: ToolServer = server.tools
        self.calls: dict[wire.IdKey | None, CancelToken] = {}

    def open(self, timeout: float) -> dict[str, Any]:
        self.state = OPEN
        return {"connectionId": self.connection_id}

    def admit_request(self, request_id: wire.RequestId, method: str, params: Any) -> Job:
        token = CancelToken()
        self.calls[wire.id_key(request_id)] = token
        return InProcessJob(self, request_id, method, params, token)

    def admit_notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            # The peer's MCP client knows a request only by the outer ACP id (the inner message has none).
            token = self.calls.get(wire.id_key(params.get("requestId")))
            if token is not None:
                token.set()
            return
        log.debug("in-process MCP server %s: notification %s", self.server.name, method)

    def close(self) -> None:
        self.state = CLOSED
        calls, self.calls = self.calls, {}
        for token in calls.values():
            token.set()


class InProcessJob(Job):
    """One MCP request to an in-process tool server, run in the background."""

    def __init__(self, bridge: InProcessBridge, request_id: wire.RequestId, method: str, params: Any, token: CancelToken) -> None:
        self.bridge = bridge
        self.key = wire.id_key(request_id)
        self.method = method
        self.params = params
        self.token = token

    def run(self) -> Any:
        if self.token.is_set():
            raise RequestCancelled()
        return self.bridge.tools.handle(self.method, self.params, self.token)

    def settle(self, outcome: Outcome) -> Outcome:
        self.bridge.calls.pop(self.key, None)
        return outcome

    def cancel(self) -> bool:
        self.token.set()  # the tool sees it; the endpoint answers -32800 and ends the greenlet
        return False

    def shutdown(self) -> None:
        self.token.set()


# -- stdio servers we launch and relay to -----------------------------------------------------
class StdioBridge(Bridge):
    """A bridge relaying to an MCP server process started for this connection."""

    def __init__(self, connection_id: str, server: ProvidedServer, call_client: Callable[..., Any],
                 notify_client: Callable[[str, Any], None], on_closed: Callable[["Bridge"], None]) -> None:
        super().__init__(connection_id, server)
        self._call_client = call_client
        self._notify_client = notify_client
        self._on_closed = on_closed
        self.link: JsonRpcLink | None = None
        self.by_request: dict[wire.IdKey | None, PendingRequest] = {}
        self._relays: set[Greenlet] = set()
        self._relay_token = CancelToken()  # set on close: abandons requests relayed to the client

    @property
    def pid(self) -> int | None:
        return self.link.pid if self.link is not None else None

    def open(self, timeout: float) -> dict[str, Any]:
        from .jsonrpc import JsonRpcLink  # the process machinery: only once a stdio server starts

        name = self.server.name
        try:
            self.link = JsonRpcLink(
                list(self.server.argv), name=name,
                on_request=self._relay_request, on_notification=self._relay_notification, on_exit=self._exited,
            )
        except OSError as exc:
            raise McpConnectFailed(one_line(f"Cannot start MCP server {name!r} ({self.server.argv[0]}): {exc.strerror or exc}"),
                                   data={"serverId": self.server.server_id}) from None
        if self.state == CLOSED:  # closed (shutdown, cancel) while the process was starting
            self.link.close()
            raise McpConnectFailed(f"MCP server {name!r} was stopped while connecting")
        # Proof that the bridge can carry messages: the process answers a ping (MCP allows ping
        # before initialize; an error reply proves it just as well).
        try:
            self.link.request("ping", None, timeout=timeout)
        except McpError:
            pass
        except McpServerExited as exc:
            raise McpConnectFailed(f"MCP server {name!r} exited before it could carry messages: {exc.message}",
                                   data={"serverId": self.server.server_id}) from None
        except gevent.Timeout:
            raise McpConnectFailed(f"MCP server {name!r} did not answer within {timeout:g}s",
                                   data={"serverId": self.server.server_id}) from None
        if self.state == CLOSED or not self.link.alive:
            raise McpConnectFailed(f"MCP server {name!r} was stopped while connecting")
        self.state = OPEN
        return {"connectionId": self.connection_id, "_meta": {"acpGreen": {"pid": self.link.pid}}}

    def admit_request(self, request_id: wire.RequestId, method: str, params: Any) -> Job:
        assert self.link is not None
        call = self.link.start_request(method, params)  # written now, in receive order (S7)
        key = wire.id_key(request_id)
        self.by_request[key] = call
        return RelayJob(self, key, call)

    def admit_notification(self, method: str, params: Any) -> None:
        assert self.link is not None
        if method == "notifications/cancelled" and isinstance(params, dict):
            request_id = params.get("requestId")
            call = self.by_request.get(wire.id_key(request_id))
            if call is not None:  # the peer names the request by its ACP id; the server knows ours
                self.link.cancel(call, str(params.get("reason") or "cancelled by the client"))
                return
        self.link.notify(method, params)

    # -- traffic the MCP server originates ------------------------------------------------------
    def _wrap(self, message: wire.Request | wire.Notification) -> dict[str, Any]:
        wrapped: dict[str, Any] = {"connectionId": self.connection_id, "method": message.method}
        if isinstance(message.params, dict):
            wrapped["params"] = message.params
        return wrapped

    def _relay_notification(self, message: wire.Notification) -> None:
        if self.state == OPEN:
            self._notify_client("mcp/message", self._wrap(message))

    def _relay_request(self, message: wire.Request) -> None:
        if self.state != OPEN:
            if self.link is not None:
                self.link.respond(message.id, error=InternalError("The ACP bridge is not open").to_wire())
            return
        greenlet = Greenlet(self._relay_one, message)
        greenlet.name = f"mcp-relay-{self.server.name}"
        self._relays.add(greenlet)
        greenlet.rawlink(self._relays.discard)
        greenlet.start()

    def _relay_one(self, message: wire.Request) -> None:
        """Ask the ACP peer (an agent->client `mcp/message` request) and answer the MCP server."""
        link = self.link
        assert link is not None
        try:
            result = self._call_client("mcp/message", self._wrap(message), token=self._relay_token)
        except TurnCancelled:
            link.respond(message.id, error=RequestCancelled("Request cancelled: the bridge closed").to_wire())
        except Exception as exc:  # the client's refusal, relayed with its code; the ACP connection closing
            relayed = McpError.relaying(exc) if isinstance(exc, PeerError) else exc
            link.respond(message.id, error=error_for(relayed, f"relaying {message.method} to the client").to_wire())
        else:
            link.respond(message.id, result)

    # -- ending -------------------------------------------------------------------------------
    def _exited(self, link: JsonRpcLink) -> None:
        if self.state != CLOSED:
            log.warning("%s; bridge %s is closed", link.process.describe_exit(), self.connection_id)
        self.state = CLOSED
        self._relay_token.set()
        self._on_closed(self)

    def close(self) -> None:
        self.state = CLOSED
        self._relay_token.set()
        if self.link is not None:
            self.link.close(McpServerExited(f"MCP connection {self.connection_id} was closed"))


class RelayJob(Job):
    """Waits in the background for the MCP server's answer to a request written at admission."""

    def __init__(self, bridge: StdioBridge, key: wire.IdKey | None, call: PendingRequest) -> None:
        self.bridge = bridge
        self.key = key
        self.call = call

    def run(self) -> Any:
        assert self.bridge.link is not None
        return self.bridge.link.wait(self.call)

    def settle(self, outcome: Outcome) -> Outcome:
        self.bridge.by_request.pop(self.key, None)
        return outcome

    def cancel(self) -> bool:
        """$/cancel_request: tell the server with our id; the endpoint answers -32800; a late reply is dropped."""
        if self.bridge.link is not None:
            self.bridge.link.cancel(self.call, "cancelled by $/cancel_request")
        return False

    def shutdown(self) -> None:
        if self.bridge.link is not None:
            self.bridge.link.cancel(self.call, "the agent is shutting down")
