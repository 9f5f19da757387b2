"""MCP's JSON-RPC as the client side of one stdio MCP server: our ids, pending calls, cancellation.

Requests are written at once, in call order, through the process's single writer; waiting
for the answer is separate, so a relay can write at admission and wait in the background
(S7). The pending-request table is `outgoing.OutgoingRequests` (ids from 1); cancelling sends
`notifications/cancelled` with our id and forgets the call, so a late reply is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..cancel import CancelToken
from ..errors import McpError, McpServerExited, MethodNotFound
from ..outgoing import OutgoingRequests, PendingRequest
from .process import StdioProcess

log = logging.getLogger(__name__)

MessageHandler = Callable[[dict[str, Any]], None]


class JsonRpcLink:
    """Our end of the JSON-RPC conversation with one MCP server process."""

    def __init__(
        self,
        argv: list[str],
        *,
        name: str,
        on_request: MessageHandler | None = None,
        on_notification: MessageHandler | None = None,
        on_exit: Callable[["JsonRpcLink"], None] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        """Start the server process; raises OSError if it cannot be started."""
        self.name = name
        self._calls = OutgoingRequests(self._write_request, self._write_cancel, _mcp_error, first_id=1)
        self._on_request = on_request or self._refuse_request
        self._on_notification = on_notification or (lambda message: log.debug("MCP %s: %s", name, message.get("method")))
        self._on_exit = on_exit
        self.process = StdioProcess(argv, self._receive, name=name, env=env, cwd=cwd, on_exit=self._exited)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def closed_error(self) -> BaseException | None:
        """Why no answers can come any more, once the server is gone; None while it runs."""
        return self._calls.closed_error

    @property
    def alive(self) -> bool:
        return self.closed_error is None

    # -- sending -------------------------------------------------------------------------------
    def start_request(self, method: str, params: Any) -> PendingRequest:
        """Write a request now (FIFO with everything else written); the answer comes later."""
        return self._calls.start(method, params)

    def wait(self, call: PendingRequest, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The call's result; McpError for an error reply; a set token cancels it (TurnCancelled).

        A timeout cancels the call (`notifications/cancelled`) only when a token was given; without
        one the call is forgotten and the server is told nothing.
        """
        return self._calls.wait(call, token, timeout, cancel_on_timeout=token is not None)

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.wait(self.start_request(method, params), token, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        """Write a notification now, after everything written before it."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.process.send(message)

    def respond(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """Answer a request the MCP server sent us."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self.process.send(message)

    def cancel(self, call: PendingRequest, reason: str, error: BaseException | None = None) -> None:
        """Tell the server to stop (our id) and release the waiter now; its late reply is dropped."""
        self._calls.cancel(call, reason, error)

    def _write_request(self, request_id: int, method: str, params: Any) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        if not self.process.send(message):
            raise self.closed_error or McpServerExited(self.process.describe_exit())

    def _write_cancel(self, request_id: int, reason: str) -> None:
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    # -- receiving -----------------------------------------------------------------------------
    def _receive(self, message: dict[str, Any]) -> None:
        dispatch(self.name, message, self._calls, self._on_request, self._on_notification)

    def _refuse_request(self, message: dict[str, Any]) -> None:
        refuse_server_request(self.respond, message)

    def _exited(self, process: StdioProcess) -> None:
        self.fail(McpServerExited(process.describe_exit()))
        if self._on_exit is not None:
            self._on_exit(self)

    def fail(self, error: Exception) -> None:
        """No answers can come any more: every pending call errors at once."""
        self._calls.close(error)

    def close(self, error: Exception | None = None) -> None:
        """Fail what is pending, stop the process and reap it."""
        self.fail(error or McpServerExited(f"MCP server {self.name!r} was stopped"))
        self.process.close()


def _mcp_error(_method: str, error: Any) -> McpError:
    """An MCP server's error reply as the exception its waiter raises (the code relayed as is)."""
    return McpError.from_wire(error)


def dispatch(name: str, message: dict[str, Any], calls: OutgoingRequests,
             on_request: Callable[[dict[str, Any]], None], on_notification: Callable[[dict[str, Any]], None]) -> None:
    """Hand one message from an MCP server to its handler, or its reply to the request awaiting it.

    Shared by every transport: a stdio child and an HTTP server deliver alike.
    """
    if "method" in message:
        if "id" in message:
            on_request(message)
        else:
            on_notification(message)
        return
    request_id = message.get("id")
    if "error" in message:
        answered = calls.reject(request_id, message["error"])
    else:
        answered = calls.resolve(request_id, message.get("result"))
    if answered is None:
        log.debug("MCP %s: dropping a reply to id %r that nobody waits for", name, request_id)


def refuse_server_request(respond: Callable[..., None], message: dict[str, Any]) -> None:
    """A server's own request when nobody relays them: answer ping, refuse the rest."""
    if message.get("method") == "ping":
        respond(message["id"], {})
    else:
        respond(message["id"], error=MethodNotFound(str(message.get("method"))).to_wire())
