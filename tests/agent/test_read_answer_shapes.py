"""`fs/read_text_file` answers that carry no content are the client's fault, never an empty file."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.demo import DemoAgent
from tests.helpers import wait_until
from tests.unit_harness import UnitConnection


@pytest.mark.parametrize("answer", [None, {}, {"text": "x"}])
def test_a_read_answer_without_content_is_a_client_error_not_an_empty_file(unit: Any, answer: Any) -> None:
    """`null`, `{}` or an object without `content` fails the read (the demo's tool call says
    "has no content"); the turn still ends normally and nothing claims a 0-character file."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/read /x")
    [asked] = wait_until(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's read", changed=conn.sink.changed)
    conn.respond(asked["id"], answer)
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    updates = conn.sink.updates(session_id)
    failed = [u for u in updates if u.get("status") == "failed"]
    assert failed and "has no content" in failed[0]["content"][0]["content"]["text"], updates
    assert not any("0 characters" in str(u) for u in updates)


def test_a_read_answer_with_empty_content_is_an_empty_file(unit: Any) -> None:
    """The control: `{"content": ""}` is an empty file."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/read /x")
    [asked] = wait_until(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's read", changed=conn.sink.changed)
    conn.respond(asked["id"], {"content": ""})
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    assert any("0 characters" in str(u) for u in conn.sink.updates(session_id))
