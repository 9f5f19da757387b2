"""History store: turns stored piece by piece while they run, read back in bounded
pages; a refused piece fails only itself; the schema-2 history is converted in place; the
history backlog waiting for the store thread is bounded."""

from __future__ import annotations

import json
import logging
import sqlite3
import time

import gevent
import pytest
from hypothesis import given, settings, strategies as st

from acp_green.store import statedb
from acp_green.store.base import MemoryStore
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import HistoryEntry, StoredTurn, TurnOutcome
from acp_green.rpc.cancel import CancelToken
from tests.helpers import wait_until


def chunk(n: int, text: str = "") -> bytes:
    return json.dumps({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": f"{n}{text}"}}).encode()


def prompt(text: str) -> list[bytes]:
    return [json.dumps({"sessionUpdate": "user_message_chunk", "messageId": "u1", "content": {"type": "text", "text": text}}).encode()]


def all_pages(store, session_id: str, max_entries: int, max_bytes: int, turn_id: str | None = None) -> list[list[HistoryEntry]]:
    pages, after = [], None
    while True:
        page = store.history_page(session_id, after, max_entries, max_bytes, turn_id)
        pages.append(page.entries)
        if page.after is None:
            return pages
        after = page.after


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else SqliteStore(statedb.db_path(str(tmp_path / "state")))
    yield made
    made.close()


# -- the API, the same on both stores --------------------------------------------------------------
def test_turns_are_begun_appended_ended_and_read_back_in_order_with_their_outcomes(store):
    """Three turns (/fail, /sleep 0, hello) stay three turns: each keeps its prompt, its updates,
    its outcome (a failed one with its message) and whether it is complete."""
    store.begin_turn("s", "t1", 1.0, prompt("/fail"))
    store.end_turn("s", "t1", TurnOutcome("error", "boom"))
    store.begin_turn("s", "t2", 2.0, prompt("/sleep 0"))
    store.end_turn("s", "t2", TurnOutcome("end_turn"))
    store.begin_turn("s", "t3", 3.0, prompt("hello"))
    store.append_history("s", "t3", [chunk(1), chunk(2)])
    store.append_history("s", "t3", [chunk(3)])
    assert store.turns("s") == [
        StoredTurn("t1", 1.0, "error", "boom", True),
        StoredTurn("t2", 2.0, "end_turn", None, True),
        StoredTurn("t3", 3.0, None, None, True),
    ]
    assert [t.outcome for t in store.turns("s")][:2] == ["failed: boom", "end_turn"]
    (page,) = all_pages(store, "s", 100, 1 << 20)
    assert page == [
        HistoryEntry("t1", prompt("/fail")[0]), HistoryEntry("t2", prompt("/sleep 0")[0]), HistoryEntry("t3", prompt("hello")[0]),
        HistoryEntry("t3", chunk(1)), HistoryEntry("t3", chunk(2)), HistoryEntry("t3", chunk(3)),
    ]
    assert [e.update for e in store.history_page("s", None, 100, 1 << 20, "t3").entries] == [prompt("hello")[0], chunk(1), chunk(2), chunk(3)]
    assert store.history("s") == [e.update for e in page]  # the old read, until every caller pages
    store.delete_session("s")
    assert store.turns("s") == [] and store.history_page("s", None, 10, 100).entries == []


def test_a_piece_for_a_turn_never_begun_is_refused_counted_and_logged(store, caplog):
    """Appending to (or ending) a turn the store does not know is a dropped write, never a silent one."""
    with caplog.at_level(logging.ERROR):
        store.append_history("s", "nope", [chunk(1)])
        store.end_turn("s", "nope", TurnOutcome("end_turn"))
        store.sync()
    assert store.failed_writes == 2
    assert sum("'nope'" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR) == 2
    assert store.turns("s") == [] and store.history("s") == []


@settings(deadline=None, max_examples=40)
@given(
    pieces=st.lists(st.lists(st.integers(min_value=0, max_value=300), min_size=0, max_size=12), min_size=0, max_size=8),
    max_entries=st.integers(min_value=1, max_value=7),
    max_bytes=st.integers(min_value=1, max_value=900),
)
def test_pages_are_bounded_and_together_are_the_history_on_both_stores(tmp_path_factory, pieces, max_entries, max_bytes):
    """Paging: whatever the pieces and the bounds, every page holds at most
    `max_entries` entries and at most `max_bytes` bytes of updates (unless one update alone is
    larger), and the pages together are the stored history, in order, with each entry's turn;
    the memory store pages the same way as SQLite."""
    stores = [MemoryStore(), SqliteStore(statedb.db_path(str(tmp_path_factory.mktemp("state"))))]
    expected = []
    for store in stores:
        expected = []
        for number, sizes in enumerate(pieces):
            turn = f"t{number // 3}"
            if number % 3 == 0:
                store.begin_turn("s", turn, float(number), [])
            updates = [json.dumps({"n": number, "x": "y" * size}).encode() for size in sizes]
            store.append_history("s", turn, updates)
            expected.extend(HistoryEntry(turn, u) for u in updates)
    try:
        for store in stores:
            pages = all_pages(store, "s", max_entries, max_bytes)
            assert [entry for page in pages for entry in page] == expected
            for page in pages:
                assert len(page) <= max_entries
                assert len(page) == 1 or sum(len(e.update) for e in page) <= max_bytes
            assert all(pages[:-1]), "only the last page may be empty"
    finally:
        for store in stores:
            store.close()


# -- SQLite: rows, batching, isolation ---------------------------------------------------------
def test_a_long_turn_is_stored_in_bounded_rows(tmp_path):
    """Paging: pieces are split into rows of at most PIECE_ROW_BYTES, so reading a
    history back one row at a time holds a bounded amount whatever the length of the turn."""
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    store.begin_turn("s", "t", 1.0, prompt("go"))
    for n in range(10):
        store.append_history("s", "t", [chunk(n, "x" * 1000) for _ in range(500)])  # ~0.5 MB pieces
    store.close()
    conn = sqlite3.connect(path)
    try:
        lengths = [n for (n,) in conn.execute("SELECT length(entries) FROM history")]
        assert max(lengths) <= statedb.PIECE_ROW_BYTES and sum(lengths) > 10 * statedb.PIECE_ROW_BYTES
        seqs = [s for (s,) in conn.execute("SELECT seq FROM history ORDER BY id")]
        assert seqs == list(range(len(seqs)))  # piece numbers within the turn, in order
    finally:
        conn.close()


def test_a_ten_thousand_chunk_turn_is_not_ten_thousand_transactions(tmp_path):
    """Batching: a turn streamed as 10,000 one-chunk pieces, yielding to the hub as a
    streaming prompt does, is committed in a few transactions (pieces wait on the hub briefly and
    the store thread commits whatever is queued as one transaction); measured: ~10."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    try:
        store.save_session(SessionRecord("s", "/tmp"))
        store.sync()
        before = store.transactions
        store.begin_turn("s", "t", 1.0, prompt("stream"))
        for n in range(10_000):
            store.append_history("s", "t", [chunk(n)])
            if n % 100 == 0:
                gevent.sleep(0)
        store.end_turn("s", "t", TurnOutcome("end_turn"))
        store.sync()
        transactions = store.transactions - before
        assert transactions <= 100, transactions
        assert len(store.history("s")) == 10_001 and store.failed_writes == 0
    finally:
        store.close()


def test_a_slow_stream_of_pieces_is_committed_a_few_times_a_second_not_once_a_piece(tmp_path):
    """Batching: pieces arriving one every millisecond or more (a slow stream) wait on
    the hub up to AppendHistory.hub_wait (50 ms), so 2,000 of them are a few dozen hand-offs and
    transactions (measured: ~50), not one each; a slower hub only makes fewer."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    try:
        store.begin_turn("s", "t", 1.0, prompt("slow"))
        store.sync()
        before = store.transactions
        for n in range(2_000):
            store.append_history("s", "t", [chunk(n)])
            gevent.sleep(0.001)
        store.end_turn("s", "t", TurnOutcome("end_turn"))
        store.sync()
        transactions = store.transactions - before
        assert transactions <= 200, transactions
        assert len(store.history("s")) == 2_001
    finally:
        store.close()


def small_rows(monkeypatch, limit: int) -> None:
    """Every store opened from now on refuses a value over `limit` bytes (SQLITE_LIMIT_LENGTH)."""
    original = statedb.connect

    def connect(path, **kwargs):
        conn = original(path, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        return conn

    monkeypatch.setattr(statedb, "connect", connect)


def test_one_refused_record_fails_that_piece_only_and_the_store_stays_on_disk(tmp_path, monkeypatch, caplog):
    """Isolation: a piece SQLite refuses ("string or blob too big", made with a small
    SQLITE_LIMIT_LENGTH instead of a real 1 GB row) is logged at ERROR, counted, and marks its
    turn incomplete; the turn keeps its other pieces and its outcome, and the store stays on
    disk: a session begun afterwards, with its turn, is visible to a fresh read-only open."""
    small_rows(monkeypatch, 50_000)
    state = str(tmp_path / "state")
    path = statedb.db_path(state)
    store = SqliteStore(path)
    try:
        with caplog.at_level(logging.ERROR):
            store.save_session(SessionRecord("big", "/tmp", updated_at=1.0))
            store.begin_turn("big", "t", 1.0, prompt("/stream"))
            store.append_history("big", "t", [chunk(1)])
            store.append_history("big", "t", [chunk(2, "x" * 60_000)])  # one update over the limit
            store.append_history("big", "t", [chunk(3)])
            store.end_turn("big", "t", TurnOutcome("end_turn"))
            store.sync()
        assert not store.degraded
        assert store.failed_writes == 1
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "append_history" in errors[0] and "'big'" in errors[0] and "too big" in errors[0], errors
        assert store.turns("big") == [StoredTurn("t", 1.0, "end_turn", None, False)]
        assert store.history("big") == [prompt("/stream")[0], chunk(1), chunk(3)]
        # Every other session, before and after, is on disk.
        store.save_session(SessionRecord("other", "/tmp", updated_at=2.0))
        store.begin_turn("other", "u", 2.0, prompt("hello"))
        store.append_history("other", "u", [chunk(9)])
        store.end_turn("other", "u", TurnOutcome("end_turn"))
        store.sync()
        assert not store.degraded
        fresh = statedb.connect_existing(path)  # read-only, while the agent still has it open
        try:
            assert [r.session_id for r in statedb.list_sessions(fresh)] == ["other", "big"]
            assert statedb.turns(fresh, "other") == [StoredTurn("u", 2.0, "end_turn", None, True)]
            assert statedb.history(fresh, "other") == [prompt("hello")[0], chunk(9)]
            assert not statedb.turns(fresh, "big")[0].complete
        finally:
            fresh.close()
    finally:
        store.close()


def test_a_refused_prompt_leaves_its_turn_begun_and_incomplete(tmp_path, monkeypatch):
    """Isolation: a prompt too big to store still begins its turn, so its later pieces
    and its outcome are kept; the turn says it is incomplete."""
    small_rows(monkeypatch, 50_000)
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    try:
        store.begin_turn("s", "t", 1.0, prompt("x" * 60_000))
        store.append_history("s", "t", [chunk(1)])
        store.end_turn("s", "t", TurnOutcome("cancelled"))
        store.sync()
        assert not store.degraded and store.failed_writes == 1
        assert store.turns("s") == [StoredTurn("t", 1.0, "cancelled", None, False)]
        assert store.history("s") == [chunk(1)]
    finally:
        store.close()


@pytest.mark.parametrize(("error", "is_record"), [
    (sqlite3.DataError("string or blob too big"), True),
    (sqlite3.IntegrityError("UNIQUE constraint failed"), True),
    (statedb.RefusedRecord("raw newline"), True),
    (OverflowError("int too big"), True),
    (sqlite3.OperationalError("database or disk is full"), False),
    (sqlite3.DatabaseError("database disk image is malformed"), False),
])
def test_a_refused_record_is_told_apart_from_a_failing_database(error, is_record):
    """Isolation: the record's own errors fail the record; the database's fail the disk."""
    assert statedb.is_record_error(error) is is_record


def test_string_or_blob_too_big_is_the_records_whatever_class_reports_it():
    """SQLITE_TOOBIG is the record's even when sqlite3 reports it as an OperationalError."""
    conn = sqlite3.connect(":memory:")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100)
    try:
        conn.execute("SELECT ?", ("x" * 200,))
    except sqlite3.Error as exc:
        caught = exc
    conn.close()
    assert statedb.is_record_error(caught)
    disguised = sqlite3.OperationalError("string or blob too big")
    disguised.sqlite_errorcode = sqlite3.SQLITE_TOOBIG
    assert statedb.is_record_error(disguised)


# -- the backlog bound -------------------------------------------------------------------------
def test_history_beyond_the_backlog_bound_is_dropped_counted_said_once_and_marks_the_turn(tmp_path, caplog):
    """Memory: history handed to the store and not yet committed never exceeds the
    bound. A piece over it is dropped (writes never block the hub), counted in failed_writes,
    said at ERROR once for the turn (and how much when it ends), and the turn is marked
    incomplete; once the store catches up, pieces are kept again. The bound is reached here by
    appending without ever yielding to the hub, so nothing is handed to the store thread."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")), history_backlog_bytes=10_000)
    try:
        piece = [b'{"sessionUpdate":"agent_message_chunk","x":"' + b"y" * 954 + b'"}']  # 1,000 bytes
        assert len(piece[0]) == 1000
        store.begin_turn("s", "t", 1.0, [])
        with caplog.at_level(logging.ERROR):
            for _ in range(100):
                store.append_history("s", "t", piece)
                assert store.backlog_bytes <= 10_000
            store.sync()
            assert store.backlog_bytes == 0
            store.append_history("s", "t", piece * 20)  # caught up: kept again, even one piece over the bound
            store.end_turn("s", "t", TurnOutcome("end_turn"))
            store.sync()
        assert store.failed_writes == 90
        assert len(store.history("s")) == 10 + 20
        assert store.turns("s") == [StoredTurn("t", 1.0, "end_turn", None, False)]
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 2 and "dropping history" in errors[0] and "90 pieces (90000 bytes)" in errors[1], errors
    finally:
        store.close()


# -- schema 2 -> 3 -----------------------------------------------------------------------------
def schema_2_database(path: str, turns: list[tuple[str, str | None, list[bytes]]]) -> None:
    """A version-2 database made by that version's own SQL: one row per turn, JSON Lines."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in statedb._SCHEMA_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO sessions VALUES ('s', '/w', '[]', NULL, NULL, '{}', 1.0)")
    for number, (session_id, stop_reason, entries) in enumerate(turns):
        joined = b"\n".join(entries)
        conn.execute(
            "INSERT INTO turns (session_id, recorded_at, stop_reason, entries) VALUES (?, ?, ?, ?)",
            (session_id, 100.0 + number, stop_reason, joined.decode("ascii") if joined.isascii() else joined),
        )
    conn.execute("PRAGMA user_version = 2")
    conn.close()


def test_a_schema_2_history_is_converted_in_place_to_turns_with_their_stop_reasons(tmp_path):
    """Migration: each version-2 turn row becomes a turn with its stop reason and its
    time, and its updates become pieces of bounded rows, exactly (a non-ASCII BLOB too); the old
    table is gone, the version is 3, and new turns go on after the old ones."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = statedb.db_path(str(state))
    big = [chunk(n, "x" * 1000) for n in range(400)]  # ~420 KB: more than one row of schema 3
    schema_2_database(path, [
        ("s", "error", prompt("/fail")),
        ("s", "end_turn", prompt("/sleep 0")),
        ("other", "cancelled", [b'{"t":"caf\xc3\xa9"}']),
        ("s", "end_turn", prompt("hello") + big),
        ("s", "end_turn", []),
    ])
    store = SqliteStore(path)
    try:
        assert [(t.turn_id, t.started_at, t.outcome, t.complete) for t in store.turns("s")] == [
            ("v2-1", 100.0, "failed", True), ("v2-2", 101.0, "end_turn", True), ("v2-4", 103.0, "end_turn", True),
            ("v2-5", 104.0, "end_turn", True),
        ]
        assert store.history("s") == prompt("/fail") + prompt("/sleep 0") + prompt("hello") + big
        assert store.history("other") == [b'{"t":"caf\xc3\xa9"}']
        store.begin_turn("s", "new", 200.0, prompt("after"))
        store.sync()
        assert store.history_page("s", None, 1000, 1 << 30, "new").entries == [HistoryEntry("new", prompt("after")[0])]
    finally:
        store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (statedb.SCHEMA_VERSION,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'turns_v2'").fetchall() == []
        assert max(n for (n,) in conn.execute("SELECT length(entries) FROM history")) <= statedb.PIECE_ROW_BYTES
    finally:
        conn.close()


def test_a_schema_2_database_is_read_by_the_inspection_connection_without_converting_it(tmp_path):
    """The read-only `sessions` connection reads a version-2 history through temporary views:
    its turns and stop reasons show; the file stays version 2."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = statedb.db_path(str(state))
    schema_2_database(path, [("s", "error", prompt("/fail")), ("s", "end_turn", prompt("/sleep 0") + [chunk(1)])])
    conn = statedb.connect_existing(path)
    try:
        assert [t.outcome for t in statedb.turns(conn, "s")] == ["failed", "end_turn"]
        assert statedb.history(conn, "s") == prompt("/fail") + prompt("/sleep 0") + [chunk(1)]
    finally:
        conn.close()
    with pytest.raises(statedb.StateDbError, match="acp-green serve"):
        statedb.connect_existing(path, write=True)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    conn.close()


def test_a_store_that_falls_back_to_memory_keeps_turns_and_their_outcomes(tmp_path, caplog, monkeypatch):
    """When the database turns out corrupt, the memory store starts from what the database held:
    turns, outcomes, incomplete marks and history, page by page; a running turn goes on in memory."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    real_append = statedb.append_history

    def append_history(conn, session_id, turn_id, updates):
        if len(updates) >= 200:
            raise sqlite3.DatabaseError("database disk image is malformed")
        real_append(conn, session_id, turn_id, updates)

    monkeypatch.setattr(statedb, "append_history", append_history)
    try:
        store.save_session(SessionRecord("s", "/tmp", updated_at=1.0))
        store.begin_turn("s", "t1", 1.0, prompt("/fail"))
        store.end_turn("s", "t1", TurnOutcome("error", "boom"))
        store.begin_turn("s", "t2", 2.0, prompt("go"))
        store.sync()
        with caplog.at_level(logging.WARNING):
            store.append_history("s", "t2", [chunk(n, "x" * 2000) for n in range(200)])  # "corrupt"
            store.sync()
        assert store.degraded
        store.append_history("s", "t2", [chunk(999)])
        store.end_turn("s", "t2", TurnOutcome("end_turn"))
        assert [t.outcome for t in store.turns("s")] == ["failed: boom", "end_turn"]
        history = store.history("s")
        assert history[:2] == prompt("/fail") + prompt("go") and history[-1] == chunk(999) and len(history) == 203
    finally:
        store.close()


def test_reads_wait_at_most_for_what_was_queued_before_them(tmp_path):
    """A page read sees every piece appended before it, even one still waiting on the hub."""
    store = SqliteStore(statedb.db_path(str(tmp_path / "state")))
    try:
        store.begin_turn("s", "t", time.time(), [])
        store.append_history("s", "t", [chunk(1)])  # waits on the hub for AppendHistory.hub_wait
        assert store.history_page("s", None, 10, 1000).entries == [HistoryEntry("t", chunk(1))]
    finally:
        store.close()


def test_a_streaming_turn_waits_for_the_disk_instead_of_growing_the_backlog(tmp_path):
    """Memory: while another process holds the database's write lock, a turn that keeps
    handing over pieces waits in `wait_for_history_room` once more than `history_room_bytes` are
    uncommitted, so the backlog stays near that mark and nothing is dropped; a cancel releases the
    wait; once the lock is gone the turn goes on and every piece is stored."""
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path, history_backlog_bytes=1 << 20, history_room_bytes=20_000)
    piece = [b'{"sessionUpdate":"agent_message_chunk","x":"' + b"y" * 954 + b'"}']  # 1,000 bytes
    token = CancelToken()
    handed: list[int] = []
    try:
        store.begin_turn("s", "t", 1.0, [])
        store.sync()
        holder = sqlite3.connect(path, isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")  # the store thread now waits for the lock

        def turn() -> None:
            for _ in range(200):
                store.append_history("s", "t", piece)
                handed.append(store.backlog_bytes)
                store.wait_for_history_room(token)

        producer = gevent.spawn(turn)
        assert wait_until(lambda: len(handed) >= 21 and store._backlog.room_wanted, timeout=30)
        gevent.sleep(0.3)
        assert not producer.dead and len(handed) < 40, len(handed)  # held back, not racing to the bound
        token.set()  # a cancelled turn stops waiting: what it hands over now may be dropped
        assert wait_until(lambda: len(handed) > 40, timeout=30)
        token_free = CancelToken()
        producer.kill()
        holder.execute("COMMIT")
        holder.close()
        store.sync()
        kept_before = len(store.history("s"))
        assert kept_before == len(handed) - store.failed_writes
        # The lock is gone: a new producer is never held for long and loses nothing.
        for _ in range(100):
            store.append_history("s", "t", piece)
            store.wait_for_history_room(token_free)
        store.end_turn("s", "t", TurnOutcome("end_turn"))
        store.sync()
        assert len(store.history("s")) == kept_before + 100
    finally:
        store.close()
