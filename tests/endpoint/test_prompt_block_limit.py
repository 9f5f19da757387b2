"""A prompt holds at most MAX_PROMPT_BLOCKS content blocks: admission work stays small."""

from __future__ import annotations

from typing import Any

from acp_green.demo import DemoAgent
from acp_green.protocol.prompt import MAX_PROMPT_BLOCKS
from tests.unit_harness import UnitConnection


def _prompt(conn: UnitConnection, session_id: str, blocks: list[dict[str, Any]]) -> Any:
    return conn.request("session/prompt", {"sessionId": session_id, "prompt": blocks})


def test_a_prompt_at_the_block_limit_runs(unit: Any) -> None:
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    session_id = conn.new_session()
    blocks = [{"type": "text", "text": "x"}] * (MAX_PROMPT_BLOCKS - 1) + [{"type": "resource_link", "uri": "file:///a", "name": "a"}]
    assert conn.result(_prompt(conn, session_id, blocks), timeout=30) == {"stopReason": "end_turn"}


def test_a_prompt_over_the_block_limit_is_refused_naming_the_field_before_any_block_is_read(unit: Any) -> None:
    """One block over: -32602 with `data.field` = prompt, saying the limit; the blocks are not
    looked at (a refusal about an ill-typed block would mean they were); the session stays free."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    session_id = conn.new_session()
    error = conn.error(_prompt(conn, session_id, [{"no": "type"}] * (MAX_PROMPT_BLOCKS + 1)))
    assert error["code"] == -32602 and error["data"] == {"field": "prompt"}, error
    assert f"at most {MAX_PROMPT_BLOCKS}" in error["message"]
    assert conn.result(conn.prompt(session_id, "hi"), timeout=30) == {"stopReason": "end_turn"}
