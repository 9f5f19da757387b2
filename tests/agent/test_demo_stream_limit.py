"""The demo's `/stream N SIZE` builds chunks of at most MAX_STREAM_CHUNK bytes."""

from __future__ import annotations

from typing import Any

from acp_green.demo import MAX_STREAM_CHUNK, DemoAgent
from tests.helpers import said
from tests.unit_harness import UnitConnection


def _texts(conn: UnitConnection, session_id: str) -> list[str]:
    return [u["content"]["text"] for u in conn.sink.updates(session_id) if u.get("sessionUpdate") == "agent_message_chunk"]


def test_a_chunk_of_exactly_the_limit_is_streamed(unit: Any) -> None:
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    session_id = conn.new_session()
    assert conn.result(conn.prompt(session_id, f"/stream 2 {MAX_STREAM_CHUNK}"), timeout=30) == {"stopReason": "end_turn"}
    texts = _texts(conn, session_id)
    assert [len(t) for t in texts] == [MAX_STREAM_CHUNK] * 2 and texts[1].startswith("1:")


def test_a_size_over_the_limit_is_refused_with_a_clear_message_and_nothing_built(unit: Any) -> None:
    """Item 16: `/stream 1 300000000` says the limit and ends the turn; no chunk is streamed."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    session_id = conn.new_session()
    assert conn.result(conn.prompt(session_id, "/stream 1 300000000"), timeout=30) == {"stopReason": "end_turn"}
    texts = _texts(conn, session_id)
    assert len(texts) == 1 and f"at most {MAX_STREAM_CHUNK} bytes" in texts[0] and "300000000" in texts[0]
    assert said(conn.sink.updates(session_id)).startswith("usage: /stream N [SIZE]")
