"""A live session's MCP servers declared anew (`session/load`, `session/resume`): the old set is
replaced, not accumulated, and closed exactly once."""

from __future__ import annotations

from typing import Any

from acp_green.mcp.session import SessionMcp
from tests.helpers import wait_until
from tests.mcp_helpers import RECORDER, stdio_entry


def test_reloading_a_live_session_replaces_its_mcp_closer_and_closes_each_old_set_once(unit, monkeypatch):
    """17b: five loads/resumes of a live session with a stdio server leave one MCP closer in the
    session's resources; each replaced set is closed once, the last one once at the session's end."""
    closed: list[int] = []
    original = SessionMcp.close

    def counting_close(self: SessionMcp) -> None:
        closed.append(id(self))
        original(self)

    monkeypatch.setattr(SessionMcp, "close", counting_close)
    conn = unit()
    conn.initialize()
    servers: list[dict[str, Any]] = [stdio_entry("st", RECORDER)]
    session_id = conn.new_session(mcp_servers=servers)
    session = conn.sessions.get(session_id)
    sets = [conn.protocol.session_mcp[session_id]]
    for method in ("session/load", "session/resume", "session/load", "session/resume", "session/load"):
        conn.call(method, {"sessionId": session_id, "cwd": "/tmp", "mcpServers": servers})
        sets.append(conn.protocol.session_mcp[session_id])
    assert len(session.resources) == 1
    assert len({id(s) for s in sets}) == 6
    wait_until(lambda: len(closed) == 5, what="the five replaced sets closed")
    conn.sessions.drop(session_id)
    wait_until(lambda: len(closed) == 6, what="the last set closed at the end")
    conn.close()
    assert sorted(closed) == sorted(id(s) for s in sets)  # each set once, none twice
