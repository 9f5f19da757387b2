"""What the agent sends back is bounded however big the client made what it sent."""

from __future__ import annotations

import json
from typing import Any

from acp_green.demo import DemoAgent
from acp_green.errors import ECHO_LIMIT
from acp_green.protocol.session_methods import LIST_PAGE_BYTES
from tests.unit_harness import UnitConnection


def _encoded(message: dict[str, Any]) -> int:
    return len(json.dumps(message, separators=(",", ":")))


def test_an_unknown_session_error_echoes_a_huge_session_id_cut_to_the_echo_limit(unit: Any) -> None:
    """A 10 MB sessionId is repeated cut to ECHO_LIMIT characters, in the message and in data."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    huge = "s" * (10 << 20)
    request_id = conn.request("session/set_mode", {"sessionId": huge, "modeId": "code"})
    response = conn.sink.response(request_id)
    error = response["error"]
    assert error["code"] == -32002 and error["data"]["reason"] == "unknown_session"
    assert error["data"]["sessionId"] == "s" * (ECHO_LIMIT - 1) + "…"
    assert _encoded(response) < 4 * ECHO_LIMIT + 400


def test_a_session_id_at_the_echo_limit_is_echoed_whole(unit: Any) -> None:
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    exact = "s" * ECHO_LIMIT
    error = conn.error(conn.request("session/set_mode", {"sessionId": exact, "modeId": "code"}))
    assert error["data"]["sessionId"] == exact


def test_session_list_pages_by_bytes_too_and_the_cursor_lists_every_session_once(unit: Any) -> None:
    """Sessions with 300 KB cwds: a page stays within LIST_PAGE_BYTES (plus at most the one
    session that always fits), well under the 50-session count page, and following nextCursor
    lists each session exactly once."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    made = {conn.new_session(cwd="/" + chr(ord("a") + i) * (300 << 10)) for i in range(10)}
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        request_id = conn.request("session/list", params)
        response = conn.sink.response(request_id)
        result = response["result"]
        pages += 1
        assert 1 <= len(result["sessions"]) < 10
        assert _encoded(response) <= LIST_PAGE_BYTES + (300 << 10) + 1000
        seen.extend(s["sessionId"] for s in result["sessions"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and pages >= 3


def test_one_session_over_the_byte_budget_is_still_listed_alone(unit: Any) -> None:
    """At the limit: a session bigger than the whole budget gets a page of its own, so the
    cursor always moves on."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    small = conn.new_session()
    big = conn.new_session(cwd="/" + "b" * (LIST_PAGE_BYTES + 10))
    first = conn.call("session/list", {})
    assert [s["sessionId"] for s in first["sessions"]] == [big]
    second = conn.call("session/list", {"cursor": first["nextCursor"]})
    assert [s["sessionId"] for s in second["sessions"]] == [small] and "nextCursor" not in second
