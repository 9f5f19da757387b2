"""Property test of chat's escape boundary (acp_green/tools/rig/chat_text.py): no control character
an agent sends but newline and tab reaches the terminal, and printable text is shown as it is."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig.chat_text import harmless

_ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_no_control_character_but_newline_and_tab_survives(text: str) -> None:
    shown = harmless(text)
    assert not _ACTED_ON.search(shown), repr(shown)
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc",))))
def test_text_without_control_characters_is_shown_unchanged(text: str) -> None:
    assert harmless(text) == text
