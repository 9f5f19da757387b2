"""The MCP client API a turn uses, over any of three channels: a stdio server, an ACP bridge to
the client (`mcp/message`; the newer shape's channel is `acp_message.ServerIdChannel`), or an
in-process tool server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..version import __version__
from ..rpc.cancel import CancelToken
from ..errors import ClientError, McpError
from .tools import PROTOCOL_VERSIONS, ToolServer

if TYPE_CHECKING:
    from .jsonrpc import JsonRpcLink

log = logging.getLogger(__name__)


class Channel(Protocol):
    """Carries MCP requests and notifications to one server."""

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any: ...

    def notify(self, method: str, params: Any = None) -> None: ...


class StdioChannel:
    """MCP to a stdio server process."""

    def __init__(self, link: JsonRpcLink) -> None:
        self.link = link

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.link.request(method, params, token, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.link.notify(method, params)


class AcpChannel:
    """MCP over ACP to a server the client provides: each MCP request is one `mcp/message` request.

    The inner message has no id of its own; cancelling is `$/cancel_request` for our ACP id,
    which the pending-request map sends when the token is set.
    """

    def __init__(self, call_client: Callable[..., Any], notify_client: Callable[[str, Any], None], connection_id: str) -> None:
        self._call = call_client
        self._notify = notify_client
        self.connection_id = connection_id

    def _params(self, method: str, params: Any) -> dict[str, Any]:
        wrapped: dict[str, Any] = {"connectionId": self.connection_id, "method": method}
        if params is not None:
            wrapped["params"] = params
        return wrapped

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        try:
            return self._call("mcp/message", self._params(method, params), token=token, timeout=timeout)
        except ClientError as exc:
            raise McpError.relaying(exc) from None

    def notify(self, method: str, params: Any = None) -> None:
        self._notify("mcp/message", self._params(method, params))


class LoopbackChannel:
    """MCP to an in-process tool server, called directly in the caller's greenlet."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.server.handle(method, params, token if token is not None else CancelToken())

    def notify(self, method: str, params: Any = None) -> None:
        pass  # the in-process server keeps no per-client state


class McpClientSession:
    """An initialized MCP client session: list and call tools."""

    def __init__(self, name: str, channel: Channel) -> None:
        self.name = name
        self.channel = channel
        self.server_info: dict[str, Any] | None = None
        self.initialized = False

    def initialize(self, token: CancelToken | None = None, timeout: float | None = 30.0) -> dict[str, Any]:
        """The MCP handshake: `initialize`, then `notifications/initialized`; none on a stateless
        channel (MCP-over-ACP's `message` shape), whose requests each carry what it would say."""
        if getattr(self.channel, "stateless", False):
            self.server_info = {}
            self.initialized = True
            return self.server_info
        result = self.channel.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSIONS[-1],
                "capabilities": {},
                "clientInfo": {"name": "acp-green", "version": __version__},
            },
            token,
            timeout,
        )
        self.server_info = result if isinstance(result, dict) else {}
        self.channel.notify("notifications/initialized")
        self.initialized = True
        return self.server_info

    def list_tools(self, token: CancelToken | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every tool of the server (following pagination cursors)."""
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = self.channel.request("tools/list", {"cursor": cursor} if cursor else None, token, timeout) or {}
            tools.extend(result.get("tools") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    def call_tool(self, tool: str, arguments: dict[str, Any] | None = None, token: CancelToken | None = None,
                  timeout: float | None = None) -> dict[str, Any]:
        """Call one tool; the CallToolResult (check its `isError`); McpError for a protocol error."""
        return self.channel.request("tools/call", {"name": tool, "arguments": arguments or {}}, token, timeout) or {}


class McpTools:
    """What `turn.mcp(name)` returns: an MCP session bound to the turn's cancellation token."""

    def __init__(self, session: McpClientSession, token: CancelToken) -> None:
        self.session = session
        self.token = token

    @property
    def name(self) -> str:
        return self.session.name

    def list_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        return self.session.list_tools(self.token, timeout)

    def call_tool(self, tool: str, arguments: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        return self.session.call_tool(tool, arguments, self.token, timeout)


def result_text(result: dict[str, Any]) -> str:
    """The text blocks of a CallToolResult joined (other blocks named by their type)."""
    parts = []
    for block in result.get("content") or []:
        if isinstance(block, dict):
            parts.append(block.get("text", "") if block.get("type") == "text" else f"[{block.get('type')}]")
    return "".join(parts)
