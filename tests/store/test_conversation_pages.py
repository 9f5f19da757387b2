"""Reading a session's conversation (acp_green.conversation.Conversation) pages through the store:
a long history is never held at once; turn_page, session state and schema 4 on both stores."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc

import pytest

from acp_green.conversation import TURN_PAGE, Conversation, ConversationMessage
from acp_green.store import statedb
from acp_green.store.base import MemoryStore
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import TurnOutcome

TURNS = 20_000


def user(text: str) -> bytes:
    return json.dumps({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}).encode()


def agent(text: str, message_id: str) -> bytes:
    return json.dumps({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                       "messageId": message_id}).encode()


def fill(writer, session_id: str, turns: int) -> None:
    """`turns` turns of a prompt and a two-chunk reply (~300 bytes each) through `writer`'s
    begin_turn/append_history/end_turn (a store, or statedb bound to a connection)."""
    for index in range(turns):
        turn_id = f"t{index}"
        writer.begin_turn(session_id, turn_id, float(index), [user(f"question {index} " + "x" * 60)])
        writer.append_history(session_id, turn_id, [agent(f"answer {index} ", f"{turn_id}.1"), agent("y" * 60, f"{turn_id}.1")])
        writer.end_turn(session_id, turn_id, TurnOutcome("end_turn"))


class _OnConnection:
    """statedb's writes bound to one connection (filling a big database in one transaction)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def begin_turn(self, *args):
        statedb.begin_turn(self.conn, *args)

    def append_history(self, *args):
        statedb.append_history(self.conn, *args)

    def end_turn(self, *args):
        statedb.end_turn(self.conn, *args)


@pytest.fixture(scope="module")
def big_database(tmp_path_factory) -> str:
    path = statedb.db_path(str(tmp_path_factory.mktemp("state")))
    conn = statedb.connect(path)
    conn.execute("BEGIN")
    statedb.save_session(conn, SessionRecord("big", "/tmp"))
    fill(_OnConnection(conn), "big", TURNS)
    conn.execute("COMMIT")
    conn.close()
    return path


@pytest.fixture
def big_store(big_database):
    store = SqliteStore(big_database)
    yield store
    store.close()


def test_reading_the_first_turns_of_a_long_history_reads_a_page_not_the_history(big_store):
    conversation = Conversation(big_store, "big")
    first = [next(conversation) for _ in range(3)]
    assert [t.prompt_text for t in first] == [f"question {i} " + "x" * 60 for i in range(3)]
    assert first[1].reply_text == "answer 1 " + "y" * 60 and first[1].messages[0].message_id == "t1.1"
    # One page of turn headers, one read of each turn's updates.
    assert conversation.pages_read == 1 + 3


def test_newest_first_and_since_turn_number_turns_as_stored(big_store):
    newest = Conversation(big_store, "big", newest_first=True)
    assert [next(newest).index for _ in range(2)] == [TURNS - 1, TURNS - 2]
    assert [t.index for t in Conversation(big_store, "big", since_turn=TURNS - 2)] == [TURNS - 2, TURNS - 1]
    assert [t.index for t in Conversation(big_store, "big", newest_first=True, since_turn=TURNS - 3)] == [TURNS - 1, TURNS - 2, TURNS - 3]


def test_iterating_twenty_thousand_turns_holds_one_page_at_a_time(big_store):
    """The whole history is ~8 MB of updates and 20k turn values; iterating it holds about one
    page of turn headers and one turn (the bound: far below what the history would take)."""
    tracemalloc.start()
    try:
        count = 0
        conversation = Conversation(big_store, "big")
        for turn in conversation:
            assert isinstance(turn.items[0], ConversationMessage)
            count += 1
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == TURNS
    assert conversation.pages_read == TURNS // TURN_PAGE + 1 + TURNS
    assert peak < 2 << 20, f"iterating held {peak} bytes at its peak"


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else SqliteStore(statedb.db_path(str(tmp_path / "state")))
    yield made
    made.close()


def test_turn_pages_and_turn_histories_are_the_same_on_both_stores(store):
    store.save_session(SessionRecord("s", "/tmp"))
    store.save_session(SessionRecord("other", "/tmp"))
    fill(store, "s", 150)
    fill(store, "other", 3)
    pages = [store.turn_page("s", start, 64) for start in (0, 64, 128)]
    assert [len(p) for p in pages] == [64, 64, 22]
    assert [t.turn_id for page in pages for t in page] == [f"t{i}" for i in range(150)]
    assert [t.turn_id for t in store.turn_page("s", 1, 2, newest_first=True)] == ["t148", "t147"]
    turns = list(Conversation(store, "s", since_turn=148))
    assert [(t.index, t.prompt_text[:12], t.stop_reason) for t in turns] == [(148, "question 148", "end_turn"), (149, "question 149", "end_turn")]
    assert [t.prompt_text[:10] for t in Conversation(store, "other")] == ["question 0", "question 1", "question 2"]


def test_state_is_kept_per_session_and_forgotten_with_it(store):
    store.save_session(SessionRecord("s", "/tmp"))
    assert store.load_state("s") is None
    store.save_state("s", b'{"name":"Ada"}')
    store.save_state("s", '{"name":"Adé \udce9"}'.encode("utf-8", "surrogatepass"))
    assert store.load_state("s") == '{"name":"Adé \udce9"}'.encode("utf-8", "surrogatepass")
    store.delete_session("s")
    assert store.load_state("s") is None


def test_a_schema_3_database_gains_the_state_table(tmp_path):
    path = statedb.db_path(str(tmp_path))
    conn = statedb.connect(path)
    conn.execute("DROP TABLE session_state")
    conn.execute("PRAGMA user_version = 3")
    statedb.save_session(conn, SessionRecord("s", "/tmp"))
    conn.close()
    # An inspection command may still delete from a version-3 database it does not convert.
    old = statedb.connect_existing(path, write=True)
    assert old is not None
    statedb.delete_session(old, "nothing")
    old.close()
    conn = statedb.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == statedb.SCHEMA_VERSION
    statedb.save_state(conn, "s", b'{"a":1}')
    assert statedb.load_state(conn, "s") == b'{"a":1}'
    assert statedb.load_session(conn, "s") is not None
    conn.close()
