"""The official `mcp` SDK client calling `echo` on the bench's MCP server directly over stdio.

Benchmark peer for `acp-green bench` W8. usage: mcp_sdk_client.py CALLS SERVER_COMMAND...
Prints one JSON object: the round-trip time of each call in milliseconds (after one warm-up call).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(calls: int, command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("echo", {"text": "warm-up"})
        rtts = []
        for n in range(calls):
            started = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {n}"})
            rtts.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"rtt_ms": rtts}))  # ok: a separate process; its stdout is the bench's pipe, not an ACP wire


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
