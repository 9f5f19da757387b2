"""History and replay at their edges: what a store may hold that a client must never see, updates
larger than a piece or than SQLite takes, loads that race a prompt, a delete or each other."""

from __future__ import annotations

import json
import logging
from typing import Any

import gevent

from acp_green.agent import Agent, Turn
from acp_green.demo import DemoAgent
from acp_green.protocol import turn_record
from acp_green.protocol.turn_record import TurnRecord
from acp_green.protocol.updates import SessionUpdateEncoder
from acp_green.sessions import Session
from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import TurnOutcome
from tests.helpers import chunk_texts
from tests.sessions.test_history_flow import RecordingStore, load_params, replay_of, stored_session
from tests.store.test_history import small_rows


def chunk_json(text: str) -> bytes:
    return json.dumps({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}).encode()


class BigUpdateAgent(Agent):
    """To "go": says "before", sends one tool_call_update whose output is `size` bytes, says
    "after". To anything else: says "ok"."""

    name = "big-update"

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def prompt(self, turn: Turn) -> str:
        if turn.text != "go":
            turn.say("ok")
            return "end_turn"
        turn.say("before")
        call = turn.tool_call(title="Read a big file", status="in_progress")
        call.complete(raw_output={"text": "z" * self.size})
        turn.say("after")
        return "end_turn"


# -- the record's pieces ---------------------------------------------------------------------------
def test_updates_sent_as_objects_are_cut_into_pieces_by_bytes_as_well():
    """Incremental history: a turn whose updates go through `Turn.send` (tool call
    updates, not text chunks) is handed over in pieces of about PIECE_BYTES too, not only every
    PIECE_UPDATES updates: 200 updates of 20 KB are several pieces, none much over the bound."""
    store = RecordingStore(keep=False)
    session = Session(SessionRecord("sess_b", "/tmp", []))
    record = TurnRecord(store, session, SessionUpdateEncoder("sess_b"))
    record.begin([{"type": "text", "text": "go"}])
    for n in range(200):
        record.update({"sessionUpdate": "tool_call_update", "toolCallId": f"c{n}", "rawOutput": "y" * 20_000})
    record.end(TurnOutcome("end_turn"))
    assert len(store.piece_sizes) >= 7
    assert all(size < turn_record.PIECE_BYTES + 21_000 for _count, size in store.piece_sizes), store.piece_sizes


# -- what the store holds ----------------------------------------------------------------------------
def test_a_replay_never_sends_a_stored_entry_that_is_not_an_update_object(inprocess, tmp_path, caplog):
    """S5/wire: history written by something other than this runtime (an older version, a hand
    edit, a damaged file) may hold lines that are not JSON objects. The replay skips them (said
    once at WARNING with the count) instead of splicing them into session/update lines the client
    cannot parse; every good entry is replayed in order and the load answers."""
    state = str(tmp_path / "state")
    store = SqliteStore(statedb.db_path(state))
    store.save_session(SessionRecord("sess_g", "/tmp", [], updated_at=1.0))
    bad = [b"not json", b"[1,2]", b'{"unterminated":', b'"a string"', b'{"content":"no sessionUpdate"}', b"\xff\xfe",
           b'{"sessionUpdate":5}', b'{"sessionUpdate":null}']
    store.append_turn("sess_g", [chunk_json("one"), *bad, chunk_json("two")], "end_turn")
    store.close()
    harness = inprocess(DemoAgent(), state_dir=state)
    client = harness.client
    client.initialize()
    with caplog.at_level(logging.WARNING):
        replay, result = replay_of(client, "sess_g")
    assert "modes" in result
    assert chunk_texts(replay) == ["one", "two"]
    assert len(replay) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "sess_g" in r.getMessage()]
    assert len(warnings) == 1 and str(len(bad)) in warnings[0], warnings


