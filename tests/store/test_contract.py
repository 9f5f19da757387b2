"""store/ behaviours that mutation testing (scripts/mutation.sh) found no test asserting: the
store contract, the same for the in-memory and the SQLite store (order, cursor, limit and cwd of
session/list, copy semantics, history, the usage ledger replaced by usage_id), and the usage
report's totals.
"""

from __future__ import annotations

import sqlite3

import pytest

from acp_green.store.session_record import SessionRecord
from acp_green.store import MemoryStore
from acp_green.store import statedb
from acp_green.store.report import Transcript, usage_report, usage_table
from acp_green.store.sqlite import SqliteStore
from acp_green.usage import UsageRecord


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else SqliteStore(statedb.db_path(str(tmp_path / "state")))
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


def test_usage_report_sums_input_and_output_apart_and_orders_sessions_busiest_first(tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    store.record_usage(UsageRecord("b", "1", "end_turn", 1.0, 0.5, 10, 1000, input_tokens=3, output_tokens=4))
    store.record_usage(UsageRecord("a", "2", "cancelled", 2.0, 0.25, 20, 2000))
    store.record_usage(UsageRecord("a", "3", "end_turn", 3.0, 1.0, 30, 3000, input_tokens=5))
    store.record_usage(UsageRecord("c", "4", "end_turn", 4.0, 0.0, 0, 0))
    store.close()
    conn = sqlite3.connect(path)
    try:
        report = usage_report(conn, with_records=True)
    finally:
        conn.close()
    assert report["totals"] == {
        "prompts": 4, "inputBytes": 60, "outputBytes": 6000, "inputTokens": 8, "outputTokens": 4,
        "durationSeconds": 1.75, "byStopReason": {"cancelled": 1, "end_turn": 3},
    }
    # Busiest first; sessions with as many prompts by id.
    assert [(s["sessionId"], s["prompts"], s["inputBytes"], s["outputBytes"]) for s in report["sessions"]] == [
        ("a", 2, 50, 5000), ("b", 1, 10, 1000), ("c", 1, 0, 0)]
    assert len(report["records"]) == 4
    table = usage_table(report)
    assert table[0].split() == ["session", "prompts", "in", "bytes", "out", "bytes", "in", "tokens", "out", "tokens", "seconds"]
    assert table[-1].split() == ["TOTAL", "4", "60", "6000", "8", "4", "1.750"]


def test_memory_store_counts_a_save_it_cannot_keep_and_never_raises():
    store = MemoryStore()
    store.save_session(_record("bad", "/w", 1.0, config={"f": lambda: None}))
    assert store.failed_writes == 1 and store.load_session("bad") is None


def test_history_is_text_when_ascii_and_kept_exactly_as_a_blob_otherwise(tmp_path):
    """statedb history pieces: the runtime's ASCII entries are TEXT (readable with any SQLite tool);
    other bytes are kept exactly, as a BLOB."""
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    store.save_session(_record("s", "/w", 1.0))
    store.append_turn("s", [b'{"a":1}'], "end_turn")
    store.append_turn("s", [b'{"t":"\xc3\xa9"}'], "end_turn")
    assert store.history("s") == [b'{"a":1}', b'{"t":"\xc3\xa9"}']
    assert store.failed_writes == 0
    store.close()
    conn = sqlite3.connect(path)
    try:
        assert [t for (t,) in conn.execute("SELECT typeof(entries) FROM history ORDER BY id")] == ["text", "blob"]
    finally:
        conn.close()


def test_writes_queued_together_share_a_transaction(tmp_path):
    """The store thread applies what is queued in one transaction (group commit), not one each."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    before = store.transactions
    for n in range(200):
        store.save_session(_record(f"s{n}", "/w", float(n)))
    store.sync()
    assert len(store.list_sessions()) == 200
    assert store.transactions - before <= 20
    store.close()


def test_the_transcript_shows_text_and_names_other_content_by_its_type():
    """A message chunk's text is shown as is; content that is not text shows as `[type]`."""
    history = [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello "}},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "image", "data": "..."}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read", "status": "pending"},
    ]
    transcript = Transcript()
    text = "".join([piece for update in history for piece in transcript.feed(update)] + list(transcript.end()))
    assert text == "user: hello [image]\nagent: hi\ntool_call: t1 read pending\n"
