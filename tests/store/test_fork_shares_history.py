"""Schema 6 (store/statedb.py): a fork shares its source's history rows instead of copying them.

A fork's copy of a turn is a `turns` row whose `history_turn` names the rows its source's turn
reads; reads page through a session's turns and each turn's rows by (turn, seq); a history row
is purged, in steps, once no turn refers to it, whoever deletes the last referring session; a
version-5 database is migrated (every turn reads its own rows) and read as it is."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3

import pytest

from acp_green.store import statedb
from acp_green.store.base import MemoryStore
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import HistoryEntry, HistoryPosition, TurnOutcome
from tests.helpers import wait_until


def _update(turn: str, n: int, size: int = 40) -> bytes:
    text = f"{turn}/{n} " + "x" * size
    return json.dumps({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}).encode()


def _turn(store, session_id: str, turn_id: str, pieces: list[list[bytes]], ended: bool = True) -> list[HistoryEntry]:
    """A turn of `pieces` (the first is the prompt) through the store API; its entries."""
    store.begin_turn(session_id, turn_id, 1.0, pieces[0])
    for piece in pieces[1:]:
        store.append_history(session_id, turn_id, piece)
    if ended:
        store.end_turn(session_id, turn_id, TurnOutcome("end_turn"))
    return [HistoryEntry(turn_id, update) for piece in pieces for update in piece]


def _paged(store, session_id: str, max_entries: int, max_bytes: int, turn_id: str | None = None) -> list[HistoryEntry]:
    """Every entry, read in pages of at most `max_entries` (each page resumed from the last one's position)."""
    entries: list[HistoryEntry] = []
    after: HistoryPosition | None = None
    for _ in range(100_000):
        page = store.history_page(session_id, after, max_entries, max_bytes, turn_id)
        assert page.entries or page.after is None, "a page always moves on"
        entries.extend(page.entries)
        if page.after is None:
            return entries
        after = page.after
    raise AssertionError("paging never ended")


def _count(path: str, sql: str) -> int:
    probe = sqlite3.connect(path, timeout=5)
    try:
        return probe.execute(sql).fetchone()[0]
    finally:
        probe.close()


def _in_use(path: str) -> int:
    """Bytes of the database's pages in use (what the file holds once checkpointed, WAL included)."""
    probe = sqlite3.connect(path, timeout=5)
    try:
        pages = probe.execute("PRAGMA page_count").fetchone()[0] - probe.execute("PRAGMA freelist_count").fetchone()[0]
        return pages * probe.execute("PRAGMA page_size").fetchone()[0]
    finally:
        probe.close()


@pytest.fixture
def path(tmp_path) -> str:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return statedb.db_path(str(state))


def test_forks_of_a_big_history_add_no_history_rows_and_page_back_equal(path):
    """20 MB of history in 175 turns of 4 rows each: five forks add no history row and under
    1 MB to the database, and each fork pages back exactly the source's ended turns, with small
    pages whose positions fall inside rows, between rows and between turns, a turn at a time too."""
    store = SqliteStore(path)
    try:
        store.save_session(SessionRecord("src", "/w"))
        expected: list[HistoryEntry] = []
        for t in range(175):
            pieces = [[_update(f"t{t}", 0)]] + [[_update(f"t{t}", 10 * p + n, 4000) for n in range(10)] for p in range(1, 4)]
            expected += _turn(store, "src", f"t{t}", pieces)
        _turn(store, "src", "running", [[_update("running", 0)]], ended=False)  # left out of every fork
        store.sync()
        rows, size = _count(path, "SELECT count(*) FROM history"), _in_use(path)
        assert sum(len(e.update) for e in expected) > 20_000_000 and rows == 176 * 4 - 3
        for n in range(5):
            store.save_session(SessionRecord(f"fork{n}", "/w", forked_from="src"))
            store.fork_history("src", f"fork{n}")
        store.sync()
        assert _count(path, "SELECT count(*) FROM history") == rows
        assert _in_use(path) - size < 1 << 20, _in_use(path) - size
        for n in range(5):
            assert _paged(store, f"fork{n}", 7, 1 << 20) == expected
        assert _paged(store, "fork3", 1000, 30_000) == expected  # pages cut by bytes
        assert _paged(store, "fork4", 3, 1 << 20, "t17") == [e for e in expected if e.turn_id == "t17"]
        assert [t.turn_id for t in store.turns("fork0")] == [f"t{t}" for t in range(175)]
        assert _paged(store, "src", 7, 1 << 20) == expected + [HistoryEntry("running", _update("running", 0))]
    finally:
        store.close()


def test_deleting_the_source_keeps_the_forks_whole_and_deleting_them_purges_every_row(path):
    """The source goes first: each fork still reads all of its history (only the source's running
    turn, which no fork shares, is purged). Then the forks go: the rows they kept alive, written
    by the session deleted before them, are purged too, in steps, to the last row."""
    store = SqliteStore(path)
    try:
        store.save_session(SessionRecord("src", "/w"))
        expected: list[HistoryEntry] = []
        for t in range(30):
            expected += _turn(store, "src", f"t{t}", [[_update(f"t{t}", n, 300) for n in range(5)] for _ in range(3)])
        _turn(store, "src", "running", [[_update("running", 0)]], ended=False)
        for n in range(3):
            store.save_session(SessionRecord(f"fork{n}", "/w", forked_from="src"))
            store.fork_history("src", f"fork{n}")
        own = _turn(store, "fork1", "own", [[_update("own", 0)], [_update("own", 1)]])
        store.sync()
        assert _count(path, "SELECT count(*) FROM history") == 30 * 3 + 1 + 2

        store.delete_session("src")
        assert store.history("src") == [] and store.turns("src") == []
        wait_until(lambda: _count(path, "SELECT count(*) FROM history") <= 30 * 3 + 2, what="the source's own running turn to be purged")
        assert _count(path, "SELECT count(*) FROM history") == 30 * 3 + 2  # and nothing the forks read
        for n in range(3):
            assert _paged(store, f"fork{n}", 4, 1 << 20) == expected + (own if n == 1 else [])

        store.delete_session("fork0")
        store.delete_session("fork1")
        store.sync()
        assert _paged(store, "fork2", 4, 1 << 20) == expected  # fork2 still keeps them
        wait_until(lambda: _count(path, "SELECT count(*) FROM history") <= 30 * 3, what="fork1's own turn to be purged")
        assert _count(path, "SELECT count(*) FROM history") == 30 * 3
        store.delete_session("fork2")
        wait_until(lambda: _count(path, "SELECT count(*) FROM history") == 0, what="every history row to be purged")
        assert _count(path, "SELECT count(*) FROM turns") == 0
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_fork_of_a_fork_then_its_own_turns_read_back_in_order(path, kind):
    """src -> f1 (which adds a turn) -> f2 (which adds two): f2 reads src's turns, f1's, then its
    own, whole and page by page; the source and the middle fork are unchanged; on both stores."""
    store = MemoryStore() if kind == "memory" else SqliteStore(path)
    try:
        big = [[_update("a", n, 2000) for n in range(100)] for _ in range(3)]  # ~600 KB: several rows
        src = _turn(store, "src", "a", big) + _turn(store, "src", "b", [[_update("b", 0)], [_update("b", 1)]])
        store.fork_history("src", "f1")
        f1 = src + _turn(store, "f1", "c", [[_update("c", 0)], [_update("c", 1), _update("c", 2)]])
        store.fork_history("f1", "f2")
        store.append_turn("src", [_update("src-later", 0)], "end_turn")  # after both forks: theirs alone
        f2 = f1 + _turn(store, "f2", "d", [[_update("d", 0)]]) + _turn(store, "f2", "e", [[_update("e", n) for n in range(5)]])
        assert [t.turn_id for t in store.turns("f2")] == ["a", "b", "c", "d", "e"]
        assert store.history("f2") == [e.update for e in f2]
        for max_entries in (1, 3, 50, 1000):
            assert _paged(store, "f2", max_entries, 1 << 20) == f2
        assert _paged(store, "f2", 1000, 5000) == f2
        assert _paged(store, "f2", 7, 1 << 20, "a") == src[:300]
        assert _paged(store, "f2", 2, 1 << 20, "c") == f1[len(src):]
        assert _paged(store, "f1", 5, 1 << 20) == f1
        assert [e.turn_id for e in _paged(store, "src", 9, 1 << 20)] == [e.turn_id for e in src] + [store.turns("src")[-1].turn_id]
    finally:
        store.close()


def test_a_forked_turn_takes_no_more_history_on_either_store(path):
    """Its rows are its source's: a piece for a fork's copied turn is refused (counted), never
    written into the source's turn; the fork's own turns take pieces as ever."""
    for store in (MemoryStore(), SqliteStore(path)):
        try:
            _turn(store, "src", "a", [[_update("a", 0)]])
            store.fork_history("src", "fork")
            store.append_history("fork", "a", [_update("late", 0)])
            store.sync()
            assert store.failed_writes == 1
            assert store.history("src") == store.history("fork") == [_update("a", 0)]
        finally:
            store.close()


def test_a_session_wide_page_sorts_nothing(path):
    """The page's statements walk indexes: no temporary b-tree orders a session's rows or turns."""
    conn = statedb.connect(path)
    try:
        for sql, args in ((statedb._SESSION_TURNS, ("s", 0)), (statedb._TURN_ROWS, (1, 0))):
            plan = " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
            assert "TEMP B-TREE" not in plan and "USING INDEX" in plan, plan
    finally:
        conn.close()


def test_rows_a_killed_purge_left_are_found_by_reference_and_forks_rows_are_kept(path):
    """Processes killed right after deleting a session written first, the source, then a fork
    (each purge queue lost with its process): each next start purges only the rows no turn
    refers to, so the other fork keeps all of its history, and in the end no row is left."""
    store = SqliteStore(path)
    try:
        for t in range(3):
            _turn(store, "early", f"e{t}", [[_update(f"e{t}", 0)]])  # its rows come first in (turn, seq) order
        expected = []
        for t in range(10):
            expected += _turn(store, "src", f"t{t}", [[_update(f"t{t}", n)] for n in range(4)])
        _turn(store, "src", "only-src", [[_update("only", 0)]], ended=False)  # no fork shares it
        for name in ("f1", "f2"):
            store.fork_history("src", name)
        store.sync()
    finally:
        store.close()
    for deleted, rows_left in (("early", 41), ("src", 40), ("f1", 40)):
        conn = statedb.connect(path)
        statedb.delete_session(conn, deleted, max_history_rows=0)  # as if killed right after the delete
        conn.close()
        store = SqliteStore(path)
        try:
            wait_until(lambda: _count(path, "SELECT count(*) FROM history") <= rows_left, what="the orphaned rows to be purged")
            store.sync()
            assert _count(path, "SELECT count(*) FROM history") == rows_left  # and nothing f2 reads
            assert _paged(store, "f2", 3, 1 << 20) == expected
        finally:
            store.close()
    conn = statedb.connect(path)
    statedb.delete_session(conn, "f2", max_history_rows=0)
    assert statedb.orphaned_history(conn) == "src"  # the rows f2 kept were written by src
    conn.close()
    store = SqliteStore(path)
    try:
        wait_until(lambda: _count(path, "SELECT count(*) FROM history") == 0, what="the last rows to be purged")
    finally:
        store.close()


# -- schema 5 -> 6 ----------------------------------------------------------------------------
def _version_5(path: str) -> list[bytes]:
    """A version-5 database made by the migration code up to 5 and that version's own SQL (a
    fork holding copies of its source's rows); the updates of session "s", oldest first."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for statement in statedb._SCHEMA_V1:
        conn.execute(statement)
    statedb._migrate_history(conn)
    statedb._migrate_state(conn)
    statedb._migrate_session_admin(conn)
    conn.execute("PRAGMA user_version = 5")
    conn.execute("INSERT INTO sessions VALUES ('s', '/w', '[]', 'old', NULL, '{}', 1.0, 0, NULL)")
    conn.execute("INSERT INTO sessions VALUES ('f', '/w', '[]', 'fork', NULL, '{}', 2.0, 0, 's')")
    updates = []
    for number in range(3):
        turn = conn.execute("INSERT INTO turns (session_id, turn_id, started_at, ended_at, stop_reason) VALUES ('s', ?, 1.0, 2.0, 'end_turn')",
                            (f"t{number}",)).lastrowid
        for seq in range(3):
            piece = [_update(f"t{number}", 10 * seq + n) for n in range(4)]
            conn.execute("INSERT INTO history (session_id, turn, seq, entries) VALUES ('s', ?, ?, ?)", (turn, seq, b"\n".join(piece).decode()))
            updates += piece
    for (old,) in conn.execute("SELECT id FROM turns WHERE session_id = 's' ORDER BY id").fetchall():  # schema 5's fork_history
        new = conn.execute("""INSERT INTO turns (session_id, turn_id, started_at, ended_at, stop_reason, error, complete)
                              SELECT 'f', turn_id, started_at, ended_at, stop_reason, error, complete FROM turns WHERE id = ?""", (old,)).lastrowid
        conn.execute("INSERT INTO history (session_id, turn, seq, entries) SELECT 'f', ?, seq, entries FROM history WHERE turn = ? ORDER BY id",
                     (new, old))
    conn.execute("COMMIT")
    conn.close()
    return updates


def _digest(path: str) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def test_a_version_5_database_is_read_as_it_is_then_migrated_to_turns_reading_their_own_rows(path):
    updates = _version_5(path)
    digest, mtime = _digest(path), os.stat(path).st_mtime_ns
    old = statedb.connect_existing(path)
    assert old is not None
    try:
        assert [t.turn_id for t in statedb.turns(old, "f")] == ["t0", "t1", "t2"]
        assert statedb.history(old, "s") == statedb.history(old, "f") == updates
        assert [e.update for e in _paged_on(old, "f", 5)] == updates
        assert [e.update for e in _paged_on(old, "s", 3, "t1")] == updates[12:24]
        assert old.execute("PRAGMA user_version").fetchone()[0] == 5
    finally:
        old.close()
    assert (_digest(path), os.stat(path).st_mtime_ns) == (digest, mtime)
    assert not any(os.path.exists(path + suffix) for suffix in ("-wal", "-shm", "-journal"))

    conn = statedb.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == statedb.SCHEMA_VERSION == 6
        assert conn.execute("SELECT count(*) FROM turns WHERE history_turn IS NOT id").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 6
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "turns_by_history" in indexes and "history_by_session" not in indexes  # rows are found by turn only
        assert statedb.history(conn, "s") == statedb.history(conn, "f") == updates
        assert [e.update for e in _paged_on(conn, "f", 5)] == updates
        # New turns and forks go on from the migrated ones.
        statedb.begin_turn(conn, "f", "new", 3.0, [_update("new", 0)])
        statedb.end_turn(conn, "f", "new", TurnOutcome("end_turn"))
        statedb.fork_history(conn, "f", "g")
        assert statedb.history(conn, "g") == updates + [_update("new", 0)]
        statedb.delete_session(conn, "s")
        statedb.delete_session(conn, "f")
        assert statedb.history(conn, "g") == updates + [_update("new", 0)]
        assert conn.execute("SELECT count(*) FROM history WHERE session_id = 's'").fetchone()[0] == 0  # f's copies stay: g reads them
        statedb.delete_session(conn, "g")
        assert conn.execute("SELECT count(*) FROM history").fetchone()[0] == 0
    finally:
        conn.close()


def test_sessions_delete_on_a_version_5_database_leaves_it_version_5(path):
    """`acp-green sessions delete` writes through connect_existing(write=True): through the
    version-5 views, the session's turns and rows go and the schema stays as it was."""
    _version_5(path)
    conn = statedb.connect_existing(path, write=True)
    assert conn is not None
    try:
        conn.execute("BEGIN IMMEDIATE")
        statedb.delete_session(conn, "s")
        conn.execute("COMMIT")
        assert statedb.turns(conn, "s") == [] and len(statedb.history(conn, "f")) == 36
        assert conn.execute("SELECT count(*) FROM main.history WHERE session_id = 's'").fetchone()[0] == 0
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert "history_turn" not in {column for _, column, *_ in conn.execute("PRAGMA main.table_info(turns)")}
    finally:
        conn.close()


def _paged_on(conn: sqlite3.Connection, session_id: str, max_entries: int, turn_id: str | None = None) -> list[HistoryEntry]:
    """`_paged` on a connection (statedb's functions)."""

    class _On:
        def history_page(self, *args):
            return statedb.history_page(conn, *args)

    return _paged(_On(), session_id, max_entries, 1 << 20, turn_id)