def test_one_update_larger_than_a_piece_is_stored_and_replayed_whole(inprocess, tmp_path):
    """Incremental history: a single update of 2 MB (four times PIECE_BYTES, sixteen
    times a stored row) is one piece and one row of its own; it is replayed whole, in its place."""
    harness = inprocess(BigUpdateAgent(2 << 20), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, "go").result() == {"stopReason": "end_turn"}
    replay, _result = replay_of(client, sid)
    kinds = [u["sessionUpdate"] for u in replay]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    assert len(replay[3]["rawOutput"]["text"]) == 2 << 20
    store = harness.server.store
    assert [t.complete for t in store.turns(sid)] == [True] and store.failed_writes == 0


def test_an_update_sqlite_refuses_fails_that_piece_only_and_the_session_still_loads(inprocess, tmp_path, monkeypatch):
    """Failure isolation, end to end: an update over SQLite's row limit (made small
    with SQLITE_LIMIT_LENGTH) fails its piece; the turn answers end_turn, is stored incomplete with
    its outcome, the store stays on disk, and a load replays what was stored, then answers."""
    small_rows(monkeypatch, 200_000)
    harness = inprocess(BigUpdateAgent(300_000), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, "go").result() == {"stopReason": "end_turn"}
    store = harness.server.store
    store.sync()
    assert not store.degraded and store.failed_writes == 1
    (turn,) = store.turns(sid)
    assert (turn.stop_reason, turn.complete) == ("end_turn", False)
    replay, result = replay_of(client, sid)
    assert result == {}  # this agent has no modes or config options
    assert [u["sessionUpdate"] for u in replay][:1] == ["user_message_chunk"]
    assert "tool_call_update" not in [u["sessionUpdate"] for u in replay]
    other = client.new_session()  # the store still writes to disk for every session
    assert client.prompt(other, "hello").result() == {"stopReason": "end_turn"}
    store.sync()
    assert not store.degraded and [t.complete for t in store.turns(other)] == [True]


# -- loads that race -------------------------------------------------------------------------------
def test_a_load_while_the_sessions_prompt_runs_is_busy_and_the_prompt_goes_on_S8(inprocess, tmp_path):
    """S8 (docs/SESSIONS.md): session/load of a session whose prompt runs gets session_busy; the
    prompt is unaffected and its turn is stored once, whole."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    waiting = client.prompt(sid, "/wait")
    client.wait_for(lambda: harness.server.sessions.get(sid).busy, what="the prompt to run")
    error = client.request("session/load", load_params(sid)).error()
    assert error["code"] == -32000 and error["data"]["reason"] == "session_busy"
    client.cancel(sid)
    assert waiting.result() == {"stopReason": "cancelled"}
    replay, _result = replay_of(client, sid)
    assert [u["sessionUpdate"] for u in replay][:1] == ["user_message_chunk"]
    assert [t.stop_reason for t in harness.server.store.turns(sid)] == ["cancelled"]


def test_two_loads_back_to_back_one_replays_the_other_is_busy_S8(inprocess, tmp_path):
    """S2/S8: two session/load requests for one session sent together: the first replays the
    history once and answers; the second gets session_busy. Nothing is answered twice."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 500)
    client = harness.client
    first = client.make_request("session/load", load_params(sid))
    second = client.make_request("session/load", load_params(sid))
    mark = len(client.received())
    client.send(first, second)
    error = client.pending_for(second).error()
    assert error["data"]["reason"] == "session_busy"
    assert "modes" in client.pending_for(first).result()
    arrived = client.received()[mark:]
    answers = [m for m in arrived if "method" not in m and m.get("id") in (first["id"], second["id"])]
    assert len(answers) == 2
    assert len(chunk_texts([m["params"]["update"] for m in arrived if m.get("method") == "session/update"])) == 500


