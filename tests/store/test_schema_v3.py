"""store/statedb.migrate from schema 3 (before session state): the state table is added and the
database says version 4."""

from __future__ import annotations

import sqlite3

from acp_green.store import statedb


def test_a_version_3_database_gains_the_state_table(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = str(state / statedb.DB_NAME)
    conn = statedb.connect(path)
    conn.execute("DROP TABLE session_state")
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    conn = statedb.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == statedb.SCHEMA_VERSION == 6
        statedb.save_state(conn, "s", b'{"step": 2}')
        assert statedb.load_state(conn, "s") == b'{"step": 2}'
    finally:
        conn.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'session_state'").fetchone() == ("session_state",)
    conn.close()
