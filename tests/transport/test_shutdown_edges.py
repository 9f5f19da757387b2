"""S13 at its edges: other signals, requests read but not dispatched, the final flush."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

import gevent
from click.testing import CliRunner
from gevent.event import Event

from acp_green.cli import cli
from acp_green.rpc.transport import Outbound, OutputLimits
from tests.agents import SessionSetupHeldAgent
from tests.helpers import wait_gone
from tests.mcp_helpers import SDK_TOOLS, stdio_entry
from tests.store.test_e2e import usage_json


def answers_by_id(client) -> Counter:
    return Counter(json.dumps(m["id"]) for m in client.received() if "id" in m and "method" not in m)


# -- signals ------------------------------------------------------------------------------------
def test_sighup_takes_the_sigterm_path_S13_S16(launch, tmp_path):
    """S13/S16: SIGHUP (the editor's terminal closed) answers the running prompt `cancelled`,
    records its usage, stops the session's MCP server and exits 0 — the SIGTERM sequence."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state)
    agent.initialize()
    with_mcp = agent.new_session(mcp_servers=[stdio_entry("st", SDK_TOOLS)])
    assert agent.prompt(with_mcp, "/mcp st pid").result() == {"stopReason": "end_turn"}
    child = int(agent.updates(with_mcp)[-2]["content"]["text"])
    sid = agent.new_session()
    waiting = agent.prompt(sid, "/wait")
    agent.call("session/list", {})  # answered in receive order: the prompt was admitted before it
    agent.signal(signal.SIGHUP)
    assert waiting.result() == {"stopReason": "cancelled"}
    assert agent.wait_exit(timeout=60) == 0
    assert wait_gone(child)
    assert usage_json(state)["totals"]["byStopReason"] == {"cancelled": 1, "end_turn": 1}


def test_sigquit_dumps_every_stack_and_keeps_serving(launch):
    """SIGQUIT writes the stack of every greenlet to stderr (the reader's among them) and the
    agent goes on answering; a running prompt is untouched."""
    agent = launch("--ephemeral")
    agent.initialize()
    sid = agent.new_session()
    waiting = agent.prompt(sid, "/wait")
    agent.call("session/list", {})
    agent.signal(signal.SIGQUIT)
    agent.wait_for(lambda: b'Greenlet "acp-reader"' in agent.stderr, what="the stack dump on stderr")
    assert b"SIGQUIT" in agent.stderr and b"session/prompt#" in agent.stderr
    assert agent.call("session/list", {})["sessions"]
    assert not waiting.done
    agent.cancel(sid)
    assert waiting.result() == {"stopReason": "cancelled"}
    agent.close_input()
    assert agent.wait_exit(timeout=60) == 0


def test_serve_help_documents_signals_and_the_flush_option():
    """--help says what the signals do and documents --flush-stall-timeout with its default."""
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    assert "--flush-stall-timeout" in result.output and "default: 5.0" in result.output
    assert "SIGHUP" in result.output and "SIGQUIT" in result.output


# -- requests read but not dispatched ------------------------------------------------------------
def test_requests_read_but_not_dispatched_are_answered_at_shutdown_S13(inprocess):
    """S13: at SIGTERM every request whose line was already read into the process is answered
    exactly once — the one being handled normally, each one still buffered -32800 (a prompt
    too), a garbage line -32700, an over-long line line_too_long; notifications get nothing."""
    agent = SessionSetupHeldAgent()
    harness = inprocess(agent, max_line_bytes=1024)
    client = harness.client
    client.initialize()
    sid = client.new_session()
    agent.entered = Event()
    held = client.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    lists = [client.make_request("session/list", {}) for _ in range(300)]
    prompt = client.make_request("session/prompt", client.prompt_params(sid, "/wait"))
    note = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    client.send(held, *lists[:150], note, prompt, *lists[150:])
    client.send_raw(b"not json\n" + b'{"x":"' + b"y" * 2000 + b'"}\n')
    agent.entered.wait(timeout=30)  # the reader holds every line of both writes and is parked here
    assert harness.server.protocol.endpoint.active == 0
    harness.server.request_stop("SIGTERM")
    agent.release.set()
    harness.greenlet.join(timeout=60)
    assert harness.exit_code == 0
    harness.finish()
    answered = answers_by_id(client)
    requests = [held, *lists, prompt]
    assert all(answered[json.dumps(r["id"])] == 1 for r in requests), "each request answered exactly once"
    assert client.pending_for(held).result()["sessionId"]
    assert {client.pending_for(r).error()["code"] for r in [*lists, prompt]} == {-32800}
    nulls = [m["error"] for m in client.received() if m.get("id", 0) is None]
    assert sorted(e["code"] for e in nulls) == [-32700, -32600]
    assert [e["data"]["reason"] for e in nulls if e["code"] == -32600] == ["line_too_long"]
    assert not [m for m in client.received() if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]


# -- the final flush -----------------------------------------------------------------------------
def test_final_flush_waits_for_a_client_that_pauses_then_reads_S13(launch):
    """S13: a client that stops reading for 3 s at exit and then reads gets every answer."""
    agent = launch("--ephemeral")
    agent.initialize()
    agent.pause_reading()
    requests = [agent.make_request("session/list", {}) for _ in range(6000)]  # ~330 KB of answers
    agent.send(*requests)
    agent.close_input()
    gevent.sleep(3)  # the client is busy elsewhere: the scenario, not a synchronization
    agent.resume_reading()
    assert agent.wait_exit(timeout=60) == 0
    agent.wait_for(lambda: agent.eof.is_set(), what="the agent's stdout to close")
    assert all(agent.pending_for(r).done for r in requests)


def test_final_flush_goes_on_past_the_stall_limit_while_the_client_reads_S13(launch):
    """S13: the stall limit counts time without progress, not the flush: a client that keeps
    reading in bursts with pauses gets everything, long past the limit."""
    agent = launch("--ephemeral", "--flush-stall-timeout", "2")
    agent.initialize()
    requests = [agent.make_request("session/list", {}) for _ in range(6000)]
    seen = 0

    def read_in_bursts(message):
        nonlocal seen
        seen += 1
        if seen % 750 == 0:  # eight pauses of 1 s: about 8 s of flushing against a 2 s limit
            agent.pause_reading()
            gevent.spawn_later(1.0, agent.resume_reading)

    agent.listeners.append(read_in_bursts)
    agent.pause_reading()
    agent.send(*requests)
    agent.close_input()
    agent.resume_reading()
    assert agent.wait_exit(timeout=90) == 0
    agent.wait_for(lambda: agent.eof.is_set(), what="the agent's stdout to close")
    assert all(agent.pending_for(r).done for r in requests)


def test_client_that_never_reads_again_cannot_hold_the_exit_S13(launch):
    """S13: answers nobody reads hold the process no longer than the grace plus the stall limit."""
    agent = launch("--ephemeral", "--shutdown-grace", "1", "--flush-stall-timeout", "1")
    agent.initialize()
    agent.pause_reading()
    agent.send(*[agent.make_request("session/list", {}) for _ in range(6000)])
    agent.close_input()
    assert agent.wait_exit(timeout=60) == 0
    agent.wait_for(lambda: b"output not fully flushed" in agent.stderr, what="the shutdown warning on stderr")


def _flush_rig(limits: OutputLimits, payload: int):
    read_end, write_end = os.pipe()
    failures: list[BaseException] = []
    outbound = Outbound(write_end, limits, on_failure=failures.append)
    outbound.put(b"x" * payload)
    gevent.sleep(0)  # the writer fills the pipe and parks
    return read_end, write_end, outbound, failures


def test_final_flush_ends_at_once_when_the_client_closed_its_end_S13():
    """S13: EPIPE ends the flush at once, however long the stall limit and the cap."""
    read_end, write_end, outbound, failures = _flush_rig(OutputLimits(flush_stall_timeout=600, flush_total_timeout=600), 1 << 20)
    try:
        closing = gevent.spawn(outbound.close)
        gevent.sleep(0)
        os.close(read_end)
        assert closing.get(timeout=30) is False
        assert failures and isinstance(failures[0], BrokenPipeError)
    finally:
        os.close(write_end)


def test_final_flush_stops_at_the_total_cap_however_the_client_trickles_S13():
    """S13: a client that reads a trickle forever cannot hold the process past the total cap."""
    read_end, write_end, outbound, _failures = _flush_rig(OutputLimits(flush_stall_timeout=600, flush_total_timeout=1), 64 << 20)
    trickle = gevent.spawn(_trickle, read_end)
    try:
        assert gevent.spawn(outbound.close).get(timeout=60) is False
        assert outbound.queued_bytes > 0
    finally:
        trickle.kill()
        os.close(read_end)
        os.close(write_end)


def _trickle(fd: int) -> None:
    os.set_blocking(fd, False)
    while True:
        try:
            os.read(fd, 512)
        except BlockingIOError:
            pass
        gevent.sleep(0.01)
