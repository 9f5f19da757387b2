"""A small, typical agent on the official ACP Python SDK (agent-client-protocol 0.12.1, asyncio).

It echoes the prompt back word by word, pausing 50 ms per word like a model streaming tokens,
offers two modes, and stops with `cancelled` when the turn is cancelled. Written the way the
SDK's examples are written, to see what `acp-green probe` finds in such an agent.
A long prompt for the probe is simply a prompt of many words.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
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

WORD_DELAY = 0.05


class EchoAgent:
    """Echo agent: streams the prompt back, one word per chunk."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=min(protocol_version, PROTOCOL_VERSION),
                                  agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="sdk-echo-agent", version="0.1.0"))

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._cancelled[session_id] = asyncio.Event()
        modes = SessionModeState(current_mode_id="ask", available_modes=[SessionMode(id="ask", name="Ask"),
                                                                           SessionMode(id="code", name="Code")])
        return NewSessionResponse(session_id=session_id, modes=modes)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        return SetSessionModeResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        cancelled = self._cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        text = " ".join(getattr(block, "text", "") for block in prompt)
        for word in text.split():
            if cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await self._conn.session_update(session_id, update_agent_message(text_block(word + " ")))
            await asyncio.sleep(WORD_DELAY)
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self._cancelled.get(session_id)
        if event is not None:
            event.set()


async def main() -> None:
    await run_agent(EchoAgent())


if __name__ == "__main__":
    asyncio.run(main())
