"""Nothing can redirect the state or open it to other users.

The state directory is ours and 0700 (tightened, with a WARNING when the user named it); the
database and its companions are never opened through a symbolic link and are 0600; anything
else is refused and the agent keeps its state in memory, saying why. The inspection commands
change nothing.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import sys

import pytest
from gevent import subprocess

from acp_green.store.session_record import SessionRecord
from acp_green.store import MemoryStore, statedb
from acp_green.store.sqlite import SqliteStore
from acp_green.store.threaded import ThreadedStore
from acp_green.store.statedir import open_store

DB = statedb.DB_NAME


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def memory_warning(caplog) -> str:
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "memory" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    return warnings[0]


def stored_once(state) -> SqliteStore:
    store = open_store(str(state))
    assert isinstance(store, ThreadedStore)
    store.save_session(SessionRecord("s", "/tmp"))
    store.sync()
    return store


def test_a_world_writable_state_dir_is_tightened_with_one_warning(tmp_path, caplog):
    """A --state-dir that exists 0777 is made 0700, and said once at WARNING."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    with caplog.at_level(logging.INFO):
        store = stored_once(state)
    store.close()
    assert mode_of(state) == 0o700
    tightened = [r for r in caplog.records if "changed it to 0700" in r.getMessage()]
    assert [r.levelno for r in tightened] == [logging.WARNING], caplog.text
    assert "0777" in tightened[0].getMessage()
    caplog.clear()
    stored_once(state).close()  # already private: nothing to say
    assert "0700" not in caplog.text


def test_the_default_state_dir_is_tightened_quietly(tmp_path, monkeypatch, caplog):
    """The default directory (no --state-dir) is tightened too, said at INFO only."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    state = tmp_path / "acp-green"
    state.mkdir()
    os.chmod(state, 0o755)
    with caplog.at_level(logging.INFO):
        store = open_store(None)
    assert isinstance(store, ThreadedStore)
    store.close()
    assert mode_of(state) == 0o700
    assert [r.levelno for r in caplog.records if "changed it to 0700" in r.getMessage()] == [logging.INFO]


def test_the_cli_says_it_tightened_a_named_state_dir(launch, tmp_path):
    """Through `acp-green serve --state-dir`: the warning reaches stderr once, the dir is 0700."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    agent = launch("--state-dir", str(state))
    agent.initialize()
    agent.new_session()
    assert agent.close() == 0
    assert bytes(agent.stderr).count(b"changed it to 0700") == 1, bytes(agent.stderr)
    assert mode_of(state) == 0o700


def test_a_dangling_database_symlink_is_not_followed(tmp_path, caplog):
    """A dangling state.sqlite3 symlink: nothing is created at its target; memory, with a warning."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "elsewhere" / "captured.sqlite3"
    target.parent.mkdir()
    os.symlink(target, state / DB)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "symbolic link" in memory_warning(caplog)
    assert not target.exists() and os.listdir(target.parent) == []
    assert os.path.islink(state / DB)


def test_a_symlink_to_an_empty_file_is_refused_and_the_file_untouched(tmp_path, caplog):
    """A state.sqlite3 symlink to an existing empty file: refused; the file stays empty, same mode."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"")
    os.chmod(victim, 0o644)
    before = os.stat(victim)
    os.symlink(victim, state / DB)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "symbolic link" in memory_warning(caplog)
    after = os.stat(victim)
    assert (after.st_size, after.st_mode, after.st_mtime_ns) == (0, before.st_mode, before.st_mtime_ns)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "state"]
    assert os.listdir(state) == [DB]


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_symlinked_companion_file_is_refused(tmp_path, caplog, suffix):
    """SQLite opens -wal/-shm/-journal by name: a symlink there is refused before SQLite runs."""
    state = tmp_path / "state"
    stored_once(state).close()
    target = tmp_path / f"captured{suffix}"
    os.symlink(target, str(state / DB) + suffix)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "symbolic link" in memory_warning(caplog)
    assert not target.exists()


