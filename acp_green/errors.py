"""JSON-RPC and ACP error types; each carries its wire code (the error table of docs/ERRORS.md).

`error_for` is the one mapping from whatever a request path raised to the JSON-RPC error that
answers it, for ACP requests and MCP requests alike. Errors a peer answered us with derive
from `PeerError` and keep the peer's code, message and data.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000
AUTH_REQUIRED = -32000
REQUEST_CANCELLED = -32800
RESOURCE_NOT_FOUND = -32002  # ACP's "Resource not found": an unknown session; the rig's client answers it for a missing file
#: What the rig's chat answers when the person declines; not -32000, which ACP reads as "authentication required".
NOT_APPROVED = -32001


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

    def answer(self) -> "RpcError":
        """The error a request that raised this one is answered with: itself, unless a subclass says otherwise."""
        return self

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


class NotInitialized(InvalidRequest):
    """A request other than `initialize` before `initialize` succeeded (ACP's lifecycle order)."""

    reason = "not_initialized"

    def __init__(self, method: str) -> None:
        super().__init__(f"{method} before initialize: call initialize first")


class MethodNotFound(RpcError):
    code = METHOD_NOT_FOUND

    def __init__(self, method: str) -> None:
        super().__init__(f"Method not found: {method}")


class InvalidParams(RpcError):
    code = INVALID_PARAMS


#: Characters of a client's value an error message or its `data` repeats at most.
ECHO_LIMIT = 256


def echoed(value: Any, limit: int = ECHO_LIMIT) -> Any:
    """A client's value as an error repeats it: a string cut to `limit` characters ("…" last)."""
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


class ResourceNotFound(RpcError):
    code = RESOURCE_NOT_FOUND


class UnknownSession(ResourceNotFound):
    """A request naming a session this agent does not have (live or stored): ACP's -32002.

    Agents before ACP's ErrorCode named -32002 answered -32602; `data.reason` stays
    `unknown_session` either way, so clients that read the reason see no change."""

    reason = "unknown_session"

    def __init__(self, session_id: Any) -> None:
        shown = echoed(session_id)
        super().__init__(f"Unknown session: {shown!r}", data={"sessionId": shown})


class ForkRefused(InvalidParams):
    """Raised by an agent's `Agent.on_fork` to refuse a `session/fork` (-32602 `fork_refused`)."""

    reason = "fork_refused"

    def __init__(self, message: str = "This session cannot be forked") -> None:
        super().__init__(message)


class NotCancellable(InvalidParams):
    """ACP v2's `tool_call/cancel` or `terminal/cancel` naming something that cannot be cancelled
    now: unknown, already final, or never advertised with `capabilities.cancel` (the schema's -32602).

    `field` is the params field that named it (`toolCallId`, `terminalId`); `data` repeats its value."""

    reason = "not_cancellable"

    def __init__(self, field: str, value: Any, why: str) -> None:
        shown = echoed(value)
        super().__init__(f"{field} {shown!r} cannot be cancelled: {why}", data={field: shown})


class InternalError(RpcError):
    code = INTERNAL_ERROR


class OutOfMemory(InternalError):
    """An input line the agent could not hold in memory: dropped, and the reader goes on."""

    reason = "out_of_memory"


class SessionBusy(RpcError):
    code = SERVER_BUSY
    reason = "session_busy"

    def __init__(self, session_id: str, until: str = "its response") -> None:
        super().__init__(
            f"Session busy: {echoed(session_id)} is already running a prompt; wait for {until}",
            data={"sessionId": echoed(session_id)},
        )


class SessionInUse(RpcError):
    """A session that another connection of this agent, or another agent process on the same
    store, holds now: one connection of one process owns a session at a time. It is the holder's
    until that connection closes it or ends (or that process dies); then any may load it."""

    code = SERVER_BUSY
    reason = "session_in_use"

    def __init__(self, session_id: str, owner: str) -> None:
        super().__init__(
            f"Session {echoed(session_id)} is open elsewhere: {owner}; close it there "
            "(session/close) or load it once that connection or process has ended",
            data={"sessionId": echoed(session_id), "owner": owner},
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


class BatchTooLarge(RpcError):
    """A request of a JSON-RPC batch whose held answers are already over the output hard limit."""

    code = SERVER_BUSY
    reason = "batch_too_large"

    def __init__(self, held_bytes: int, limit: int) -> None:
        super().__init__(
            f"This batch's answers already hold {held_bytes} bytes, over {limit}: the request did not run; send it again",
            data={"heldBytes": held_bytes},
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


def _is_code(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class PeerError(RpcError):
    """An error object a peer answered one of our requests with: the ACP client's (ClientError)
    or an MCP server's (McpError). `code`, `message` and `data` are the peer's, so relaying it
    keeps the peer's code; a code that is not an integer becomes -32603, data that is not an
    object becomes `{"value": data}`."""

    def __init__(self, code: Any, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code if _is_code(code) else INTERNAL_ERROR
        if data is not None and not isinstance(data, dict):
            self.data = {"value": data}
        elif data:
            self.data = dict(data)


class McpError(PeerError):
    """An MCP-level error: the MCP server's own error object, relayed with its code as is.

    Raised by our own MCP servers (`ToolServer`) too, with the code an MCP client should see.
    """

    @classmethod
    def from_wire(cls, error: Any) -> "McpError":
        """From a JSON-RPC error object as some peer wrote it (tolerant of bad shapes)."""
        if not isinstance(error, dict):
            return cls(INTERNAL_ERROR, f"Malformed error from the MCP server: {one_line(repr(error))}")
        return cls(error.get("code"), one_line(str(error.get("message", "MCP error"))), error.get("data"))

    @classmethod
    def relaying(cls, error: PeerError) -> "McpError":
        """Another peer's error (the ACP client's answer to an MCP request) passed on as MCP's."""
        return cls(error.code, one_line(error.message), error.data or None)


class UnknownMcpServer(InvalidParams):
    reason = "unknown_mcp_server"

    def __init__(self, server_id: Any) -> None:
        shown = echoed(server_id)
        super().__init__(f"mcp/connect: no MCP server with serverId {shown!r} is provided here", data={"serverId": shown})


class UnknownMcpConnection(InvalidParams):
    """`mcp/message` or `mcp/disconnect` naming a connection that is unknown, closed or not yet connected."""

    reason = "unknown_connection"

    def __init__(self, connection_id: Any, state: str = "unknown") -> None:
        words = {"unknown": "is unknown", "closed": "is closed", "connecting": "is not connected yet"}
        super().__init__(
            f"MCP connection {echoed(connection_id)!r} {words.get(state, state)}",
            data={"connectionId": echoed(connection_id), "state": state},
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


class McpServerFlooding(InternalError):
    """The MCP server sent more junk (messages that cannot be served) than a link takes; it was stopped."""

    reason = "mcp_server_flooding"


class McpServerBacklog(RpcError):
    """The MCP server does not read its stdin: a request would queue past the link's byte bound."""

    code = SERVER_BUSY
    reason = "mcp_backlog"


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


class ClientError(PeerError):
    """The client answered one of the agent's requests with a JSON-RPC error.

    `str()` names the method, the client's message and code, then the client's reason from
    `data` when it gave one (`client_reason`): what a person needs to see. Bounded in length.
    Escaping agent code it is the agent's failure, not the client's: `error_for` answers it
    -32603 quoting `str()`, never with the client's own code (the client did not fail the
    request being answered).
    """

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        data = error.get("data")
        super().__init__(error.get("code"), str(error.get("message", "")), data)
        self.method = method
        self.reason = client_reason(data)
        shown = one_line(self.message, CLIENT_MESSAGE_LIMIT)
        text = f"{method} failed: {shown} ({error.get('code')})"
        if self.reason is not None and self.reason != shown:
            text += f": {self.reason}"
        self.args = (text,)

    @property
    def error_message(self) -> str:
        """The client's own message, as it sent it."""
        return self.message

    @property
    def explanation(self) -> str:
        """The client's message and, when it gave one, its reason: one bounded line without the method."""
        shown = one_line(self.message, CLIENT_MESSAGE_LIMIT)
        if self.reason is None or self.reason == shown:
            return shown
        return f"{shown}: {self.reason}" if shown else self.reason

    def answer(self) -> RpcError:
        """The agent's own failure (-32603), quoting the client's words (see the class)."""
        return InternalError(one_line(str(self), 600))


class TurnCancelled(Exception):
    """Raised inside a turn by a wait that its cancellation token interrupted."""


class TurnInterrupted(BaseException):
    """Raised at the blocking call of a cancelled turn still running when the cancel grace ends.

    A BaseException, as KeyboardInterrupt is: the `except Exception` of a retry loop (HTTP
    clients, model SDKs) must not swallow it and call again. The turn answers `cancelled`."""


class CapabilityMissing(Exception):
    """The client did not advertise the capability an operation needs."""


class StateNotStorable(ValueError):
    """A `session.state` value cannot be stored: not JSON, or the state is over its size limit.

    `key` names the offending entry (for the size limit: the largest one)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"session.state[{key!r}] cannot be stored: {reason}")
        self.key = key
        self.reason = reason


def error_for(exc: BaseException, doing: str = "a request") -> RpcError:
    """The JSON-RPC error answering a request whose handling raised `exc`: the one mapping, for
    ACP and MCP requests alike; `doing` names the work in the log.

    An RpcError answers as itself (`answer`: a PeerError keeps the peer's code, a ClientError
    escaping agent code is our -32603); a cancel or a kill is -32800; a gevent.Timeout, a
    SystemExit (agent code must not end the server from a greenlet) and anything else are
    -32603 in one line, the unexpected ones logged with their traceback.
    """
    if isinstance(exc, RpcError):
        return exc.answer()
    from gevent import GreenletExit, Timeout  # errors.py stays importable without gevent

    if isinstance(exc, (TurnCancelled, GreenletExit)):
        return RequestCancelled()
    if isinstance(exc, Timeout):  # a BaseException: would otherwise leave the request unanswered
        return InternalError(f"Timed out: {one_line(str(exc))}")
    if isinstance(exc, SystemExit):
        log.error("%s called sys.exit; answered as an internal error", doing)
        return InternalError("Agent code tried to exit the process")
    log.error("%s failed", doing, exc_info=exc)
    return InternalError(one_line(f"{type(exc).__name__}: {exc}"))


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a message to one bounded line, as ACP asks of error messages."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
