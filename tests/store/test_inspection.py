"""`acp-green sessions` and `acp-green usage` read the state database read-only: they never take
the write lock, so they answer while a serving agent writes, and they change nothing on disk."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import tempfile

import gevent
import pytest
from gevent import subprocess
from gevent.event import Event
from hypothesis import HealthCheck, given, settings
from click.testing import CliRunner
from hypothesis import strategies as st

from acp_green.cli import cli
from acp_green.store import statedb
from acp_green.store.report import open_db
from acp_green.store.session_record import SessionRecord
from acp_green.store.statedb import db_path
from acp_green.store.turns import TurnOutcome

INSPECTIONS = (
    ("sessions", "list"), ("sessions", "list", "--json"), ("sessions", "export"),
    ("usage",), ("usage", "--json", "--records"),
)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """An `acp-green` command, waited for with a generous bound (a lock wait would fail it)."""
    return subprocess.run([sys.executable, "-m", "acp_green", *args], capture_output=True, text=True, timeout=120)


def files_of(state: str) -> dict[str, tuple[int, int]]:
    """What a reader must not change: every file's name, and the size and mtime of the database
    and its WAL (the -shm is shared memory every WAL reader registers in; only its presence counts)."""
    seen = {}
    for name in sorted(os.listdir(state)):
        info = os.lstat(os.path.join(state, name))
        seen[name] = (info.st_size, info.st_mtime_ns) if not name.endswith("-shm") else (0, 0)
    return seen


def stored_database(state: str, *session_ids: str, version: int = statedb.SCHEMA_VERSION) -> None:
    """A database of schema `version` in `state` holding these sessions, no process holding it
    open: today's made by `statedb.connect`, an older one by the old schema's own SQL."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    if version < 3:
        conn = sqlite3.connect(db_path(state), isolation_level=None)
        for statement in statedb._SCHEMA_V1:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    else:
        conn = statedb.connect(db_path(state))
    try:
        for session_id in session_ids:
            if version < 3:  # the old schema's columns (no archive state, no fork source)
                conn.execute("INSERT INTO sessions VALUES (?, '/tmp', '[]', NULL, NULL, '{}', ?)", (session_id, 1.0))
            else:
                statedb.save_session(conn, SessionRecord(session_id, "/tmp"))
    finally:
        conn.close()


@pytest.mark.parametrize("agent_has_it_open", [False, True])
def test_the_inspection_connection_cannot_write(tmp_path, agent_has_it_open):
    """Store: what `sessions`/`usage` read through is a read-only connection, whether
    no process has the database open (read as immutable) or an agent has (-wal and -shm exist)."""
    state = str(tmp_path / "state")
    stored_database(state, "s")
    other = None
    if agent_has_it_open:
        other = sqlite3.connect(db_path(state), isolation_level=None)
        other.execute("SELECT count(*) FROM sessions").fetchone()
        assert os.path.exists(db_path(state) + "-wal")
    try:
        with open_db(state) as conn:
            assert [r.session_id for r in statedb.list_sessions(conn)] == ["s"]
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                conn.execute("INSERT INTO sessions VALUES ('t', '/tmp', '[]', NULL, NULL, '{}', 1, 0, NULL)")
    finally:
        if other is not None:
            other.close()


_NAME_BYTES = st.binary(min_size=1, max_size=60).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_NAME_BYTES)
def test_inspection_opens_a_state_dir_of_any_name(tmp_path, name):
    """Store: the read-only URI names the directory exactly, whatever bytes its name
    holds (`?`, `#`, `%`, spaces, bytes that are not UTF-8), so the inspection commands read the
    same database `serve` wrote there."""
    state = os.path.join(str(tmp_path), os.fsdecode(name))
    if os.path.lexists(state):
        return  # an earlier example's directory (hypothesis reuses tmp_path)
    stored_database(state, "s")
    before = files_of(state)
    with open_db(state) as conn:
        assert conn is not None and [r.session_id for r in statedb.list_sessions(conn)] == ["s"]
    assert files_of(state) == before


