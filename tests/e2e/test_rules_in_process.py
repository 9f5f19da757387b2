"""Rules that need the real receive loop, writer and shutdown path, proved in-process through
`Server.serve(read_fd, write_fd)` on os.pipe() descriptors. Each names its rule and goes red under a
one-line break."""

from __future__ import annotations

import select
import time
from typing import Any

import gevent
import pytest
from click.testing import CliRunner

from acp_green.rpc import wire
from acp_green.demo import DemoAgent
from acp_green.tools.rig.client import ClientPolicy, Record
from acp_green.rpc.transport import OutputLimits
from tests.agents import (
    ExtensionSwallowsKillAgent,
    FailingSessionStartAgent,
    FloodsAfterCancelAgent,
    IgnoresCancelAgent,
    KeepsItsTurnAgent,
    NeedsAuthAgent,
    PromptSwallowsKillAgent,
    SnapshotAcrossPauseAgent,
)
from tests.helpers import record_peak_backlog, said


def start(inprocess, agent=None, policy=None, **options):
    harness = inprocess(agent or DemoAgent(), policy, **options)
    harness.client.initialize()
    return harness


def test_prompt_ignoring_cancel_is_killed_at_end_of_grace_and_finalized_S13_S14_S16(inprocess):
    """S13/S14/S16: a prompt that ignores cancellation is killed at the end of the grace, still answers
    `cancelled`, releases its reservation, and leaves exactly one usage record ("aborted")."""
    harness = start(inprocess, IgnoresCancelAgent(), shutdown_grace=0.3)
    client = harness.client
    sid = client.new_session()
    pending = client.prompt(sid, "/stubborn")
    client.wait_for(lambda: "not listening" in said(client.updates(sid)), what="the prompt to start")
    assert harness.finish() == 0
    assert pending.result(timeout=5) == {"stopReason": "cancelled"}
    records = harness.server.store.usage(sid)
    assert [r.stop_reason for r in records] == ["aborted"]
    assert harness.server.protocol.prompts == {}


