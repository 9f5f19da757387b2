"""MCP for acp_green: MCP's JSON-RPC spoken by the runtime itself, and MCP-over-ACP bridges.

- `process`: a stdio child process run the gevent way;
- `jsonrpc`: our client end of MCP's JSON-RPC to such a process;
- `tools`: an in-process MCP tool server written against acp_green's API;
- `client`: the MCP client session agent code uses (`turn.mcp(name)`);
- `bridge`: inbound bridges (the peer connects to servers we provide);
- `registry`: the bridges of one ACP connection and the `mcp/*` routes;
- `session`: the MCP servers of one session.
"""

from __future__ import annotations

from .client import McpClientSession, McpTools, result_text
from .tools import Tool, ToolCall, ToolServer

__all__ = ["McpClientSession", "McpTools", "Tool", "ToolCall", "ToolServer", "result_text"]
