"""Drive an ACP agent with the `acp-client` package (PyPI, asyncio) as the client; print a JSON report.

usage: python acp_client_driver.py WORKDIR -- COMMAND...

acp-client offers the agent no files and no terminal, answers a permission through a handler, and
returns each prompt's text (not its stop reason: the test reads that from the wire log). One
session, in order: a plain prompt, /read and /write of relative paths (the client cannot serve
them), /mcp demo echo, a cancel during a slow MCP tool call, and a prompt after the cancel.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp_client import Agent


async def drive(workdir: Path, command: list[str]) -> dict[str, Any]:
    asked: list[dict[str, Any]] = []

    async def permission(request: dict[str, Any]) -> str | None:
        asked.append(request)
        return "allow"

    agent = Agent(command, workdir, permission=permission)
    report: dict[str, Any] = {}

    async def ask(name: str, text: str) -> None:
        updates: list[dict[str, Any]] = []
        answer = await asyncio.wait_for(agent.ask(text, on_update=updates.append), 60)
        report[name] = {"text": answer, "updates": updates, "asked": len(asked)}

    try:
        await ask("plain", "hello from acp-client")
        await ask("read", "/read in.txt")
        await ask("write", "/write out.txt from acp-client")
        await ask("mcp", '/mcp demo echo {"text": "echoed for acp-client"}')

        started = asyncio.Event()
        updates: list[dict[str, Any]] = []

        def on_update(update: dict[str, Any]) -> None:
            updates.append(update)
            if update.get("sessionUpdate") == "tool_call":
                started.set()

        slow = asyncio.create_task(agent.ask('/mcp demo sleep {"seconds": 30}', on_update=on_update))
        await asyncio.wait_for(started.wait(), 60)
        agent.cancel()
        report["cancel"] = {"text": await asyncio.wait_for(slow, 60), "updates": updates}
        await ask("after", "still here")
    finally:
        await agent.stop()
    return report


def main() -> int:
    workdir = Path(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    print(json.dumps(asyncio.run(drive(workdir, command))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
