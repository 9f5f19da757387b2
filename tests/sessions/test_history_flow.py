"""History that scales, the runtime's side: turns hand their updates to the store in bounded
pieces through the prompt job's record, message ids live and in replay, and session/load's
streaming replay (S2 amended, S5, S8)."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import gevent
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.agent import Turn
from acp_green.demo import DemoAgent
from acp_green.protocol import replay, turn_record
from acp_green.protocol.turn_record import MESSAGE_BREAKS, MESSAGE_CHUNKS, TurnRecord
from acp_green.protocol.updates import SessionUpdateEncoder
from acp_green.tools.rig.schema import default_schema
from acp_green.sessions import Session
from acp_green.store.session_record import SessionRecord
from acp_green.store.turns import TurnOutcome
from tests.agents import FloodsAfterCancelAgent, MessageRunsAgent
from tests.helpers import chunk_texts, record_peak_backlog

MESSAGE_KINDS = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")


def load_params(session_id: str) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}


def message_runs(updates: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """Message chunks grouped by messageId, in order: (kind, messageId, texts); every chunk has an id."""
    runs: list[tuple[str, str, list[str]]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if kind not in MESSAGE_KINDS:
            continue
        message_id = update.get("messageId")
        assert isinstance(message_id, str) and message_id, update
        if runs and runs[-1][1] == message_id:
            assert runs[-1][0] == kind, "one message id for chunks of two kinds"
            runs[-1][2].append(update["content"]["text"])
        else:
            assert message_id not in {run[1] for run in runs}, f"message id {message_id} used by two messages"
            runs.append((kind, message_id, [update["content"]["text"]]))
    return runs


#: What a load sends after the replayed history and before its response; never stored.
SESSION_LEVEL = ("available_commands_update", "session_info_update")


def history_part(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A load's updates before its response without the session-level ones, which come last, after the history."""
    cut = len(updates)
    while cut and updates[cut - 1]["sessionUpdate"] in SESSION_LEVEL:
        cut -= 1
    assert not any(u["sessionUpdate"] in SESSION_LEVEL for u in updates[:cut]), "a session-level update amid the replay"
    return updates[:cut]


def replay_of(client: Any, session_id: str) -> tuple[list[dict[str, Any]], Any]:
    """session/load: the replayed history (the session's updates between its request and its
    response, less the session-level ones that close it), and its result."""
    before = len(client.received())
    pending = client.request("session/load", load_params(session_id))
    result = pending.result()
    arrived = client.received()[before:]
    response_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == pending.id)
    replay = [m["params"]["update"] for m in arrived[:response_at]
              if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id]
    return history_part(replay), result


# -- message ids -------------------------------------------------------------------------------------
def test_message_ids_live_and_in_replay_are_the_same_and_valid(inprocess, tmp_path):
    """Message ids: the prompt is one user message; agent chunks are one message until
    a tool call, plan or a chunk of another kind intervenes (a usage update does not); thoughts
    form their own message. Every chunk carries its message's id, live and in replay, the same
    ids, and each chunk is a valid ACP SessionNotification."""
    harness = inprocess(MessageRunsAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}
    assert client.call("session/prompt", prompt) == {"stopReason": "end_turn"}
    live = message_runs(client.updates(sid))
    expected = [("agent_message_chunk", ["a", "b"]), ("agent_thought_chunk", ["t1", "t2"]), ("agent_message_chunk", ["c"]),
                ("agent_message_chunk", ["d"]), ("agent_message_chunk", ["e"]), ("agent_message_chunk", ["f", "g", "h"])]
    assert [(kind, texts) for kind, _id, texts in live] == expected
    assert all(len(message_id) <= 16 for _kind, message_id, _texts in live)  # short ids

    replay, _result = replay_of(client, sid)
    replayed = message_runs(replay)
    assert replayed[0][0] == "user_message_chunk" and replayed[0][2] == ["one", "two"]
    assert replayed[1:] == live  # the same messages with the same ids
    validator = default_schema().validator("stable", "SessionNotification")
    for update in client.updates(sid):
        if update["sessionUpdate"] in MESSAGE_KINDS:
            assert not list(validator.iter_errors({"sessionId": sid, "update": update}))
    malformed = {"sessionId": sid, "update": {**replay[0], "messageId": 7}}
    assert list(validator.iter_errors(malformed)), "the validator must refuse a messageId that is not a string"


