"""The line reader: framing, the size bound and the lines it holds unread."""

from __future__ import annotations

import os
from collections.abc import Iterator

import gevent
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.rpc.transport import Line, LineFramer, LineReader, read_chunks

MAX = 1024

line_bodies = st.lists(
    st.one_of(st.binary(max_size=40), st.binary(min_size=MAX - 2, max_size=MAX + 2), st.binary(min_size=3 * MAX, max_size=70_000))
    .map(lambda b: b.replace(b"\n", b" ")),
    max_size=12,
)


def expected(bodies: list[bytes], final: bytes) -> list[Line]:
    out = [Line(b"", too_long=True) if len(b) > MAX else Line(b + b"\n") for b in bodies]
    if final:
        out.append(Line(b"", too_long=True) if len(final) > MAX else Line(final))
    return out


def read_all(chunks: list[bytes]) -> list[Line]:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def feed() -> None:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[gevent.os.nb_write(write_end, view):]
        finally:
            os.close(write_end)

    writer = gevent.spawn(feed)
    reader = LineReader(read_end, MAX)
    try:
        return list(reader.lines())
    finally:
        writer.join()
        reader.close()
        os.close(read_end)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bodies=line_bodies, final=st.binary(max_size=MAX + 5).map(lambda b: b.replace(b"\n", b" ")), cuts=st.lists(st.integers(1, 100_000), max_size=8))
def test_lines_framed_exactly_whatever_the_write_boundaries(bodies, final, cuts):
    """Every line comes out once and whole; a line over the limit (newline excluded) is one
    too_long marker and never held whole; a last line without a newline at EOF still counts."""
    stream = b"".join(b + b"\n" for b in bodies) + final
    chunks, at = [], 0
    for cut in sorted(cuts):
        if at < cut < len(stream):
            chunks.append(stream[at:cut])
            at = cut
    chunks.append(stream[at:])
    assert read_all(chunks) == expected(bodies, final)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(st.one_of(st.binary(max_size=40), st.binary(min_size=MAX - 2, max_size=MAX + 40)).map(lambda b: b.replace(b"\n", b" ")),
                      min_size=1, max_size=40),
       taken=st.integers(0, 40), partial=st.binary(max_size=30).map(lambda b: b.replace(b"\n", b" ")))
def test_unread_lines_are_exactly_the_complete_lines_not_handed_out(bodies, taken, partial):
    """S13 (unread requests): what the reader read but did not hand out is given back in order,
    complete lines only, too-long ones as markers; nothing is handed out twice."""
    taken = min(taken, len(bodies))
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(b + b"\n" for b in bodies) + partial)  # < 64 KiB: one read takes it all
    reader = LineReader(read_end, MAX)
    try:
        lines = reader.lines()
        handed = [next(lines) for _ in range(taken)]
        if taken:
            assert handed + reader.unread_lines() == expected(bodies, b"")
        else:
            assert reader.unread_lines() == []  # nothing read yet: all of it is still the kernel's
        assert reader.unread_lines() == []
    finally:
        reader.close()
        os.close(read_end)
        os.close(write_end)


def test_a_line_far_over_the_limit_is_skipped_with_bounded_memory():
    """Errors:line_too_long: a 20 MB line is reported once and the next line is still read."""
    big = b"x" * (20 << 20)
    assert read_all([big[: 5 << 20], big[5 << 20:] + b"\n{}\n"]) == [Line(b"", too_long=True), Line(b"{}\n")]


def reference_lines(stream: bytes, limit: int, skip_long_lines: bool) -> list[Line]:
    """The framer's contract, by plain splitting: with `skip_long_lines=False` the first line
    over the limit is the last line reported."""
    pieces = stream.split(b"\n")
    bodies = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    out: list[Line] = []
    for body in bodies:
        if len(body.rstrip(b"\n")) > limit:
            out.append(Line(b"", too_long=True))
            if not skip_long_lines:
                break
        else:
            out.append(Line(body))
    return out


@settings(deadline=None, max_examples=300)
@given(stream=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"x" * 9, b"\r"]), max_size=40).map(b"".join),
       limit=st.integers(1, 12), cuts=st.lists(st.integers(1, 200), max_size=10), skip_long_lines=st.booleans())
def test_the_framer_over_any_chunking_is_a_plain_split_in_both_modes(stream, limit, cuts, skip_long_lines):
    """However the bytes arrive, the framer hands out what splitting the whole stream gives: a
    line over the limit (newline excluded) is one too_long marker, and when long lines are not
    skipped it ends the stream wherever the chunk boundaries fall."""
    chunks, at = [], 0
    for cut in sorted(set(cuts)):
        if at < cut < len(stream):
            chunks.append(stream[at:cut])
            at = cut
    chunks.append(stream[at:])
    source = iter(chunks)
    framer = LineFramer(lambda: next(source, b""), limit, skip_long_lines=skip_long_lines)
    assert list(framer.lines()) == reference_lines(stream, limit, skip_long_lines)


# -- LineReader on a real pipe: the exact limit, unread lines, reads to EOF -----------------------
def test_a_line_of_exactly_the_limit_is_kept_and_one_byte_more_is_too_long(os_pipe):
    read_end, write_end = os_pipe
    os.write(write_end, b"a" * 16 + b"\n" + b"b" * 17 + b"\n" + b"c" * 5 + b"\n" + b"d" * 16)
    os.close(write_end)
    reader = LineReader(read_end, 16)
    lines = list(reader.lines())
    reader.close()
    assert lines == [Line(b"a" * 16 + b"\n"), Line(b"", too_long=True), Line(b"c" * 5 + b"\n"), Line(b"d" * 16)]


def test_unread_lines_are_the_complete_lines_left_in_the_buffer(os_pipe):
    read_end, write_end = os_pipe
    os.write(write_end, b"one\n" + b"x" * 20 + b"\nthree\npart")
    reader = LineReader(read_end, 16)
    lines = reader.lines()
    assert next(lines) == Line(b"one\n")
    assert reader.unread_lines() == [Line(b"", too_long=True), Line(b"three\n")]
    assert reader.unread_lines() == []
    reader.close()
    reader.close()


def test_read_chunks_reads_to_eof(os_pipe):
    read_end, write_end = os_pipe
    os.write(write_end, b"abc")
    os.close(write_end)
    assert b"".join(read_chunks(read_end, 2)) == b"abc"


def test_an_empty_line_left_in_the_buffer_is_still_an_unread_line(os_pipe):
    read_end, write_end = os_pipe
    os.write(write_end, b"a\n\npart")
    reader = LineReader(read_end, 16)
    lines = reader.lines()
    assert next(lines) == Line(b"a\n")
    assert reader.unread_lines() == [Line(b"\n")]
    reader.close()


def test_a_line_over_the_limit_that_spans_two_reads_is_too_long(os_pipe):
    """The limit counts the part read earlier too: 10 bytes, then 10 more and the newline."""
    read_end, write_end = os_pipe
    reader = LineReader(read_end, 16)
    got: list[Line] = []

    def read_all() -> None:
        got.extend(reader.lines())

    consumer = gevent.spawn(read_all)
    for part in (b"a" * 10, b"b" * 10 + b"\n", b"c" * 8, b"d" * 8 + b"\n"):
        os.write(write_end, part)
        gevent.sleep(0.05)  # the reader takes each write as a chunk of its own
    os.close(write_end)
    consumer.join(10)
    reader.close()
    assert got == [Line(b"", too_long=True), Line(b"c" * 8 + b"d" * 8 + b"\n")]
