"""JSON-RPC and ACP error types; each carries its wire code (the README's error table)."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000
AUTH_REQUIRED = -32000
REQUEST_CANCELLED = -32800


class RpcError(Exception):
    """An error that becomes one JSON-RPC error response."""

    code: int = INTERNAL_ERROR
    reason: str | None = None

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = dict(data or {})
        if self.reason is not None:
            self.data.setdefault("reason", self.reason)

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            error["data"] = self.data
        return error


class ParseError(RpcError):
    code = PARSE_ERROR


class InvalidRequest(RpcError):
    code = INVALID_REQUEST


class LineTooLong(InvalidRequest):
    reason = "line_too_long"


class MethodNotFound(RpcError):
    code = METHOD_NOT_FOUND

    def __init__(self, method: str) -> None:
        super().__init__(f"Method not found: {method}")


class InvalidParams(RpcError):
    code = INVALID_PARAMS


class UnknownSession(InvalidParams):
    reason = "unknown_session"

    def __init__(self, session_id: Any) -> None:
        super().__init__(f"Unknown session: {session_id!r}", data={"sessionId": session_id})


class InternalError(RpcError):
    code = INTERNAL_ERROR


class SessionBusy(RpcError):
    code = SERVER_BUSY
    reason = "session_busy"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"Session busy: {session_id} is already running a prompt; wait for its response",
            data={"sessionId": session_id},
        )


class ConnectionBusy(RpcError):
    code = SERVER_BUSY
    reason = "connection_busy"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"Connection busy: {limit} background requests are already running; retry when one finishes",
            data={"limit": limit},
        )


class OutputBacklog(RpcError):
    code = SERVER_BUSY
    reason = "output_backlog"

    def __init__(self, queued_bytes: int) -> None:
        super().__init__(
            "Output backlog: the client is not reading the agent's output; retry after reading",
            data={"queuedBytes": queued_bytes},
        )


class AuthRequired(RpcError):
    code = AUTH_REQUIRED
    reason = "auth_required"

    def __init__(self, message: str = "Authentication required") -> None:
        super().__init__(message)


class RequestCancelled(RpcError):
    code = REQUEST_CANCELLED

    def __init__(self, message: str = "Request cancelled") -> None:
        super().__init__(message)


class McpError(RpcError):
    """An MCP-level error: the MCP server's own error object, relayed with its code as is."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        if data is not None and not isinstance(data, dict):
            self.data = {"value": data}
        elif data:
            self.data = dict(data)

    @classmethod
    def from_wire(cls, error: Any) -> "McpError":
        """From a JSON-RPC error object as some peer wrote it (tolerant of bad shapes)."""
        if not isinstance(error, dict):
            return cls(INTERNAL_ERROR, f"Malformed error from the MCP server: {one_line(repr(error))}")
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            code = INTERNAL_ERROR
        return cls(code, one_line(str(error.get("message", "MCP error"))), error.get("data"))


class UnknownMcpServer(InvalidParams):
    reason = "unknown_mcp_server"

    def __init__(self, server_id: Any) -> None:
        super().__init__(f"mcp/connect: no MCP server with serverId {server_id!r} is provided here", data={"serverId": server_id})


class UnknownMcpConnection(InvalidParams):
    """`mcp/message` or `mcp/disconnect` naming a connection that is unknown, closed or not yet connected."""

    reason = "unknown_connection"

    def __init__(self, connection_id: Any, state: str = "unknown") -> None:
        words = {"unknown": "is unknown", "closed": "is closed", "connecting": "is not connected yet"}
        super().__init__(
            f"MCP connection {connection_id!r} {words.get(state, state)}",
            data={"connectionId": connection_id, "state": state},
        )


class TooManyMcpServers(InvalidParams):
    """A session declares more MCP servers than the agent accepts (every transport counts)."""

    reason = "too_many_mcp_servers"

    def __init__(self, method: str, count: int, limit: int) -> None:
        super().__init__(
            f"{method}: field 'mcpServers' declares {count} MCP servers; at most {limit} are accepted per session",
            data={"field": "mcpServers", "count": count, "limit": limit},
        )


class McpConnectFailed(InternalError):
    reason = "mcp_connect_failed"


class McpServerExited(InternalError):
    """The MCP server process ended while a request to it was pending."""

    reason = "mcp_server_exited"


class McpUnavailable(Exception):
    """Agent code asked for an MCP server the session does not have, or it could not start."""


#: How many characters of a client's error message and reason a ClientError shows.
CLIENT_MESSAGE_LIMIT = 200
CLIENT_REASON_LIMIT = 300


def client_reason(data: Any) -> str | None:
    """The reason a client put in an error's `data`, as one bounded line, or None.

    TypeScript-SDK clients answer "Internal error" and put the real reason in `data.details`;
    others use `data.message` or make `data` a plain string. Only strings count.
    """
    candidates = (data.get("details"), data.get("message")) if isinstance(data, dict) else (data,)
    for found in candidates:
        if isinstance(found, str):
            reason = one_line(found, CLIENT_REASON_LIMIT)
            if reason:
                return reason
    return None


class ClientError(Exception):
    """The client answered one of the agent's requests with a JSON-RPC error.

    `str()` names the method, the client's message and code, then the client's reason from
    `data` when it gave one (`client_reason`): what a person needs to see. Bounded in length.
    """

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.error_message = str(error.get("message", ""))
        self.data = error.get("data")
        self.reason = client_reason(self.data)
        shown = one_line(self.error_message, CLIENT_MESSAGE_LIMIT)
        text = f"{method} failed: {shown} ({self.code})"
        if self.reason is not None and self.reason != shown:
            text += f": {self.reason}"
        super().__init__(text)

    @property
    def explanation(self) -> str:
        """The client's message and, when it gave one, its reason: one bounded line without the method."""
        shown = one_line(self.error_message, CLIENT_MESSAGE_LIMIT)
        if self.reason is None or self.reason == shown:
            return shown
        return f"{shown}: {self.reason}" if shown else self.reason


class TurnCancelled(Exception):
    """Raised inside a turn by a wait that its cancellation token interrupted."""


class CapabilityMissing(Exception):
    """The client did not advertise the capability an operation needs."""


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a message to one bounded line, as ACP asks of error messages."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
