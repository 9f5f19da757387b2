"""The in-memory store (`--ephemeral`, and the fallback) keeps a bounded history: past
`HISTORY_LIMIT_BYTES` the oldest turns are dropped whole, counted and said once at WARNING."""

from __future__ import annotations

import logging

from acp_green.demo import DemoAgent
from acp_green.store import base
from acp_green.store.base import MemoryStore
from acp_green.store.turns import TurnOutcome
from tests.sessions.test_history_flow import replay_of

UPDATE = b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"' + b"x" * 50 + b'"}}'


def add_turn(store: MemoryStore, session_id: str, turn_id: str, updates: int = 1) -> None:
    store.begin_turn(session_id, turn_id, 1.0, [UPDATE] * updates)
    store.end_turn(session_id, turn_id, TurnOutcome("end_turn"))


def test_history_up_to_the_limit_is_kept_and_one_byte_over_drops_the_oldest_turn_whole(caplog):
    limit = 10 * len(UPDATE)
    store = MemoryStore(history_limit_bytes=limit)
    for i in range(10):
        add_turn(store, "a" if i % 2 else "b", f"t{i}")
    assert store.history_bytes == limit and store.dropped_turns == 0  # exactly at the limit: all kept
    assert len(store.turns("a")) == len(store.turns("b")) == 5
    with caplog.at_level(logging.WARNING, logger="acp_green.store.base"):
        add_turn(store, "a", "t10")
        add_turn(store, "a", "t11")
    assert store.dropped_turns == 2 and store.history_bytes == limit
    # The oldest two (t0 of b, t1 of a) went whole, turn rows and updates alike.
    assert [t.turn_id for t in store.turns("b")] == ["t2", "t4", "t6", "t8"]
    assert [t.turn_id for t in store.turns("a")] == ["t3", "t5", "t7", "t9", "t10", "t11"]
    assert len(store.history("a")) == 6 and len(store.history("b")) == 4
    said = [r for r in caplog.records if "bound" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING  # once, however many are dropped


def test_a_turn_alone_over_the_limit_keeps_what_fits_and_is_marked_incomplete():
    store = MemoryStore(history_limit_bytes=3 * len(UPDATE))
    add_turn(store, "a", "old")
    store.begin_turn("a", "big", 1.0, [UPDATE])
    for _ in range(5):
        store.append_history("a", "big", [UPDATE])
    # The older turn made room; then the running turn is never dropped: its pieces are refused.
    assert [t.turn_id for t in store.turns("a")] == ["big"]
    assert len(store.history("a")) == 3 and store.history_bytes == 3 * len(UPDATE)
    assert store.failed_writes == 3 and not store.turns("a")[0].complete


def test_deleting_a_session_gives_its_bytes_back():
    store = MemoryStore(history_limit_bytes=4 * len(UPDATE))
    add_turn(store, "a", "t0", 2)
    add_turn(store, "b", "t0", 2)
    store.delete_session("a")
    assert store.history_bytes == 2 * len(UPDATE)
    add_turn(store, "c", "t0", 2)
    assert store.dropped_turns == 0 and len(store.history("b")) == 2


def test_ephemeral_prompts_beyond_the_bound_keep_memory_bounded_and_load_replays_the_newest(inprocess, monkeypatch):
    """The reviewer's case scaled down: many large prompts under --ephemeral."""
    monkeypatch.setattr(base, "HISTORY_LIMIT_BYTES", 200_000)
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    sid = client.new_session()
    for i in range(20):
        assert client.prompt(sid, f"p{i} " + "y" * 20_000).result() == {"stopReason": "end_turn"}
    store = harness.server.store
    store.sync()
    memory = store.store if hasattr(store, "store") and store.store is not None else store
    assert memory.history_bytes <= 200_000 and memory.dropped_turns >= 10
    harness.server.sessions.drop(sid)
    replay, _result = replay_of(client, sid)
    users = [u["content"]["text"][:3] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert users and users[-1] == "p19" and "p0 " not in users
