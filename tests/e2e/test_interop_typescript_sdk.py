"""Interop: a Node script on the official TypeScript SDK (@agentclientprotocol/sdk, pinned in
tests/node/package-lock.json) drives `acp-green serve`: initialize, session, a streamed prompt,
a permission round trip with an fs write, and a cancel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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
