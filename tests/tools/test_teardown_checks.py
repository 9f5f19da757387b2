"""The check every agent-launching fixture runs at teardown can fail, and can be switched off only
by naming the invariant and a reason."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from acp_green.tools.rig.client import Record
from tests.helpers import invariant_problems, tolerated_invariants


def out(message: dict[str, Any]) -> Record:
    return Record(time.monotonic(), "out", json.dumps(message).encode(), message)


def into(message: dict[str, Any]) -> Record:
    return Record(time.monotonic(), "in", json.dumps(message).encode(), message)


CANCEL = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
LISTED = {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}


def test_an_answered_notification_fails_the_teardown_check():
    """S6: an error with id null after a well-formed notification is a response to it."""
    records = [out(CANCEL), into({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}})]
    problems = invariant_problems(records)
    assert len(problems) == 1 and problems[0].startswith("no_response_to_notification"), problems


def test_a_request_answered_twice_or_never_fails_the_teardown_check():
    assert [p.split(":")[0] for p in invariant_problems([out(LIST), into(LISTED), into(LISTED)])] == ["one_response_per_request"]
    assert [p.split(":")[0] for p in invariant_problems([out(LIST)], complete=True)] == ["one_response_per_request"]
    assert invariant_problems([out(LIST), into(LISTED)], complete=True) == []


def test_an_update_after_the_prompts_response_fails_the_teardown_check():
    """S5: nothing for a session after its prompt's response."""
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    late = {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}}}}
    records = [out(prompt), into({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}), into(late)]
    assert [p.split(":")[0] for p in invariant_problems(records)] == ["no_update_after_response"]


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_an_update_after_a_load_or_resume_response_fails_the_teardown_check(method: str) -> None:
    """S5: a load's or resume's session-level updates precede its response, like a prompt's
    updates; one after it is late, until the client's next request for the session. An update
    before the response, or after an error answer, is no violation."""
    reopen = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"sessionId": "s", "cwd": "/tmp", "mcpServers": []}}
    commands = {"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": "s", "update": {"sessionUpdate": "available_commands_update", "availableCommands": []}}}
    answered = into({"jsonrpc": "2.0", "id": 3, "result": {}})
    problems = invariant_problems([out(reopen), answered, into(commands)])
    assert [p.split(":")[0] for p in problems] == ["no_update_after_response"] and f"its {method} response" in problems[0], problems
    assert invariant_problems([out(reopen), into(commands), answered]) == []
    refused = into({"jsonrpc": "2.0", "id": 3, "error": {"code": -32002, "message": "Unknown session"}})
    assert invariant_problems([out(reopen), refused, into(commands)]) == []


def test_only_a_terminal_created_after_the_agent_gave_up_on_it_may_be_released_after_the_response() -> None:
    """S5 in the rig, its one exception: a terminal/create the client answers after the agent's
    $/cancel_request for it (or after the prompt's response) made a terminal the agent must kill
    and release, even after the response. Any other terminal request after it is still late."""
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "/term sleep 30"}]}}
    create = {"jsonrpc": "2.0", "id": 0, "method": "terminal/create", "params": {"sessionId": "s", "command": "sleep"}}
    given_up = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}
    cancelled = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}
    created = {"jsonrpc": "2.0", "id": 0, "result": {"terminalId": "t1"}}

    def cleanup(request_id: int, method: str, terminal_id: str = "t1") -> Record:
        return into({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"sessionId": "s", "terminalId": terminal_id}})

    late = [out(prompt), into(create), into(given_up), into(cancelled), out(created)]
    assert invariant_problems([*late, cleanup(1, "terminal/kill"), cleanup(2, "terminal/release")]) == []
    after_response = [out(prompt), into(create), into(cancelled), out(created)]  # the response came first
    assert invariant_problems([*after_response, cleanup(1, "terminal/release")]) == []
    crossing = [out(prompt), into(create), into(given_up), out(created), into(cancelled)]  # answered as the response left
    assert invariant_problems([*crossing, cleanup(1, "terminal/kill"), cleanup(2, "terminal/release")]) == []
    for wrong in ([*late, cleanup(1, "terminal/release", "t2")], [*late, cleanup(1, "terminal/output")],
                  [out(prompt), into(create), out(created), into(cancelled), cleanup(1, "terminal/release")]):
        assert [p.split(":")[0] for p in invariant_problems(wrong)] == ["no_update_after_response"], wrong


def test_a_tolerated_invariant_is_skipped_and_only_that_one():
    records = [out(CANCEL), into({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}}),
               out(LIST), into(LISTED), into(LISTED)]
    problems = invariant_problems(records, frozenset({"no_response_to_notification"}))
    assert [p.split(":")[0] for p in problems] == ["one_response_per_request"]


def _request_with(*markers: pytest.Mark) -> Any:
    return SimpleNamespace(node=SimpleNamespace(nodeid="t", iter_markers=lambda name: [m for m in markers if m.name == name]))


def test_an_opt_out_needs_the_invariants_and_a_reason():
    named = pytest.mark.breaks_invariants("one_response_per_request", reason="reuses an id on purpose").mark
    assert tolerated_invariants(_request_with(named)) == {"one_response_per_request"}
    for silent in (pytest.mark.breaks_invariants("one_response_per_request").mark,
                   pytest.mark.breaks_invariants(reason="no names").mark,
                   pytest.mark.breaks_invariants("schema", reason=" ").mark):
        with pytest.raises(pytest.UsageError):
            tolerated_invariants(_request_with(silent))


# -- what the checker must survive (it runs after every test, on hostile input too) ----------------
def test_the_checker_survives_a_prompt_whose_text_is_not_a_string():
    """An ill-typed text block (answered -32602 by the agent) is no /stream prompt, not a crash."""
    prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": ["not", "a", "string"]}]}}
    records = [out(prompt), into({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "prompt[0].text"}})]
    assert invariant_problems(records, complete=True) == []


def raw_out(data: bytes) -> Record:
    return Record(time.monotonic(), "out", data, None)


NULL_PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}


@pytest.mark.parametrize("line", [
    b'{"jsonrpc":"2.0","id":1,"method":"x\xed\xa0\x80"}\n',  # an encoded surrogate: not UTF-8
    b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
])
def test_a_line_the_agent_cannot_read_is_garbage_to_the_checker(line):
    """Invalid UTF-8 and nesting past the recursion limit are garbage: answered -32700 with id
    null, no request owed an answer, and the checker does not crash."""
    assert invariant_problems([raw_out(line), into(NULL_PARSE_ERROR)], complete=True) == []


def test_the_teardown_schema_check_validates_stable_methods_against_the_unstable_schema_too():
    """Testing layers: an agent's PromptResponse whose `usage` breaks the unstable schema (the stable one
    leaves it open) fails the check every launched agent gets at teardown, naming the schema."""
    from tests.conftest import schema_problems

    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn", "usage": {"totalTokens": -1, "inputTokens": 0, "outputTokens": 0}}}
    problems = schema_problems(SimpleNamespace(records=[out(prompt), into(answer)]))
    assert len(problems) == 1 and "(PromptResponse, unstable schema)" in problems[0], problems
    answer["result"]["usage"]["totalTokens"] = 1
    assert schema_problems(SimpleNamespace(records=[out(prompt), into(answer)])) == []
