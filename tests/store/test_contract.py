"""The store contract, the same for the in-memory, the SQLite and the PostgreSQL store: order, cursor, limit and cwd
of session/list, copy semantics, history, the usage ledger replaced by usage_id; and a save the
memory store cannot keep is counted, never raised.
"""

from __future__ import annotations

import pytest

from acp_green.store.session_record import SessionRecord
from acp_green.store import MemoryStore
from acp_green.store import statedb
from acp_green.store.postgres import PostgresStore
from acp_green.store.sqlite import SqliteStore
from acp_green.usage import UsageRecord


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    else:  # a fresh database on the test server (tests/postgres_server.py)
        made = PostgresStore(request.getfixturevalue("postgres_url"))
    yield made
    made.close()


def _record(session_id: str, cwd: str, updated_at: float, **rest) -> SessionRecord:
    return SessionRecord(session_id, cwd, updated_at=updated_at, **rest)


def test_list_is_newest_first_with_cursor_limit_and_cwd(store):
    for sid, cwd, at in [("a", "/p", 1.0), ("b", "/q", 2.0), ("c", "/p", 3.0), ("d", "/p", 3.0)]:
        store.save_session(_record(sid, cwd, at))
    assert [r.session_id for r in store.list_sessions()] == ["d", "c", "b", "a"]
    assert [r.session_id for r in store.list_sessions(cwd="/p")] == ["d", "c", "a"]
    assert [r.session_id for r in store.list_sessions(limit=2)] == ["d", "c"]
    assert [r.session_id for r in store.list_sessions(after=(3.0, "c"))] == ["b", "a"]
    assert [r.session_id for r in store.list_sessions(after=(3.0, "d"), limit=1)] == ["c"]
    assert store.list_sessions(cwd="/nowhere") == []


def test_a_saved_record_is_a_copy_and_comes_back_whole(store):
    record = _record("s", "/w", 5.0, additional_directories=["/x"], title="t", mode_id="ask", config={"k": [1]})
    store.save_session(record)
    record.title = "changed later"
    record.config["k"].append(2)
    loaded = store.load_session("s")
    assert loaded == _record("s", "/w", 5.0, additional_directories=["/x"], title="t", mode_id="ask", config={"k": [1]})
    assert store.load_session("missing") is None


def test_history_appends_in_order_and_delete_forgets_session_and_history(store):
    store.save_session(_record("s", "/w", 1.0))
    store.append_turn("s", [b'{"n":1}', b'{"n":2}'], "end_turn")
    store.append_turn("s", [b'{"n":3}'], "cancelled")
    assert store.history("s") == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    store.delete_session("s")
    assert store.load_session("s") is None and store.history("s") == []
    store.delete_session("s")  # idempotent


def test_usage_is_replaced_by_its_usage_id_and_filtered_by_session(store):
    running = UsageRecord("s1", "1", "running", 10.0, 0.0, 5, 0, usage_id="u1")
    store.record_usage(running)
    store.record_usage(UsageRecord("s2", "2", "end_turn", 11.0, 1.0, 7, 9, usage_id="u2"))
    store.record_usage(UsageRecord("s1", "1", "end_turn", 10.0, 2.5, 5, 40, usage_id="u1"))
    records = store.usage()
    assert sorted((r.usage_id, r.stop_reason, r.output_bytes) for r in records) == [("u1", "end_turn", 40), ("u2", "end_turn", 9)]
    assert [r.usage_id for r in store.usage("s2")] == ["u2"]
    asked = "".join(["s", "2"])  # an equal id that is another str object, as a request's would be
    assert [r.usage_id for r in store.usage(asked)] == ["u2"]


def test_memory_store_counts_a_save_it_cannot_keep_and_never_raises():
    store = MemoryStore()
    store.save_session(_record("bad", "/w", 1.0, config={"f": lambda: None}))
    assert store.failed_writes == 1 and store.load_session("bad") is None
