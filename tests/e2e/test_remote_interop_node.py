"""Interop over the network: the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0, pinned in
tests/node/package-lock.json) drives a real `acp-green serve --listen 127.0.0.1:0` with its own
remote clients, `experimental/http-client` (createHttpStream: POST, event streams per connection
and per session, DELETE) and `experimental/ws-client` (createWebSocketStream, on the `ws` package:
node 20 has no global WebSocket). The peer is tests/node/interop_remote.mjs; it prints a report.
"""

from __future__ import annotations

import pytest

from tests.node_peers import needs_node, require_node_package, run_peer
from tests.remote_serve import remote_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow  # a third-party peer: the official TypeScript SDK on node as the client


@needs_node
@pytest.mark.parametrize("kind", ["http", "ws"])
def test_typescript_sdk_remote_client_converses_then_loads_the_session_on_a_new_connection(kind, remote_server, tmp_path):
    """Over Streamable HTTP and over WebSocket, with the TypeScript SDK's own clients: initialize,
    session/new, a prompt whose 20 chunks arrive in order before its answer (S5), a running prompt
    cancelled (S1, S11: it answers "cancelled", S14), a permission the client answers mid-turn
    (S1) with the fs write that follows; the stream is closed (DELETE answered 202 / the socket
    closed), and a new stream's session/load replays the whole history, in order, nothing lost,
    then takes a prompt. Every message passed the SDK's own schema (it complains of none)."""
    require_node_package("@agentclientprotocol", "sdk")
    require_node_package("ws")
    server = remote_server()
    assert server.url is not None
    report = run_peer("interop_remote.mjs", server.url, kind, str(tmp_path))
    print(report["transportLog"])  # shown if an assertion below fails

    assert report["complaints"] == []
    first = report["first"]
    assert (first["protocolVersion"], first["agentName"], first["loadSession"]) == (1, "acp-green-demo", True)
    assert first["hello"] == {"stopReason": "end_turn", "chunks": [f"hello over {kind}"]}
    assert first["stream"]["stopReason"] == "end_turn"
    assert [c.split(":")[0] for c in first["stream"]["chunks"]] == [str(i) for i in range(20)]
    assert first["cancel"] == {"stopReason": "cancelled"}
    path = str(tmp_path / f"from-ts-{kind}.txt")
    assert first["write"] == {"stopReason": "end_turn", "permissions": [f"Write {path}"],
                              "writes": {path: f"written over {kind}"}, "path": path}
    assert first["toolStatuses"] == ["pending", "completed"]

    prompts = report["prompts"]
    assert prompts == [f"hello over {kind}", "/stream 20 16", "/wait", f"/write {path} written over {kind}"]
    replay = report["second"]["replay"]
    assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"] == prompts
    assert [u for u in replay if u["sessionUpdate"] != "user_message_chunk"] == \
        [u for u in report["live"] if u["sessionUpdate"] != "user_message_chunk"]
    assert report["second"]["after"] == {"stopReason": "end_turn", "chunks": ["still here"]}

    if kind == "http":
        assert (first["closed"], report["second"]["closed"]) == (202, 202)
        # Nothing was refused; a request the SDK aborted as it closed is not the server's answer.
        refused = [entry for entry in report["transportLog"] if entry.split()[1].isdigit() and int(entry.split()[1]) >= 400]
        assert refused == [], report["transportLog"]
    else:
        upgrades = [entry for entry in report["transportLog"] if entry.startswith("upgrade")]
        assert upgrades == ["upgrade 101 [connection id]"] * 2  # each 101 carried Acp-Connection-Id
