"""Rules that need the real receive loop, writer and shutdown path, proved in-process through
`Server.serve` on os.pipe() descriptors. Each names its rule and goes red under a one-line break."""

from __future__ import annotations

import select
from typing import Any

from click.testing import CliRunner

from acp_green.demo import DemoAgent
from acp_green.transport import OutputLimits


def start(inprocess, **options):
    harness = inprocess(DemoAgent(), **options)
    harness.client.initialize()
    return harness


def test_S1_a_long_extension_request_does_not_hold_the_lines_after_it(inprocess):
    """S1: an extension request runs in the background: a session/new written in the same write,
    behind an extension that runs until cancelled, is answered while the extension still runs."""
    harness = start(inprocess)
    client = harness.client
    long_running = client.make_request("_acp_green/sleep", {"seconds": 600}, request_id="ext")
    new = client.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    client.send(long_running, new)
    assert client.pending_for(new).result(timeout=10)["sessionId"].startswith("sess_")
    assert not client.pending_for(long_running).done
    client.notify("$/cancel_request", {"requestId": "ext"})
    assert client.pending_for(long_running).error()["code"] == -32800


def test_S1_reader_yields_between_buffered_lines(inprocess):
    """S1: lines that arrive in one read are handed over one at a time, and the
    receive loop yields after each, so a background request admitted from the burst runs (and here
    answers) before the control requests read after it."""
    harness = start(inprocess)
    client = harness.client
    session_id = client.new_session()
    echo = client.make_request("_acp_green/echo", {"n": 1}, request_id="echo")
    controls = [client.make_request("session/set_mode", {"sessionId": session_id, "modeId": "code"}, request_id=f"c{i}")
                for i in range(20)]
    burst = [echo, *controls]
    assert sum(len(str(m)) for m in burst) < 4000  # one atomic pipe write: the agent reads it in one go
    client.send(*burst)
    for message in controls:
        assert client.pending_for(message).result() == {}
    assert client.pending_for(echo).result() == {"params": {"n": 1}}
    order = [m["id"] for m in client.received() if "method" not in m and m.get("id") in {"echo", *(c["id"] for c in controls)}]
    assert order.index("echo") < order.index("c0"), order


def test_S2_control_requests_in_one_write_are_answered_in_receive_order(inprocess, tmp_path):
    """S2: control requests run inline in the receive loop, in order: a session/list, which waits
    for the store thread, and a session/new written with it in one write are answered in that
    order, and the list does not contain the session created after it."""
    harness = start(inprocess, state_dir=str(tmp_path / "state"))
    client = harness.client
    listing = client.make_request("session/list", {})
    new = client.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    client.send(listing, new)
    created = client.pending_for(new).result()["sessionId"]
    assert client.pending_for(listing).result()["sessions"] == []
    answers = [m["id"] for m in client.received() if "method" not in m and m.get("id") in (listing["id"], new["id"])]
    assert answers == [listing["id"], new["id"]]
    assert [s["sessionId"] for s in client.call("session/list", {})["sessions"]] == [created]


def test_S9_max_background_from_serve_options_reaches_the_endpoint(inprocess):
    """S9: the background limit is the one configured (here 2), not the default 32: a third
    background request gets -32000 connection_busy at once."""
    harness = start(inprocess, max_background=2)
    client = harness.client
    sessions = [client.new_session() for _ in range(3)]
    waiting = [client.prompt(sessions[0], "/wait"), client.prompt(sessions[1], "/wait")]
    error = client.prompt(sessions[2], "refused").error()
    assert (error["code"], error["data"]["reason"]) == (-32000, "connection_busy")
    for session_id in sessions[:2]:
        client.cancel(session_id)
    assert [p.result() for p in waiting] == [{"stopReason": "cancelled"}] * 2
    assert client.prompt(sessions[2], "now").result() == {"stopReason": "end_turn"}


def test_S9_max_background_option_of_the_cli_reaches_serve_options(monkeypatch):
    """S9: `acp-green serve --max-background N` builds ServeOptions with N (checked without serving:
    the Server is replaced by one that records its options)."""
    from types import SimpleNamespace

    from acp_green import logsetup, server, stderrsink, transport
    from acp_green.cli import cli

    seen: list[Any] = []

    class RecordingServer:
        def __init__(self, agent, options=None, store=None, *, owns_process=False) -> None:
            seen.append(options)

        def serve(self, read_fd: int, write_fd: int) -> int:
            return 0

    monkeypatch.setattr(server, "Server", RecordingServer)
    monkeypatch.setattr(transport, "claim_stdio", lambda *args, **kwargs: (-1, -1))
    monkeypatch.setattr(logsetup, "configure", lambda *args, **kwargs: None)
    # Serving would route this worker's sys.stderr through a sink: not for a test process.
    monkeypatch.setattr(stderrsink, "install", lambda *args, **kwargs: SimpleNamespace(flush=lambda timeout: True))
    result = CliRunner().invoke(cli, ["serve", "--ephemeral", "--max-background", "3"])
    assert result.exit_code == 0, result.output
    assert [options.max_background for options in seen] == [3]


def test_S13_shutdown_releases_producers_waiting_on_the_backlog(inprocess, monkeypatch):
    """S13, back-pressure: a stream held at the high-water mark by a client that stopped reading is
    released at shutdown, sees its cancellation and ends by itself: usage "cancelled", not killed
    at the end of the grace ("aborted")."""
    limits = OutputLimits(high_water=16 << 10, low_water=4 << 10, hard_limit=64 << 20, flush_stall_timeout=30)
    harness = start(inprocess, output=limits, shutdown_grace=3)
    client = harness.client
    server = harness.server
    session_id = client.new_session()
    client.wait_for(lambda: client.updates(session_id), what="the session's commands")  # nothing else in flight
    outbound = server.protocol.endpoint.outbound
    waiting = [0]
    original_wait = outbound.wait_below_high_water

    def wait_below_high_water(cancelled=None) -> None:
        waiting[0] += 1
        try:
            original_wait(cancelled)
        finally:
            waiting[0] -= 1

    monkeypatch.setattr(outbound, "wait_below_high_water", wait_below_high_water)
    client.pause_reading()
    # The client's reader takes this answer (the read it was in) and then reads nothing more.
    assert client.call("session/set_mode", {"sessionId": session_id, "modeId": "code"}) == {}
    pending = client.prompt(session_id, "/stream 1000000 256")
    agent_out = harness._fds[1]  # the server's end of the pipe to the client
    # Held for good: waiting on the backlog while the pipe takes no more and nobody reads it.
    client.wait_for(lambda: waiting[0] and not writable(agent_out), what="the stream to be held")
    client.close_input()
    # The prompt settles (leaves the table) before the final flush; only then read again.
    client.wait_for(lambda: not server.protocol.prompts, timeout=30, what="the stream to settle")
    client.resume_reading()
    harness.greenlet.join(timeout=30)
    assert pending.result() == {"stopReason": "cancelled"}
    assert [r.stop_reason for r in server.store.usage(session_id)] == ["cancelled"]


def writable(fd: int) -> bool:
    """The pipe would take a write now (a writer parked on it is not stuck)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(0))