def test_three_turns_replay_as_three_user_messages(inprocess, tmp_path):
    """Turns visible: prompts `/fail`, `/sleep 0`, `hello` replay as three user
    messages with distinct ids, each followed by what its turn sent."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.request("session/prompt", client.prompt_params(sid, "/fail")).error()["code"] == -32603
    assert client.prompt(sid, "/sleep 0").result() == {"stopReason": "end_turn"}
    assert client.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    replay, _result = replay_of(client, sid)
    users = [run for run in message_runs(replay) if run[0] == "user_message_chunk"]
    assert [texts for _kind, _id, texts in users] == [["/fail"], ["/sleep 0"], ["hello"]]
    assert len({message_id for _kind, message_id, _texts in users}) == 3
    assert chunk_texts(replay) == ["hello"]


@settings(deadline=None, max_examples=200)
@given(st.lists(st.sampled_from(sorted(MESSAGE_CHUNKS | MESSAGE_BREAKS | {"usage_update", "current_mode_update"})), max_size=40),
       st.booleans())
def test_message_boundaries_for_any_sequence_of_updates(kinds, as_text):
    """Message ids, any sequence of updates: a chunk continues the open message only
    when the one before it among chunks and breaks is a chunk of the same kind; otherwise a new
    id, never used before in the turn. Ids in the stored updates equal the ids on the wire."""
    store = RecordingStore()
    record = TurnRecord(store, Session(SessionRecord("sess_p", "/tmp", [])), SessionUpdateEncoder("sess_p"))
    record.begin([{"type": "text", "text": "hi"}])
    current = json.loads(store.updates()[0])["messageId"]  # the prompt's message is open
    wire_ids, previous, seen = [], "user_message_chunk", {current}
    for kind in kinds:
        if kind in MESSAGE_CHUNKS and as_text and kind != "user_message_chunk":
            line = record.text_chunk(kind, "x")
        else:
            update = {"sessionUpdate": kind, "content": {"type": "text", "text": "x"}} if kind in MESSAGE_CHUNKS else {"sessionUpdate": kind}
            line = record.update(update)
        sent = json.loads(line)["params"]["update"]
        if kind in MESSAGE_CHUNKS:
            record_id = sent["messageId"]
            if kind == previous:
                assert record_id == current
            else:
                assert record_id not in seen
            seen.add(record_id)
            current, previous = record_id, kind
            wire_ids.append(record_id)
        else:
            assert "messageId" not in sent
            if kind in MESSAGE_BREAKS:
                previous = None
    record.end(TurnOutcome("end_turn"))
    stored = [json.loads(u) for u in store.updates()]
    assert [u["messageId"] for u in stored[1:] if u["sessionUpdate"] in MESSAGE_CHUNKS] == wire_ids


# -- bounded pieces, bounded memory ------------------------------------------------------------------
class RecordingStore:
    """The store's history writes, as calls; keeps every update unless `keep` is False."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.calls: list[tuple[str, Any]] = []
        self.piece_sizes: list[tuple[int, int]] = []
        self.room_waits = 0  # how often the turn offered to wait for the store (back-pressure)

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: list[bytes]) -> None:
        self.calls.append(("begin", list(prompt) if self.keep else len(prompt)))

    def append_history(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        self.piece_sizes.append((len(updates), sum(len(u) for u in updates)))
        self.calls.append(("append", list(updates) if self.keep else len(updates)))

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome) -> None:
        self.calls.append(("end", outcome))

    def wait_for_history_room(self, cancelled: Any = None) -> None:
        self.room_waits += 1

    def updates(self) -> list[bytes]:
        return [u for name, value in self.calls if name in ("begin", "append") for u in value]


class NullChannel:
    over_high_water = False

    def put(self, data: bytes) -> None:
        pass

    def wait_below_high_water(self, cancelled: Any = None) -> None:
        pass


