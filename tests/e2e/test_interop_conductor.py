"""Interop with a proxy chain: @thinkwell/conductor (pinned in tests/node/package-lock.json)
in front of `acp-green serve`. The client declares an MCP server it hosts as `acp:ID`; the
conductor turns it into `{"type": "http", "url": "http://127.0.0.1:PORT"}` for the agent and
carries the agent's MCP requests back to the client in `_mcp/message`. A turn reaches that
server's tools through the chain. What the conductor itself gets wrong is in docs/INTEROP.md."""

from __future__ import annotations

import os
import sys

import pytest

from acp_green.tools.rig.client import AcpClient, ClientPolicy
from tests.helpers import TESTS, said
from tests.mcp_peer import SdkServerOverAcp
from tests.mcp_servers.client_hosted import make_server
from tests.node_peers import needs_node, require_node_package

NODE_DIR = str(TESTS / "node")
CONDUCTOR = os.path.join(NODE_DIR, "conductor.mjs")

pytestmark = needs_node


class ConductorHostedServer(SdkServerOverAcp):
    """The client's MCP server as the conductor reaches it: `_mcp/connect` names the connection id
    the conductor chose (and the `acp:` URL); `_mcp/message` carries each MCP message."""

    def _connect(self, client: AcpClient, request: dict) -> None:
        params = request.get("params") or {}
        if params.get("url") != f"acp:{self.server_id}":
            client.respond_error(request["id"], {"code": -32602, "message": "unknown MCP server URL"})
            return
        self.connections.append(params["connectionId"])
        client.respond(request["id"], {"connectionId": params["connectionId"]})

    def _forget(self, client: AcpClient, message: dict) -> None:
        self.disconnected.append((message.get("params") or {}).get("connectionId"))

    def policy(self) -> ClientPolicy:
        return ClientPolicy(handlers={"_mcp/connect": self._connect, "_mcp/message": self._message},
                            notification_handlers={"_mcp/message": self._notification, "_mcp/disconnect": self._forget})


@pytest.fixture
def hosted():
    require_node_package("@thinkwell", "conductor")
    server = ConductorHostedServer(make_server(), server_id="9f3c-client-tools")
    server.start()
    yield server
    server.stop()


def test_a_turn_reaches_an_mcp_server_the_conductor_provides_over_acp(launch, hosted):
    """The chain client -> conductor -> acp-green: the agent connects to the conductor's HTTP
    bridge like any HTTP MCP server, and the tool call is answered by the client's server."""
    command = ["node", CONDUCTOR, "--", sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
    agent = launch(command=command, policy=hosted.policy())
    assert agent.initialize()["agentCapabilities"]["mcpCapabilities"]["http"] is True
    session_id = agent.new_session(mcp_servers=[{"type": "http", "name": "proj", "url": f"acp:{hosted.server_id}", "headers": []}])
    assert agent.prompt(session_id, '/mcp proj echo {"text": "through the chain"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "client says through the chain"
    assert len(hosted.connections) == 1
    assert hosted.inner_methods == ["initialize", "notifications/initialized", "tools/call"]
    assert agent.prompt(session_id, '/mcp proj echo {"text": "again"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).endswith("client says again")
    assert len(hosted.connections) == 1  # one MCP session for the ACP session
