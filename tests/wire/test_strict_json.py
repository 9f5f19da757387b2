"""Strict JSON in (hostile input): what RFC 8259 rejects is -32700, what Python
cannot carry is named, and no shape, size or depth makes decoding raise anything else; the nesting
limit holds at its exact boundary, field paths in messages stay bounded and readable, and stored
history is written as strict JSON too."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire
from acp_green.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ParseError, RpcError


def envelope(fragment: bytes, request_id: bytes = b"1") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + request_id + b',"method":"session/list","params":{"x":' + fragment + b"}}"


# -- RFC 8259 rejects these; ujson accepted them --------------------------------------------------
@pytest.mark.parametrize(("data", "words"), [
    (b'{"jsonrpc":"2.0","id":-,"method":"x"}', "expected a value at byte 22"),
    (b'{"jsonrpc":"2.0","id":01,"method":"x"}', "at byte 23"),
    (b'{"jsonrpc":"2.0","id":1.,"method":"x"}', "at byte 23"),
    (envelope(b'"a\tb"'), "raw control character U+0009 inside a string at byte 64"),
    (envelope(b'"a\x1fb"'), "raw control character U+001F"),
    (envelope(b'"\xed\xa0\x80"'), "invalid UTF-8 at byte 63"),
    (envelope(b'"ok"') + b" trailing", "unexpected text after the message at byte"),
    (envelope(b"[1,]"), "expected a value"),
    (envelope(b'{"a":1,}'), "expected a member name in double quotes"),
    (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"unterminated}}', "unterminated string starting at byte 51"),
    (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":', "expected a value at byte 51, where the line ends"),
    (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"x"}', "byte order mark"),
    (envelope(b'"\\x"'), "invalid escape sequence in a string"),
    (envelope(b"NaN"), "NaN is not JSON"),
    (envelope(b"-Infinity"), "-Infinity is not JSON"),
    (envelope(b"[Infinity]"), "Infinity is not JSON"),
], ids=["minus", "leading-zero", "trailing-dot", "raw-tab", "raw-unit-separator", "utf8-surrogate", "trailing-text",
        "trailing-comma-array", "trailing-comma-object", "unterminated", "truncated", "bom", "bad-escape", "nan",
        "minus-infinity", "infinity-in-array"])
def test_text_rfc8259_rejects_is_a_parse_error_in_words(data, words):
    """Strict JSON in: every line RFC 8259 rejects is -32700 (id null), and says what was wrong."""
    with pytest.raises(ParseError) as info:
        wire.decode(data)
    assert info.value.code == PARSE_ERROR and not isinstance(info.value, wire.InvalidMessage)
    assert words in info.value.message, info.value.message
    assert "\n" not in info.value.message


def test_nan_and_infinity_inside_strings_are_plain_text():
    """Strict JSON in: the words NaN and Infinity inside strings are just text."""
    message = wire.decode(envelope(b'["NaN", "Infinity", "-Infinity"]'))
    assert message.params == {"x": ["NaN", "Infinity", "-Infinity"]}


@pytest.mark.parametrize("depth", [wire.MAX_NESTING - 1, 1_000, 2_000, 100_000])
def test_deep_nesting_is_a_parse_error_never_a_recursion_error(depth):
    """Hostile input: nesting past MAX_NESTING, to any depth, is -32700 saying so, never RecursionError."""
    for fragment in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        with pytest.raises(ParseError) as info:
            wire.decode(envelope(fragment))  # the envelope adds two levels
        assert info.value.message == f"Parse error: nesting deeper than {wire.MAX_NESTING} levels of arrays and objects"


def test_nesting_up_to_the_limit_is_accepted():
    depth = wire.MAX_NESTING - 2
    message = wire.decode(envelope(b"[" * depth + b"]" * depth))
    assert isinstance(message, wire.Request)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"s": '\\"' + "[{" * 2_000, "t": "]" * 900}})
    assert wire.decode(text.encode()).params["t"] == "]" * 900


def _depth(value) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            level += 1
            deepest = max(deepest, level)
            stack.extend((v, level) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


@settings(deadline=None, max_examples=200)
@given(st.recursive(st.text(alphabet='[]{}"\\ab', max_size=4) | st.integers(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\', max_size=3), inner, max_size=3),
                    max_leaves=12),
       st.integers(0, 600))
def test_depth_precheck_agrees_with_the_value(value, wrap):
    """The pre-check measures JSON text exactly as deep as the decoded value, strings ignored."""
    value = {"v": value}
    for _ in range(wrap):
        value = [value]
    text = json.dumps(value).encode()
    assert wire._too_deep(text) == (_depth(value) > wire.MAX_NESTING)


def test_nan_with_deep_nesting_is_answered_not_raised():
    """Issue reproducer: "NaN" in a string plus 500 levels used to make the non-finite check recurse."""
    line = b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"note":"NaN","x":' + b"[" * 500 + b"]" * 500 + b"}}"
    message = wire.decode(line)
    assert isinstance(message, wire.Request) and message.id == 2


def test_deeply_nested_id_is_described_not_repred():
    """Hostile input: an id nested 500 levels is -32600 with a message that describes it, not repr()."""
    line = b'{"jsonrpc":"2.0","id":' + b"[" * 500 + b"]" * 500 + b',"method":"x"}'
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(line)
    assert info.value.code == INVALID_REQUEST and info.value.request_id is None
    assert info.value.message == "Invalid id: an array of 1 item; an id must be an integer, a string or null"


# -- valid JSON that Python cannot carry -----------------------------------------------------------
@pytest.mark.parametrize(("fragment", "field", "words"), [
    (b'[{"type":"text","text":"hi","_meta":{"x":1e400}}]', "prompt[0]._meta.x", "1e400 overflows to infinity"),
    (b'[{"type":"text","text":"hi","_meta":{"x":-1E+999}}]', "prompt[0]._meta.x", "overflows to infinity"),
    (b'[{"type":"text","text":"hi","_meta":{"odd key":[0,' + b"9" * 5000 + b"]}}]", 'prompt[0]._meta["odd key"][1]',
     "an integer of 5000 digits"),
])
def test_unrepresentable_number_in_params_names_the_field(fragment, field, words):
    """Issue defect 3 / strict JSON: 1e400 and over-long integers are valid JSON: -32602, id echoed, data.field."""
    line = b'{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"sessionId":"s","prompt":' + fragment + b"}}"
    with pytest.raises(wire.UnrepresentableNumber) as info:
        wire.decode(line)
    error = info.value
    assert error.code == INVALID_PARAMS and error.source.id == "p-1"
    assert error.data == {"field": field}
    assert words in error.message and error.message.startswith("session/prompt: field ")


def test_integer_under_the_digit_limit_is_exact():
    """Strict JSON in: integers are exact up to Python's digit limit (an id of 4,000 digits is echoed)."""
    digits = "7" * 4000
    message = wire.decode(b'{"jsonrpc":"2.0","id":' + digits.encode() + b',"method":"x"}')
    assert message.id == int(digits)
    assert json.loads(wire.encode_result(message.id, None))["id"] == int(digits)