def test_prompt_ignoring_cancel_is_interrupted_at_the_cancel_grace_and_recorded_cancelled_S14_S16(inprocess):
    """S14/S16: a prompt that ignores its token is interrupted at the cancel grace (before any
    shutdown): it answers `cancelled`, takes the next prompt, and its one usage record says
    `cancelled`, not `aborted` (nothing was killed)."""
    harness = start(inprocess, IgnoresCancelAgent(), cancel_grace=0.05)
    client = harness.client
    sid = client.new_session()
    pending = client.prompt(sid, "/stubborn")
    client.wait_for(lambda: "not listening" in said(client.updates(sid)), what="the prompt to start")
    client.cancel(sid)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    assert client.prompt(sid, "/echo next").result(timeout=30) == {"stopReason": "end_turn"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["cancelled", "end_turn"]
    assert harness.finish() == 0


def test_greenlet_killed_before_it_ever_ran_still_answers_and_releases_S14_S16(inprocess):
    """S14/S16: a prompt greenlet killed before its first switch (its `finally` never runs) still
    answers, frees its slot and session, and leaves one usage record."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    server = harness.server
    endpoint = server.protocol.endpoint
    # Admit directly, as the receive loop would, and kill before the hub ever switches to it.
    request = client.make_request("session/prompt", client.prompt_params(sid, "/wait"), request_id=99)
    client.records.append(Record(time.monotonic(), "out", b"", request))  # for the schema check
    endpoint.handle(wire.Request(99, request["method"], request["params"]))
    [greenlet] = endpoint.greenlets()
    greenlet.kill(block=False)
    client.wait_for(lambda: any(m.get("id") == 99 for m in client.received()), what="the killed prompt's response")
    [response] = [m for m in client.received() if m.get("id") == 99]
    assert response["result"] == {"stopReason": "cancelled"}
    session = server.sessions.get(sid)
    assert not session.busy and endpoint.active == 0
    assert [r.stop_reason for r in server.store.usage(sid)] == ["aborted"]
    # The session and the slot take the next prompt at once.
    assert client.prompt(sid, "next").result() == {"stopReason": "end_turn"}


def test_exactly_one_usage_record_per_admitted_prompt_S16(inprocess):
    """S16: end, cancel and exception each leave one record; a refused prompt leaves none."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    waiting = client.prompt(sid, "/wait")
    refused = client.prompt(sid, "busy")
    assert refused.error()["data"]["reason"] == "session_busy"
    client.cancel(sid)
    assert waiting.result() == {"stopReason": "cancelled"}
    assert client.prompt(sid, "/fail").error()["code"] == -32603
    records = harness.server.store.usage(sid)
    assert [r.stop_reason for r in records] == ["end_turn", "cancelled", "error"]
    assert records[0].input_bytes == 5 and records[0].output_bytes == 5


def test_exception_in_agent_answers_internal_error_and_session_goes_on_S14(inprocess):
    """S14: an exception answers -32603 with a one-line message; the session takes the next prompt."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    error = client.prompt(sid, "/fail").error()
    assert error["code"] == -32603 and "\n" not in error["message"] and "demo failure" in error["message"]
    assert client.prompt(sid, "again").result() == {"stopReason": "end_turn"}


def test_background_request_sees_snapshot_from_admission_S3(inprocess):
    """S3: a re-initialize while a background request runs does not change its snapshot."""
    harness = inprocess(SnapshotAcrossPauseAgent())
    client = harness.client
    client.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "first", "version": "1"}})
    pending = client.request("_test/snapshot", {})
    client.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "second", "version": "2"}})
    result = pending.result()
    assert result["before"]["name"] == "first" and result["after"]["name"] == "first"
    assert result["readOnly"] is True  # the snapshot's capabilities refuse a write
    assert harness.server.context.snapshot.client_info["name"] == "second"


def test_idle_sessions_evicted_busy_ones_kept_and_revived_without_replay_S15(inprocess):
    """S15: idle sessions leave memory; a session with an active prompt never does; a request naming
    an evicted session brings it back transparently, without replay."""
    harness = start(inprocess, idle_timeout=0.2)
    client = harness.client
    idle, busy = client.new_session(), client.new_session()
    assert client.prompt(idle, "remember me").result() == {"stopReason": "end_turn"}
    waiting = client.prompt(busy, "/wait")
    sessions = harness.server.sessions
    passes = []
    original = sessions.evict_idle
    sessions.evict_idle = lambda now=None: passes.append(1) or original(now)
    client.wait_for(lambda: not sessions.is_live(idle), timeout=10, what="the idle session to be evicted")
    seen = len(passes)
    client.wait_for(lambda: len(passes) >= seen + 3, what="three more eviction passes")
    assert sessions.is_live(busy), "a session with an active prompt was evicted"
    before = len(client.updates(idle))
    assert client.call("session/set_mode", {"sessionId": idle, "modeId": "code"}) == {}
    assert sessions.is_live(idle)
    assert len(client.updates(idle)) == before, "reviving replayed history"
    assert client.prompt(idle, "back").result() == {"stopReason": "end_turn"}
    client.cancel(busy)
    assert waiting.result() == {"stopReason": "cancelled"}


def test_client_requests_permission_read_and_write(inprocess):
    """The agent asks the client (permission, fs) while the receive loop keeps running (S1)."""
    policy = ClientPolicy(files={"/tmp/x.txt": "file body"})
    harness = start(inprocess, policy=policy)
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "/read /tmp/x.txt").result() == {"stopReason": "end_turn"}
    done = [u for u in client.updates(sid) if u.get("status") == "completed"]
    assert done[0]["content"][0]["content"]["text"] == "file body"
    assert client.prompt(sid, "/write /tmp/y.txt new text").result() == {"stopReason": "end_turn"}
    assert policy.written == {"/tmp/y.txt": "new text"}
    methods = [r["method"] for r in client.agent_requests]
    assert methods == ["fs/read_text_file", "session/request_permission", "fs/write_text_file"]


def test_no_fs_calls_unless_advertised(inprocess):
    """The agent never calls fs/* when the client did not advertise it; the tool call fails clearly."""
    harness = inprocess(DemoAgent(), ClientPolicy(capabilities={}))
    client = harness.client
    client.initialize(capabilities={})
    sid = client.new_session()
    assert client.prompt(sid, "/read /etc/hostname").result() == {"stopReason": "end_turn"}
    failed = [u for u in client.updates(sid) if u.get("status") == "failed"]
    assert "readTextFile" in failed[0]["content"][0]["content"]["text"]
    assert client.agent_requests == []


def test_cancel_releases_outstanding_client_request_at_once_S12(inprocess):
    """A cancelled turn stops waiting for the client at once and tells it with $/cancel_request."""
    policy = ClientPolicy(permission="hold")
    harness = start(inprocess, policy=policy)
    client = harness.client
    sid = client.new_session()
    pending = client.prompt(sid, "/write /tmp/z.txt text")
    client.wait_for(lambda: policy_holds(client), what="the permission request")
    [request_id] = list(client.hold)
    client.cancel(sid)
    assert pending.result() == {"stopReason": "cancelled"}
    cancels = [m for m in client.received() if m.get("method") == "$/cancel_request"]
    assert cancels and cancels[0]["params"]["requestId"] == request_id
    # A late answer from the client is ignored, and the session goes on.
    client.respond(request_id, {"outcome": {"outcome": "cancelled"}})
    assert client.prompt(sid, "/sleep 0.01").result() == {"stopReason": "end_turn"}


def policy_holds(client) -> bool:
    return bool(client.hold)


def test_cancel_request_for_prompt_and_extension(inprocess):
    """$/cancel_request: a prompt ends `cancelled`, an extension request gets -32800, unknown ids are ignored."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    prompt = client.prompt(sid, "/wait")
    client.notify("$/cancel_request", {"requestId": prompt.id})
    assert prompt.result() == {"stopReason": "cancelled"}
    ext = client.request("_acp_green/sleep", {"seconds": 30})
    client.notify("$/cancel_request", {"requestId": ext.id})
    assert ext.error()["code"] == -32800
    client.notify("$/cancel_request", {"requestId": 123456})
    marker = client.request("session/set_mode", {"sessionId": sid, "modeId": "code"})
    assert marker.result() == {}
    assert all(m.get("id") != 123456 for m in client.received())
    # The session's next prompt is not cancelled by the earlier $/cancel_request (S12).
    assert client.prompt(sid, "/sleep 0.01").result() == {"stopReason": "end_turn"}


def test_authentication_required_until_authenticated(inprocess):
    """An agent that advertises auth methods answers session/new with -32000 auth_required until it succeeds."""
    harness = start(inprocess, NeedsAuthAgent())
    client = harness.client
    error = client.request("session/new", {"cwd": "/tmp", "mcpServers": []}).error()
    assert error["code"] == -32000 and error["data"]["reason"] == "auth_required"
    assert client.request("authenticate", {"methodId": "nope"}).error()["code"] == -32602
    assert client.call("authenticate", {"methodId": "token"}) == {}
    sid = client.new_session()
    assert client.prompt(sid, "hi").result() == {"stopReason": "end_turn"}


def test_output_backlog_over_hard_limit_refuses_background_work(inprocess, monkeypatch):
    """Back-pressure: while the client does not read and the backlog is over the hard limit, new
    background requests get -32000 output_backlog; control is still answered once it reads."""
    limits = OutputLimits(high_water=16 << 10, low_water=4 << 10, hard_limit=128 << 10, flush_stall_timeout=2)
    harness = start(inprocess, output=limits)
    client = harness.client
    endpoint = harness.server.protocol.endpoint
    handled = []
    original = endpoint.handle
    monkeypatch.setattr(endpoint, "handle", lambda message: (original(message), handled.append(getattr(message, "id", None))))
    sid = client.new_session()
    client.pause_reading()
    # Responses pile up (the client reads nothing) until the backlog passes the hard limit.
    params = {"sessionId": sid, "configId": "model", "value": "echo-careful"}
    floods = []
    while endpoint.outbound.queued_bytes <= limits.hard_limit * 1.25:
        floods += [client.request("session/set_config_option", params) for _ in range(50)]
        client.wait_for(lambda: floods[-1].id in handled, what="the agent to read the flood")
    refused = client.prompt(sid, "hello")
    client.wait_for(lambda: refused.id in handled, what="the agent to read the prompt")
    assert endpoint.outbound.over_hard_limit
    client.resume_reading()
    error = refused.error()
    assert error["code"] == -32000 and error["data"]["reason"] == "output_backlog"
    assert all(f.result()["configOptions"] for f in floods)
    assert client.prompt(sid, "hello").result() == {"stopReason": "end_turn"}


def test_updates_after_response_are_refused_S5(inprocess):
    """S5: after a prompt's response nothing more is sent for the session: a late update is refused."""
    agent = KeepsItsTurnAgent()
    harness = start(inprocess, agent)
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "x").result() == {"stopReason": "end_turn"}
    with pytest.raises(RuntimeError):
        agent.turns[0].say("too late")
    marker = client.request("session/set_mode", {"sessionId": sid, "modeId": "x"})
    marker.response()
    assert [u["content"]["text"] for u in client.updates(sid) if "content" in u] == ["in turn"]


def test_cancel_handled_before_the_prompt_greenlet_first_runs_S11(inprocess):
    """S11: the token is bound at admission, so a cancel handled before the prompt's greenlet has run
    even once still cancels that prompt (and not the next one, S12)."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    endpoint = harness.server.protocol.endpoint
    request = client.make_request("session/prompt", client.prompt_params(sid, "/wait"), request_id=77)
    client.records.append(Record(time.monotonic(), "out", b"", request))  # for the schema check
    # Both handled back to back by the receive loop, with no switch in between.
    endpoint.handle(wire.Request(77, request["method"], request["params"]))
    [greenlet] = endpoint.greenlets()
    endpoint.handle(wire.Notification("session/cancel", {"sessionId": sid}))
    assert not greenlet.dead and greenlet.loop is not None
    client.wait_for(lambda: any(m.get("id") == 77 for m in client.received()), what="the prompt's response")
    [response] = [m for m in client.received() if m.get("id") == 77]
    assert response["result"] == {"stopReason": "cancelled"}
    assert client.prompt(sid, "/sleep 0.01").result() == {"stopReason": "end_turn"}


def test_turn_history_is_what_was_sent(inprocess):
    """The stored history of a turn is the user's prompt then every update the client received."""
    import json

    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "/think").result() == {"stopReason": "end_turn"}
    stored = [json.loads(entry) for entry in harness.server.store.history(sid)]
    received = [u for u in client.updates(sid) if u["sessionUpdate"] not in ("available_commands_update", "session_info_update")]
    assert isinstance(stored[0].pop("messageId"), str)  # the prompt is a message of its own
    assert stored[0] == {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "/think"}}
    assert stored[1:] == [u for u in received if u["sessionUpdate"] != "usage_update"]


def test_cancel_request_frees_the_slot_before_answering_S14(inprocess):
    """S14: a request cancelled by $/cancel_request frees its slot before its -32800 is queued, so a
    request written the moment that answer is read is admitted — even if agent code lingers."""
    harness = start(inprocess, ExtensionSwallowsKillAgent(), max_background=1)
    client = harness.client
    sid = client.new_session()
    ext = client.request("_test/linger", {})
    client.notify("$/cancel_request", {"requestId": ext.id})
    assert ext.error()["code"] == -32800
    assert client.prompt(sid, "admitted").result() == {"stopReason": "end_turn"}


@pytest.mark.parametrize("block", [
    {"type": "text", "text": ["not", "a", "string"]},
    {"type": "text", "text": 5},
    {"type": "text"},
    {"type": "resource_link", "name": "x", "uri": 7},
])
def test_malformed_prompt_block_is_refused_before_reserving_S14(inprocess, block):
    """§6/S14: an ill-typed prompt block is -32602 naming the field, and the session is not left
    reserved: its next prompt runs."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    error = client.request("session/prompt", {"sessionId": sid, "prompt": [block]}).error()
    assert error["code"] == -32602 and "prompt[0]" in error["message"]
    assert client.prompt(sid, "fine").result() == {"stopReason": "end_turn"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["end_turn"]


def test_failed_session_setup_leaves_no_session_behind(inprocess):
    """A session hook that raises answers -32603 and leaves no live or stored session."""
    harness = start(inprocess, FailingSessionStartAgent())
    client = harness.client
    error = client.request("session/new", {"cwd": "/tmp", "mcpServers": []}).error()
    assert error["code"] == -32603 and "session setup failed" in error["message"]
    assert len(harness.server.sessions) == 0
    assert harness.server.store.list_sessions() == []


def test_input_pauses_when_a_client_writes_without_reading(inprocess):
    """Back-pressure: replies to a client that never reads cannot grow memory without bound: past twice
    the hard limit the agent stops reading until the client reads; then every line is answered."""
    limits = OutputLimits(high_water=16 << 10, low_water=4 << 10, hard_limit=64 << 10, flush_stall_timeout=2)
    harness = start(inprocess, output=limits)
    client = harness.client
    server = harness.server
    outbound = server.protocol.endpoint.outbound
    client.pause_reading()
    lines = 6000  # about 540 KB of -32700 replies: far more than the pipe and twice the limit
    gevent.spawn(client.send_raw, b"not json\n" * lines)
    client.wait_for(lambda: outbound.over_input_limit and server.connection._reading is False, what="input to pause")
    gevent.sleep(0.2)
    assert outbound.queued_bytes < 2 * limits.hard_limit + 4096
    client.resume_reading()
    client.wait_for(lambda: sum(1 for r in client.records if r.direction == "in" and b"-32700" in r.raw) == lines,
                    timeout=60, what="every garbage line to be answered")


def test_prompt_that_swallows_its_kill_is_still_answered_at_shutdown_S13_S16(inprocess):
    """S13/S14/S16: agent code that swallows the kill at the end of the grace cannot leave its prompt
    unanswered or its usage record unfinished: it is answered `cancelled` and recorded "aborted"."""
    harness = start(inprocess, PromptSwallowsKillAgent(), shutdown_grace=0.2)
    client = harness.client
    sid = client.new_session()
    pending = client.prompt(sid, "go")
    client.wait_for(lambda: client.updates(sid), what="the prompt to start")
    harness.finish()
    assert pending.result(timeout=5) == {"stopReason": "cancelled"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["aborted"]


def test_cancelled_turn_still_waits_on_the_backlog_S10(inprocess, monkeypatch):
    """S10, back-pressure: a cancelled turn that flushes output keeps to the high-water mark, so control
    responses are never buried under an unbounded backlog."""
    harness = start(inprocess, FloodsAfterCancelAgent())
    client = harness.client
    sid = client.new_session()
    outbound = harness.server.protocol.endpoint.outbound
    peak = record_peak_backlog(monkeypatch, outbound)
    pending = client.prompt(sid, "flood later")
    client.cancel(sid)
    assert pending.result() == {"stopReason": "cancelled"}
    assert peak[0] <= outbound.limits.high_water + 4096, peak[0]


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

    from acp_green.process import logsetup, stderrsink
    from acp_green import server
    from acp_green.rpc import transport
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
    result = CliRunner().invoke(cli, ["serve", "--no-monkey-patch", "--ephemeral", "--max-background", "3"])  # this process stays unpatched
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
