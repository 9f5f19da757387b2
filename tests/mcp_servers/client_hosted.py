"""The MCPServer a test client hosts and offers to the agent with `type: "acp"` (outbound bridges)."""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer


def make_server() -> MCPServer:
    server = MCPServer("client-hosted", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return f"client says {text}"

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep (cancellable)."""
        await asyncio.sleep(seconds)
        return "slept"

    return server
