"""Two agents on one state directory: the first to open it serves from it; a second is refused
at once (a clear warning naming the holder) and keeps its state in memory, so the two can never
overwrite each other's sessions. The lock goes with its holder, even a SIGKILLed one."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

import gevent
import pytest
from gevent import subprocess

from acp_green.store import MemoryStore, statedb
from acp_green.store.sqlite import SqliteStore
from acp_green.store.statedir import open_store
from acp_green.store.statelock import StateDirInUse


def test_a_second_store_on_one_state_dir_is_refused_naming_the_holder(tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    first = SqliteStore(path)
    try:
        with pytest.raises(StateDirInUse, match=f"pid {os.getpid()}"):
            SqliteStore(path)
    finally:
        first.close()
    SqliteStore(path).close()  # released at close: the next one opens it


def test_open_store_falls_back_to_memory_with_a_clear_warning(tmp_path, caplog):
    state = str(tmp_path / "state")
    first = open_store(state)
    try:
        with caplog.at_level(logging.WARNING):
            second = open_store(state)
        assert isinstance(second, MemoryStore)
        assert "another acp-green" in caplog.text and "its own --state-dir" in caplog.text
    finally:
        first.close()


def store_in_memory(agent) -> bool:
    """`storeInMemory` of the agent's stats, once its store is open (it opens in the background)."""
    deadline = time.monotonic() + 30
    while True:
        stats = agent.call("_acp_green/stats", {})
        if "storeInMemory" in stats or time.monotonic() > deadline:
            return stats["storeInMemory"]
        gevent.sleep(0.05)


def test_a_symlinked_lock_file_is_refused_like_any_state_file(tmp_path, caplog):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "state.lock").symlink_to(tmp_path / "elsewhere")
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore) and "symbolic link" in caplog.text
    assert not (tmp_path / "elsewhere").exists()


HOLDER = """
import sys, time
from acp_green.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1])
print("open", flush=True)
time.sleep(600)
"""


def test_a_second_process_is_refused_and_a_killed_holder_leaves_no_stale_lock(tmp_path, launch):
    """Across processes: another process holds the directory; `acp-green serve` on it warns and
    keeps sessions in memory (its stats say so); once the holder is SIGKILLed the next agent
    serves from the directory."""
    state = str(tmp_path / "state")
    os.makedirs(state, mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, statedb.db_path(state)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"open\n"
        agent = launch("--state-dir", state)
        agent.initialize()
        sid = agent.new_session()
        assert store_in_memory(agent) is True
        assert agent.close() == 0
        assert f"pid {holder.pid}".encode() in bytes(agent.stderr) and b"memory" in bytes(agent.stderr)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    agent = launch("--state-dir", state)
    agent.initialize()
    later = agent.new_session()
    assert store_in_memory(agent) is False
    listed = [s["sessionId"] for s in agent.call("session/list", {})["sessions"]]
    assert later in listed and sid not in listed
    assert agent.close() == 0
