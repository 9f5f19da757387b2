"""Findings of an adversarial review of the input path, each proved by a test that goes red
under the defect (hostile input never stalls or breaks the agent).
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import wire
from acp_green.errors import ParseError
from acp_green.demo import DemoAgent
from tests.unit_harness import UnitConnection, unit  # noqa: F401 - `unit` is a fixture


# -- the nesting pre-check is linear in the line ----------------------------------------------
def test_unterminated_string_of_escaped_quotes_is_scanned_once():
    """A line of escaped quotes with no closing quote. A string pattern that can fail
    is retried from every later quote, quadratic in the line (96 KB held the hub for 100 s);
    the pattern must consume an unterminated string to the end of the line in one match, so
    its brackets are not counted and the decoder names the real fault."""
    line = b'{"a":"' + b'[\\"' * 2000
    with pytest.raises(ParseError) as caught:
        wire.decode(line)
    assert "unterminated string" in caught.value.message


@settings(deadline=None, max_examples=200)
@given(st.lists(st.sampled_from(['"', '\\"', "\\", "[", "]", "{", "}", "a", ","]), max_size=300))
def test_nesting_precheck_matches_the_decoder_on_any_bracket_and_quote_soup(parts):
    """Whatever the line, the pre-check never refuses text the decoder would accept
    within MAX_NESTING, and never lets deeper text through to the decoder."""
    body = "".join(parts)
    line = ('{"a":' + "[" * 510 + body + "]" * 510 + "}").encode()
    try:
        wire.decode_value(line)
    except ParseError as exc:
        assert "nesting deeper" not in exc.message or wire._too_deep(line)
    else:
        assert not wire._too_deep(line)


# -- the client's answers to the agent's own requests -----------------------------------------
@pytest.mark.parametrize("answer", [{"content": 5}, "text", [1], {"content": {"nested": []}}])
def test_read_text_file_with_a_malformed_result_fails_the_tool_call_not_the_turn(unit, answer):
    """A field the runtime reads from a client's answer, ill-typed, is the client's
    fault: the turn's helper raises ClientError (the demo reports a failed tool call and ends
    the turn) instead of a TypeError that turns the prompt into -32603."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/read /x")
    [asked] = conn.sink.wait_for(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's read")
    conn.respond(asked["id"], answer)
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    failed = [u for u in conn.sink.updates(session_id) if u.get("status") == "failed"]
    assert failed and "malformed result" in failed[0]["content"][0]["content"]["text"]


@pytest.mark.parametrize("answer", [{"outcome": "selected"}, [1], "allow", {"outcome": ["allow"]}])
def test_request_permission_with_a_malformed_result_grants_nothing_and_names_the_fault(unit, answer):
    """A malformed permission answer is a ClientError naming it (never an
    AttributeError inside agent code); the permission helper fails the tool call with that
    reason, the turn goes on, and nothing is written."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/write /tmp/x hello")
    [asked] = conn.sink.wait_for(lambda: conn.sink.requests("session/request_permission"), what="the permission request")
    conn.respond(asked["id"], answer)
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    failed = [u for u in conn.sink.updates(session_id) if u.get("status") == "failed"]
    assert failed and "malformed result" in failed[0]["content"][0]["content"]["text"], failed
    assert not conn.sink.requests("fs/write_text_file")


# -- ids at their limits -----------------------------------------------------------------------
def test_a_negative_integer_id_of_the_maximum_digit_count_is_accepted():
    """The digit limit counts digits, not the minus sign: `-` and 4300 digits is an
    integer Python holds, so the request keeps its id, like its positive twin, even on the slow
    path taken when another integer of the line is over the limit (that one is -32602)."""
    digits = "9" * sys.get_int_max_str_digits()
    too_long = b"1" * (sys.get_int_max_str_digits() + 1)
    for text in (digits, "-" + digits):
        line = b'{"jsonrpc":"2.0","id":%s,"method":"m","params":{"n":%s}}' % (text.encode(), too_long)
        with pytest.raises(wire.UnrepresentableNumber) as caught:
            wire.decode(line)
        assert caught.value.source.id == int(text) and caught.value.data == {"field": "n"}


def test_a_huge_id_is_cut_to_an_excerpt_in_the_log(unit, caplog):
    """A response to an id the agent never used, with an id of a megabyte, is
    ignored with a log line of bounded length (a client cannot make each log line huge)."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    huge = "i" * 1_000_000
    conn.respond(huge, {})
    warned = [r.getMessage() for r in caplog.records if "not waiting for" in r.getMessage()]
    assert warned and all(len(message) < 1000 for message in warned)
