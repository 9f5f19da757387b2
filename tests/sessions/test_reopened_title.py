"""After session/resume the agent repeats a stored title (session_info_update), and says nothing
about a title for a session that has none."""

from __future__ import annotations

from typing import Any

from acp_green.demo import DemoAgent
from tests.unit_harness import UnitConnection


def _infos_after_resume(conn: UnitConnection, session_id: str) -> list[dict[str, Any]]:
    before = len(conn.sink.updates(session_id))
    conn.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
    return [u for u in conn.sink.updates(session_id)[before:] if u["sessionUpdate"] == "session_info_update"]


def test_a_resumed_session_repeats_its_title_and_an_untitled_one_sends_none(unit: Any) -> None:
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    titled = conn.new_session()
    conn.result(conn.prompt(titled, "Fix the parser"))
    untitled = conn.new_session()
    infos = _infos_after_resume(conn, titled)
    assert [i.get("title") for i in infos] == ["Fix the parser"]
    assert _infos_after_resume(conn, untitled) == []
