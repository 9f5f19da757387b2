"""Interop: a Node script on the official TypeScript SDK (@agentclientprotocol/sdk, pinned in
tests/node/package-lock.json) drives `acp-green serve`: initialize, session, a streamed prompt,
a permission round trip with an fs write, and a cancel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import sdk_unstable_schema
from tests.helpers import TESTS
from tests.node_peers import needs_node, require_node_package

pytestmark = pytest.mark.slow  # a third-party peer: the official TypeScript SDK on node as the client

NODE_DIR = str(TESTS / "node")


@needs_node
def test_typescript_sdk_client_drives_acp_green_serve(tmp_path):
    require_node_package("@agentclientprotocol", "sdk")
    done = subprocess.run(
        ["node", os.path.join(NODE_DIR, "interop_client.mjs"), str(tmp_path), "--",
         sys.executable, "-m", "acp_green", "serve", "--ephemeral"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
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
    if not sdk_unstable_schema.available():
        pytest.skip("the sdk-2.4.0 schema is not on this machine")
    done = subprocess.run(
        ["node", os.path.join(NODE_DIR, "interop_session_admin.mjs"), str(tmp_path), "--",
         sys.executable, "-m", "acp_green", "serve", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
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
