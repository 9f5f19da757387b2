"""acp_green: a gevent runtime for Agent Client Protocol agents over stdio.

Importing the package is cheap and imports neither gevent nor the stdlib modules that
`acp-green serve` must patch first (its default); the public names load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Agent": "acp_green.agent",
    "Turn": "acp_green.agent",
    "Mode": "acp_green.agent",
    "SelectOption": "acp_green.agent",
    "BooleanOption": "acp_green.agent",
    "Command": "acp_green.agent",
    "AuthMethod": "acp_green.agent",
    "ExtensionCall": "acp_green.agent",
    "SessionView": "acp_green.agent",
    "ServeOptions": "acp_green.server",
    "Server": "acp_green.server",
    "serve": "acp_green.server",
    "serve_stdio": "acp_green.server",
    "RpcError": "acp_green.errors",
    "TurnCancelled": "acp_green.errors",
    "CapabilityMissing": "acp_green.errors",
    "ClientError": "acp_green.errors",
    "McpError": "acp_green.errors",
    "McpUnavailable": "acp_green.errors",
    "Terminal": "acp_green.terminals",
    "TerminalReleased": "acp_green.terminals",
    "ExitStatus": "acp_green.terminals",
    "Elicited": "acp_green.elicitation",
    "Tool": "acp_green.mcp.tools",
    "ToolCall": "acp_green.mcp.tools",
    "ToolServer": "acp_green.mcp.tools",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'acp_green' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
