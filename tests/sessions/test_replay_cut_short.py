"""A `session/load` whose replay is cut short never answers a success (ACP: the agent responds
once *all* the conversation entries have been streamed): $/cancel_request, session/cancel and
session/close -32800; EOF and SIGTERM -32800 "shutting down"; session/delete unknown_session.
A whole replay, even one cancelled right after its last entry, answers its result.

S2 and S13: a load admitted in order is answered once, with an error when its replay is cut short (shutdown included), never a success.
"""

from __future__ import annotations

import signal
from typing import Any

import gevent

from acp_green.demo import DemoAgent
from acp_green.protocol import replay
from tests.sessions.test_history_flow import history_part, load_params, stored_session

CHUNKS = 3000  # ~450 KB stored: more than the output backlog and the pipe hold together


def start_held_replay(harness: Any, sid: str) -> Any:
    """A load whose replay fills the output backlog and waits for a client that stopped reading."""
    client = harness.client
    client.pause_reading()
    harness.mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    endpoint = harness.server.protocol.endpoint
    client.wait_for(lambda: endpoint.greenlets(), what="the replay to run")
    gevent.sleep(0.2)
    return load


def replayed_before(client: Any, load: Any, sid: str, mark: int) -> int:
    """The session's history updates that arrived after `mark` and before the load's answer."""
    arrived = client.received()[mark:]
    at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load.id)
    return len(history_part([m["params"]["update"] for m in arrived[:at]
                             if m.get("method") == "session/update" and m["params"]["sessionId"] == sid]))


def test_cancel_request_mid_replay_answers_cancelled(inprocess, tmp_path):
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, CHUNKS)
    load = start_held_replay(harness, sid)
    harness.client.notify("$/cancel_request", {"requestId": load.id})
    harness.client.resume_reading()
    error = load.error()
    assert error["code"] == -32800 and "result" not in load.response()
    assert 0 < replayed_before(harness.client, load, sid, harness.mark) < CHUNKS + 1


def test_session_delete_mid_replay_answers_unknown_session(inprocess, tmp_path):
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, CHUNKS)
    load = start_held_replay(harness, sid)
    delete = harness.client.request("session/delete", {"sessionId": sid})
    harness.client.resume_reading()
    assert delete.result() == {}
    assert load.error()["code"] == -32002 and load.error()["data"] == {"reason": "unknown_session", "sessionId": sid}


def test_eof_mid_replay_answers_shutting_down(inprocess, tmp_path):
    """The client closes its end while the replay waits for it: the load is answered -32800."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"), shutdown_grace=0.5)
    sid = stored_session(harness, CHUNKS)
    load = start_held_replay(harness, sid)
    harness.client.close_input()
    harness.client.resume_reading()
    error = load.error(timeout=60)
    assert error["code"] == -32800 and "shutting down" in error["message"], error
    assert replayed_before(harness.client, load, sid, harness.mark) < CHUNKS + 1


def test_sigterm_mid_replay_answers_shutting_down(launch, tmp_path):
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state, "--shutdown-grace", "0.5")
    client = agent
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, f"/stream {CHUNKS} 16").result(timeout=60) == {"stopReason": "end_turn"}
    client.pause_reading()
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    gevent.sleep(1.0)  # the replay fills the pipe and waits for the client
    client.signal(signal.SIGTERM)
    client.resume_reading()
    error = load.error(timeout=60)
    assert error["code"] == -32800 and "shutting down" in error["message"], error
    assert replayed_before(client, load, sid, mark) < CHUNKS + 1


def test_a_whole_replay_cancelled_after_its_last_entry_answers_its_result(inprocess, tmp_path, monkeypatch):
    """session/cancel lands while the last entry is being sent: nothing is missing, so the load
    answers its result; one entry earlier, it answers -32800."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3)  # 4 entries: the prompt and 3 chunks
    client = harness.client
    sent = [0]
    cancel_at = [4]

    class CancellingProducer(replay.PacedProducer):
        def send(self, line: bytes) -> None:
            super().send(line)
            sent[0] += 1
            if sent[0] == cancel_at[0]:
                harness.server.sessions.get(sid).cancel()

    monkeypatch.setattr(replay, "PacedProducer", CancellingProducer)
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    assert "modes" in load.result()
    assert replayed_before(client, load, sid, mark) == 4
    sent[0], cancel_at[0] = 0, 3
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    assert load.error()["code"] == -32800
    assert replayed_before(client, load, sid, mark) == 3


def test_a_session_deleted_as_its_replay_ends_gets_no_session_level_updates(inprocess, tmp_path, monkeypatch):
    """session/delete lands while the last entry is being sent: the replay was whole, but the
    commands and title that would follow it are not sent for a session that no longer exists."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3)  # 4 entries: the prompt and 3 chunks
    client = harness.client
    sent = [0]

    class DeletingProducer(replay.PacedProducer):
        def send(self, line: bytes) -> None:
            super().send(line)
            sent[0] += 1
            if sent[0] == 4:
                harness.server.sessions.delete(sid)

    monkeypatch.setattr(replay, "PacedProducer", DeletingProducer)
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    load.response()
    assert replayed_before(client, load, sid, mark) == 4
    kinds = [m["params"]["update"]["sessionUpdate"] for m in client.received()[mark:] if m.get("method") == "session/update"]
    assert not {"available_commands_update", "session_info_update"} & set(kinds), kinds
