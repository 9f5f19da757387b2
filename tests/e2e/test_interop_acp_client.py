"""Interop (real clients): `acp-client` (PyPI), a small asyncio client nobody on this
project wrote, drives `acp-green serve` through tests/peers/acp_client_driver.py.

acp-client advertises no fs capability, so `/read` and `/write` must fail their tool call without
asking the user anything (capabilities are checked before asking). Every message both ways is
logged by tests/peers/tee_agent.py and checked: both sides' against the stable and the unstable
schema, the rig's invariants, and every tool call finished before its prompt's response.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import TESTS, invariant_problems, stream_schema_problems, unfinished_tool_calls, wire_log_records

PEERS = TESTS / "peers"


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk")


def last_status(updates: list[dict[str, Any]], tool_call_id: str) -> str | None:
    statuses = [u["status"] for u in updates if u.get("toolCallId") == tool_call_id and "status" in u]
    return statuses[-1] if statuses else None


def test_acp_client_drives_acp_green_serve(tmp_path):
    """A plain prompt, /read and /write without fs capability, /mcp demo echo, a cancel, and a
    prompt after it, in one session; stop reasons and tool-call endings read from the wire."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("not readable by this client\n")
    log = tmp_path / "wire.log"
    agent = [sys.executable, str(PEERS / "tee_agent.py"), str(log), "--", sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
    done = subprocess.run([sys.executable, str(PEERS / "acp_client_driver.py"), str(work), "--", *agent],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads(done.stdout)

    assert report["plain"]["text"] == "hello from acp-client"
    # No fs capability: each tool call fails, nothing was asked, no fs request went out.
    assert last_status(report["read"]["updates"], "read-1") == "failed"
    assert last_status(report["write"]["updates"], "write-1") == "failed"
    assert report["write"]["asked"] == 0
    assert not (work / "out.txt").exists()
    assert report["mcp"]["text"] == "echoed for acp-client"
    assert last_status(report["mcp"]["updates"], "mcp-1") == "completed"
    assert last_status(report["cancel"]["updates"], "mcp-1") in ("completed", "failed")
    assert report["after"]["text"] == "still here"

    records = wire_log_records(log)
    wire = [r.message for r in records]
    assert wire[0]["method"] == "initialize"
    assert wire[0]["params"]["clientCapabilities"]["fs"] == {"readTextFile": False, "writeTextFile": False}
    assert not [m for m in wire if str(m.get("method", "")).startswith("fs/")]
    prompt_ids = [m["id"] for m in wire if m.get("method") == "session/prompt"]
    stops = [m["result"]["stopReason"] for m in wire if "result" in m and m.get("id") in prompt_ids and "method" not in m]
    assert stops == ["end_turn", "end_turn", "end_turn", "end_turn", "cancelled", "end_turn"]
    problems = stream_schema_problems(records) + invariant_problems(records) + unfinished_tool_calls(records)
    assert problems == [], problems
    assert stream_schema_problems(records, sender="client") == []  # acp-client's own messages, for the record
