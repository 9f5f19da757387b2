"""End-to-end with the official ACP Python SDK (agent-client-protocol 0.12.1) as the client: a whole
conversation over the tee (every message schema-checked), and stored sessions across a restart of
the real CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from acp import spawn_agent_process, text_block

from tests.helpers import TESTS, stream_schema_problems, wire_log_records

pytestmark = pytest.mark.slow  # a third-party peer: the official Python SDK as the client

PEERS = TESTS / "peers"


def test_official_python_sdk_client_drives_acp_green(tmp_path):
    """Initialize, new session, a streamed prompt, a file read through fs/read_text_file, a permission
    answered by the client before fs/write_text_file, and a cancel — every agent message schema-valid."""
    log = tmp_path / "wire.log"
    agent = [sys.executable, str(PEERS / "tee_agent.py"), str(log), "--", sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
    done = subprocess.run(
        [sys.executable, str(PEERS / "sdk_client.py"), str(tmp_path), "--", *agent],
        capture_output=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads(done.stdout)
    assert report["protocolVersion"] == 1 and report["agentName"] == "acp-green-demo"
    assert report["modes"] == ["ask", "code"]
    assert report["stream"]["stopReason"] == "end_turn"
    assert [c.split(":")[0] for c in report["stream"]["chunks"]] == [str(i) for i in range(50)]
    assert report["read"]["stopReason"] == "end_turn" and report["read"]["reads"] == [f"{tmp_path}/note.txt"]
    completed = [u for u in report["read"]["updates"] if u.get("status") == "completed"]
    assert completed[0]["content"][0]["content"]["text"] == "read through the client"
    assert report["write"]["stopReason"] == "end_turn"
    assert report["write"]["permissions"] and report["write"]["writes"] == {f"{tmp_path}/out.txt": "hello sdk"}
    assert report["cancel"]["stopReason"] == "cancelled"
    assert report["setMode"] == "ok"

    records = wire_log_records(log)
    assert len(records) > 60
    assert stream_schema_problems(records) == []


# -- stored sessions across a restart ----------------------------------------------------------------
SERVE = [sys.executable, "-m", "acp_green", "serve"]


class RecordingClient:
    """The client side the SDK calls back: it only records session updates."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


def _kinds(client: RecordingClient, session_id: str) -> list[str]:
    return [u.session_update for sid, u in client.updates if sid == session_id]


async def _first_run(state: str) -> str:
    client = RecordingClient()
    env = {**os.environ}
    async with spawn_agent_process(client, *SERVE, "--state-dir", state, env=env) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        caps = init.agent_capabilities
        assert caps.load_session is True
        assert caps.session_capabilities.list is not None and caps.session_capabilities.resume is not None
        session = await conn.new_session(cwd="/tmp")
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("hello from the sdk")])
        assert response.stop_reason == "end_turn"
        listed = await conn.list_sessions()
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session.session_id, "hello from the sdk")]
        return session.session_id


async def _second_run(state: str, session_id: str) -> None:
    client = RecordingClient()
    async with spawn_agent_process(client, *SERVE, "--state-dir", state, env={**os.environ}) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd="/tmp", session_id=session_id)
        replay = [(u.session_update, getattr(u.content, "text", None)) for sid, u in client.updates
                  if sid == session_id and u.session_update in ("user_message_chunk", "agent_message_chunk")]
        assert replay == [("user_message_chunk", "hello from the sdk"), ("agent_message_chunk", "hello from the sdk")]
        before = len(_kinds(client, session_id))
        await conn.resume_session(session_id=session_id, cwd="/tmp")
        await asyncio.sleep(0)
        assert "user_message_chunk" not in _kinds(client, session_id)[before:]
        await conn.close_session(session_id=session_id)
        assert await conn._conn.send_request("session/delete", {"sessionId": session_id}) == {}
        assert (await conn.list_sessions()).sessions == []


def test_sdk_client_loads_resumes_closes_and_deletes_after_restart(tmp_path):
    """session/new + prompt, restart, then session/load, resume, close, delete and list, all
    driven by the official SDK (which validates every message it decodes)."""
    state = str(tmp_path / "state")
    session_id = asyncio.run(_first_run(state))
    asyncio.run(_second_run(state, session_id))


async def _drive_notices_agent(log: str) -> tuple[list[str], list[str]]:
    """The SDK (its older schema knows no notices) drives an agent that sends notices and
    compactions, through the tee (`log`): the stop reasons, and the update kinds it decoded."""
    client = RecordingClient()
    serve = [sys.executable, str(PEERS / "tee_agent.py"), log, "--", *SERVE, "--ephemeral", "--agent", "tests.surface_agents:NoticesAgent"]
    async with spawn_agent_process(client, *serve, env={**os.environ}) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd="/tmp")
        stops = [(await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])).stop_reason
                 for text in ("/notice warning Heads up", "/compact", "/named")]
        return stops, _kinds(client, session.session_id)


def test_sdk_client_on_the_older_schema_is_sent_no_notice_nor_compaction(tmp_path):
    """The official Python SDK advertises neither `session.notices` nor `session.compaction`: the
    agent's notices and compaction are not sent to it (the wire says so: the SDK would drop them
    unseen), and every turn ends as usual."""
    log = str(tmp_path / "wire.log")
    stops, kinds = asyncio.run(_drive_notices_agent(log))
    assert stops == ["end_turn"] * 3
    sent = [r.message["params"]["update"]["sessionUpdate"] for r in wire_log_records(log)
            if r.direction == "in" and isinstance(r.message, dict) and r.message.get("method") == "session/update"]
    assert not {"notice", "compaction_update", "compaction_summary_chunk"} & set(sent), sent
    assert kinds.count("agent_message_chunk") == 3 and "tool_call" in kinds
    assert stream_schema_problems(wire_log_records(log)) == []