def streamed_turn(store: Any, chunks: int, text: str = "0123456789" * 6) -> TurnRecord:
    """A Turn that says `chunks` chunks into a null channel, its record handing pieces to `store`."""
    session = Session(SessionRecord("sess_m", "/tmp", []))
    record = TurnRecord(store, session, SessionUpdateEncoder("sess_m"))
    turn = Turn(session=session, prompt=[{"type": "text", "text": "go"}], token=session.token, snapshot=None,
                channel=NullChannel(), updates=record, call_client=None)
    record.begin(turn.prompt)
    for _ in range(chunks):
        turn.say(text)
    record.end(TurnOutcome("end_turn"))
    return record


def test_a_turn_hands_its_updates_to_the_store_in_bounded_pieces():
    """Incremental history: while the turn runs its updates reach the store in pieces
    of at most PIECE_UPDATES updates and about PIECE_BYTES, in order, between begin and end; the
    stored form is the update object itself (the `update` of the wire line)."""
    store = RecordingStore()
    chunks = 3 * turn_record.PIECE_UPDATES + 5
    streamed_turn(store, chunks, text="x")
    names = [name for name, _ in store.calls]
    assert names[0] == "begin" and names[-1] == "end" and set(names[1:-1]) == {"append"}
    assert len(store.piece_sizes) >= 4
    assert all(count <= turn_record.PIECE_UPDATES and size < turn_record.PIECE_BYTES + 256 for count, size in store.piece_sizes)
    updates = [json.loads(u) for u in store.updates()]
    assert updates[0]["sessionUpdate"] == "user_message_chunk" and updates[0]["content"]["text"] == "go"
    assert [u["content"]["text"] for u in updates[1:]] == ["x"] * chunks
    big = RecordingStore()
    streamed_turn(big, 2000, text="y" * 4000)  # ~8 MB: the byte bound, not the count, cuts pieces
    assert len(big.piece_sizes) >= 15
    assert all(size < turn_record.PIECE_BYTES + 4200 for _count, size in big.piece_sizes)
    # Every piece handed over while the turn runs is followed by the store's chance to hold the
    # turn back; only the last one, handed over when the turn ends, is not.
    assert big.room_waits == len(big.piece_sizes) - 1


def test_a_turns_memory_does_not_grow_with_its_length():
    """Bounded memory: the memory a streamed turn holds at its peak is the same for
    20,000 and 100,000 chunks (one piece at most), while keeping every line would be ~5x more."""
    def peak_for(chunks: int) -> int:
        tracemalloc.start()
        try:
            streamed_turn(RecordingStore(keep=False), chunks)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    short, long = peak_for(20_000), peak_for(100_000)
    print(f"peak traced memory: 20,000 chunks {short >> 10} KiB, 100,000 chunks {long >> 10} KiB")
    assert long < short * 1.5 + (256 << 10), (short, long)
    assert long < 8 << 20  # 100,000 kept lines would be ~17 MB


