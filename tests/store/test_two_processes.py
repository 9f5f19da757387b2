"""Any number of agents on one state directory: each owns the sessions it has live (a lock file
per session, store/session_locks.py), every one creates, lists, deletes and records usage through
the one database, and a session live in one is refused to the others naming its owner. The lock
goes with its owner, even a SIGKILLed one."""

from __future__ import annotations

import os
import tempfile
import time

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.store import statedb
from acp_green.store.session_locks import SessionLockFiles
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.tools.rig.client_wire import RpcErrorResponse

SESSION_IN_USE = -32000


def slow_commits(statement: str) -> None:
    """A store thread's trace callback: every COMMIT takes 50 ms longer (a slow disk)."""
    if statement.strip().upper() == "COMMIT":
        time.sleep(0.05)


def test_a_session_is_owned_by_one_store_at_a_time_and_the_other_is_told_who(tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    first, second = SqliteStore(path), SqliteStore(path)
    try:
        assert first.claim_session("s") is None
        assert first.claim_session("s") is None  # ours already
        holder = second.claim_session("s")
        assert holder is not None and f"pid {os.getpid()}" in holder
        first.release_session("s")
        first.sync()
        assert second.claim_session("s") is None
        assert first.claim_session("s") is not None
    finally:
        first.close()
        second.close()


def test_a_release_lets_go_only_after_the_owners_writes_are_committed(tmp_path):
    """The next owner reads everything the last one wrote: the unlock waits for the commit (each
    of the first store's commits made 50 ms slow, so an unlock before it would be seen)."""
    path = statedb.db_path(str(tmp_path / "state"))
    first, second = SqliteStore(path, trace=slow_commits), SqliteStore(path)
    try:
        first.own_new_session("s")
        first.sync()
        assert second.claim_session("s") is not None
        for n in range(50):
            first.save_session(SessionRecord("s", "/w", title=f"title {n}", updated_at=float(n)))
        first.release_session("s")
        # Poll the lock, as another process would; the first time it is free the save is there.
        while second.claim_session("s") is not None:
            gevent.sleep(0.001)
        record = second.load_session("s")
        assert record is not None and record.title == "title 49"
    finally:
        first.close()
        second.close()


def test_a_closed_store_lets_every_session_go_and_a_deleted_session_leaves_no_lock_file(tmp_path):
    state = tmp_path / "state"
    path = statedb.db_path(str(state))
    first = SqliteStore(path)
    first.own_new_session("a")
    assert first.claim_session("b") is None
    first.delete_session("b")
    first.release_session("b")
    first.sync()
    assert os.listdir(state / "locks") == [os.path.basename(SessionLockFiles(str(state)).path("a"))]
    first.close()
    second = SqliteStore(path)
    try:
        assert second.claim_session("a") is None and second.claim_session("b") is None
    finally:
        second.close()


def test_a_lock_file_removed_under_a_waiting_locker_is_not_trusted(tmp_path):
    """The path must still name the locked file: a lock on an unlinked file is worth nothing."""
    locks = SessionLockFiles(str(tmp_path))
    other = SessionLockFiles(str(tmp_path))
    assert locks.lock("s") is None
    assert other.lock("s") is not None
    locks.unlock("s")
    assert os.path.exists(locks.path("s"))  # kept when let go: opening it again is cheap
    assert other.lock("s") is None
    other.deleted("s")
    other.unlock("s")  # a deleted session's file goes, while still locked
    assert not os.path.exists(other.path("s"))
    assert locks.lock("s") is None and os.path.exists(locks.path("s"))
    assert other.lock("s") is not None
    locks.close()


def test_a_symlinked_lock_file_is_refused(tmp_path):
    locks = SessionLockFiles(str(tmp_path))
    os.symlink(tmp_path / "elsewhere", locks.path("s"))
    with pytest.raises(OSError):
        locks.lock("s")
    assert not (tmp_path / "elsewhere").exists()


def refused(call) -> dict:
    with pytest.raises(RpcErrorResponse) as caught:
        call()
    return caught.value.error


def test_two_agents_share_one_state_directory(tmp_path, launch):
    """Two `acp-green serve` on one directory: both store; a session live in one is refused to
    the other (-32000, naming the owner's pid), and is the other's once the first lets it go."""
    state = str(tmp_path / "state")
    a, b = launch("--state-dir", state), launch("--state-dir", state)
    a.initialize()
    b.initialize()
    mine = a.new_session()
    a.call("session/prompt", a.prompt_params(mine, "/echo from a"))
    theirs = b.new_session()
    b.call("session/prompt", b.prompt_params(theirs, "/echo from b"))
    assert {s["sessionId"] for s in a.call("session/list", {})["sessions"]} == {mine, theirs}
    assert {s["sessionId"] for s in b.call("session/list", {})["sessions"]} == {mine, theirs}

    error = refused(lambda: b.call("session/load", {"sessionId": mine, "cwd": "/tmp", "mcpServers": []}))
    assert error["code"] == SESSION_IN_USE and f"pid {a.pid}" in error["data"]["owner"]
    assert refused(lambda: b.call("session/delete", {"sessionId": mine}))["code"] == SESSION_IN_USE
    assert refused(lambda: b.call("session/set_mode", {"sessionId": mine, "modeId": "ask"}))["code"] == SESSION_IN_USE

    a.call("session/close", {"sessionId": mine})
    b.call("session/load", {"sessionId": mine, "cwd": "/tmp", "mcpServers": []})
    replayed = [u for u in b.updates(mine) if u.get("sessionUpdate") == "agent_message_chunk"]
    assert any("from a" in u["content"]["text"] for u in replayed)
    usage = {r["sessionId"] for r in _usage(state)}
    assert {mine, theirs} <= usage
    assert a.close() == 0 and b.close() == 0


def test_a_killed_owner_leaves_its_sessions_to_the_next_agent(tmp_path, launch):
    state = str(tmp_path / "state")
    a = launch("--state-dir", state)
    a.initialize()
    held = a.new_session()
    a.call("session/prompt", a.prompt_params(held, "/echo before the kill"))
    b = launch("--state-dir", state)
    b.initialize()
    assert refused(lambda: b.call("session/load", {"sessionId": held, "cwd": "/tmp", "mcpServers": []}))["code"] == SESSION_IN_USE
    a.kill()
    a.wait_exit()
    b.call("session/load", {"sessionId": held, "cwd": "/tmp", "mcpServers": []})
    assert any("before the kill" in u.get("content", {}).get("text", "") for u in b.updates(held))
    assert b.close() == 0


def _usage(state: str) -> list[dict]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "acp_green", "usage", "--state-dir", state, "--json", "--records"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["records"]



def test_a_session_let_go_and_taken_again_in_one_batch_stays_ours(tmp_path):
    """A release and a claim of one session in one batch of the store thread: the session stays
    this store's (the release waiting for the commit is dropped by the claim)."""
    path = statedb.db_path(str(tmp_path / "state"))
    first, second = SqliteStore(path, trace=slow_commits), SqliteStore(path)
    try:
        assert first.claim_session("s") is None
        first.own_new_session("busy")
        first.release_session("busy")  # the thread is busy committing this for 50 ms...
        first.release_session("s")  # ...while these two wait to be taken together
        assert first.claim_session("s") is None
        first.sync()
        assert second.claim_session("s") is not None
    finally:
        first.close()
        second.close()


def test_a_claim_while_the_release_waits_for_a_locked_database_keeps_the_session(tmp_path):
    """The database refuses writes (another process holds its write lock): a release waits with
    them, and a claim of the same session meanwhile cancels it, so once the writes go through the
    session is still this store's."""
    import sqlite3

    path = statedb.db_path(str(tmp_path / "state"))
    first, second = SqliteStore(path), SqliteStore(path)
    try:
        assert first.claim_session("s") is None
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            first.release_session("s")
            while first.waiting_writes == 0:
                gevent.sleep(0.01)
            assert first.claim_session("s") is None
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        first.sync()
        assert second.claim_session("s") is not None
    finally:
        first.close()
        second.close()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300) | st.sampled_from(["..", "../x", "/etc/passwd", "a/b", "\x00", "\udce9", "\n", ""]))
def test_any_session_id_locks_one_file_inside_the_locks_directory(session_id):
    """A client names the session: any str (path separators, dots, NUL, lone surrogates, empty)
    locks exactly one file, inside locks/, and two different ids never share one."""
    with tempfile.TemporaryDirectory() as state:
        locks = SessionLockFiles(state)
        try:
            assert locks.lock(session_id) is None
            assert os.listdir(os.path.join(state, "locks")) == [os.path.basename(locks.path(session_id))]
            assert os.path.dirname(locks.path(session_id)) == os.path.join(state, "locks")
            assert locks.path(session_id) != locks.path(session_id + "x")
        finally:
            locks.close()
