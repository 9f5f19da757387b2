"""A small stdio MCP server built on the official `mcp` SDK (a test peer, never used by the runtime).

Tools: `echo` (fast), `sleep` (slow, cancellable; records a cancellation in $MARK_DIR), `pid`,
`big` (a result of N bytes), `crash` (the process exits in the middle of the request).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-tools", log_level="WARNING")
MARK_DIR = os.environ.get("MARK_DIR")


def _mark(name: str) -> None:
    if MARK_DIR:
        with open(os.path.join(MARK_DIR, name), "w") as handle:
            handle.write(str(os.getpid()))


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so; cancellable."""
    _mark("sleep-started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark("sleep-cancelled")
        raise
    return f"slept {seconds}"


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def big(size: int) -> str:
    """A text of `size` bytes."""
    return "x" * size


@server.tool()
def crash() -> str:
    """Exit at once, in the middle of the request."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--exit-now":
        sys.exit(2)
    server.run("stdio")
