"""MCP server starts hold neither the receive loop nor other sessions (item 3).

- https: the TLS context (loading a trust store: 35-50 ms of CPU) is made once per process, on a
  thread. Made per link on the hub, 64 https servers declared in one `session/new` held every
  request of the connection 2.3-3.2 s (5-6 s on a loaded machine). Shown here without a clock: the
  making of the context is held shut (tests/mcp/tls_start_agents.py) and requests are answered
  while every one of the 64 starts waits for it; once it opens, the servers are reached over TLS.
- Nor does an https start wait for gevent's pool of 10 threads, where name lookups run (a session
  whose servers' names never resolve fills it): the context has a thread of its own, and a server
  named by an IP address is connected without a lookup.
- stdio: a starting place (STARTING_AT_ONCE per process, by session in turn) goes on once the
  server's processes are idle, not after STAGGER (2 s) each: 36 sessions whose servers never
  answer `initialize` delayed another session's server 30-34 s, past the mute ones' own 30 s
  timeout. Shown by order, not time: the other session's server answers while none of the mute
  ones has given up yet.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from acp_green.mcp.starting import wait_while_busy

from tests.mcp.hostile_http_helpers import hostile_servers, http_entry, tool_text
from tests.mcp.test_https_handshake import self_signed
from tests.mcp_helpers import RECORDER, stdio_entry

GATED = "tests.mcp.tls_start_agents:GatedTlsAgent"
POOL_FILLING = "tests.mcp.tls_start_agents:PoolFillingAgent"
HTTPS_SERVERS = 64
MUTE_SESSIONS = 36


def test_requests_are_answered_while_64_https_starts_wait_for_tls(launch, tmp_path):
    """64 https servers in one session/new: while all their starts wait for the TLS context,
    session/list and another session/new are answered (S10); once the context is made, a call
    reaches a server over TLS. With the context made on the hub, nothing is answered until it is."""
    cert, key = self_signed(tmp_path)
    gate = tmp_path / "tls-gate"
    with hostile_servers(1, "tls-slow", "0", cert, key) as [port]:
        agent = launch("--ephemeral", "--agent", GATED, env={"SSL_CERT_FILE": cert, "ACP_TEST_GATE": str(gate)})
        agent.initialize()
        entries = [http_entry(f"t{i}", f"https://127.0.0.1:{port}/mcp") for i in range(HTTPS_SERVERS)]
        new = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": entries})
        listing = agent.make_request("session/list", {})
        agent.send(new, listing)  # one write: the list is read right behind the 64 starts
        session_id = agent.pending_for(new).result(timeout=60)["sessionId"]
        answered = agent.pending_for(listing)
        assert [s["sessionId"] for s in answered.result(timeout=30)["sessions"]] == [session_id]
        other = agent.new_session()  # control goes on too, the gate still shut
        assert not gate.exists()
        print(f"\nsession/list answered {1000 * (answered.answered_at - answered.sent_at):.1f} ms after it was sent, "
              f"{HTTPS_SERVERS} https starts waiting for TLS")
        gate.touch()
        assert agent.prompt(session_id, "/mcp t0 echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert "over tls" in tool_text(agent, session_id)
        assert other != session_id


def test_an_https_server_by_address_is_reached_while_gevents_pool_is_full(launch, tmp_path):
    """Every thread of gevent's pool taken (as endless name lookups would take them): a session's
    https server on 127.0.0.1 still starts and answers over TLS; its TLS context is made on a
    thread of its own and its address needs no lookup."""
    cert, key = self_signed(tmp_path)
    gate = tmp_path / "pool-gate"
    with hostile_servers(1, "tls-slow", "0", cert, key) as [port]:
        agent = launch("--ephemeral", "--agent", POOL_FILLING, env={"SSL_CERT_FILE": cert, "ACP_TEST_GATE": str(gate)})
        agent.initialize()
        try:
            filler = agent.new_session()
            assert agent.prompt(filler, "/fill").result(timeout=60) == {"stopReason": "end_turn"}
            session_id = agent.new_session(mcp_servers=[http_entry("t", f"https://127.0.0.1:{port}/mcp")])
            assert agent.prompt(session_id, "/mcp t echo").result(timeout=60) == {"stopReason": "end_turn"}
            assert "over tls" in tool_text(agent, session_id)
            assert not gate.exists()
        finally:
            gate.touch()


def test_another_sessions_server_starts_while_36_sessions_of_mute_servers_wait(launch):
    """36 sessions each declare a stdio server that never answers initialize (`sleep`) and an
    https server on a TCP port that never speaks (the handshake waits); then session B's working
    stdio server answers a tool call while every mute stdio server still waits: none of them has
    given up (30 s) by then. With each place held STAGGER (2 s), B's server started only after all 36
    sessions had had a turn, 36 s later, after the first mute ones had failed."""
    with hostile_servers(1, "silent") as [silent]:
        agent = launch("--ephemeral")
        agent.initialize()
        for i in range(MUTE_SESSIONS):
            agent.new_session(mcp_servers=[{"name": f"mute{i}", "command": "sleep", "args": ["600"], "env": []},
                                           http_entry(f"tcp{i}", f"https://127.0.0.1:{silent}/mcp")])
        started = time.monotonic()
        session_b = agent.new_session(mcp_servers=[stdio_entry("st", RECORDER)])
        assert agent.prompt(session_b, "/mcp st pid").result(timeout=120) == {"stopReason": "end_turn"}
        took = time.monotonic() - started
        given_up = [line for line in agent.stderr_text(timeout=0.5).splitlines() if "failed to start" in line]
        print(f"\nsession B's server answered its first tool call {took:.1f}s after B was opened, "
              f"{MUTE_SESSIONS} sessions of mute servers waiting")
        assert given_up == [], given_up[:3]  # the mute stdio servers still wait (their https neighbours give up at 10 s)


def test_a_starting_place_goes_on_when_the_start_waits_and_stays_while_it_computes():
    """The rule a place follows (`starting.wait_while_busy`): a server whose processes only wait
    (a `sleep`, as a mute server) is let go after a few looks; one whose process group computes
    keeps its place to the end of the stagger, even when the process computing is a grandchild
    behind a shell (a `uvx`/`npx` launcher) and the machine is busy (waiting to run counts)."""
    waiting = subprocess.Popen(["sleep", "60"], start_new_session=True)
    computing = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "while True: pass"; true'], start_new_session=True)
    try:
        assert wait_while_busy(lambda: waiting.pid, 30.0) is True
        assert wait_while_busy(lambda: computing.pid, 1.0) is False
        assert wait_while_busy(lambda: None, 0.3) is False  # not launched yet: only the stagger ends it
    finally:
        for child in (waiting, computing):
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