def test_nothing_stored_is_said_and_nothing_is_created(tmp_path):
    """A state directory that does not exist (a mistyped --state-dir) is one line on stderr and
    exit 1; one that exists without a database, or with a file without a schema yet, is a note
    on stderr, the empty answer and exit 0. Either way nothing is created or changed."""
    missing = tmp_path / "missing"
    bare = tmp_path / "bare"
    bare.mkdir()
    for args in INSPECTIONS:
        done = run_cli(*args, "--state-dir", str(missing))
        assert done.returncode == 1, done.stderr
        assert done.stderr == f"Error: no directory {missing} (check --state-dir)\n" and done.stdout == ""
        done = run_cli(*args, "--state-dir", str(bare))
        assert done.returncode == 0, done.stderr
        assert "nothing is stored in" in done.stderr and str(bare) in done.stderr
        if "--json" in args:
            json.loads(done.stdout)
    assert not missing.exists() and files_of(str(bare)) == {}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / statedb.DB_NAME).write_bytes(b"")
    before = files_of(str(empty))
    done = run_cli("usage", "--json", "--state-dir", str(empty))
    assert done.returncode == 0 and "nothing is stored in" in done.stderr
    assert json.loads(done.stdout)["totals"]["prompts"] == 0
    assert files_of(str(empty)) == before


def test_inspection_answers_while_a_serving_agent_writes_and_changes_nothing(launch, tmp_path):
    """While a real `acp-green serve` writes continuously, and while a write
    transaction is held open on its database (as another agent's commit would), `sessions` and
    `usage` answer (no "database is locked": they never ask for the write lock and migrate
    nothing) and leave the state directory as it was: no new file, the database and its WAL
    unchanged."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state)
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "first").result() == {"stopReason": "end_turn"}
    agent.call("session/list", {})  # committed: a read answers after every earlier write

    stop = Event()

    def keep_writing() -> None:
        while not stop.is_set():
            assert agent.prompt(sid, "/stream 20 16").result(timeout=120) == {"stopReason": "end_turn"}

    writer = gevent.spawn(keep_writing)
    try:
        names = set(os.listdir(state))
        for args in INSPECTIONS:
            done = run_cli(*args, "--state-dir", state)
            assert done.returncode == 0, (args, done.stderr)
            assert sid in done.stdout, args
        assert set(os.listdir(state)) == names
    finally:
        stop.set()
        writer.join(timeout=120)
    assert writer.successful(), writer.exception

    agent.call("session/list", {})  # reads follow queued writes: every turn above is committed
    holder = sqlite3.connect(db_path(state), timeout=60, isolation_level=None)
    # A commit may have started a checkpoint in the agent's store thread, which copies the WAL
    # into the database file without the write lock: ours waits for it and empties the WAL, so
    # nothing of the agent's moves the files while the lock below is held.
    holder.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO sessions VALUES ('uncommitted', '/tmp', '[]', NULL, NULL, '{}', 1, 0, NULL)")
    try:
        # The agent's own next commit now waits behind the held lock.
        assert agent.prompt(sid, "during the lock").result(timeout=120) == {"stopReason": "end_turn"}
        before = files_of(state)
        for args in INSPECTIONS:
            done = run_cli(*args, "--state-dir", state)
            assert done.returncode == 0, (args, done.stderr)
            assert sid in done.stdout and "uncommitted" not in done.stdout, args
        assert files_of(state) == before
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    agent.call("session/list", {})
    assert agent.close() == 0


@pytest.mark.parametrize("version", [1, 2, statedb.SCHEMA_VERSION, statedb.SCHEMA_VERSION + 1])
def test_an_older_schema_is_read_as_it_is_a_newer_one_is_refused_by_name(tmp_path, version):
    """Store: `sessions` reads an older schema without migrating it (its version
    stays; history of schema 1 and 2 through temporary views); a newer schema is refused,
    naming both versions; either way the database is left as it was."""
    state = str(tmp_path / "state")
    stored_database(state, "s", version=min(version, statedb.SCHEMA_VERSION))
    conn = sqlite3.connect(db_path(state))
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    before = files_of(state)
    done = run_cli("sessions", "list", "--state-dir", state)
    if version <= statedb.SCHEMA_VERSION:
        assert done.returncode == 0 and done.stdout.startswith("s "), done.stderr
    else:
        assert done.returncode != 0
        assert f"schema {version}" in done.stderr and f"knows {statedb.SCHEMA_VERSION}" in done.stderr
    assert files_of(state) == before
    conn = sqlite3.connect(f"file:{db_path(state)}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone() == (version,)
    conn.close()


def test_sessions_delete_leaves_a_session_open_in_a_running_agent(launch, tmp_path):
    """`sessions delete` takes each session's lock as an agent would: the one a running agent has
    open is left alone, naming that agent (exit 1); the closed one is deleted."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state)
    agent.initialize()
    open_one, closed_one = agent.new_session(), agent.new_session()
    agent.call("session/close", {"sessionId": closed_one})
    done = run_cli("sessions", "delete", "--state-dir", state, open_one, closed_one)
    assert done.returncode == 1, done.stderr
    assert f"not deleted: {open_one} is open in another acp-green process (pid {agent.pid} " in done.stderr
    assert "deleted 1 of 2 sessions" in done.stdout
    assert [s["sessionId"] for s in agent.call("session/list", {})["sessions"]] == [open_one]
    assert agent.close() == 0


