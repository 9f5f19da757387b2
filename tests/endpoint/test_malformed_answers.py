"""A malformed answer to one of the agent's own requests releases its waiter and is never answered."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from acp_green.demo import DemoAgent
from tests.helpers import wait_until
from tests.unit_harness import UnitConnection


@pytest.mark.parametrize(("answer", "named"), [
    ({"result": {"content": "x"}, "error": {"code": 1, "message": "m"}}, "has both"),
    ({"error": "boom"}, "not the string"),
    ({"error": None}, "has neither"),
    ({}, "has neither"),
])
def test_a_malformed_answer_fails_the_agents_request_and_the_turn_goes_on(unit: Any, caplog: Any, answer: dict[str, Any],
                                                                          named: str) -> None:
    """Item 9: the waiter raises ClientError naming what was malformed (the demo fails its tool
    call with it and ends the turn); nothing is sent back for the answer (no id-null -32600: a
    response is never answered), and it is logged once."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/read /x")
    [asked] = wait_until(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's read", changed=conn.sink.changed)
    with caplog.at_level(logging.WARNING, logger="acp_green"):
        conn.endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "id": asked["id"], **answer}).encode())
        assert conn.result(prompt_id, timeout=20) == {"stopReason": "end_turn"}
    failed = [u for u in conn.sink.updates(session_id) if u.get("status") == "failed"]
    assert failed and "malformed answer" in failed[0]["content"][0]["content"]["text"], failed
    assert named in failed[0]["content"][0]["content"]["text"]
    assert [m for m in conn.sink.responses() if m.get("id") is None] == []
    assert len([r for r in caplog.records if "malformed" in r.getMessage()]) == 1


@pytest.mark.breaks_invariants("no_response_to_notification", reason="the raw line goes to the endpoint unrecorded, so its id-null answer matches nothing")
def test_a_malformed_answer_nobody_waits_for_is_still_invalid_request_with_id_null(unit: Any) -> None:
    """The control: an answer-shaped line for an id the agent does not wait for is -32600, id null."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    conn.endpoint.handle_line(b'{"jsonrpc":"2.0","id":77,"result":1,"error":{"code":1,"message":"m"}}')
    [answer] = [m for m in conn.sink.responses() if m.get("id") is None]
    assert answer["error"]["code"] == -32600
