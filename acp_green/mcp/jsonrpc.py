"""MCP's JSON-RPC to one stdio MCP server: the shared `peer.McpPeer` core over a child process.

Requests are written at once, in call order, through the process's single writer; waiting
for the answer is separate, so a relay can write at admission and wait in the background
(S7). Cancelling sends `notifications/cancelled` with our id and forgets the call, so a late
reply is dropped. Each line the child writes is one message for `McpPeer.receive`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import McpServerExited
from .peer import McpPeer, NotificationHandler, RequestHandler
from .process import StdioProcess

log = logging.getLogger(__name__)


class JsonRpcLink(McpPeer):
    """Our end of the JSON-RPC conversation with one MCP server process."""

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
        super().__init__(name, on_request, on_notification)
        self._on_exit = on_exit
        self.process = StdioProcess(argv, self.receive, name=name, env=env, cwd=cwd, on_exit=self._exited)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _send_request(self, request_id: int, method: str, params: Any, data: bytes) -> None:
        if not self.process.send(data):
            raise self.closed_error or McpServerExited(self.process.describe_exit())

    def _send(self, data: bytes, what: str) -> None:
        if not self.process.send(data):
            log.debug("MCP %s: %s not written: the server is gone", self.name, what)

    def _exited(self, process: StdioProcess) -> None:
        self.fail(McpServerExited(process.describe_exit()))
        if self._on_exit is not None:
            self._on_exit(self)

    def close(self, error: Exception | None = None) -> None:
        """Fail what is pending, stop the process and reap it."""
        self.fail(error or McpServerExited(f"MCP server {self.name!r} was stopped"))
        self.process.close()
