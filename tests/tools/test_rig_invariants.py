"""The rig's invariant checker on hand-made conversations: each invariant goes red on the
message that breaks it, and a clean conversation stays green (no processes: fast)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_green.tools.rig.client import Record
from acp_green.tools.rig.invariants import InvariantChecker

SID = "s1"


class Convo:
    """Builds a record list the way AcpClient records a conversation."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.t = 0.0

    def _add(self, direction: str, message: Any, raw: bytes | None = None) -> "Convo":
        self.t += 0.001
        data = raw if raw is not None else json.dumps(message).encode() + b"\n"
        self.records.append(Record(self.t, direction, data if direction == "in" else b"", message))
        return self

    def out(self, message: dict[str, Any]) -> "Convo":
        return self._add("out", message)

    def out_raw(self, data: bytes) -> "Convo":
        self.t += 0.001
        self.records.append(Record(self.t, "out", data, None))
        return self

    def inn(self, message: Any) -> "Convo":
        return self._add("in", message)

    def inn_raw(self, data: bytes) -> "Convo":
        return self._add("in", None, data)

    # ACP shorthands
    def prompt(self, rid: int, text: str) -> "Convo":
        return self.out({"jsonrpc": "2.0", "id": rid, "method": "session/prompt",
                         "params": {"sessionId": SID, "prompt": [{"type": "text", "text": text}]}})

    def cancel(self) -> "Convo":
        return self.out({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}})

    def chunk(self, text: str) -> "Convo":
        return self.inn({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})

    def stop(self, rid: int, reason: str) -> "Convo":
        return self.inn({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": reason}})


def opened() -> Convo:
    convo = Convo()
    convo.out({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    convo.inn({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    return convo


def check(convo: Convo, must_cancel: tuple[Any, ...] = (), complete: bool = True) -> list[str]:
    checker = InvariantChecker(must_cancel)
    checker.finish(convo.records, complete=complete)
    return [v.invariant for v in checker.violations]


def test_a_clean_conversation_breaks_nothing():
    convo = opened().prompt(2, "/stream 3").chunk("0:a").chunk("1:b").chunk("2:c").stop(2, "end_turn")
    convo.prompt(3, "/wait").cancel().stop(3, "cancelled")
    convo.out_raw(b"garbage\n").inn({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert check(convo, must_cancel=(3,)) == []


def test_a_line_that_is_not_json_is_named():
    convo = opened().inn_raw(b"debug: hello\n")
    checker = InvariantChecker()
    checker.finish(convo.records)
    assert [v.invariant for v in checker.violations] == ["valid_json_rpc"]
    assert "debug: hello" in checker.violations[0].messages[0]


def test_a_schema_violation_is_named():
    convo = opened().inn({"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk"}}})
    assert check(convo) == ["schema"]


def test_a_request_answered_twice_is_named_with_both_answers():
    convo = opened().prompt(2, "hi").stop(2, "end_turn").stop(2, "end_turn")
    checker = InvariantChecker()
    checker.finish(convo.records)
    assert "one_response_per_request" in [v.invariant for v in checker.violations]
    twice = next(v for v in checker.violations if v.invariant == "one_response_per_request")
    assert len(twice.messages) == 3  # the request and both responses


def test_an_unanswered_request_is_named_only_when_the_run_ended_cleanly():
    convo = opened().out({"jsonrpc": "2.0", "id": 7, "method": "session/set_mode", "params": {"sessionId": SID, "modeId": "x"}})
    assert check(convo) == ["one_response_per_request"]
    assert check(convo, complete=False) == []


def test_a_response_to_a_notification_is_named_with_the_notification():
    convo = opened().cancel().inn({"jsonrpc": "2.0", "id": None, "result": {}})
    checker = InvariantChecker()
    checker.finish(convo.records)
    invariants = [v.invariant for v in checker.violations]
    assert "no_response_to_notification" in invariants
    found = next(v for v in checker.violations if v.invariant == "no_response_to_notification")
    assert "session/cancel" in found.messages[0]


def test_stream_chunks_out_of_order_are_named():
    convo = opened().prompt(2, "/stream 3").chunk("1:b").chunk("0:a").chunk("2:c").stop(2, "end_turn")
    assert check(convo) == ["prompt_updates_in_order"]


def test_a_stream_missing_chunks_is_named():
    convo = opened().prompt(2, "/stream 3").chunk("0:a").chunk("1:b").stop(2, "end_turn")
    assert check(convo) == ["prompt_updates_in_order"]


def test_prompts_of_other_agents_are_not_held_to_the_stream_grammar():
    convo = opened().prompt(2, "/stream 3").chunk("/stream 3").stop(2, "end_turn")
    assert check(convo) == []


def test_an_update_after_the_prompt_response_is_named_S5():
    convo = opened().prompt(2, "hi").chunk("hi").stop(2, "end_turn").chunk("late")
    assert check(convo) == ["no_update_after_response"]


def test_an_update_after_the_next_request_for_the_session_is_fine():
    convo = opened().prompt(2, "hi").stop(2, "end_turn")
    convo.out({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode", "params": {"sessionId": SID, "modeId": "code"}})
    convo.inn({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": SID, "update": {"sessionUpdate": "current_mode_update", "currentModeId": "code"}}})
    convo.inn({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert check(convo) == []


def test_a_cancelled_prompt_answered_with_an_error_is_named():
    convo = opened().prompt(2, "/sleep 5").cancel().inn({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom"}})
    assert check(convo) == ["cancelled_answers_cancelled"]


def test_a_prompt_that_only_ends_by_cancel_must_answer_cancelled():
    convo = opened().prompt(2, "/wait").cancel().stop(2, "end_turn")
    assert check(convo, must_cancel=(2,)) == ["cancelled_answers_cancelled"]
    # Without the declaration, a race (the turn ended before the cancel was read) is allowed.
    assert check(convo) == []


def test_a_busy_refusal_is_not_a_cancelled_prompt():
    convo = opened().prompt(2, "/wait").prompt(3, "second").cancel()
    convo.inn({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "busy", "data": {"reason": "session_busy"}}})
    convo.stop(2, "cancelled")
    assert check(convo, must_cancel=(2,)) == []


def test_a_tool_call_finished_after_a_busy_refusal_counts_for_the_running_prompt():
    def tool(status: str, first: bool = False) -> dict[str, Any]:
        update = {"sessionUpdate": "tool_call" if first else "tool_call_update", "toolCallId": "t1", "status": status}
        if first:
            update["title"] = "Read"
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": update}}

    convo = opened().prompt(2, "/wait").inn(tool("in_progress", first=True)).prompt(3, "second")
    convo.inn({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "busy", "data": {"reason": "session_busy"}}})
    convo.cancel().inn(tool("failed")).stop(2, "cancelled")
    checker = InvariantChecker((2,))
    checker.finish(convo.records, complete=True)
    assert checker.violations == [] and checker.advisories == []
    assert checker.exercised["cancelled_answers_cancelled"] == 1


@pytest.mark.parametrize("rid", [0, -1, "abc", 2**53 + 1])
def test_ids_are_matched_exactly(rid):
    convo = opened().out({"jsonrpc": "2.0", "id": rid, "method": "_x/y", "params": {}})
    convo.inn({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
    assert check(convo) == []


def test_a_string_id_is_not_the_same_as_an_integer_id():
    convo = opened().out({"jsonrpc": "2.0", "id": 5, "method": "_x/y", "params": {}})
    convo.inn({"jsonrpc": "2.0", "id": "5", "error": {"code": -32601, "message": "no"}})
    assert "one_response_per_request" in check(convo)


def test_checking_is_incremental():
    convo = opened().prompt(2, "hi").stop(2, "end_turn")
    checker = InvariantChecker()
    assert checker.update(convo.records) == []
    convo.chunk("late")
    new = checker.update(convo.records)
    assert [v.invariant for v in new] == ["no_update_after_response"]


def test_a_session_goes_quiet_only_when_none_of_its_prompts_is_still_running():
    """An agent that runs two turns at once (no S8) may still stream the first after the second ends."""
    convo = opened().prompt(2, "long").chunk("a").prompt(3, "short").stop(3, "end_turn").chunk("b").stop(2, "end_turn")
    assert check(convo) == []
    convo.chunk("late")
    assert check(convo) == ["no_update_after_response"]


def test_after_a_signal_only_requests_the_agent_must_have_read_are_owed_answers():
    convo = opened().prompt(2, "/wait").prompt(3, "hi").stop(3, "end_turn").prompt(4, "/wait")
    assert check(convo, complete="read") == ["one_response_per_request"]  # #2 was read: #3, sent later, was answered
    assert "#2" in InvariantChecker().finish(convo.records, complete="read")[0].detail
    convo = opened().prompt(2, "hi").stop(2, "end_turn").prompt(3, "/wait")
    assert check(convo, complete="read") == []  # #3 may never have been read


# -- JSON-RPC batches: ACP v2 answers them as a batch, v1 refuses them -------------------------------
def _negotiated(version: int) -> Convo:
    convo = Convo()
    convo.out({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version}})
    convo.inn({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": version, "info": {"name": "a", "version": "1"}}})
    return convo


def _set_mode(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "session/set_mode", "params": {"sessionId": SID, "modeId": "x"}}


def _answer(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {}}


def check_no_schema(convo: Convo) -> list[str]:
    return [name for name in check(convo) if name != "schema"]  # the shapes are not what is judged here


def test_v2_a_batch_answered_as_one_array_breaks_nothing():
    convo = _negotiated(2)
    convo._add("out", [_set_mode(1), {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}}, _set_mode(2)])
    convo.inn([_answer(2), _answer(1)])
    assert check_no_schema(convo) == []


def test_v2_a_batch_member_left_unanswered_or_answered_twice_is_named():
    convo = _negotiated(2)
    convo._add("out", [_set_mode(1), _set_mode(2)])
    convo.inn([_answer(1)])
    assert check_no_schema(convo) == ["one_response_per_request"]
    convo.inn([_answer(1), _answer(2)])
    assert "one_response_per_request" in check_no_schema(convo)


def test_v2_an_empty_batch_is_owed_one_error_with_id_null_and_an_empty_answer_is_named():
    convo = _negotiated(2)
    convo._add("out", [])
    convo.inn({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}})
    assert check_no_schema(convo) == []
    assert check_no_schema(convo.inn([])) == ["valid_json_rpc"]


def test_v2_a_batch_answer_holding_a_request_is_named():
    convo = _negotiated(2)
    convo.inn([{"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {}}])
    assert check_no_schema(convo) == ["valid_json_rpc"]


def test_v1_a_batch_is_owed_one_refusal_and_an_array_from_the_agent_is_named():
    convo = _negotiated(1)
    convo._add("out", [_set_mode(1), _set_mode(2)])
    convo.inn({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Batch requests are not supported"}})
    assert check(convo) == []
    assert check(convo.inn([_answer(1), _answer(2)])) == ["valid_json_rpc"]


def test_v2_a_nested_batch_member_is_owed_one_error_with_id_null_not_an_answer_by_its_inner_ids():
    """Batches do not nest: a member that is itself an array is answered -32600 with id null, in its place."""
    convo = _negotiated(2)
    convo._add("out", [_set_mode(1), [_set_mode(2)]])
    convo.inn([_answer(1), {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "batches do not nest"}}])
    assert check_no_schema(convo) == []


def test_a_notification_whose_params_are_not_structured_is_owed_one_error_with_id_null():
    """`"params": false` makes the message invalid (JSON-RPC: params are an object or an array), so it is
    answered -32600 with id null, as any invalid message, alone or in a batch."""
    convo = _negotiated(2)
    convo._add("out", [{"jsonrpc": "2.0", "method": "session/cancel", "params": False}])
    convo.inn([{"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "params must be an object or an array"}}])
    assert check_no_schema(convo) == []


def _settings_convo(capabilities: dict[str, Any], version: int = 1) -> Convo:
    """A client initializes with `capabilities`; the agent answers session/new with a boolean option."""
    convo = Convo()
    params: dict[str, Any] = {"protocolVersion": version, "clientCapabilities": capabilities}
    convo.out({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    convo.inn({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": version, "agentCapabilities": {}, "authMethods": []}})
    convo.out({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    verbose = {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": True}
    convo.inn({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID, "configOptions": [verbose]}})
    convo.inn({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": SID, "update": {"sessionUpdate": "config_option_update", "configOptions": [verbose]}}})
    return convo


@pytest.mark.parametrize("capabilities, violations", [
    ({"session": {"configOptions": {"boolean": {}}}}, []),
    ({}, ["capabilities_respected"] * 2),
    ({"session": {"configOptions": {"boolean": None}}}, ["capabilities_respected"] * 2),
])
def test_a_boolean_option_to_a_v1_client_that_did_not_advertise_it_is_named(capabilities, violations):
    """ACP v1: `type: "boolean"` config options only to a client that advertised
    `session.configOptions.boolean`; both the session/new answer and the update are named."""
    assert check(_settings_convo(capabilities)) == violations
