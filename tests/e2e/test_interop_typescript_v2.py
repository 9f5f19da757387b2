"""Interop: the official TypeScript SDK's draft ACP v2 client (@agentclientprotocol/sdk 2.4.0,
`experimental/v2`, pinned in tests/node/package-lock.json) drives `acp-green serve`: it negotiates
v2, sets the session's mode as its `mode` config option, streams a prompt (acknowledged with its
messageId, ended by an idle state_update), answers a form, cancels one, resumes the session replaying it from the start, and closes it. The SDK parses every message
it receives with its own v2 schema: one it refuses fails a request or is a complaint."""

from __future__ import annotations

import pytest

from tests.helpers import TESTS
from tests.node_peers import needs_node, peer_report, require_node_package

pytestmark = pytest.mark.slow  # a third-party peer: the official TypeScript SDK on node as the client


@needs_node
def test_typescript_sdk_v2_client_drives_acp_green_serve(tmp_path):
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("interop_v2.mjs", tmp_path, "--ephemeral")
    assert report["complaints"] == []
    assert report["protocolVersion"] == 2 and report["agentName"] == "acp-green-demo"
    assert report["sessionCapabilities"] == ["additionalDirectories", "delete", "mcp", "prompt"]
    assert report["initialMode"] == "ask" and report["configOptions"] == [["mode", "mode", "code"], ["model", "model", "echo-fast"]]
    stream = report["stream"]
    assert stream["messageId"] == "string" and stream["stopReason"] == "end_turn"
    assert stream["kinds"].count("agent_message_chunk") == 5 and [t[:2] for t in stream["text"].split(".") if t] == ["0:", "1:", "2:", "3:", "4:"]
    assert stream["kinds"].index("state_update") < stream["kinds"].index("user_message") < stream["kinds"].index("agent_message_chunk")
    ask = report["ask"]
    assert ask["forms"] == ["Who is asking?"] and ask["text"] == "you answered: from the v2 client", ask
    assert ask["stopReason"] == "end_turn" and ask["kinds"].count("state_update") == 3  # running, requires_action, running
    assert report["cancel"]["acknowledged"] == "string" and report["cancel"]["stopReason"] == "cancelled"
    resume = report["resume"]
    assert resume["firstUserMessageId"] is True and resume["text"] == stream["text"] + ask["text"]
    assert "user_message_chunk" in resume["kinds"] and resume["stopReason"] is None  # the current state: idle
    assert report["list"] == [True] and report["close"] == {}
    assert report["exit"] == {"code": 0, "signal": None}


@needs_node
def test_typescript_sdk_v2_client_answers_a_permission_request(tmp_path):
    """The request's title and its tool call as `subject` parse under the SDK's v2 schema; the
    turn waited on the user meanwhile (requires_action, then running)."""
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("interop_v2_permission.mjs", tmp_path, "--ephemeral", "--agent", "tests.agents:AsksPermissionAgent", cwd=str(TESTS.parent))
    assert report["complaints"] == []
    assert report["asked"] == [{"title": "Touch /tmp/x", "subject": "tool_call", "toolCall": "Touch /tmp/x"}]
    assert report["states"] == ["running", "requires_action", "running", "idle:end_turn"]
    assert report["text"] == "allowed"
    assert report["exit"] == {"code": 0, "signal": None}