# -- failure paths -----------------------------------------------------------------------------------
def test_each_prompt_ends_its_turn_with_its_outcome_S16(inprocess, tmp_path):
    """S16 (turns visible): the outcome of each prompt reaches the store's turn —
    its stop reason, "error" with the error's one-line message, "cancelled" — and each prompt
    still has exactly one usage record."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    failed = client.request("session/prompt", client.prompt_params(sid, "/fail")).error()
    assert client.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    waiting = client.prompt(sid, "/wait")
    client.wait_for(lambda: harness.server.sessions.get(sid).busy, what="the prompt to run")
    client.cancel(sid)
    assert waiting.result() == {"stopReason": "cancelled"}
    store = harness.server.store
    store.sync()
    turns = store.turns(sid)
    assert [(t.stop_reason, t.error) for t in turns] == [("error", failed["message"]), ("end_turn", None), ("cancelled", None)]
    assert all(t.complete for t in turns)
    assert sorted(u.stop_reason for u in store.usage(sid)) == ["cancelled", "end_turn", "error"]
    assert store.failed_writes == 0


def test_a_deleted_sessions_running_turn_writes_nothing_more(inprocess, tmp_path):
    """session/delete under a running turn that then sends 4 MB (several pieces): nothing more of
    the turn is written (no refused writes, no history), its one usage record is (S16)."""
    harness = inprocess(FloodsAfterCancelAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    flooding = client.prompt(sid, "flood when cancelled")
    client.wait_for(lambda: harness.server.sessions.get(sid).busy, what="the prompt to run")
    assert client.call("session/delete", {"sessionId": sid}) == {}
    assert flooding.result() == {"stopReason": "cancelled"}
    assert len(chunk_texts(client.updates(sid))) == 4000
    store = harness.server.store
    store.sync()
    assert store.turns(sid) == [] and store.history(sid) == []
    assert [u.stop_reason for u in store.usage(sid)] == ["cancelled"]
    assert store.failed_writes == 0


# -- streaming replay --------------------------------------------------------------------------------
def stored_session(harness: Any, chunks: int, size: int = 16) -> str:
    client = harness.client
    client.initialize()
    sid = client.new_session()
    assert client.prompt(sid, f"/stream {chunks} {size}").result() == {"stopReason": "end_turn"}
    return sid


def test_a_prompt_during_the_replay_is_busy_S2_S8(inprocess, tmp_path):
    """S2 amended, S8: a prompt for the loading session read right after session/load gets
    session_busy; the load then answers after its whole replay, and the session takes prompts."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 500)
    client = harness.client
    load = client.make_request("session/load", load_params(sid))
    prompt = client.make_request("session/prompt", client.prompt_params(sid, "too soon"))
    mark = len(client.received())
    client.send(load, prompt)
    error = client.pending_for(prompt).error()
    assert error["code"] == -32000 and error["data"]["reason"] == "session_busy"
    assert "modes" in client.pending_for(load).result()
    arrived = client.received()[mark:]
    load_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load["id"])
    replay = [m["params"]["update"]["sessionUpdate"] for m in arrived[:load_at] if m.get("method") == "session/update"]
    # All of it, then the commands and the title, before the response (S5).
    assert len(replay) == 1 + 500 + 2 and replay[-2:] == ["available_commands_update", "session_info_update"], replay[-3:]
    assert client.prompt(sid, "now").result() == {"stopReason": "end_turn"}


