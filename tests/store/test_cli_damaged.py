"""`acp-green sessions list|show|export` and `acp-green usage` on a damaged state database: one
line naming the file on stderr, exit status 1, never a traceback and never an empty answer."""

from __future__ import annotations

import os
import sys

import pytest
from gevent import subprocess

from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.statedb import db_path
from acp_green.usage import UsageRecord

COMMANDS = (("sessions", "list"), ("sessions", "export"), ("sessions", "show", "s1"), ("usage",), ("usage", "--json"))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acp_green", *args], capture_output=True, text=True, timeout=120)


def real_database(state: str, sessions: int = 200) -> bytes:
    """A state database with sessions, history and usage, checkpointed and closed; its bytes."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    conn = statedb.connect(db_path(state))
    try:
        for i in range(sessions):
            statedb.save_session(conn, SessionRecord(f"s{i}", "/tmp", [], "t" * 400, None, {}, float(i)))
            statedb.begin_turn(conn, f"s{i}", "turn", 1.0, [b'{"sessionUpdate":"user_message_chunk"}' * 40])
            statedb.record_usage(conn, UsageRecord(f"s{i}", "1", "end_turn", 1.0, 1.0, 10, 10, None, None, 1.0))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    with open(db_path(state), "rb") as f:
        return f.read()


def write_db(state: str, data: bytes) -> None:
    os.makedirs(state, mode=0o700, exist_ok=True)
    with open(db_path(state), "wb") as f:
        f.write(data)


def assert_one_line_error(state: str, args: tuple[str, ...]) -> None:
    done = run_cli(*args, "--state-dir", state)
    assert done.returncode == 1, (args, done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and db_path(state) in lines[0], (args, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("args", COMMANDS)
def test_a_file_of_garbage_bytes_is_one_line_and_exit_1(tmp_path, args):
    state = str(tmp_path / "state")
    write_db(state, os.urandom(20_000))
    assert_one_line_error(state, args)


@pytest.mark.parametrize("args", COMMANDS)
def test_damage_past_the_header_met_by_a_query_is_one_line_and_exit_1(tmp_path, args):
    """Pages overwritten after the first two: opening succeeds, the query that reaches them fails."""
    state = str(tmp_path / "state")
    data = bytearray(real_database(state))
    data[8192:len(data) - 4096] = os.urandom(len(data) - 4096 - 8192)
    write_db(state, bytes(data))
    assert_one_line_error(state, args)


@pytest.mark.parametrize("cut", [50, 4096, 0.5])
def test_a_truncated_real_database_is_one_line_and_exit_1(tmp_path, cut):
    """Cut inside its header (SQLite then reads it as an empty database: it must not print zeros),
    after its first page, and at half its length."""
    state = str(tmp_path / "state")
    data = real_database(state)
    write_db(state, data[: int(len(data) * cut) if isinstance(cut, float) else cut])
    for args in COMMANDS:
        assert_one_line_error(state, args)


def test_an_empty_database_file_is_still_nothing_stored(tmp_path):
    """The file `serve` creates before its first transaction: nothing stored yet, exit 0."""
    state = str(tmp_path / "state")
    write_db(state, b"")
    done = run_cli("usage", "--json", "--state-dir", state)
    assert done.returncode == 0 and "nothing is stored" in done.stderr
