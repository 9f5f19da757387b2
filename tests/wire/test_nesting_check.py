"""The nesting check before decoding counts exactly the brackets outside strings, in C."""

from __future__ import annotations

import json
from array import array
from itertools import accumulate
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire

# Strings full of what could fool a string scanner: brackets, quotes, backslash runs, escapes.
TRICKY_TEXT = st.text(alphabet=st.sampled_from(['[', ']', '{', '}', '"', '\\', 'a', 'é', '😀', '\n']), max_size=8)
VALUES = st.recursive(
    TRICKY_TEXT | st.integers() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY_TEXT, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(deadline=None, max_examples=400)
@given(VALUES, st.booleans())
def test_the_bracket_depth_outside_strings_is_the_nesting_depth(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    steps = array("b", wire._brackets_outside_strings(text).translate(wire._BRACKET_STEP))
    assert max(accumulate(steps), default=0) == _depth(value), text


def test_escaped_quotes_and_backslash_runs_do_not_hide_real_nesting() -> None:
    """Strings ending in an even run of backslashes, or holding escaped quotes and closing
    brackets, cannot hide 600 real levels; the same brackets inside one string count nothing."""
    trick = json.dumps(["\\\\", "\\\"]]]]", "]" * 700])
    deep = ("[" * 600 + "]" * 600).encode()
    assert wire._too_deep(trick.encode()[:-1] + b"," + deep + b"]")
    assert not wire._too_deep(json.dumps(["[" * 700, "\\\"" + "{" * 700]).encode())