# What a terminal acts on: C0 controls (ESC, BEL, CR, backspace...) and DEL, the C1 controls
# (some terminals read them as ESC sequences), the line separators and bidirectional overrides.
_ACTED_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_HOSTILE = st.sampled_from(["\x1b]0;owned\x07", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b[2J", "\x9b31m", "\x9d0;t\x9c", "\r",
                            "\x08", "\n", "\t", "\x00", "\x7f", "\u202e", "\u2028", "é", "a", " "]) | st.characters()
_TEXT = st.lists(_HOSTILE, max_size=12).map("".join)


def hostile_store(state: str, session_id: str, cwd: str, title: str, said: str, tool: str) -> None:
    """A stored session whose every field the agent (or its client) chose holds `hostile` text."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    conn = statedb.connect(db_path(state))
    try:
        statedb.save_session(conn, SessionRecord(session_id, cwd, [cwd], title, said, {"model": said}))
        update = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": said}}
        statedb.begin_turn(conn, session_id, "t1", 1.0, [json.dumps(update).encode()])
        statedb.append_history(conn, session_id, "t1", [json.dumps(u).encode() for u in (
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}},
            {"sessionUpdate": "tool_call", "toolCallId": tool, "title": tool, "status": said},
            {"sessionUpdate": "notice", "severity": said, "title": tool, "description": said})])
        statedb.end_turn(conn, session_id, "t1", TurnOutcome("error", said), 2.0)
    finally:
        conn.close()


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session_id=_TEXT.filter(bool), cwd=_TEXT, title=_TEXT, said=_TEXT, tool=_TEXT)
def test_no_control_character_of_an_agent_reaches_the_terminal_and_json_stays_exact(session_id, cwd, title, said, tool):
    """`sessions list` and `sessions show` print what agents stored (ids, cwd, titles, messages,
    tool calls, notices, errors) with every character a terminal acts on written as a visible
    escape: no ESC, C0 or C1 control reaches stdout but the newlines that end lines, and one line
    per session in the list. `--json` gives every string exactly as it was stored."""
    with tempfile.TemporaryDirectory() as state:
        hostile_store(state, session_id, cwd, title, said, tool)
        runner = CliRunner()
        listed = runner.invoke(cli, ["sessions", "list", "--state-dir", state])
        shown = runner.invoke(cli, ["sessions", "show", "--state-dir", state, "--full", session_id])
        assert listed.exit_code == 0 and shown.exit_code == 0, (listed.output, shown.output)
        for human in (listed.output, shown.output):
            assert not _ACTED_ON.search(human), repr(human)
        assert listed.output.count("\n") == 1  # a newline in any field cannot start a line of its own
        [row] = json.loads(runner.invoke(cli, ["sessions", "list", "--json", "--state-dir", state]).output)
        assert (row["sessionId"], row["cwd"], row["title"], row["config"]) == (session_id, cwd, title, {"model": said})
        session = json.loads(runner.invoke(cli, ["sessions", "show", "--json", "--state-dir", state, session_id]).output)
        assert json.dumps(said) in json.dumps(session["turns"]) and session["sessionId"] == session_id