def test_over_long_integer_id_is_an_invalid_request():
    """Hostile input: an id over the digit limit cannot be echoed: -32600, id null, described."""
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"x"}')
    assert info.value.request_id is None and "an integer of 5000 digits" in info.value.message


def test_unrepresentable_number_in_a_notification_is_refused_with_its_source():
    """The endpoint drops such a notification: the exception says it came from one."""
    with pytest.raises(wire.UnrepresentableNumber) as info:
        wire.decode(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","_meta":{"t":1e999}}}')
    assert isinstance(info.value.source, wire.Notification)


def test_unrepresentable_number_in_a_response_becomes_an_error_for_its_waiter():
    """A response whose result holds 1e400 reaches the waiting agent code as an error naming where."""
    message = wire.decode(b'{"jsonrpc":"2.0","id":4,"result":{"content":[1e400]}}')
    assert isinstance(message, wire.Response) and message.result is None
    assert message.error["code"] == INVALID_PARAMS and "result.content[0]" in message.error["message"]


def test_unrepresentable_number_in_an_unread_field_is_ignored():
    """Unknown fields are ignored, whatever they hold."""
    message = wire.decode(b'{"jsonrpc":"2.0","id":4,"method":"x","params":{},"extra":1e400}')
    assert isinstance(message, wire.Request) and message.params == {}


def test_path_of_an_unrepresentable_number_is_bounded_at_any_depth():
    """The walk is iterative and the path it renders is bounded, even 500 levels down."""
    line = envelope(b'{"a":' * 500 + b"1e400" + b"}" * 500)
    with pytest.raises(wire.UnrepresentableNumber) as info:
        wire.decode(line)
    field = info.value.data["field"]
    assert field.startswith("x.a.a") and "…" in field and len(field) < 200


def test_decode_value_is_strict_and_bounded():
    """decode_value (a cursor, say) raises ParseError for every kind of bad input, nothing else."""
    assert wire.decode_value(b'[1.5,"s"]') == [1.5, "s"]
    for bad in (b"[1e400]", b"[" + b"1" * 5000 + b"]", b"[" * 5000 + b"]" * 5000, b"[NaN]", b"\xff", b"01"):
        with pytest.raises(ParseError):
            wire.decode_value(bad)


@pytest.mark.parametrize(("value", "text"), [
    (None, "null"), (True, "true"), (3, "an integer"), (1.5, "the number 1.5"), ([1, 2], "an array of 2 items"),
    ({"a": 1}, "an object of 1 member"), ("x" * 500, '"' + "x" * 39 + "…" + '"'),
])
def test_describe_is_short_whatever_the_value(value, text):
    assert text in wire.describe(value) and len(wire.describe(value)) < 80


# -- property: nothing but RpcError ever leaves decode ---------------------------------------------
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=8),
)


