"""The SQLite store: few transactions, private files, and the fallback to memory for each fault."""

from __future__ import annotations

import json

import contextlib
import logging
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator

import pytest
from gevent import subprocess

from acp_green.demo import DemoAgent
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.threaded import ThreadedStore
from acp_green.store.statedb import DB_NAME, db_path
from acp_green.store.statedir import open_store
from acp_green.store import MemoryStore
from acp_green.usage import UsageRecord
from tests.helpers import wait_until


def _transactions(trace: list[str]) -> int:
    return sum(1 for statement in trace if statement.split(None, 1)[0].upper() == "BEGIN")


def test_ten_thousand_chunk_turn_is_a_handful_of_transactions(inprocess, tmp_path):
    """A streamed turn of 10,000 chunks costs a handful of store transactions, not thousands
    (counted with sqlite3's trace callback on the store thread's connection)."""
    trace: list[str] = []
    store = open_store(str(tmp_path / "state"), trace=trace.append)
    assert isinstance(store, ThreadedStore)
    harness = inprocess(DemoAgent(), store=store)
    client = harness.client
    client.initialize()
    sid = client.new_session()
    store.sync()
    before, commits_before = _transactions(trace), store.transactions
    assert client.prompt(sid, "/stream 10000 16").result() == {"stopReason": "end_turn"}
    store.sync()
    during = _transactions(trace) - before
    assert store.transactions - commits_before == during  # every BEGIN was committed
    print(f"transactions for a 10,000-chunk turn: {during}")
    # At most one commit per 50 ms window while the turn streams (a handful on a quiet machine,
    # more on a loaded one); one per piece would be thousands.
    assert 1 <= during <= 200
    history = store.history(sid)
    assert len(history) == 1 + 10_000
    assert [u.stop_reason for u in store.usage(sid)] == ["end_turn"]


def test_reads_see_the_writes_queued_before_them(gevent_hub_store):
    """What a process wrote is visible to its own next request (reads follow queued writes)."""
    store = gevent_hub_store
    for i in range(50):
        store.save_session(SessionRecord(f"s{i}", "/tmp", updated_at=float(i)))
        store.append_turn(f"s{i}", [json.dumps({"sessionUpdate": "agent_message_chunk", "n": i}).encode()])
        store.record_usage(UsageRecord(f"s{i}", str(i), "end_turn", 0.0, 0.0, 1, 1))
    assert [r.session_id for r in store.list_sessions(limit=3)] == ["s49", "s48", "s47"]
    assert [json.loads(e) for e in store.history("s7")] == [{"sessionUpdate": "agent_message_chunk", "n": 7}]
    assert len(store.usage()) == 50
    store.delete_session("s7")
    assert store.load_session("s7") is None and store.history("s7") == []
    assert len(store.usage("s7")) == 1  # the ledger keeps usage of deleted sessions


@pytest.fixture
def gevent_hub_store(tmp_path) -> Iterator[SqliteStore]:
    store = open_store(str(tmp_path / "state"))
    assert isinstance(store, ThreadedStore)
    yield store
    store.close()


def test_state_dir_and_files_are_private(tmp_path):
    """The state dir is created 0700 and the database files 0600."""
    state = tmp_path / "deep" / "state"
    store = open_store(str(state))
    store.save_session(SessionRecord("s", "/tmp"))
    store.sync()
    store.close()
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    files = [name for name in os.listdir(state) if name.startswith(DB_NAME)]
    assert DB_NAME in files
    for name in files:
        assert stat.S_IMODE(os.stat(state / name).st_mode) == 0o600, name


def test_ephemeral_is_memory(tmp_path):
    """--ephemeral keeps everything in memory: nothing is created on disk."""
    store = open_store(str(tmp_path / "state"), ephemeral=True)
    assert isinstance(store, MemoryStore)
    assert not (tmp_path / "state").exists()


def _warned(caplog) -> bool:
    return any(r.levelno == logging.WARNING and "memory" in r.getMessage() for r in caplog.records)


