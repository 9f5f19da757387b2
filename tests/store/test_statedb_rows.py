"""The state database gives back every field of a row it stored, each in its own place: a usage
record, with and without tokens, and a session record whose optional columns are empty."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.usage import UsageRecord


def _conn(tmp_path: Path) -> sqlite3.Connection:
    return statedb.connect(str(tmp_path / statedb.DB_NAME))


def test_a_usage_record_reads_back_field_by_field(tmp_path: Path) -> None:
    """Every number differs, so two fields read back into each other's place show."""
    counted = UsageRecord("s1", "r1", "end_turn", 10.5, 2.25, 300, 4000, input_tokens=50, output_tokens=60,
                          recorded_at=12.75, usage_id="u1", pid=4242)
    uncounted = UsageRecord("s2", "r2", "cancelled", 20.5, 0.5, 7, 8, recorded_at=21.0, usage_id="u2", pid=4343)
    conn = _conn(tmp_path)
    try:
        statedb.record_usage(conn, counted)
        statedb.record_usage(conn, uncounted)
        assert statedb.usage(conn) == [counted, uncounted]
        assert statedb.usage(conn, "s2") == [uncounted]
    finally:
        conn.close()


def test_a_session_record_reads_back_with_its_empty_columns_empty(tmp_path: Path) -> None:
    record = SessionRecord("s1", "/work/é", ["/other"], title=None, mode_id=None, config={"k": [1]}, updated_at=3.5)
    conn = _conn(tmp_path)
    try:
        statedb.save_session(conn, record)
        assert statedb.load_session(conn, "s1") == record
        assert statedb.list_sessions(conn) == [record]
    finally:
        conn.close()