def test_a_dangling_symlink_is_not_followed_by_the_cli(launch, tmp_path):
    """Through the real CLI: a warning on stderr, the agent serves from memory, no target file."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "captured.sqlite3"
    os.symlink(target, state / DB)
    agent = launch("--state-dir", str(state))
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    assert agent.close() == 0
    stderr = bytes(agent.stderr)
    assert b"symbolic link" in stderr and b"memory" in stderr, stderr
    assert not os.path.lexists(target)


def test_a_state_dir_of_another_user_is_refused(tmp_path, monkeypatch, caplog):
    """A directory we do not own is neither used nor changed (simulated with another euid)."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o777)
    real_uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real_uid + 4242)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "belongs to uid" in memory_warning(caplog)
    assert mode_of(state) == 0o777 and os.listdir(state) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_state_dir_chowned_to_another_user_is_refused_root_only(tmp_path, caplog):
    """The same with a real chown (root only): root does not adopt a user's directory."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "belongs to uid 65534" in memory_warning(caplog)
    assert os.listdir(state) == []


def test_a_database_with_another_hard_link_is_refused(tmp_path, caplog):
    """A second name for the database (a hard link) could be read elsewhere: refused."""
    state = tmp_path / "state"
    stored_once(state).close()
    os.link(state / DB, tmp_path / "copy")
    with caplog.at_level(logging.WARNING):
        store = open_store(str(state))
    assert isinstance(store, MemoryStore)
    assert "hard links" in memory_warning(caplog)


def test_files_are_created_0600_whatever_the_umask(tmp_path):
    """Under umask 0 the database, its -wal/-shm and a session's lock file are still 0600, the
    directories 0700; a 0644 database becomes 0600."""
    state = tmp_path / "state"
    previous = os.umask(0)
    try:
        store = stored_once(state)
        assert store.claim_session("s") is None
        names = sorted(os.listdir(state))
        modes = {name: mode_of(state / name) for name in names if name != "locks"}
        lock_modes = {mode_of(state / "locks" / name) for name in os.listdir(state / "locks")}
        store.close()
    finally:
        os.umask(previous)
    assert names == ["locks", DB, DB + "-shm", DB + "-wal"]
    assert set(modes.values()) == {0o600}, modes
    assert lock_modes == {0o600}
    assert mode_of(state) == 0o700 and mode_of(state / "locks") == 0o700
    os.chmod(state / DB, 0o644)
    stored_once(state).close()
    assert mode_of(state / DB) == 0o600


# -- inspection commands change nothing ------------------------------------------------------------
def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acp_green", *args], capture_output=True, text=True, timeout=60)


def snapshot(path) -> dict[str, tuple[int, int]]:
    return {name: (stat.S_IMODE(os.lstat(path / name).st_mode), os.lstat(path / name).st_size) for name in os.listdir(path)}


INSPECTIONS = (
    ("sessions", "list"), ("sessions", "list", "--json"), ("sessions", "show", "s"),
    ("sessions", "export"), ("usage",), ("usage", "--json", "--records"),
)


def test_inspection_commands_create_and_change_nothing(tmp_path):
    """`acp-green sessions list/show/export` and `usage` read a loose state dir (0777, a 0644
    database of schema 1) without tightening, migrating or creating any file, and a missing
    state dir stays missing."""
    state = tmp_path / "state"
    stored_once(state).close()
    conn = sqlite3.connect(state / DB)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    os.chmod(state, 0o777)
    os.chmod(state / DB, 0o644)
    before = snapshot(state)
    for args in INSPECTIONS:
        done = cli(*args, "--state-dir", str(state))
        assert done.returncode == 0, (args, done.stderr)
        assert snapshot(state) == before, args
    assert mode_of(state) == 0o777
    conn = sqlite3.connect(f"file:{state / DB}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
    missing = tmp_path / "missing"
    for args in INSPECTIONS[:2] + INSPECTIONS[4:]:
        done = cli(*args, "--state-dir", str(missing))  # a mistyped --state-dir: one line, exit 1
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "no directory" in done.stderr
    assert not missing.exists()


def test_inspection_commands_refuse_a_symlinked_database(tmp_path):
    """The inspection commands do not read a database through a symbolic link either."""
    state = tmp_path / "state"
    stored_once(state).close()
    os.rename(state / DB, tmp_path / "real.sqlite3")
    os.symlink(tmp_path / "real.sqlite3", state / DB)
    done = cli("sessions", "list", "--state-dir", str(state))
    assert done.returncode != 0 and "symbolic link" in done.stderr