def test_corrupt_database_falls_back_to_memory(tmp_path, caplog):
    """A state file that is not a database: MemoryStore and a warning naming the problem."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / DB_NAME).write_bytes(b"this is not a database\n" * 400)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert _warned(caplog) and "not a database" in caplog.text


def test_store_that_fills_up_at_runtime_keeps_what_waits_and_serves(tmp_path, caplog):
    """A disk that fills up later (SQLITE_FULL, made with PRAGMA max_page_count): the store warns,
    does not give the database up (full may go away), keeps the writes waiting and retries them,
    and answers reads from the disk with the waiting session saves applied."""
    store = open_store(str(tmp_path / "state"), page_limit=16)
    assert isinstance(store, ThreadedStore)
    store.save_session(SessionRecord("small", "/tmp", updated_at=1.0))
    store.record_usage(UsageRecord("small", "1", "end_turn", 0.0, 0.0, 1, 1))
    store.sync()
    assert not store.degraded
    with caplog.at_level(logging.WARNING):
        store.save_session(SessionRecord("big", "/tmp", updated_at=2.0))
        store.append_turn("big", [json.dumps({"sessionUpdate": "agent_message_chunk", "text": "x" * 200_000}).encode()])
        store.record_usage(UsageRecord("big", "2", "end_turn", 0.0, 0.0, 1, 1))
        assert [r.session_id for r in store.list_sessions()] == ["big", "small"]
        wait_until(lambda: store.retries >= 2, what="the store to retry")
    assert not store.degraded and store.waiting_writes == 3 and "full" in caplog.text
    assert [u.session_id for u in store.usage()] == ["small"]  # usage shows once written
    store.close()
    assert store.failed_writes == 3  # never written: counted at close


@contextlib.contextmanager
def _tmpfs(path, size: str) -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _serve_and_prompt(launch, state: str) -> bytes:
    agent = launch("--state-dir", state)
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "still works").result() == {"stopReason": "end_turn"}
    listed = [s["sessionId"] for s in agent.call("session/list", {})["sessions"]]
    # At open, or at its first write (a read-only file can still be opened): either way the
    # store falls back; at runtime it keeps what the database held.
    assert sid in listed, (listed, bytes(agent.stderr))
    assert agent.close() == 0
    return bytes(agent.stderr)


def test_read_only_state_dir_falls_back_to_memory(launch, tmp_path):
    """A read-only state dir holding an existing database: the agent warns and runs from memory."""
    mount = tmp_path / "ro"
    with _tmpfs(mount, "4m"):
        state = str(mount / "state")
        first = _serve_and_prompt(launch, state)
        assert b"unusable" not in first
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        stderr = _serve_and_prompt(launch, state)
    assert b"unusable" in stderr and b"memory" in stderr, stderr


def test_full_state_dir_falls_back_to_memory(launch, tmp_path):
    """A state dir on a full filesystem (a tiny tmpfs, filled up first): warning, memory."""
    mount = tmp_path / "full"
    with _tmpfs(mount, "256k"):
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        stderr = _serve_and_prompt(launch, str(mount / "state"))
    assert b"unusable" in stderr and b"memory" in stderr, stderr


def test_corrupt_state_dir_falls_back_to_memory_cli(launch, tmp_path):
    """A corrupt database under the real CLI: warning on stderr, the agent still serves."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / DB_NAME).write_bytes(os.urandom(8192))
    stderr = _serve_and_prompt(launch, str(state))
    assert b"unusable" in stderr and b"memory" in stderr, stderr


def test_store_thread_is_real_under_monkey_patch(launch, tmp_path):
    """With --monkey-patch the store still runs on a real thread and persists."""
    state = str(tmp_path / "state")
    agent = launch("--monkey-patch", "--state-dir", state)
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "/stream 50").result() == {"stopReason": "end_turn"}
    assert agent.close() == 0
    done = subprocess.run([sys.executable, "-m", "acp_green", "sessions", "list", "--json", "--state-dir", state],
                          capture_output=True, text=True, timeout=60)
    assert '"turns": 1' in done.stdout, done
    assert os.path.exists(db_path(state))


def test_sqlite_never_runs_on_the_hub_thread(inprocess, tmp_path, monkeypatch):
    """Every SQL statement of a whole conversation (new, set_mode, prompt, list, revive, load,
    close, delete) runs on the one store thread, never on the hub's. Every
    connection statedb opens is traced, whoever opens it."""
    import threading

    from acp_green.store import statedb

    threads: set[int] = set()
    original = statedb.connect

    def traced_connect(path, **kwargs):
        kwargs["trace"] = lambda _sql: threads.add(threading.get_ident())
        return original(path, **kwargs)

    monkeypatch.setattr(statedb, "connect", traced_connect)
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    client.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
    client.prompt(sid, "/stream 20").result()
    client.call("session/list", {})
    harness.server.sessions.drop(sid)  # as if evicted: the next request reads the store
    client.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    client.call("session/close", {"sessionId": sid})
    client.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "echo-careful"})
    client.call("session/delete", {"sessionId": sid})
    harness.finish()
    assert threads and threading.get_ident() not in threads
    assert len(threads) == 1


# -- group commit, and history as TEXT where it is ASCII ------------------------------------------
def test_writes_queued_together_share_a_transaction(tmp_path):
    """The store thread applies what is queued in one transaction (group commit), not one each."""
    store = SqliteStore(db_path(str(tmp_path / "state")))
    before = store.transactions
    for n in range(200):
        store.save_session(SessionRecord(f"s{n}", "/w", updated_at=float(n)))
    store.sync()
    assert len(store.list_sessions()) == 200
    assert store.transactions - before <= 20
    store.close()


def test_history_is_text_when_ascii_and_kept_exactly_as_a_blob_otherwise(tmp_path):
    """statedb history pieces: the runtime's ASCII entries are TEXT (readable with any SQLite tool);
    other bytes are kept exactly, as a BLOB."""
    path = db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    store.save_session(SessionRecord("s", "/w", updated_at=1.0))
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
