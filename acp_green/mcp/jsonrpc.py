"""MCP's JSON-RPC as the client side of one stdio MCP server: our ids, pending calls, cancellation.

Requests are written at once, in call order, through the process's single writer; waiting
for the answer is separate, so a relay can write at admission and wait in the background
(S7). Cancelling sends `notifications/cancelled` with our id and forgets the call, so a late
reply is dropped.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

import gevent
from gevent.event import AsyncResult

from ..errors import McpError, McpServerExited, RequestCancelled, TurnCancelled
from ..sessions import CancelToken
from .process import StdioProcess

log = logging.getLogger(__name__)

MessageHandler = Callable[[dict[str, Any]], None]


class PendingCall:
    """One request we sent to the MCP server and have not had answered."""

    __slots__ = ("id", "method", "result")

    def __init__(self, request_id: int, method: str) -> None:
        self.id = request_id
        self.method = method
        self.result = AsyncResult()


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
        self._ids = itertools.count(1)
        self._pending: dict[int, PendingCall] = {}
        self._on_request = on_request or self._refuse_request
        self._on_notification = on_notification or (lambda message: log.debug("MCP %s: %s", name, message.get("method")))
        self._on_exit = on_exit
        self.closed_error: Exception | None = None
        self.process = StdioProcess(argv, self._receive, name=name, env=env, cwd=cwd, on_exit=self._exited)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.closed_error is None

    # -- sending -------------------------------------------------------------------------------
    def start_request(self, method: str, params: Any) -> PendingCall:
        """Write a request now (FIFO with everything else written); the answer comes later."""
        if self.closed_error is not None:
            raise self.closed_error
        call = PendingCall(next(self._ids), method)
        self._pending[call.id] = call
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": call.id, "method": method}
        if params is not None:
            message["params"] = params
        if not self.process.send(message):
            self._pending.pop(call.id, None)
            raise self.closed_error or McpServerExited(self.process.describe_exit())
        return call

    def wait(self, call: PendingCall, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The call's result; McpError for an error reply; a set token cancels it (TurnCancelled)."""
        if token is None:
            return call.result.get(timeout=timeout)
        remove = token.on_cancel(lambda: self.cancel(call, "cancelled by the caller", TurnCancelled()))
        try:
            return call.result.get(timeout=timeout)
        except gevent.Timeout:
            self.cancel(call, "timed out")
            raise
        finally:
            remove()

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

    def cancel(self, call: PendingCall, reason: str, error: BaseException | None = None) -> None:
        """Tell the server to stop (our id) and release the waiter now; its late reply is dropped."""
        if self._pending.pop(call.id, None) is None:
            return
        self.notify("notifications/cancelled", {"requestId": call.id, "reason": reason})
        call.result.set_exception(error if error is not None else RequestCancelled())

    # -- receiving -----------------------------------------------------------------------------
    def _receive(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:
                self._on_request(message)
            else:
                self._on_notification(message)
            return
        request_id = message.get("id")
        call = self._pending.pop(request_id, None) if isinstance(request_id, int) and not isinstance(request_id, bool) else None
        if call is None:
            log.debug("MCP %s: dropping a reply to id %r that nobody waits for", self.name, request_id)
            return
        if "error" in message:
            call.result.set_exception(McpError.from_wire(message["error"]))
        else:
            call.result.set(message.get("result"))

    def _refuse_request(self, message: dict[str, Any]) -> None:
        """Server-originated requests when nobody relays them: answer ping, refuse the rest."""
        if message.get("method") == "ping":
            self.respond(message["id"], {})
        else:
            self.respond(message["id"], error={"code": -32601, "message": f"Method not found: {message.get('method')}"})

    def _exited(self, process: StdioProcess) -> None:
        self.fail(McpServerExited(process.describe_exit()))
        if self._on_exit is not None:
            self._on_exit(self)

    def fail(self, error: Exception) -> None:
        """No answers can come any more: every pending call errors at once."""
        if self.closed_error is None:
            self.closed_error = error
        pending, self._pending = self._pending, {}
        for call in pending.values():
            call.result.set_exception(error)

    def close(self, error: Exception | None = None) -> None:
        """Fail what is pending, stop the process and reap it."""
        self.fail(error or McpServerExited(f"MCP server {self.name!r} was stopped"))
        self.process.close()
