"""The concurrency rules through the real CLI over real pipes, from the basic conversation on."""

from __future__ import annotations

import os
import signal

import pytest

from acp_green.tools.rig.client import AgentProcess
from tests.helpers import chunk_texts, said, wait_pipe_full


def open_session(agent: AgentProcess, count: int = 1) -> list[str]:
    agent.initialize()
    return [agent.new_session() for _ in range(count)]


def test_initialize_and_new_session_in_one_write_S2(launch):
    """S2: `initialize` and `session/new` written together both succeed, in order."""
    agent = launch()
    init = agent.make_request("initialize", agent.initialize_params())
    new = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.send(init, new)
    assert agent.pending_for(init).result()["protocolVersion"] == 1
    session_id = agent.pending_for(new).result()["sessionId"]
    # A prompt written the moment the session/new response is read works.
    assert agent.prompt(session_id, "hello").result() == {"stopReason": "end_turn"}
    text = said(agent.updates(session_id))
    assert text == "hello"


def test_prompt_and_cancel_in_one_write_S11(launch):
    """S11: a session/cancel read right after the prompt, in the same write, cancels it."""
    agent = launch()
    [sid] = open_session(agent)
    prompt = agent.make_request("session/prompt", agent.prompt_params(sid, "/wait"))
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    agent.send(prompt, cancel)
    assert agent.pending_for(prompt).result() == {"stopReason": "cancelled"}


def test_cancel_with_nothing_running_does_not_cancel_next_prompt_S12(launch):
    """S12: a cancel with nothing running installs a fresh token; the next prompt ends normally."""
    agent = launch()
    [sid] = open_session(agent)
    agent.cancel(sid)
    assert agent.prompt(sid, "/sleep 0.05").result() == {"stopReason": "end_turn"}
    # And after a real cancel, the next turn gets a fresh token too.
    waiting = agent.prompt(sid, "/wait")
    # The prompt is admitted and holds its session (not a cancel racing its admission).
    assert agent.prompt(sid, "busy?").error()["data"]["reason"] == "session_busy"
    agent.cancel(sid)
    assert waiting.result() == {"stopReason": "cancelled"}
    assert agent.prompt(sid, "/sleep 0.05").result() == {"stopReason": "end_turn"}


def test_prompt_after_cancel_before_response_is_busy_then_runs_S8_S14(launch):
    """S8/S14: a cancelled prompt keeps its reservation until it answers; one sent after the answer runs."""
    agent = launch("--agent", "tests.agents:SleepsAfterCancelAgent")
    [sid] = open_session(agent)
    first = agent.prompt(sid, "wind down for 0.5")
    agent.wait_for(lambda: agent.updates(sid), what="the first prompt to start")
    agent.cancel(sid)
    second = agent.prompt(sid, "again")  # sent after the cancel, before the cancelled response
    error = second.error()
    assert error["code"] == -32000 and error["data"]["reason"] == "session_busy"
    assert first.result() == {"stopReason": "cancelled"}
    # Written the moment the cancelled response is read: admitted.
    assert agent.prompt(sid, "after").result() == {"stopReason": "end_turn"}


def test_second_prompt_on_busy_session_refused_at_once_S8(launch):
    """S8: -32000 session_busy at once; the running prompt is unaffected and history never interleaves."""
    agent = launch()
    [sid] = open_session(agent)
    running = agent.prompt(sid, "/wait")
    busy = agent.prompt(sid, "intruder")
    error = busy.error()
    assert error["code"] == -32000 and error["data"]["reason"] == "session_busy"
    assert "message" in error and "busy" in error["message"]
    assert not running.done
    agent.cancel(sid)
    assert running.result() == {"stopReason": "cancelled"}
    assert "intruder" not in "".join(chunk_texts(agent.updates(sid)))


def test_thousand_chunks_in_order_before_response_S5(launch):
    """S5: 1,000 indexed chunks arrive in order, all before the prompt's response, usage_update included."""
    agent = launch()
    [sid] = open_session(agent)
    pending = agent.prompt(sid, "/stream 1000 64")
    assert pending.result() == {"stopReason": "end_turn"}
    inbound = [r for r in agent.records if r.direction == "in" and r.message]
    response_index = next(i for i, r in enumerate(inbound) if r.message.get("id") == pending.id)
    session_updates = [
        (i, r.message["params"]["update"]) for i, r in enumerate(inbound)
        if r.message.get("method") == "session/update" and r.message["params"]["sessionId"] == sid
    ]
    chunks = chunk_texts(u for _, u in session_updates)
    assert [c.split(":")[0] for c in chunks] == [str(i) for i in range(1000)]
    assert all(len(c) == 64 for c in chunks)
    assert all(i < response_index for i, _ in session_updates), "an update came after the prompt's response"
    assert session_updates[-1][1]["sessionUpdate"] == "usage_update"


