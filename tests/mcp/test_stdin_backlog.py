"""A `--provide-mcp` stdio server that stops reading its stdin: what waits for it is bounded in
bytes (`StdioProcess.max_stdin_bytes`), requests beyond are refused -32000 `mcp_backlog`,
notifications dropped and counted; and `mcp/disconnect` is admitted even when every background
slot is held by a relay stuck on that server.

S7 and S9: a bridge whose server stops reading is bounded, and mcp/disconnect (which frees resources) is admitted even with all 32 background slots taken: the one exception to S9's limit.
"""

from __future__ import annotations

import sys

from acp_green.mcp.process import MAX_STDIN_BYTES
from tests.helpers import wait_gone
from tests.mcp_helpers import HERE, connect, message

FLOODER = str(HERE / "mcp_servers" / "flooder.py")
DEAF = ["--provide-mcp", f"deaf={sys.executable} {FLOODER} deaf 600"]
MB = 1 << 20


def test_a_server_that_stops_reading_cannot_grow_the_agents_memory(launch):
    """10: 200 notifications of 1 MB each for a server that answered its ping and reads no more:
    the agent's RSS grows by about the bound (16 MiB), not by 200 MB; a request beyond is refused
    -32000 mcp_backlog saying why; the drop is logged once."""
    agent = launch("--ephemeral", *DEAF)
    agent.initialize()
    connection_id, pid = connect(agent, "acp-green:deaf")
    before = agent.memory_rss()
    assert before is not None
    payload = "z" * MB
    for _ in range(200):
        agent.notify("mcp/message", {"connectionId": connection_id, "method": "notifications/big", "params": {"data": payload}})
    request = message(agent, connection_id, "tools/call", {"name": "echo", "arguments": {"text": payload}})
    agent.send(request)  # does not fit beside what waits (a small one still would)
    error = agent.pending_for(request).error(timeout=60)
    assert error["code"] == -32000 and error["data"]["reason"] == "mcp_backlog", error
    assert "is not reading its input" in error["message"] and str(MAX_STDIN_BYTES) in error["message"]
    grown = agent.memory_rss() - before
    assert grown < 80 * MB, f"RSS grew by {grown / MB:.0f} MB"
    assert agent.call("session/list", {}) == {"sessions": []}
    assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}
    assert wait_gone(pid)
    agent.close_input()
    assert agent.wait_exit(30) == 0
    stderr = agent.stderr_text()
    assert stderr.count("is not reading its input") == 1, stderr[-3000:]
    assert "messages were dropped because the server did not read them" in stderr


def test_disconnect_is_admitted_while_every_background_slot_is_held_by_a_stuck_relay(launch):
    """10: 32 mcp/message requests wait on a server that never answers (every slot taken); a 33rd
    is refused connection_busy, but mcp/disconnect is answered, reaps the server, and the 32
    relays are answered with an error."""
    agent = launch("--ephemeral", *DEAF)
    agent.initialize()
    connection_id, pid = connect(agent, "acp-green:deaf")
    stuck = []
    for i in range(32):
        request = message(agent, connection_id, "tools/call", {"name": "never", "arguments": {"i": i}})
        agent.send(request)
        stuck.append(agent.pending_for(request))
    busy = message(agent, connection_id, "tools/list")
    agent.send(busy)
    assert agent.pending_for(busy).error()["data"]["reason"] == "connection_busy"
    assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}
    assert wait_gone(pid)
    for pending in stuck:
        assert pending.error(timeout=30)["code"] == -32603
