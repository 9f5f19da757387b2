"""An HTTP MCP server flooding an event stream with events that cannot be served: the reader
yields to the hub between events (acp_green/rpc/fairness.py), the core logs the first ten and counts
the rest, and at the core's MAX_JUNK the link is closed with a clear error.

S10: control stays answered while an event stream floods.
"""

from __future__ import annotations

import time

import gevent
import pytest

from acp_green.errors import McpServerExited, McpServerFlooding
from acp_green.mcp import peer
from acp_green.mcp.httplink import HttpLink
from tests.helpers import wait_until
from tests.mcp.hostile_http_helpers import hostile_servers, http_entry, tool_text, tool_update, worst_control_latency
from tests.mcp.test_http_hostile import flood_server

JUNK = "data: not json at all\n\n"


def test_a_flood_of_junk_events_closes_the_link_with_a_clear_error_and_logs_ten(launch):
    """A server in another process answers a tool call with an endless stream of non-JSON events:
    control requests are answered meanwhile, the call fails saying the server was stopped for
    sending MAX_JUNK messages that cannot be served, only the first ten are logged, the next call fails as
    the link is closed, and the agent exits at EOF."""
    with hostile_servers(1, "sse-junk") as [port]:
        agent = launch("--ephemeral")
        agent.initialize()
        session_id = agent.new_session(mcp_servers=[http_entry("h", f"http://127.0.0.1:{port}/mcp")])
        prompt = agent.prompt(session_id, "/mcp h echo")
        worst, _answered = worst_control_latency(agent, 2.0)
        assert worst < 2.0, f"a control request waited {worst:.2f}s"
        assert prompt.result(timeout=60) == {"stopReason": "end_turn"}
        assert tool_update(agent, session_id)["status"] == "failed"
        assert "MCP server 'h' was stopped: it sent 1000 messages that cannot be served" in tool_text(agent, session_id)
        assert agent.prompt(session_id, "/mcp h echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert "was stopped" in tool_text(agent, session_id)
        agent.close_input()
        assert agent.wait_exit(timeout=30) == 0
        logged = [line for line in agent.stderr_text().splitlines() if "cannot be served; ignored" in line]
        assert len(logged) == 10, logged


def test_the_link_is_closed_at_the_bound(monkeypatch):
    """One junk event short of the core's MAX_JUNK is counted and the call goes on; at the bound the
    call fails as flooding and the link is closed (the same bound as a stdio server's)."""
    monkeypatch.setattr(peer, "MAX_JUNK", 50)
    with flood_server("", JUNK, 49, 49 * len(JUNK)) as (port, _server):
        link = HttpLink(f"http://127.0.0.1:{port}/mcp", name="junk", connect_timeout=5)
        try:
            with pytest.raises(McpServerExited, match="ended its response to tools/list without answering"):
                link.request("tools/list", {}, timeout=30)
            assert link.invalid_messages == 49 and link.alive
        finally:
            link.close()
    with flood_server("", JUNK, 4096, 1 << 40) as (port, _server):  # endless: only our close ends its stream
        link = HttpLink(f"http://127.0.0.1:{port}/mcp", name="junk", connect_timeout=5)
        try:
            with pytest.raises(McpServerFlooding, match="it sent 50 messages that cannot be served"):
                link.request("tools/list", {}, timeout=30)
            assert not link.alive
            wait_until(lambda: link.open_streams == 0, 30, "the flooded link to close its streams")
        finally:
            link.close()


def test_a_junk_flood_leaves_the_hub_free_between_events(monkeypatch):
    """With the bound out of the way, a server in another process floods junk events: a greenlet
    sleeping 1 ms at a time wakes dozens of times a second at least meanwhile, as the reader parks
    between polls for I/O once its share of a hub iteration is spent (without that: twice in 2 s)."""
    monkeypatch.setattr(peer, "MAX_JUNK", 10**12)
    with flood_server("", JUNK, 4096, 1 << 40) as (port, _server):
        link = HttpLink(f"http://127.0.0.1:{port}/mcp", name="junk", connect_timeout=5)
        try:
            call = link.start_request("tools/list", {})
            gevent.sleep(0)
            wait_until(lambda: link.invalid_messages > 1000, 60, "the flood to start")
            wakes, end = 0, time.monotonic() + 2.0
            while time.monotonic() < end:
                gevent.sleep(0.001)
                wakes += 1
            flooded = link.invalid_messages
            assert flooded > 5_000, f"only {flooded} events were read: the flood was not under way"
            assert wakes > 50, f"a 1 ms timer ran only {wakes} times in 2 s of flood"
            link.cancel(call, "done")
        finally:
            link.close()