def test_thirty_two_waiting_prompts_then_connection_busy_control_still_answered_S9_S10(launch):
    """S9/S10: 32 waiting prompts fill the slots; a 33rd gets connection_busy; control is still answered."""
    agent = launch()
    sids = open_session(agent, 34)
    waiting = [agent.prompt(sid, "/wait") for sid in sids[:32]]
    refused = agent.prompt(sids[32], "one too many")
    error = refused.error()
    assert error["code"] == -32000 and error["data"]["reason"] == "connection_busy"
    assert agent.call("session/set_mode", {"sessionId": sids[33], "modeId": "code"}) == {}
    assert agent.call("session/set_mode", {"sessionId": sids[0], "modeId": "code"}) == {}
    assert agent.new_session().startswith("sess_")
    options = agent.call("session/set_config_option", {"sessionId": sids[1], "configId": "model", "value": "echo-careful"})
    assert options["configOptions"][0]["currentValue"] == "echo-careful"
    assert all(not p.done for p in waiting), "a waiting prompt ended early"
    for sid in sids[:32]:
        agent.cancel(sid)
    assert [p.result()["stopReason"] for p in waiting] == ["cancelled"] * 32
    # Slots are free again.
    assert agent.prompt(sids[32], "now").result() == {"stopReason": "end_turn"}


def test_cancel_answered_while_eight_prompts_stream_S10(launch):
    """S10: behind eight streaming prompts a cancel and a set_mode are handled while the streams still run."""
    agent = launch()
    sids = open_session(agent, 10)
    streams = [agent.prompt(sid, "/stream 2000000 64") for sid in sids[:8]]
    agent.wait_for(lambda: len(agent.updates(sids[0])) > 10, what="streams to start")
    waiting = agent.prompt(sids[8], "/wait")
    assert agent.call("session/set_mode", {"sessionId": sids[9], "modeId": "code"}) == {}
    agent.cancel(sids[8])
    assert waiting.result() == {"stopReason": "cancelled"}
    assert sum(not s.done for s in streams) > 0, "all streams had finished: the test proved nothing"
    for sid in sids[:8]:
        agent.cancel(sid)
    for stream in streams:
        assert stream.result()["stopReason"] in ("cancelled", "end_turn")


def test_cancel_answered_while_client_pauses_reading_S10(launch):
    """S10, back-pressure: with stdout unread and a stream blocked on the backlog, a cancel still takes effect."""
    agent = launch()
    sid, other = open_session(agent, 2)
    agent.pause_reading()
    stream = agent.prompt(sid, "/stream 200000 256")
    waiting = agent.prompt(other, "/wait")
    wait_pipe_full(agent.proc.stdout.fileno())  # the stream is now held by the backlog
    agent.cancel(other)
    agent.cancel(sid)
    agent.resume_reading()
    assert waiting.result() == {"stopReason": "cancelled"}
    assert stream.result() == {"stopReason": "cancelled"}
    chunks = chunk_texts(agent.updates(sid))
    # Held at the high-water mark (64 KiB) behind a full pipe (64 KiB), the stream produced a few
    # hundred 256-byte chunks before the cancel; without back-pressure it makes tens of thousands
    # in the same half second. 1 MiB leaves room for larger pipes and client buffers.
    assert len(chunks) * 256 < 1 << 20, f"the stream was not held back by the backlog: {len(chunks)} chunks"


def test_eof_with_prompts_running_cancels_them_and_exits_zero_S13(launch):
    """S13: on stdin EOF running prompts answer `cancelled` and the process exits 0 within the grace."""
    agent = launch("--shutdown-grace", "5")
    sids = open_session(agent, 3)
    prompts = [agent.prompt(sids[0], "/wait"), agent.prompt(sids[1], "/sleep 60"), agent.prompt(sids[2], "/stream 1000000 64")]
    agent.wait_for(lambda: len(agent.updates(sids[2])) > 5, what="the stream to start")
    agent.close_input()
    assert agent.wait_exit(timeout=30) == 0
    assert [p.result(timeout=5)["stopReason"] for p in prompts] == ["cancelled"] * 3


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_takes_the_eof_path_S13(launch, signum):
    """S13: SIGTERM and SIGINT stop admitting, cancel running prompts, answer them and exit 0."""
    agent = launch()
    [sid] = open_session(agent)
    waiting = agent.prompt(sid, "/wait")
    agent.wait_for(lambda: agent.updates(sid), what="the session's first update")
    agent.signal(signum)
    assert waiting.result() == {"stopReason": "cancelled"}
    assert agent.wait_exit(timeout=30) == 0


