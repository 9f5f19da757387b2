"""Schema 5 (store/statedb.py): each session's archive state and the session it was forked from.
A version-4 database is migrated in place and read as it is by the inspection commands; a fork
copies the ended turns of its source, on disk and in memory; `acp-green sessions` shows both."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from acp_green.cli import cli
from acp_green.store import statedb
from acp_green.store.base import MemoryStore
from acp_green.store.opening import OpeningStore
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import TurnOutcome


def _update(text: str) -> bytes:
    return json.dumps({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}).encode()


def _version_4(path: str) -> None:
    """A version-4 database holding session `s`: today's schema without the two columns."""
    conn = statedb.connect(path)
    conn.execute("ALTER TABLE sessions DROP COLUMN archived")
    conn.execute("ALTER TABLE sessions DROP COLUMN forked_from")
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO sessions VALUES ('s', '/w', '[]', 'old', NULL, '{}', 1.0)")
    conn.close()


@pytest.fixture
def state(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    return str(directory)


def test_a_version_4_database_is_read_as_it_is_then_migrated(state):
    """Read-only, a version-4 database shows its sessions neither archived nor forked, and is left
    at version 4; `serve` (statedb.connect) then adds the columns, keeping every session."""
    path = statedb.db_path(state)
    _version_4(path)
    old = statedb.connect_existing(path)
    assert old is not None
    try:
        (record,) = statedb.list_sessions(old)
        assert (record.session_id, record.title, record.archived, record.forked_from) == ("s", "old", False, None)
        assert statedb.list_sessions(old, archived=True) == []
        assert old.execute("PRAGMA user_version").fetchone()[0] == 4
    finally:
        old.close()
    writer = statedb.connect_existing(path, write=True)  # `sessions delete` on a version-4 database
    assert writer is not None
    statedb.delete_session(writer, "nothing")
    assert statedb.load_session(writer, "s") is not None
    writer.close()
    conn = statedb.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == statedb.SCHEMA_VERSION == 6
        record = statedb.load_session(conn, "s")
        assert record is not None and (record.archived, record.forked_from) == (False, None)
        record.archived, record.forked_from = True, "sess_source"
        statedb.save_session(conn, record)
        assert statedb.load_session(conn, "s") == record
        assert statedb.list_sessions(conn, archived=False) == []
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_fork_copies_the_ended_turns_and_leaves_the_source_alone(state, kind):
    """fork_history: the source's ended turns with their history (and outcome, and incompleteness)
    go to the fork; a turn still running does not; later writes to either stay their own."""
    store = MemoryStore() if kind == "memory" else SqliteStore(statedb.db_path(state))
    try:
        store.save_session(SessionRecord("src", "/w"))
        store.begin_turn("src", "t1", 1.0, [_update("q1")])
        store.append_history("src", "t1", [_update("a1")])
        store.end_turn("src", "t1", TurnOutcome("end_turn"))
        store.begin_turn("src", "t2", 2.0, [_update("q2")])
        store.end_turn("src", "t2", TurnOutcome("error", "boom"))
        store.begin_turn("src", "t3", 3.0, [_update("running")])
        store.save_session(SessionRecord("fork", "/x", forked_from="src"))
        store.fork_history("src", "fork")
        store.end_turn("src", "t3", TurnOutcome("end_turn"))
        store.append_turn("fork", [_update("own")], "end_turn")
        assert store.history("fork") == [_update("q1"), _update("a1"), _update("q2"), _update("own")]
        assert store.history("src") == [_update("q1"), _update("a1"), _update("q2"), _update("running")]
        turns = store.turns("fork")
        assert [(t.turn_id, t.stop_reason, t.error) for t in turns[:2]] == [("t1", "end_turn", None), ("t2", "error", "boom")]
        assert len(turns) == 3 and [t.turn_id for t in store.turns("src")] == ["t1", "t2", "t3"]
        record = store.load_session("fork")
        assert record is not None and record.forked_from == "src"
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_list_sessions_filters_by_archive_state_before_the_limit(state, kind):
    """archived=None lists both, True only archived, False only the others; the limit counts the kept ones."""
    store = MemoryStore() if kind == "memory" else SqliteStore(statedb.db_path(state))
    try:
        for n in range(6):
            store.save_session(SessionRecord(f"s{n}", "/w", updated_at=float(n), archived=n % 2 == 1))
        assert [r.session_id for r in store.list_sessions()] == ["s5", "s4", "s3", "s2", "s1", "s0"]
        assert [r.session_id for r in store.list_sessions(limit=2, archived=True)] == ["s5", "s3"]
        assert [r.session_id for r in store.list_sessions(limit=2, archived=False)] == ["s4", "s2"]
        assert [r.session_id for r in store.list_sessions(after=(4.0, "s4"), archived=False)] == ["s2", "s0"]
    finally:
        store.close()


def test_sessions_list_and_show_mark_archived_sessions_and_forks(state):
    """`acp-green sessions list` marks `[archived]` and `[forked from ID]`; `show` and `--json` say both."""
    conn = statedb.connect(statedb.db_path(state))
    statedb.save_session(conn, SessionRecord("src", "/w", title="source", archived=True, updated_at=1.0))
    statedb.save_session(conn, SessionRecord("fork", "/w", title="copy", forked_from="src", updated_at=2.0))
    conn.close()
    runner = CliRunner()
    listed = runner.invoke(cli, ["sessions", "list", "--state-dir", state], catch_exceptions=False).output.splitlines()
    assert listed[0].endswith("copy  [forked from src]") and listed[1].endswith("source  [archived]"), listed
    as_json = json.loads(runner.invoke(cli, ["sessions", "list", "--json", "--state-dir", state], catch_exceptions=False).output)
    assert [(s["sessionId"], s["archived"], s["forkedFrom"]) for s in as_json] == [("fork", False, "src"), ("src", True, None)]
    shown = runner.invoke(cli, ["sessions", "show", "fork", "--state-dir", state], catch_exceptions=False).output
    assert "archived: False" in shown and "forkedFrom: src" in shown
    shown = runner.invoke(cli, ["sessions", "show", "src", "--state-dir", state], catch_exceptions=False).output
    assert "archived: True" in shown and "forkedFrom" not in shown
    assert not os.path.exists(statedb.db_path(state) + "-wal")  # read-only: nothing written



def test_a_fork_made_before_the_store_opens_is_copied_in_call_order():
    """OpeningStore: a fork handed over before the store is open copies what was written before
    it, once the store opens; what the source writes after it stays the source's."""
    opened = MemoryStore()
    store = OpeningStore(lambda: opened)
    store.save_session(SessionRecord("src", "/w"))
    store.append_turn("src", [_update("before")], "end_turn")
    store.save_session(SessionRecord("fork", "/w", forked_from="src"))
    store.fork_history("src", "fork")
    store.append_turn("src", [_update("after")], "end_turn")
    assert store.store is None  # nothing was read yet: all of it waited
    assert store.history("fork") == [_update("before")]
    assert store.history("src") == [_update("before"), _update("after")]
