"""MCP-over-ACP in the shape of the newest ACP schema (SDK 2.4.0): no connection, one `mcp/message` per request.

Two shapes reach a server the client declared with `type: "acp"`:

- `connect` (the older unstable schema, @thinkwell/conductor 0.5.7, older clients):
  `mcp/connect` -> `connectionId`, then `mcp/message` requests and notifications on it,
  then `mcp/disconnect`; the response to `mcp/message` is the inner result itself.
- `message` (the newest unstable schema): each inner request is one agent->client `mcp/message`
  naming `serverId` and a caller-made `requestId`; the response carries exactly one inner outcome,
  `{"result": ...}` or `{"error": {"code", "message"}}`, and outer ACP errors are binding failures.
  No inner handshake (MCP 2026-07-28 is stateless: each request's `params._meta` carries the
  protocol version and client capabilities), no agent->client notification, and cancelling is
  `$/cancel_request` of the outer request. The client may send `mcp/message` *notifications*
  naming an active request (progress); those are the only client->agent messages of this shape.

Neither schema has a client capability that says which shape a client speaks, so the rule is:
try `mcp/connect` first; a client that answers it -32601 (it has no such method) speaks the
`message` shape, and every later server of that ACP connection uses it at once (`ClientShape`).
Connect-first because -32601 to `mcp/connect` can only mean "no such method", while an older
client would answer a `message`-shaped request with -32602, which the new shape also uses for a
malformed envelope or a duplicate `requestId`: only this order tells the shapes apart for sure.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from ..errors import ClientError, McpError, one_line
from ..rpc.cancel import CancelToken
from ..version import __version__

log = logging.getLogger(__name__)

CONNECT, MESSAGE = "connect", "message"

#: The MCP revision the `message` shape carries (the SDK's MCP_PROTOCOL_VERSION).
MCP_PROTOCOL_VERSION = "2026-07-28"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: The binding's outer code for "the backend failed without a valid MCP outcome".
BACKEND_FAILED = -33002

_request_ids = itertools.count(1)


class ClientShape:
    """Which MCP-over-ACP shape the client of one ACP connection speaks, once learnt, and the
    `message`-shape requests in flight to it (what a client's notification may name)."""

    def __init__(self) -> None:
        self.known: str | None = None  # None until the first `mcp/connect` is answered
        self.active: set[tuple[str, str]] = set()  # (serverId, requestId) awaiting their outcome


def inner_outcome(carrier: Any) -> Any:
    """The inner MCP result a `message`-shape response carries; McpError for an inner error.

    As the schema says: `result` wins when both are present (and may be null); an `error` must be
    an object with an integer `code` and a string `message`; anything else is no outcome at all,
    a binding failure (-33002)."""
    if isinstance(carrier, dict):
        if "result" in carrier:
            return carrier["result"]
        error = carrier.get("error")
        if isinstance(error, dict) and _is_int(error.get("code")) and isinstance(error.get("message"), str):
            raise McpError.from_wire(error)
    raise McpError(BACKEND_FAILED, "The client answered mcp/message without an MCP outcome "
                   f"(neither a result nor an error object): {one_line(repr(carrier), 120)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def with_request_meta(params: Any) -> dict[str, Any]:
    """The inner params with the per-request MCP metadata the binding requires, unless already there."""
    inner = dict(params) if isinstance(params, dict) else {}
    meta = dict(inner["_meta"]) if isinstance(inner.get("_meta"), dict) else {}
    meta.setdefault(META_PROTOCOL_VERSION, MCP_PROTOCOL_VERSION)
    meta.setdefault(META_CLIENT_CAPABILITIES, {})
    meta.setdefault(META_CLIENT_INFO, {"name": "acp-green", "version": __version__})
    inner["_meta"] = meta
    return inner


class ServerIdChannel:
    """MCP to a client's server in the `message` shape: each request is one `mcp/message`
    naming the server and a fresh `requestId`; cancelling (a set token) is `$/cancel_request`
    of that ACP request, which the pending-request map sends."""

    stateless = True  # no initialize handshake: the metadata travels with every request

    def __init__(self, call_client: Callable[..., Any], server_id: str, shape: ClientShape) -> None:
        self._call = call_client
        self.server_id = server_id
        self._shape = shape

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        request_id = f"acp-green-{next(_request_ids)}"
        route = (self.server_id, request_id)
        message = {"serverId": self.server_id, "requestId": request_id, "method": method, "params": with_request_meta(params)}
        self._shape.active.add(route)
        try:
            carrier = self._call("mcp/message", message, token=token, timeout=timeout)
        except ClientError as exc:  # a binding failure (-33001 unknown server, -33000 limit...), code kept
            raise McpError.relaying(exc) from None
        finally:
            self._shape.active.discard(route)
        return inner_outcome(carrier)

    def notify(self, method: str, params: Any = None) -> None:
        # The shape has no agent->client notification: cancelling is $/cancel_request, and the
        # stateless revision has no `notifications/initialized`.
        log.debug("MCP %s: %s not sent (the message shape carries no notification to the client)", self.server_id, method)
