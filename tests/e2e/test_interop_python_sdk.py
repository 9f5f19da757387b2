"""End-to-end with the official ACP Python SDK (agent-client-protocol 0.12.1) as the client."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys

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
