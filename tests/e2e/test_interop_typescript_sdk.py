"""Interop: a Node script on the official TypeScript SDK (@agentclientprotocol/sdk, pinned in
tests/node/package-lock.json) drives `acp-green serve`: initialize, session, a streamed prompt,
a permission round trip with an fs write, and a cancel; on the SDK's `/unstable` entrypoint, the
session methods (fork, archive, title, status) and an MCP server the client provides over the
newest MCP-over-ACP shape; notices, compaction and tool-call names on the stable one."""

from __future__ import annotations

import json

import pytest

from tests import sdk_unstable_schema
from tests.mcp_helpers import connect_shape_schema, mcp_problems, message_shape_schema
from tests.node_peers import needs_node, peer_report, require_node_package

pytestmark = pytest.mark.slow  # a third-party peer: the official TypeScript SDK on node as the client


@needs_node
def test_typescript_sdk_client_drives_acp_green_serve(tmp_path):
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("interop_client.mjs", tmp_path, "--ephemeral")
    assert report["protocolVersion"] == 1
    assert report["agentName"] == "acp-green-demo"
    assert report["modes"] == ["ask", "code"]
    assert report["stream"]["stopReason"] == "end_turn"
    assert [c.split(":")[0] for c in report["stream"]["chunks"]] == [str(i) for i in range(40)]
    path = str(tmp_path / "from-ts.txt")
    assert report["write"] == {"stopReason": "end_turn", "permissions": [f"Write {path}"], "writes": {path: "hello from node"}}
    assert report["cancel"] == {"stopReason": "cancelled"}
    assert report["after"] == {"stopReason": "end_turn", "text": "still here"}
    assert report["exit"] == {"code": 0, "signal": None}


@needs_node
def test_typescript_sdk_unstable_client_forks_archives_titles_and_checks_sessions(tmp_path):
    """The SDK's unstable entrypoint: session/fork, archive/unarchive (and list's `archived`
    filter), set_title and status, each answer parsed by the SDK's own schema, and every line the
    agent wrote valid in the sdk-2.4.0 unstable schema."""
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("interop_session_admin.mjs", tmp_path, "--state-dir", str(tmp_path / "state"))
    assert report["invalid"] == []
    assert {name: report["sessionCapabilities"].get(name) for name in ("fork", "archive", "status", "title")} == {
        "fork": {}, "archive": {}, "status": {}, "title": {}}
    assert report["fork"] == {"isNew": True, "modes": ["ask", "code"]}
    assert report["title"] == "the fork"
    assert (report["statusOpen"], report["statusArchived"]) == ("open", "saved")
    fork = {"id": "fork", "archived": False, "title": "the fork"}
    source = {"id": "source", "archived": True, "title": "hello from node"}
    assert report["listDefault"] == [fork]
    assert report["listOnly"] == [source]
    assert sorted(report["listInclude"], key=lambda s: s["id"]) == [fork, source]
    assert sorted(s["id"] for s in report["listAfterUnarchive"]) == ["fork", "source"]
    assert report["unknown"]["reason"] == "unknown_session"
    assert report["exit"] == {"code": 0, "signal": None}
    sent = [("out", json.loads(line)) for line in "".join(report["lines"]["out"]).splitlines() if line.strip()]
    received = [("in", json.loads(line)) for line in "".join(report["lines"]["in"]).splitlines() if line.strip()]
    methods = {m["method"] for _, m in sent if "method" in m}
    assert {"session/fork", "session/archive", "session/unarchive", "session/set_title", "session/status"} <= methods
    # The client's lines first, so each answer is checked against the type of the request it answers.
    assert sdk_unstable_schema.problems(sent + received) == []


@needs_node
def test_typescript_sdk_client_accepts_notices_compaction_and_tool_names(tmp_path):
    """The SDK 2.4.0 client advertises `session.notices` and `session.compaction`: the notice, the
    compaction's updates and summary chunks, and the tool calls' `name` reach its handler, each
    parsed by the SDK's own schema (an update it refuses never does, and it complains on stderr)."""
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("interop_notices.mjs", tmp_path, "--ephemeral", "--agent", "tests.surface_agents:NoticesAgent")
    assert report["complaints"] == []
    assert report["notices"] == [{"sessionUpdate": "notice", "severity": "warning", "title": "Context is almost full",
                                  "description": "details here"}]
    text = {"type": "text", "text": "Summarised the chat"}
    assert report["compaction"] == [
        {"sessionUpdate": "compaction_update", "compactionId": "c-1", "status": "in_progress"},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c-1", "content": {"type": "text", "text": "Summarised "}},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c-1", "content": {"type": "text", "text": "the chat"}},
        {"sessionUpdate": "compaction_update", "compactionId": "c-1", "status": "completed", "summary": [text]},
    ]
    assert report["tools"] == [["tool_call", "read_file"], ["tool_call_update", "read_file_v2"]]
    assert report["said"] == ["sent=True", "sent=[True, True, True, True]", "named"]
    assert all(report[p] == "end_turn" for p in ("/notice warning Context is almost full", "/compact c-1", "/named"))
    assert report["exit"] == {"code": 0, "signal": None}


@needs_node
def test_typescript_sdk_client_serves_an_mcp_server_over_the_newest_mcp_over_acp_shape(tmp_path):
    """MCP-over-ACP in the newest shape, end to end: the SDK 2.4.0 client (`/unstable`,
    McpOverAcpProvider) declares a `type: "acp"` server; `acp-green serve` probes mcp/connect once,
    gets -32601, and calls the tool with mcp/message by serverId + requestId; an inner error fails
    the tool call with the server's words; a cancelled turn sends $/cancel_request for the outer
    request. Every mcp/message the agent sent validates against the sdk-2.4.0 unstable schema."""
    require_node_package("@agentclientprotocol", "sdk")
    report = peer_report("mcp_client.mjs", tmp_path, "--ephemeral")
    assert report["mcpCapabilities"]["acp"] is True
    assert report["first"] == {"stopReason": "end_turn", "said": "client says over the new shape"}
    assert report["second"] == {"stopReason": "end_turn", "said": "client says again"}
    assert report["missing"]["update"]["status"] == "failed"
    assert "Unknown tool: missing" in report["missing"]["update"]["content"][0]["content"]["text"]
    assert report["cancel"] == {"stopReason": "cancelled"}
    assert [(c["method"], c["name"], c["protocolVersion"]) for c in report["calls"]] == [
        ("tools/call", name, "2026-07-28") for name in ("echo", "echo", "missing", "hold")]
    assert report["exit"] == {"code": 0, "signal": None}
    sent = [m for m in report["fromAgent"] if str(m.get("method", "")).startswith("mcp/")]
    [probe] = [m for m in sent if m["method"] == "mcp/connect"]
    [refusal] = [m for m in report["toAgent"] if m.get("id") == probe["id"] and "method" not in m]
    assert refusal["error"]["code"] == -32601 and mcp_problems(probe, connect_shape_schema()) == []
    messages = [m for m in sent if m["method"] == "mcp/message"]
    assert len(messages) == 4 and {m["params"]["serverId"] for m in messages} == {report["serverId"]}
    assert len({m["params"]["requestId"] for m in messages}) == 4
    for message in messages:
        assert mcp_problems(message, message_shape_schema()) == [], message
    cancels = [m for m in report["fromAgent"] if m.get("method") == "$/cancel_request"]
    assert [c["params"]["requestId"] for c in cancels] == [messages[-1]["id"]]