def test_session_delete_during_a_replay_ends_it_and_leaves_nothing_behind(inprocess, tmp_path):
    """session/delete while the session's replay waits for a client that stopped reading: the
    replay ends early, the load answers once, unknown_session (a partial replay is never a
    success), with no updates after it, the session
    is gone (a prompt naming it is unknown_session) and nothing of it is stored again."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)
    client = harness.client
    client.pause_reading()
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    endpoint = harness.server.protocol.endpoint
    client.wait_for(lambda: endpoint.greenlets(), what="the replay to run")
    gevent.sleep(0.2)
    delete = client.request("session/delete", {"sessionId": sid})
    client.resume_reading()
    assert delete.result() == {}
    assert load.error()["data"]["reason"] == "unknown_session"
    arrived = client.received()[mark:]
    load_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load.id)
    assert len([m for m in arrived[:load_at] if m.get("method") == "session/update"]) < 3001
    gevent.sleep(0.1)
    assert not [m for m in client.received()[mark + load_at + 1:] if m.get("method") == "session/update"]
    error = client.request("session/prompt", client.prompt_params(sid, "still there?")).error()
    assert error["data"]["reason"] == "unknown_session"
    store = harness.server.store
    store.sync()
    assert store.load_session(sid) is None and store.turns(sid) == [] and store.history(sid) == []


# -- the replay job's own bounds and endings ---------------------------------------------------------
def test_a_replay_reads_the_store_a_bounded_page_at_a_time_S2(inprocess, tmp_path, monkeypatch):
    """S2 amended: a replay reads pages of at most PAGE_ENTRIES updates and about PAGE_BYTES,
    never the whole history: 3,000 small chunks take several pages by count, 300 chunks of
    4,000 bytes (1.2 MB) several pages by bytes."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    small = stored_session(harness, 3000)
    big = client.new_session()
    assert client.prompt(big, "/stream 300 4000").result() == {"stopReason": "end_turn"}
    store = harness.server.store
    pages: list[tuple[int, int]] = []
    original = store.history_page

    def history_page(session_id, after, max_entries, max_bytes, turn_id=None):
        page = original(session_id, after, max_entries, max_bytes, turn_id)
        pages.append((len(page.entries), sum(len(entry.update) for entry in page.entries)))
        return page

    monkeypatch.setattr(store, "history_page", history_page)
    for session_id, total in ((small, 3001), (big, 301)):
        pages.clear()
        replay, _result = replay_of(client, session_id)
        assert len(replay) == total and sum(n for n, _size in pages) == total
        assert len(pages) >= 3, pages
        assert all(n <= 1024 and size <= (256 << 10) for n, size in pages), pages


def test_a_cancel_ends_a_replay_held_by_a_client_that_never_reads_S2_S10(inprocess, tmp_path):
    """S2 amended, S10: session/cancel ends a replay that waits at the high-water mark for a
    client that stopped reading, at once — the reservation is released while the client still
    reads nothing; the load's answer, -32800 (the replay is partial), is there when it reads again."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)
    client = harness.client
    client.pause_reading()
    load = client.request("session/load", load_params(sid))
    session = harness.server.sessions.get(sid)
    client.wait_for(lambda: harness.server.protocol.endpoint.greenlets(), what="the replay to run")
    gevent.sleep(0.2)
    assert session.busy
    client.cancel(sid)
    client.wait_for(lambda: not session.busy, what="the cancelled replay to release the session")
    client.resume_reading()
    assert load.error()["code"] == -32800


def test_session_close_during_a_replay_takes_effect_when_the_replay_ends(inprocess, tmp_path):
    """session/close while the session replays: the replay is cancelled, the load answers -32800, and
    then the session leaves memory (as after a prompt); a later load brings it back."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)
    client = harness.client
    client.pause_reading()
    load = client.request("session/load", load_params(sid))
    client.wait_for(lambda: harness.server.protocol.endpoint.greenlets(), what="the replay to run")
    gevent.sleep(0.2)
    close = client.request("session/close", {"sessionId": sid})
    client.resume_reading()
    assert close.result() == {}
    assert load.error()["code"] == -32800
    sessions = harness.server.sessions
    client.wait_for(lambda: not sessions.is_live(sid), what="the closed session to leave memory")
    replay, _result = replay_of(client, sid)
    assert len(replay) == 3001