def test_idle_agent_exits_at_once_on_eof_S13(launch):
    """S13: an idle agent exits right after EOF (well inside a generous bound)."""
    agent = launch("--shutdown-grace", "30")
    open_session(agent)
    agent.close_input()
    assert agent.wait_exit(timeout=10) == 0


def test_receive_loop_keeps_serving_while_prompts_run_S1(launch):
    """S1: while one prompt waits on the client and another streams, the connection still answers
    control requests, runs other background requests, and routes the client's answer back."""
    from acp_green.tools.rig.client import ClientPolicy

    agent = launch(policy=ClientPolicy(permission="hold"))
    sids = open_session(agent, 3)
    asking = agent.prompt(sids[0], "/write /tmp/s1.txt text")
    agent.wait_for(lambda: agent.hold, what="the permission request")
    streaming = agent.prompt(sids[1], "/stream 2000000 16384")  # big chunks: few records to check at teardown
    agent.wait_for(lambda: len(agent.updates(sids[1])) > 10, what="the stream to start")
    assert agent.call("session/set_mode", {"sessionId": sids[2], "modeId": "code"}) == {}
    assert agent.new_session().startswith("sess_")
    assert agent.call("_acp_green/echo", {"x": 1}) == {"params": {"x": 1}}
    assert agent.prompt(sids[2], "meanwhile").result() == {"stopReason": "end_turn"}
    assert not asking.done and not streaming.done
    [request_id] = list(agent.hold)
    agent.respond(request_id, {"outcome": {"outcome": "selected", "optionId": "reject"}})
    assert asking.result() == {"stopReason": "end_turn"}
    agent.cancel(sids[1])
    assert streaming.result() == {"stopReason": "cancelled"}


def test_client_that_stopped_reading_cannot_hold_the_process_S13(launch):
    """S13: with stdout unread and a stream blocked on the backlog, EOF still ends the process
    with exit 0 — the final flush is bounded."""
    agent = launch("--shutdown-grace", "1")
    [sid] = open_session(agent)
    agent.pause_reading()
    agent.prompt(sid, "/stream 10000000 256")
    wait_pipe_full(agent.proc.stdout.fileno())
    agent.close_input()
    assert agent.wait_exit(timeout=60) == 0
    agent.wait_for(lambda: b"output not fully flushed" in agent.stderr, what="the shutdown warning on stderr")


def test_second_signal_during_shutdown_does_not_kill_the_process_S13(launch, tmp_path):
    """S13: a second SIGTERM while the first is being handled keeps to the same path: the winding-down
    prompt still answers `cancelled` and the process exits 0. The second signal is sent while the
    prompt is known to be winding down, and shutdown goes on only once the process has taken it."""
    release = tmp_path / "release"
    agent = launch("--agent", "tests.agents:WindsDownUntilFileExistsAgent")
    [sid] = open_session(agent)
    pending = agent.prompt(sid, f"wind down until {release}")
    agent.wait_for(lambda: "started" in chunk_texts(agent.updates(sid)), what="the prompt to start")
    agent.signal(signal.SIGTERM)
    agent.wait_for(lambda: "winding down" in chunk_texts(agent.updates(sid)), what="shutdown to cancel the prompt")
    agent.signal(signal.SIGTERM)
    agent.wait_for(lambda: not sigterm_pending(agent.pid), what="the second SIGTERM to be delivered")
    release.touch()
    assert agent.wait_exit(timeout=30) == 0
    assert pending.result(timeout=5) == {"stopReason": "cancelled"}


def sigterm_pending(pid: int) -> bool:
    """SIGTERM still pending for the process or any of its threads (not yet delivered or read)."""
    bit = 1 << (signal.SIGTERM - 1)
    paths = [f"/proc/{pid}/status"] + [f"/proc/{pid}/task/{tid}/status" for tid in os.listdir(f"/proc/{pid}/task")]
    for path in paths:
        try:
            with open(path) as handle:
                for line in handle:
                    if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & bit:
                        return True
        except FileNotFoundError:
            continue
    return False
