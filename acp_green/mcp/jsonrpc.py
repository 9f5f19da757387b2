"""MCP's JSON-RPC to one stdio MCP server: the shared `peer.McpPeer` core, held, over a child process.

Requests are written at once, in call order, through the process's single writer; waiting
for the answer is separate, so a relay can write at admission and wait in the background
(S7). Cancelling sends `notifications/cancelled` with our id and forgets the call, so a late
reply is dropped. Each line the child writes is one message for `McpPeer.receive`.

A child that stops reading its stdin: once `StdioProcess.max_stdin_bytes` wait for it, a new
request is refused at once (`McpServerBacklog`, -32000 `mcp_backlog`: the caller learns why
and can retry), and a notification or a response to the server is dropped and counted
(`dropped_messages`; nobody waits for it, so refusing it would reach no one, and closing the
link would punish a server that is only slow). A server that floods junk is killed (`_flooded`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import McpServerBacklog, McpServerExited, McpServerFlooding
from ..rpc.cancel import CancelToken
from ..rpc.outgoing import PendingRequest
from .peer import McpPeer, NotificationHandler, RequestHandler
from .process import StdioProcess

log = logging.getLogger(__name__)


class JsonRpcLink:
    """Our end of the JSON-RPC conversation with one MCP server process: the `peer` core over its stdio."""

    def __init__(
        self,
        argv: list[str],
        *,
        name: str,
        on_request: RequestHandler | None = None,
        on_notification: NotificationHandler | None = None,
        on_exit: Callable[["JsonRpcLink"], None] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        """Start the server process; raises OSError if it cannot be started."""
        self.name = name
        self.peer = McpPeer(name, self._send_request, self._send, on_request=on_request,
                            on_notification=on_notification, on_flooded=self._flooded)
        self._on_exit = on_exit
        self.dropped_messages = 0
        self.process = StdioProcess(argv, self.peer.receive, name=name, env=env, cwd=cwd, on_exit=self._exited,
                                    on_too_long=self.peer.discard)

    @property
    def pid(self) -> int:
        return self.process.pid

    # -- the conversation, through the core ----------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.peer.alive

    @property
    def invalid_messages(self) -> int:
        return self.peer.invalid_messages

    def start_request(self, method: str, params: Any) -> PendingRequest:
        return self.peer.start_request(method, params)

    def wait(self, call: PendingRequest, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.peer.wait(call, token, timeout)

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.peer.request(method, params, token, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.peer.notify(method, params)

    def respond(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        self.peer.respond(request_id, result, error)

    def cancel(self, call: PendingRequest, reason: str, error: BaseException | None = None) -> None:
        self.peer.cancel(call, reason, error)

    # -- the transport the core is given -------------------------------------------------------
    def _send_request(self, request_id: int, method: str, params: Any, data: bytes) -> None:
        process = self.process
        if not process.has_room(len(data)):
            raise McpServerBacklog(
                f"MCP server {self.name!r} is not reading its input: {process.queued_bytes} bytes wait for it "
                f"(at most {process.max_stdin_bytes}); {method} was refused",
                data={"queuedBytes": process.queued_bytes, "limit": process.max_stdin_bytes})
        if not process.send(data):
            raise self.peer.closed_error or McpServerExited(process.describe_exit())

    def _send(self, data: bytes, what: str) -> None:
        process = self.process
        if not process.has_room(len(data)):
            self.dropped_messages += 1
            if self.dropped_messages == 1:
                log.warning("MCP %s: the server is not reading its input (%d bytes wait for it, at most %d); "
                            "%s dropped, and further messages that do not fit are only counted",
                            self.name, process.queued_bytes, process.max_stdin_bytes, what)
            return
        if not process.send(data):
            log.debug("MCP %s: %s not written: the server is gone", self.name, what)

    def _flooded(self, error: McpServerFlooding) -> None:
        self.process.kill()  # never waits: we are in its reader; the core has failed what waits

    def _exited(self, process: StdioProcess) -> None:
        self.peer.fail(McpServerExited(process.describe_exit()))
        if self._on_exit is not None:
            self._on_exit(self)

    def close(self, error: Exception | None = None) -> None:
        """Fail what is pending, stop the process and reap it."""
        self.peer.fail(error or McpServerExited(f"MCP server {self.name!r} was stopped"))
        self.process.close()
        if self.dropped_messages:
            log.warning("MCP %s: %d messages were dropped because the server did not read them", self.name, self.dropped_messages)
