"""wire.py behaviours that mutation testing (scripts/mutation.sh) found no test asserting:
the nesting limit's exact boundary, the bounded field path in error messages, strict JSON
for stored history, and `decode_value` on text.
"""

from __future__ import annotations

import json

import pytest

from acp_green import wire
from acp_green.errors import ParseError


def _chain(keys: list[object]) -> object:
    link = None
    for key in keys:
        link = (key, link)
    return link


DOCUMENTED_DEPTH = 512  # README: "nesting deeper than 512 levels" is a parse error


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


def test_stored_history_refuses_non_finite_numbers():
    """encode_json writes strict JSON: NaN would make a stored row unreadable by decode_value."""
    with pytest.raises((OverflowError, ValueError)):
        wire.encode_json({"x": float("nan")})


def test_a_non_ascii_member_name_stays_readable_in_a_path():
    """Paths are for people: a non-ASCII name is quoted as it is, not as \\u escapes."""
    assert wire.render_path(_chain(["prompt", 0, "café"])) == 'prompt[0]["café"]'
