"""No record lost: every str the store is given comes back unchanged, and a write
that fails for its own content is said, counted, and stops nothing else.

A lone surrogate is how a non-UTF-8 path byte reaches Python (and what a JSON `\\udce9` escape
decodes to); SQLite cannot store such a str as TEXT, so the store once dropped the session.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys

from gevent import subprocess
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire
from acp_green.demo import DemoAgent
from acp_green.store.session_record import SessionRecord
from acp_green.store import MemoryStore, statedb
from acp_green.store.sqlite import SqliteStore
from acp_green.store.threaded import ThreadedStore
from acp_green.store.statedir import open_store
from acp_green.usage import UsageRecord

CWD = "/srv/caf\udce9"  # the byte 0xE9 of a Latin-1 path, as os.fsdecode gives it
DIRECTORIES = ["/srv/\ud800lone", "/srv/ok"]
TITLE = "r\u00e9sum\udce9 of \U0001f600"
ESCAPED = b"caf\\udce9"  # how the cwd travels in JSON, byte for byte


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "acp_green", *args], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # The CLI writes lone surrogates as JSON \u escapes, so its output is valid UTF-8.
    return done.stdout.decode("utf-8")


def raw_lines_in(agent) -> list[bytes]:
    return [record.raw for record in agent.records if record.direction == "in"]


def test_lone_surrogates_in_cwd_and_title_survive_list_restart_and_load(launch, tmp_path):
    """A session whose cwd, additional directories and title hold lone
    surrogates is listed with exactly those strings, survives a restart of the real CLI, is
    replayed by session/load, and `acp-green sessions` shows it. The JSON escape is the same
    bytes the client sent."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state)
    agent.initialize()
    sid = agent.call("session/new", {"cwd": CWD, "additionalDirectories": DIRECTORIES, "mcpServers": []})["sessionId"]
    assert agent.prompt(sid, f"{TITLE}\nsecond line").result() == {"stopReason": "end_turn"}
    listed = agent.call("session/list", {"cwd": CWD})["sessions"]
    assert [(s["sessionId"], s["cwd"], s["additionalDirectories"], s["title"]) for s in listed] == [(sid, CWD, DIRECTORIES, TITLE)]
    assert any(ESCAPED in line for line in raw_lines_in(agent) if b"nextCursor" in line or b'"sessions"' in line)
    assert agent.call("_acp_green/stats", {})["storeFailedWrites"] == 0
    assert agent.close() == 0
    assert b"dropped" not in agent.stderr, bytes(agent.stderr)

    shown = json.loads(cli("sessions", "show", sid, "--json", "--state-dir", state))
    assert (shown["cwd"], shown["additionalDirectories"], shown["title"]) == (CWD, DIRECTORIES, TITLE)
    assert shown["history"][0]["content"]["text"] == f"{TITLE}\nsecond line"
    exported = json.loads(cli("sessions", "export", "--state-dir", state))["sessions"]
    assert [(s["cwd"], s["title"]) for s in exported] == [(CWD, TITLE)]
    assert [s["sessionId"] for s in json.loads(cli("sessions", "list", "--json", "--cwd", CWD, "--state-dir", state))] == [sid]
    assert "caf\\udce9" in cli("sessions", "list", "--state-dir", state)  # the table shows the escape

    again = launch("--state-dir", state)
    again.initialize()
    listed = again.call("session/list", {})["sessions"]
    assert [(s["cwd"], s["additionalDirectories"], s["title"]) for s in listed] == [(CWD, DIRECTORIES, TITLE)]
    load = again.request("session/load", {"sessionId": sid, "cwd": CWD, "additionalDirectories": DIRECTORIES, "mcpServers": []})
    load.result()
    replayed = [m["params"]["update"] for m in again.received() if m.get("method") == "session/update"]
    assert isinstance(replayed[0].pop("messageId"), str)
    assert replayed[0] == {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": f"{TITLE}\nsecond line"}}
    assert any(b"user_message_chunk" in line and ESCAPED.replace(b"caf", b"sum") in line for line in raw_lines_in(again))
    assert again.close() == 0


# -- the store layer, property-based -----------------------------------------------------------
ANY_STR = st.text(st.characters(exclude_categories=()), max_size=40) | st.sampled_from(
    ["\udce9", "\ud800", "\udfff", "\x00", "\U0001f600", "\ud83d\ude00", "a\udce9\x00\U0010ffff"]
)


def _check_round_trip(store, seen: dict[str, tuple[str, str, bytes]]) -> None:
    """Every record stored so far reads back unchanged, alone and through the cwd filter."""
    for session_id, (cwd, title, entry) in seen.items():
        record = store.load_session(session_id)
        assert (record.cwd, record.title, record.additional_directories) == (cwd, title, [title, cwd])
        assert session_id in [r.session_id for r in store.list_sessions(cwd=cwd)]
        assert store.history(session_id) == [entry]


def _property(store, seen: dict[str, tuple[str, str, bytes]]):
    @settings(deadline=None, max_examples=150, database=None)
    @given(cwd=ANY_STR, title=ANY_STR, text=ANY_STR)
    def stores_any_str(cwd: str, title: str, text: str) -> None:
        session_id = f"s{len(seen)}"
        entry = wire.encode_json({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
        store.save_session(SessionRecord(session_id, cwd, [title, cwd], title, updated_at=float(len(seen))))
        store.append_turn(session_id, [entry], "end_turn")
        seen[session_id] = (cwd, title, entry)
        record = store.load_session(session_id)
        assert (record.cwd, record.title, record.additional_directories) == (cwd, title, [title, cwd])
        assert [r.session_id for r in store.list_sessions(cwd=cwd) if r.session_id == session_id] == [session_id]
        (stored,) = store.history(session_id)
        assert stored == entry and json.loads(stored)["content"]["text"] == json.loads(entry)["content"]["text"]

    return stores_any_str


def test_any_str_round_trips_through_the_sqlite_store_and_a_reopen(tmp_path):
    """Property: any str — lone surrogates, NUL, astral characters —
    stored as cwd, title or additional directory, and any history entry, reads back unchanged,
    and again after the database is closed and reopened. Nothing is dropped."""
    state = str(tmp_path / "state")
    store = open_store(state)
    assert isinstance(store, ThreadedStore)
    seen: dict[str, tuple[str, str, bytes]] = {}
    _property(store, seen)()
    assert store.failed_writes == 0 and not store.degraded
    store.close()
    reopened = open_store(state)
    assert isinstance(reopened, ThreadedStore)
    _check_round_trip(reopened, seen)
    reopened.close()


def test_any_str_round_trips_through_the_memory_store():
    """Property: the same for --ephemeral's MemoryStore."""
    store = MemoryStore()
    seen: dict[str, tuple[str, str, bytes]] = {}
    _property(store, seen)()
    _check_round_trip(store, seen)
    assert store.failed_writes == 0


def test_a_version_1_database_is_migrated_and_its_rows_read(tmp_path):
    """An existing schema-1 database opens: its rows read as before, new rows may hold surrogates."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    conn = sqlite3.connect(state / statedb.DB_NAME, isolation_level=None)
    for statement in statedb._SCHEMA_V1:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO sessions VALUES ('old', '/srv/old', '[\"/srv/\\u00e9\"]', 'caf\u00e9', 'ask', '{\"model\": \"echo-fast\"}', 1.0)"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    store = open_store(str(state))
    assert isinstance(store, ThreadedStore)
    old = store.load_session("old")
    assert (old.cwd, old.additional_directories, old.title, old.config) == ("/srv/old", ["/srv/\u00e9"], "caf\u00e9", {"model": "echo-fast"})
    store.save_session(SessionRecord("new", CWD, title=TITLE, updated_at=2.0))
    assert [r.session_id for r in store.list_sessions()] == ["new", "old"]
    store.close()
    conn = sqlite3.connect(state / statedb.DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == statedb.SCHEMA_VERSION == 6
    # Ordinary rows stay readable, filterable text; only the str SQLite cannot hold is a BLOB.
    assert conn.execute("SELECT typeof(cwd), typeof(title) FROM sessions WHERE session_id = 'old'").fetchone() == ("text", "text")
    assert conn.execute("SELECT typeof(cwd) FROM sessions WHERE session_id = 'new'").fetchone() == ("blob",)
    conn.close()


# -- one bad record never stops the store --------------------------------------------------------
def test_a_record_the_database_refuses_is_counted_and_the_rest_still_reach_the_disk(tmp_path, monkeypatch, caplog):
    """A usage record whose token count SQLite cannot hold (an int
    over 64 bits) and a turn bigger than the database's row limit (sqlite3.DataError, which is no
    disk failure) are each logged at ERROR and counted; the store stays on disk and the writes
    queued around them, in the same batch and after, are committed."""
    original = statedb.connect

    def small_rows(path, **kwargs):
        conn = original(path, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 50_000)
        return conn

    monkeypatch.setattr(statedb, "connect", small_rows)
    state = str(tmp_path / "state")
    store = open_store(state)
    assert isinstance(store, ThreadedStore)
    with caplog.at_level(logging.ERROR):
        store.save_session(SessionRecord("before", "/tmp", updated_at=1.0))
        store.record_usage(UsageRecord("before", "1", "end_turn", 0.0, 0.0, 1, 1, input_tokens=1 << 70))
        store.append_turn("before", [b'{"sessionUpdate":"agent_message_chunk","text":"' + b"x" * 60_000 + b'"}'], "end_turn")
        store.append_turn("before", [b'{"sessionUpdate":"agent_message_chunk","text":"small"}'], "end_turn")
        store.save_session(SessionRecord("after", "/tmp", updated_at=2.0))
        store.sync()
    assert not store.degraded
    assert store.failed_writes == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("record_usage" in m and "'before'" in m for m in errors), errors
    assert any("begin_turn" in m and "DataError" in m for m in errors), errors
    store.record_usage(UsageRecord("after", "2", "end_turn", 0.0, 0.0, 1, 1))
    store.close()
    conn = sqlite3.connect(statedb.db_path(state))
    assert [row[0] for row in conn.execute("SELECT session_id FROM sessions ORDER BY updated_at")] == ["before", "after"]
    # The refused turn is kept, marked incomplete; only its piece is missing.
    assert conn.execute("SELECT complete FROM turns ORDER BY id").fetchall() == [(0,), (1,)]
    assert conn.execute("SELECT count(*) FROM history").fetchone()[0] == 1
    assert [row[0] for row in conn.execute("SELECT session_id FROM usage")] == ["after"]
    conn.close()


def test_dropped_writes_are_reported_by_the_stats_extension(inprocess, tmp_path, caplog):
    """The count of dropped writes is visible from outside: `_acp_green/stats` storeFailedWrites."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    assert client.call("_acp_green/stats", {})["storeFailedWrites"] == 0
    with caplog.at_level(logging.ERROR):
        harness.server.store.save_session(SessionRecord("bad", "/tmp", config={"unencodable": {1, 2}}))
        harness.server.store.sync()
    assert client.call("_acp_green/stats", {})["storeFailedWrites"] == 1
    assert "dropped a save_session of session 'bad'" in caplog.text


def test_memory_store_counts_a_record_it_cannot_keep(caplog):
    """MemoryStore never raises into the hub for a bad record: it logs at ERROR and counts."""
    store = MemoryStore()
    with caplog.at_level(logging.ERROR):
        store.save_session(SessionRecord("bad", "/tmp", config={"unpicklable": lambda: None}))
    store.save_session(SessionRecord("good", "/tmp"))
    assert store.failed_writes == 1 and "dropped a save_session" in caplog.text
    assert [r.session_id for r in store.list_sessions()] == ["good"]
