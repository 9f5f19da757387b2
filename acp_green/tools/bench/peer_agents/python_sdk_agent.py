"""A minimal ACP agent on the official Python SDK (agent-client-protocol 0.12.1, asyncio).

Benchmark peer for `acp-green bench`: understands `/stream N [SIZE]` and `/wait` like acp_green's
demo agent, written the plain way the SDK documents (one awaited session_update per chunk).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
)

MODES = [SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code")]


class PeerSession:
    """One session's mode and cancellation flag."""

    def __init__(self) -> None:
        self.mode = "ask"
        self.cancelled = asyncio.Event()


class PeerAgent:
    """Streams numbered chunks or waits for cancellation."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, PeerSession] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="python-sdk-peer", version="0.12.1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self.sessions[session_id] = PeerSession()
        return NewSessionResponse(session_id=session_id, modes=SessionModeState(current_mode_id="ask", available_modes=MODES))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        self.sessions[session_id].mode = mode_id
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self.sessions[session_id]
        session.cancelled = asyncio.Event()
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        if text == "/wait":
            await session.cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        parts = text.split()
        if len(parts) >= 2 and parts[0] == "/stream":
            count = int(parts[1])
            size = int(parts[2]) if len(parts) > 2 else 64
            for i in range(count):
                if session.cancelled.is_set():
                    return PromptResponse(stop_reason="cancelled")
                head = f"{i}:"
                await self.conn.session_update(session_id, update_agent_message_text(head + "." * (size - len(head))))
        else:
            await self.conn.session_update(session_id, update_agent_message_text(text))
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    # The SDK's Agent Protocol lists every ACP method, but the SDK looks handlers up by name and
    # answers a missing one -32601 (acp/router.py): this peer has only the methods the bench calls.
    asyncio.run(run_agent(PeerAgent()))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
