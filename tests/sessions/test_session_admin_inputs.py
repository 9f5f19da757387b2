"""Property tests at the input boundaries of the unstable session methods (protocol/session_admin.py):
titles (empty, huge, control characters, lone surrogates) and session ids of any text."""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.errors import UnknownSession
from acp_green.protocol.session_admin import SET_TITLE_LIMIT, normalized_title

ANY_CHARACTER = st.characters(exclude_categories=())  # control characters and lone surrogates too
TITLES = st.one_of(
    st.text(ANY_CHARACTER, max_size=400),
    st.text(st.sampled_from(" \t\n\r\x00\x1b\x7f\x85\u2028a"), max_size=50),
    st.builds(lambda c, n: c * n, ANY_CHARACTER, st.integers(SET_TITLE_LIMIT - 2, 5000)),
)
FIXTURE_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(max_examples=500, deadline=None)
@given(TITLES)
def test_a_normalized_title_is_one_bounded_line_and_stable(title):
    """No control character, no whitespace but single inner spaces, at most SET_TITLE_LIMIT
    characters, empty only when the title held nothing else, and normalizing twice changes nothing."""
    stored = normalized_title(title)
    assert not any(unicodedata.category(c) == "Cc" for c in stored)
    assert stored == stored.strip() and "  " not in stored
    assert not any(c.isspace() and c != " " for c in stored)
    assert len(stored) <= SET_TITLE_LIMIT
    assert (stored == "") == all(c.isspace() or unicodedata.category(c) == "Cc" for c in title)
    assert normalized_title(stored) == stored


def test_a_title_is_cut_only_past_the_limit():
    """Exactly SET_TITLE_LIMIT characters are kept; one more is cut to the limit, "…" last."""
    assert normalized_title("x" * SET_TITLE_LIMIT) == "x" * SET_TITLE_LIMIT
    assert normalized_title("x" * (SET_TITLE_LIMIT + 1)) == "x" * (SET_TITLE_LIMIT - 1) + "…"


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=SET_TITLE_LIMIT))
def test_a_plain_title_is_kept_as_it_is(title):
    """A title of printable characters without spaces, within the limit, is stored unchanged."""
    assert normalized_title(title) == title


def test_set_title_answers_the_stored_title_or_refuses_an_empty_one(unit):
    """Over the protocol: any title is stored as normalized and listed so, or refused -32602
    (field `title`) when nothing is left of it; the previous title stays then."""
    connection = unit()
    connection.initialize()
    sid = connection.new_session()
    current: list[str | None] = [None]

    @FIXTURE_SETTINGS
    @given(TITLES)
    def check(title):
        request = connection.request("session/set_title", {"sessionId": sid, "title": title})
        expected = normalized_title(title)
        if expected:
            assert connection.result(request) == {"title": expected}
            current[0] = expected
        else:
            error = connection.error(request)
            assert error["code"] == -32602 and error["data"]["field"] == "title"
        listed = connection.call("session/list", {})["sessions"]
        assert listed[0].get("title") == current[0]

    check()


def test_any_session_id_is_unknown_or_refused_never_an_internal_error(unit):
    """fork, archive, unarchive, set_title, status with a sessionId of any text: unknown_session
    (its id echoed, cut), or -32602 on `sessionId` for a lone surrogate no id may hold."""
    connection = unit()
    connection.initialize()
    known = connection.new_session()

    @FIXTURE_SETTINGS
    @given(st.text(ANY_CHARACTER, max_size=300).filter(lambda s: s != known),
           st.sampled_from(["session/fork", "session/archive", "session/unarchive", "session/set_title", "session/status"]))
    def check(session_id, method):
        error = connection.error(connection.request(method, {"sessionId": session_id, "cwd": "/tmp", "title": "t"}))
        if error["data"].get("reason") == "unknown_session":
            assert error["code"] == UnknownSession.code
            assert len(error["data"]["sessionId"]) <= 256
        else:
            assert error["code"] == -32602 and error["data"]["field"] == "sessionId", error

    check()
    assert [s["sessionId"] for s in connection.call("session/list", {"archived": "include"})["sessions"]] == [known]
