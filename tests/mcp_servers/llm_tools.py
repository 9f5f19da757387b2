"""A stdio MCP server on the official `mcp` SDK with one read-only tool and one that is not (a test peer).

Tools: `lookup` (annotated readOnlyHint) and `note`, which appends its text to $MARK_DIR/notes,
so a test can tell whether it really ran.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("llm-tools", log_level="WARNING")
MARK_DIR = os.environ.get("MARK_DIR")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> str:
    """Look a key up; changes nothing."""
    return f"value of {key}"


@server.tool()
def note(text: str) -> str:
    """Write a note down (a side effect: the agent must ask first)."""
    if MARK_DIR:
        with open(os.path.join(MARK_DIR, "notes"), "a") as handle:
            handle.write(text + "\n")
    return f"noted {text}"


if __name__ == "__main__":
    server.run("stdio")
