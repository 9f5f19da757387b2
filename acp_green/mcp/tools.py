"""An in-process MCP tool server written against acp_green's API (no MCP SDK involved).

A tool is a plain function of a `ToolCall`; it runs in a greenlet and may wait cooperatively.
The call's token is set when the MCP client cancels (`notifications/cancelled`,
`$/cancel_request`) or the connection closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..errors import INVALID_PARAMS, METHOD_NOT_FOUND, McpError, TurnCancelled, one_line

log = logging.getLogger(__name__)

#: MCP revisions this server answers `initialize` with (newest last).
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@dataclass(slots=True)
class ToolCall:
    """One `tools/call` as a tool function receives it."""

    name: str
    arguments: dict[str, Any]
    token: CancelToken

    @property
    def cancelled(self) -> bool:
        return self.token.is_set()

    def sleep(self, seconds: float) -> None:
        """Wait cooperatively; raises TurnCancelled if the call is cancelled first."""
        if self.token.wait(seconds):
            raise TurnCancelled()


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its MCP description and the function that runs it."""

    name: str
    handler: Callable[[ToolCall], Any]
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": dict(self.input_schema)}


class ToolServer:
    """The server side of MCP for a set of tools: initialize, ping, tools/list, tools/call."""

    def __init__(self, name: str, tools: Sequence[Tool], *, version: str = "0.1.0", instructions: str | None = None) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.tools = {tool.name: tool for tool in tools}

    def handle(self, method: str, params: Any, token: CancelToken) -> Any:
        """Answer one MCP request; raises McpError for an MCP-level error."""
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
            result: dict[str, Any] = {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": self.version},
            }
            if self.instructions:
                result["instructions"] = self.instructions
            return result
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [tool.to_wire() for tool in self.tools.values()]}
        if method == "tools/call":
            return self._call(params, token)
        raise McpError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _call(self, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name!r}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "tools/call: arguments must be an object")
        try:
            value = tool.handler(ToolCall(tool.name, arguments, token))
        except (TurnCancelled, McpError):
            raise
        except Exception as exc:  # a tool's failure is a result the model can read (MCP convention)
            log.warning("tool %s.%s failed: %s", self.name, name, exc)
            return {"content": [{"type": "text", "text": one_line(f"{type(exc).__name__}: {exc}")}], "isError": True}
        return tool_result(value)


def tool_result(value: Any) -> dict[str, Any]:
    """A tool function's return value as an MCP CallToolResult."""
    if isinstance(value, dict) and "content" in value:
        return value
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    return {"content": [{"type": "text", "text": wire.dumps(value)}], "structuredContent": {"result": value}, "isError": False}
