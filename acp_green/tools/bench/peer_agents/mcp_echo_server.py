"""The bench's MCP server: one `echo` tool, on the official `mcp` SDK (MCPServer), over stdio or HTTP.

Benchmark peer for `acp-green bench` W8. usage:
  mcp_echo_server.py                 stdio
  mcp_echo_server.py --http PORTFILE streamable HTTP on 127.0.0.1, an ephemeral port written to PORTFILE
"""

from __future__ import annotations

import os
import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-echo", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def serve_http(port_file: str) -> None:
    import uvicorn

    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it the answer's body waits for the ACK of its headers (a 40 ms delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    with open(port_file + ".tmp", "w") as handle:
        handle.write(str(sock.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)  # whole or absent: the bench polls for it
    config = uvicorn.Config(server.streamable_http_app(json_response=True), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        server.run()