def test_session_cancel_ends_the_replay_early_S2(inprocess, tmp_path, monkeypatch):
    """S2 amended: session/cancel during a replay (held by a client that stopped reading) ends it
    early, even within a page (here one page holds the whole history); the load answers -32800
    (a partial replay is never a success), after what was replayed (S5)."""
    monkeypatch.setattr(replay, "PAGE_ENTRIES", 1 << 20)
    monkeypatch.setattr(replay, "PAGE_BYTES", 1 << 30)
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)  # ~450 KB: more than the output backlog and the pipe hold
    client = harness.client
    client.pause_reading()
    mark = len(client.received())
    load = client.request("session/load", load_params(sid))
    endpoint = harness.server.protocol.endpoint
    client.wait_for(lambda: endpoint.greenlets(), what="the replay to run as a background job")
    gevent.sleep(0.2)  # the replay fills the output backlog and waits for the client
    client.cancel(sid)
    client.resume_reading()
    assert load.error()["code"] == -32800
    arrived = client.received()[mark:]
    load_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load.id)
    replayed = [m for m in arrived[:load_at] if m.get("method") == "session/update"]
    assert 0 < len(replayed) < 3000  # the whole replay is 3001
    assert not [m for m in arrived[load_at:] if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"].endswith("_chunk")]
    assert client.prompt(sid, "after").result() == {"stopReason": "end_turn"}


def test_cancel_request_for_the_load_ends_the_replay_early(inprocess, tmp_path):
    """$/cancel_request naming the load ends its replay early too; the load answers -32800."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)
    client = harness.client
    client.pause_reading()
    load = client.request("session/load", load_params(sid))
    endpoint = harness.server.protocol.endpoint
    client.wait_for(lambda: endpoint.greenlets(), what="the replay to start")
    gevent.sleep(0.2)
    client.notify("$/cancel_request", {"requestId": load.id})
    client.resume_reading()
    assert load.error()["code"] == -32800
    assert len(chunk_texts(client.updates(sid))) < 2 * 3000


def replay_while_answering_control(harness: Any, chunks: int) -> dict[str, Any]:
    """Load a `chunks`-chunk session; while its replay streams, another session's set_mode is
    sent each time 1/20 of the replay arrived. Returns the figures and what arrived."""
    sid = stored_session(harness, chunks)
    client = harness.client
    other = client.new_session()
    sent_at: dict[Any, float] = {}
    answered: dict[Any, float] = {}
    replayed_before: dict[Any, int] = {}  # per set_mode answer: how much of the replay had arrived
    step = max(chunks // 20, 1)
    count = [0]

    def listener(message: dict[str, Any]) -> None:
        now = time.monotonic()
        if message.get("method") == "session/update" and message["params"]["sessionId"] == sid:
            count[0] += 1
            if count[0] % step == 0 and count[0] < chunks:
                request = client.make_request("session/set_mode", {"sessionId": other, "modeId": "code"})
                sent_at[request["id"]] = time.monotonic()
                gevent.spawn(client.send, request)
        elif "method" not in message and message.get("id") in sent_at:
            answered[message["id"]] = now
            replayed_before[message["id"]] = count[0]

    client.listeners.append(listener)
    mark = len(client.received())
    started = time.monotonic()
    load = client.request("session/load", load_params(sid))
    load.result(timeout=300)
    replay_time = time.monotonic() - started
    client.wait_for(lambda: len(answered) == len(sent_at), what="every set_mode answer")
    client.listeners.remove(listener)
    arrived = client.received()[mark:]
    load_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load.id)
    latencies = [answered[i] - sent_at[i] for i in sent_at]
    return {
        "replay_time": replay_time,
        # The loaded session's own updates: the other session's first updates (sent after its
        # session/new answer) may be read after `mark`, as the rig's reader yields between lines.
        "replayed": len(history_part([m["params"]["update"] for m in arrived[:load_at]
                                      if m.get("method") == "session/update" and m["params"]["sessionId"] == sid])),
        "answered_during": sum(1 for m in arrived[:load_at] if "method" not in m and m.get("id") in sent_at),
        "answered_mid_replay": sum(1 for n in replayed_before.values() if n < 1 + chunks),
        "longest": max(latencies),
        "asked": len(sent_at),
    }


def test_other_sessions_are_answered_during_a_replay_S2(inprocess, tmp_path):
    """S2 amended: while a 3,000-chunk replay streams, another session's session/set_mode is
    answered before the load's response; the longest answer time is printed, not asserted
    (tests/sessions/test_history_scale.py does the same for 100,000 chunks against the real CLI)."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    figures = replay_while_answering_control(harness, 3000)
    print(f"replay of 3,000 chunks: {figures['replay_time']:.2f}s; longest set_mode answer for another session "
          f"during it: {figures['longest'] * 1000:.1f} ms ({figures['asked']} asked)")
    assert figures["replayed"] == 1 + 3000
    assert figures["asked"] >= 10 and figures["answered_during"] >= 1
    assert figures["answered_mid_replay"] >= 1  # answered while the replay was still arriving


def test_a_replay_keeps_to_the_output_high_water_mark_S10(inprocess, tmp_path, monkeypatch):
    """S10, back-pressure: a replay to a client that stopped reading waits at the high-water mark like
    a streaming turn (the one paced path, fairness.PacedProducer), instead of queuing the history."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    sid = stored_session(harness, 3000)  # ~450 KB of replay
    client = harness.client
    outbound = harness.server.protocol.endpoint.outbound
    peak = record_peak_backlog(monkeypatch, outbound)
    client.pause_reading()
    load = client.request("session/load", load_params(sid))
    # Held: the writer drains what the pipe takes and the replay waits (for the low-water mark).
    client.wait_for(lambda: outbound.queued_bytes > outbound.limits.low_water, what="the replay to fill the backlog")
    gevent.sleep(0.2)
    client.resume_reading()
    assert "modes" in load.result()
    assert peak[0] <= outbound.limits.high_water + 4096, peak[0]
