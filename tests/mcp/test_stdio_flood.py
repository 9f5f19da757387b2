"""A stdio MCP server that writes without pause: the agent keeps answering control requests
(the link's reader yields between lines), every kind of junk is logged within one bound, and a
server that floods junk past `peer.MAX_JUNK` is stopped with a clear error. The servers are real
processes: `yes`, and tests/mcp_servers/flooder.py.

S10: control requests and cancels stay answered while an MCP server floods (the reader yields).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from acp_green.mcp.peer import LOGGED_INVALID, MAX_JUNK
from tests.helpers import process_gone, wait_until
from tests.mcp_helpers import HERE

FLOODER = str(HERE / "mcp_servers" / "flooder.py")


def flooder(name: str, mode: str, seconds: float = 20.0) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [FLOODER, mode, str(seconds)], "env": []}


def tool_result(agent: Any, session_id: str, command: str, timeout: float = 60.0) -> str:
    assert agent.prompt(session_id, command).result(timeout=timeout) == {"stopReason": "end_turn"}
    update = [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]
    return f'{update["status"]}: {update["content"][0]["content"]["text"]}'


def worst_control_latency(agent: Any, seconds: float) -> float:
    """The longest a `session/list` waited for its answer, asked back to back for `seconds`."""
    worst = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        agent.call("session/list", {}, timeout=60)
        worst = max(worst, time.monotonic() - started)
    return worst


def test_a_server_flooding_valid_messages_does_not_starve_control_requests(launch):
    """1: while a server writes valid notifications without pause (for 20 s), `session/list` is
    answered within a bound; before the fix it waited as long as the server wrote."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[flooder("fl", "notify", 20)])
    worst = worst_control_latency(agent, 6.0)  # the server starts, is initialized and floods meanwhile
    started = time.monotonic()
    pid = int(tool_result(agent, session_id, "/mcp fl pid").split(": ", 1)[1])
    assert time.monotonic() - started < 10, "a tool call is answered while the server floods"
    assert not process_gone(pid), "valid messages are not junk: the server keeps running"
    print(f"worst session/list latency while a server floods notifications: {worst * 1000:.0f} ms")
    assert worst < 3.0, f"session/list waited {worst:.1f}s"
    def calls() -> int:
        return sum(u["sessionUpdate"] == "tool_call" for u in agent.updates(session_id))

    before = calls()
    prompt = agent.prompt(session_id, "/mcp fl hang")
    agent.wait_for(lambda: calls() > before, what="the tool call that never returns")
    started = time.monotonic()
    agent.cancel(session_id)
    assert prompt.result(timeout=60) == {"stopReason": "cancelled"}
    took = time.monotonic() - started
    print(f"cancel answered after {took * 1000:.0f} ms")
    assert took < 3.0, f"the cancel took {took:.1f}s"


def test_yes_as_a_server_is_stopped_as_flooding_with_bounded_logging(launch):
    """1: `yes` as a declared server writes garbage lines without end: it is stopped after
    MAX_JUNK of them, the turn that calls it fails saying so, the agent logs a bounded number of
    lines about it and keeps answering."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[{"name": "yes", "command": "yes", "args": [], "env": []}])
    started = time.monotonic()
    text = tool_result(agent, session_id, "/mcp yes anything")
    assert text.startswith("failed: ") and f"sent {MAX_JUNK} messages that cannot be served" in text, text
    assert time.monotonic() - started < 20
    assert worst_control_latency(agent, 1.0) < 3.0
    agent.close_input()
    assert agent.wait_exit(30) == 0
    lines = [line for line in agent.stderr_text().splitlines() if "MCP yes" in line or "'yes'" in line]
    assert LOGGED_INVALID <= len(lines) <= LOGGED_INVALID + 5, "\n".join(lines)


def test_a_server_flooding_replies_to_unknown_ids_is_stopped_and_its_logging_bounded(launch):
    """1: replies to an id nobody waits for count as junk once there are more than requests we
    sent: the server is stopped after MAX_JUNK, the next turn fails saying so, logging is bounded."""
    agent = launch("--ephemeral", "--log-level", "DEBUG")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[flooder("fl", "unknown", 60)])
    text = tool_result(agent, session_id, "/mcp fl pid")  # answered or failed: the flood races the reply
    deadline = time.monotonic() + 45  # the flooder writes for 60 s
    while text.startswith("completed: ") and time.monotonic() < deadline:
        # Not yet MAX_JUNK replies read (a loaded machine runs the flooder slower): call again.
        time.sleep(0.2)
        text = tool_result(agent, session_id, "/mcp fl pid")
    assert text.startswith("failed: ") and f"sent {MAX_JUNK} messages that cannot be served" in text, text
    assert "which nobody waits for" in text
    assert worst_control_latency(agent, 1.0) < 3.0
    agent.close_input()
    assert agent.wait_exit(30) == 0
    lines = [line for line in agent.stderr_text().splitlines() if "nobody waits for" in line]
    assert len(lines) <= LOGGED_INVALID + 5, f"{len(lines)} lines about replies nobody waits for"
