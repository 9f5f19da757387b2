"""Drive an ACP agent with the official ACP Python SDK (asyncio) as the client; print a JSON report.

usage: python sdk_client.py WORKDIR -- COMMAND...
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


class RecordingClient:
    """A client that allows every permission and serves files from a directory."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[str] = []
        self.reads: list[str] = []
        self.writes: dict[str, str] = {}

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append(tool_call.title or tool_call.tool_call_id)
        allow = next(o for o in options if o.kind.startswith("allow"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        with open(path, encoding="utf-8") as handle:
            return ReadTextFileResponse(content=handle.read())

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass


def chunks(client: RecordingClient) -> list[str]:
    return [u["content"]["text"] for u in client.updates if u.get("sessionUpdate") == "agent_message_chunk"]


async def drive(workdir: str, command: list[str]) -> dict[str, Any]:
    client = RecordingClient()
    report: dict[str, Any] = {}
    async with spawn_agent_process(client, command[0], *command[1:]) as (conn, process):
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)),
            client_info=Implementation(name="sdk-driver", version="1"),
        )
        report["protocolVersion"] = init.protocol_version
        report["agentName"] = init.agent_info.name if init.agent_info else None
        session = await conn.new_session(cwd=workdir, mcp_servers=[])
        sid = session.session_id
        report["modes"] = [m.id for m in session.modes.available_modes] if session.modes else []

        streamed = await conn.prompt(session_id=sid, prompt=[text_block("/stream 50 32")])
        report["stream"] = {"stopReason": streamed.stop_reason, "chunks": chunks(client)}

        path = f"{workdir}/note.txt"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("read through the client")
        before = len(client.updates)
        read = await conn.prompt(session_id=sid, prompt=[text_block(f"/read {path}")])
        report["read"] = {"stopReason": read.stop_reason, "reads": client.reads, "updates": client.updates[before:]}

        written = await conn.prompt(session_id=sid, prompt=[text_block(f"/write {workdir}/out.txt hello sdk")])
        report["write"] = {"stopReason": written.stop_reason, "permissions": client.permissions, "writes": client.writes}

        waiting = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("/wait")]))
        await asyncio.sleep(0.2)
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(waiting, timeout=30)
        report["cancel"] = {"stopReason": cancelled.stop_reason}
        await conn.set_session_mode(session_id=sid, mode_id="code")
        report["setMode"] = "ok"
    return report


def main() -> None:
    workdir = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    report = asyncio.run(drive(workdir, command))
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
