"""A stdio MCP server the agent gives up on is killed and reaped at once, not when its session ends:
one stopped for flooding (-32603 `mcp_server_flooding`, after MAX_JUNK messages that cannot be
served), and one that failed to start while still running (it answered `initialize` with an
error). Without the kill on flooding (`JsonRpcLink._flooded`) a server flooding after it had
started keeps running, writing and being read until its session ends; a server that refused
`initialize` used to do so. The agent keeps serving throughout. The servers are real processes; each one's pid is read from the agent's INFO log
line "started MCP server NAME (pid N)", so a server killed before a turn could ask it is still
found.
"""

from __future__ import annotations

import re
import time
from typing import Any

from acp_green.mcp.peer import MAX_JUNK
from tests.helpers import wait_gone, wait_until
from tests.mcp.test_stdio_flood import flooder, tool_result, worst_control_latency

#: Generous: the kill is at once and the reap follows the child's EOF; a loaded machine is slow.
GONE_WITHIN = 15.0
FLOODED = f"sent {MAX_JUNK} messages that cannot be served"
# Reads `initialize` (id 1, our first request), answers it with an error, then stays: only the
# agent can end it.
REFUSES_INITIALIZE = ('read line; echo \'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"not today"}}\'; '
                      'exec sleep 600')


def server_pid(agent: Any, name: str) -> int:
    """The pid of the MCP server `name`, from the agent's log (needs --log-level INFO)."""
    pattern = re.compile(rf"started MCP server {re.escape(name)} \(pid (\d+)\)")
    found = wait_until(lambda: pattern.search(bytes(agent.stderr).decode("utf-8", "replace")), 30, f"MCP server {name} to start")
    return int(found.group(1))


def still_serving(agent: Any, session_id: str) -> None:
    """Control requests are answered promptly and a turn runs to its end."""
    assert worst_control_latency(agent, 1.0) < 3.0
    assert agent.prompt(session_id, "hello").result(timeout=30) == {"stopReason": "end_turn"}


def test_a_server_flooding_after_it_started_is_killed_and_reaped_while_the_agent_serves(launch):
    """A server that initialized and then floods replies to ids nobody waits for (for 600 s if
    nobody stops it) is stopped as flooding: the turn that calls it fails saying so, its process is
    gone (reaped, no zombie) within GONE_WITHIN seconds, and the agent keeps serving."""
    agent = launch("--ephemeral", "--log-level", "INFO")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[flooder("fl", "unknown", 600)])
    pid = server_pid(agent, "fl")
    text = tool_result(agent, session_id, "/mcp fl pid")
    deadline = time.monotonic() + 45
    while text.startswith("completed: ") and time.monotonic() < deadline:
        time.sleep(0.2)  # answered before MAX_JUNK junk replies were read (a loaded machine): again
        text = tool_result(agent, session_id, "/mcp fl pid")
    assert text.startswith("failed: ") and FLOODED in text, text
    assert wait_gone(pid, GONE_WITHIN), f"the flooding server (pid {pid}) still runs after its link was failed"
    still_serving(agent, session_id)
    agent.close_input()
    assert agent.wait_exit(30) == 0


def test_yes_as_a_server_is_killed_and_reaped_once_stopped_as_flooding(launch):
    """`yes` as a declared server floods before it could answer `initialize`: it fails to start as
    flooding and its process is gone within GONE_WITHIN seconds, while the agent keeps serving."""
    agent = launch("--ephemeral", "--log-level", "INFO")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[{"name": "yes", "command": "yes", "args": [], "env": []}])
    pid = server_pid(agent, "yes")
    text = tool_result(agent, session_id, "/mcp yes anything")
    assert text.startswith("failed: ") and FLOODED in text, text
    assert wait_gone(pid, GONE_WITHIN), f"yes (pid {pid}) still runs after it was stopped as flooding"
    still_serving(agent, session_id)
    agent.close_input()
    assert agent.wait_exit(30) == 0


def test_a_server_that_refuses_initialize_is_stopped_and_reaped_not_left_running(launch):
    """A server that answers `initialize` with an error and stays: the turn that asks for it fails
    saying why, and its process is gone within GONE_WITHIN seconds, long before its session ends."""
    agent = launch("--ephemeral", "--log-level", "INFO")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[{"name": "no", "command": "sh", "args": ["-c", REFUSES_INITIALIZE], "env": []}])
    pid = server_pid(agent, "no")
    text = tool_result(agent, session_id, "/mcp no anything")
    assert text.startswith("failed: ") and "failed to start: initialize failed: not today" in text, text
    assert wait_gone(pid, GONE_WITHIN), f"the server that failed to start (pid {pid}) still runs"
    still_serving(agent, session_id)
    agent.close_input()
    assert agent.wait_exit(30) == 0