def _nest(depth: int, inner: str) -> str:
    return "[" * depth + inner + "]" * depth


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """Lines near the edges: deep nesting, NaN/Infinity, huge and non-finite numbers, surrogates, junk."""
    pieces = [
        json.dumps(draw(_SCALARS)),
        _nest(draw(st.integers(0, 2_500)), draw(st.sampled_from(["", "1", '"NaN"', "NaN", "Infinity", "1e400", "-0"]))),
        draw(st.sampled_from(["NaN", "-Infinity", "1e400", "-1e400", "9" * 4301, "9" * 400, "01", "1.", "-", '"\\ud800"',
                              '"\\udc00x"', '"\t"', "1e-400", "[1,]", "{}", "null"])),
    ]
    fragment = ",".join(draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=3)))
    request_id = draw(st.sampled_from(["1", '"a"', "null", "true", "1.5", "[]", '{"a":[[[]]]}', _nest(1_500, ""), _nest(500, ""), "9" * 5000]))
    line = ('{"jsonrpc":"2.0","id":' + request_id + ',"method":"m","params":[' + fragment + "]}").encode("utf-8", "surrogatepass")
    junk = draw(st.binary(max_size=6))
    where = draw(st.integers(0, len(line)))
    return draw(st.sampled_from([line, line[:where] + junk + line[where:], b"\xed\xa0\x80" + line, junk]))


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_lines())
def test_decode_raises_only_rpc_errors_for_any_line(line):
    """Hostile input: decode returns a message or raises an RpcError; never RecursionError, ValueError..."""
    try:
        wire.decode(line)
    except RpcError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)
        assert len(exc.message) < 400 and "\n" not in exc.message


def test_recursion_limit_is_untouched_by_decoding():
    before = sys.getrecursionlimit()
    with pytest.raises(ParseError):
        wire.decode(envelope(b"[" * 10_000))
    assert sys.getrecursionlimit() == before


# -- the nesting limit: its exact boundary, and a pre-check linear in the line --------------------
DOCUMENTED_DEPTH = 512  # docs/ERRORS.md: "nesting deeper than 512 levels" is a parse error


def test_exactly_512_levels_decode_even_with_more_brackets_than_that():
    """Input bounds: a value nested exactly 512 deep is accepted, also when the line
    holds more opening brackets than that (the cheap pre-check cannot decide); 513 is refused."""
    inner = "[" * (DOCUMENTED_DEPTH - 1) + "]" * (DOCUMENTED_DEPTH - 1)
    text = '{"deep": ' + inner + ', "flat": []}'  # depth 512, 513 opening brackets
    assert wire.decode_value(text.encode())["flat"] == []
    deeper = '{"deep": [' + inner + '], "flat": []}'
    with pytest.raises(ParseError, match="nesting deeper than"):
        wire.decode_value(deeper.encode())


def test_decode_value_takes_long_text_as_well_as_bytes():
    """decode_value accepts str (stored rows) past the pre-check's length, deep or not."""
    flat = "[" + "1," * 600 + "1]"
    assert wire.decode_value(flat) == [1] * 601
    with pytest.raises(ParseError, match="nesting deeper than"):
        wire.decode_value("[" * 600 + "]" * 600)


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


# -- field paths in error messages: bounded, readable ---------------------------------------------
def _chain(keys: list[object]) -> object:
    link = None
    for key in keys:
        link = (key, link)
    return link


def test_decode_value_names_the_field_and_what_the_number_is():
    with pytest.raises(ParseError) as info:
        wire.decode_value(b'{"a": 1e400}')
    assert info.value.message == "Parse error: a is a number too large for a double (1e400 overflows to infinity)"
    with pytest.raises(ParseError) as info:
        wire.decode_value(b"1e400")
    assert info.value.message.startswith("Parse error: the value is a number too large for a double")


def test_a_long_field_path_keeps_its_first_and_last_twelve_segments():
    names = [f"k{i}" for i in range(30)]
    assert wire.render_path(_chain(names)) == ".".join(names[:12]) + "….k18." + ".".join(names[19:])
    assert wire.render_path(_chain(names[:24])) == ".".join(names[:24])


def test_a_member_name_over_64_characters_is_quoted_and_cut_in_a_path():
    assert wire.render_path(_chain(["a" * 64])) == "a" * 64
    long_name = "b" * 65
    assert wire.render_path(_chain(["x", long_name, 3])) == "x[" + json.dumps("b" * 39 + "…", ensure_ascii=False) + "][3]"


def test_a_non_ascii_member_name_stays_readable_in_a_path():
    """Paths are for people: a non-ASCII name is quoted as it is, not as \\u escapes."""
    assert wire.render_path(_chain(["prompt", 0, "café"])) == 'prompt[0]["café"]'


# -- ids at their limits --------------------------------------------------------------------------
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


# -- stored history is strict JSON too ------------------------------------------------------------
def test_stored_history_refuses_non_finite_numbers():
    """encode_json writes strict JSON: NaN would make a stored row unreadable by decode_value."""
    with pytest.raises((OverflowError, ValueError)):
        wire.encode_json({"x": float("nan")})
