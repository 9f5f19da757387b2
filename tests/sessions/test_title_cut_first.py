"""Titles are cut first, then cleaned: nothing past the first TITLE_SCAN characters of a text is
read, so a title from a 52-million-character text costs what a short one does (the whole text
used to be cleaned first: 13.4 s of the receive loop for `session/set_title`).

What shows it without a clock: text past TITLE_SCAN never changes the title taken (it is not
read), for `session/set_title` (`normalized_title`) and for the title a first prompt gives
(`title_from_prompt`). The cut itself keeps a character with its combining marks.
"""

from __future__ import annotations

import time
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.protocol.session_admin import SET_TITLE_LIMIT, normalized_title
from acp_green.protocol.updates import TITLE_LIMIT, TITLE_SCAN, cut_title, title_from_prompt

JUNK = st.sampled_from([" ", "\t", "\n", "\x00", "\x1b", "\x85", "\u3000", "\u2028"])
WORDS = st.lists(st.text(st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12),
                 min_size=0, max_size=12)
ANYTHING = st.text(st.characters(exclude_categories=()), max_size=300)


@st.composite
def sparse_texts(draw: st.DrawFn) -> str:
    """At least TITLE_SCAN characters, mostly whitespace and control characters, with a few words."""
    junk = draw(JUNK)
    words = draw(WORDS)
    pieces = [junk * draw(st.integers(0, 300)) + word for word in words]
    text = "".join(pieces)
    return text + junk * (TITLE_SCAN - len(text) + draw(st.integers(0, 50))) if len(text) < TITLE_SCAN else text


@settings(max_examples=300, deadline=None)
@given(sparse_texts(), ANYTHING)
def test_nothing_past_the_scan_changes_a_set_title(text: str, tail: str) -> None:
    """Item 2: `session/set_title`'s title is cut first: whatever follows the first TITLE_SCAN
    characters (here after a head of mostly whitespace, where cleaning first would reach it)
    leaves the stored title as it is."""
    head = text[:TITLE_SCAN]
    stored = normalized_title(head + "x" + tail)
    assert stored == normalized_title(head + "y")
    assert len(stored) <= SET_TITLE_LIMIT


@settings(max_examples=300, deadline=None)
@given(sparse_texts(), ANYTHING)
def test_nothing_past_the_scan_changes_a_prompts_title(text: str, tail: str) -> None:
    """The same for the title a first prompt gives (its first non-blank line)."""
    head = text[:TITLE_SCAN]
    title = title_from_prompt(head + "x" + tail)
    assert title == title_from_prompt(head + "y")
    assert title is None or len(title) <= TITLE_LIMIT


def test_a_title_whose_words_lie_past_the_scan_is_not_read():
    """The cases by hand: blank lines (or spaces) up to the scan, then words, give no title (a
    set_title of it is refused as empty); a word cut by the scan ends in "…"."""
    assert normalized_title(" " * TITLE_SCAN + "late words") == ""
    assert title_from_prompt("\n" * TITLE_SCAN + "late words") is None
    assert normalized_title(" " * (TITLE_SCAN - 3) + "abcdef") == "abc…"
    assert title_from_prompt("\n" * (TITLE_SCAN - 3) + "abcdef") == "abc…"
    assert title_from_prompt("\n" * (TITLE_SCAN - 7) + "abcdef\nmore") == "abcdef"


def test_a_cut_keeps_a_character_with_its_marks():
    """The cut lands on a character boundary as a reader sees one: a base letter is never kept
    without the combining marks that follow it, nor half of a joined emoji."""
    accented = "e\u0301"  # é as e + COMBINING ACUTE ACCENT
    text = "x" * (SET_TITLE_LIMIT - 2) + accented + "tail"
    stored = normalized_title(text)
    assert stored == "x" * (SET_TITLE_LIMIT - 2) + "…", stored
    assert not unicodedata.category(stored[-2])[0] == "M"
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    cut = cut_title("y" * (TITLE_LIMIT - 3) + family + "z", TITLE_LIMIT)
    assert cut == "y" * (TITLE_LIMIT - 3) + "…", cut


def test_a_52_million_character_title_over_the_protocol(unit):
    """`session/set_title` with 52 million characters is answered with the cut title (the figure:
    how long normalizing it takes, printed; it was 13.4 s when the whole text was cleaned first)."""
    connection = unit()
    connection.initialize()
    session_id = connection.new_session()
    title = "a" * 52_000_000
    started = time.perf_counter()
    stored = normalized_title(title)
    took = time.perf_counter() - started
    answer = connection.call("session/set_title", {"sessionId": session_id, "title": title})
    assert answer == {"title": stored} and stored == "a" * (SET_TITLE_LIMIT - 1) + "…"
    print(f"normalizing a 52M-character title took {took * 1000:.3f} ms")
