"""The event-stream parser MCP's HTTP transport reads answers with (MCP over HTTP)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.mcp.sse import SseEvent, SseParser, SseTooLarge


def parse(lines: list[bytes], parser: SseParser | None = None) -> list[SseEvent]:
    parser = parser or SseParser()
    return [event for line in lines if (event := parser.feed_line(line)) is not None]


def test_events_comments_multiline_data_and_line_endings():
    stream = [b"\xef\xbb\xbf: keep-alive\r\n", b"event: message\r\n", b"id: 7\r\n", b'data: {"a":\n', b"data:1}\n", b"\n",
              b"retry: 100\n", b"data\n", b"\r\n", b"event: other\n", b"data: x\n", b"\n", b"data: dropped at the end\n"]
    assert parse(stream) == [SseEvent("message", b'{"a":\n1}', "7"), SseEvent("message", b"", "7"), SseEvent("other", b"x", "7")]


def test_blank_lines_without_data_dispatch_nothing():
    assert parse([b"\n", b"event: lonely\n", b"\n", b": comment\n", b"\n"]) == []


def test_an_event_over_the_bound_raises_and_the_parser_recovers():
    parser = SseParser(max_event_bytes=10)
    parser.feed_line(b"data: 12345\n")
    with pytest.raises(SseTooLarge):
        parser.feed_line(b"data: 67890\n")
    assert parse([b"data: ok\n", b"\n"], parser) == [SseEvent("message", b"ok", None)]


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40)


@settings(deadline=None, max_examples=200)
@given(events=st.lists(st.tuples(st.sampled_from(["", "message", "ping"]), st.lists(_text, min_size=1, max_size=4)), max_size=6),
       endings=st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=1, max_size=5), comments=st.booleans())
def test_what_a_server_writes_is_what_the_parser_reads(events, endings, comments):
    """Property: any events written in the format (data lines, names, either line ending, comments
    between them) come back as written."""
    lines: list[bytes] = []
    n = 0

    def line(text: str) -> None:
        nonlocal n
        lines.append(text.encode("utf-8") + endings[n % len(endings)])
        n += 1

    for name, data_lines in events:
        if comments:
            line(": note")
        if name:
            line(f"event: {name}")
        for data in data_lines:
            line(f"data: {data}")
        line("")
    expected = [SseEvent(name or "message", "\n".join(data).encode("utf-8"), None) for name, data in events]
    assert parse(lines) == expected


@settings(deadline=None, max_examples=100)
@given(pieces=st.lists(st.integers(0, 20), min_size=1, max_size=5), bound=st.integers(0, 60))
def test_an_event_of_exactly_the_bound_is_accepted_and_one_byte_more_refused(pieces, bound):
    """The bound is on the event's data as delivered (its lines joined by `\\n`), so an event of
    exactly `max_event_bytes` bytes passes, like a JSON body of exactly the bound."""
    lines = [b"data: " + b"x" * n + b"\n" for n in pieces]
    size = sum(pieces) + len(pieces) - 1
    parser = SseParser(max_event_bytes=bound)
    if size <= bound:
        assert parse([*lines, b"\n"], parser) == [SseEvent("message", b"\n".join(b"x" * n for n in pieces), None)]
    else:
        with pytest.raises(SseTooLarge):
            parse([*lines, b"\n"], parser)
