"""transport.py behaviours that mutation testing (scripts/mutation.sh) found no test asserting:
the outbound queue's thresholds (high water, low water, hard limit, twice the hard limit), how
producers are held and released, the final flush, a failed output, and a line of exactly the
size limit. Real pipes, in this process.
"""

from __future__ import annotations

import os

import gevent
import gevent.os
import pytest
from gevent.event import Event

from acp_green.transport import Line, LineReader, OutputLimits, Outbound, read_chunks

LIMITS = OutputLimits(high_water=100, low_water=40, hard_limit=1000, flush_stall_timeout=5.0, flush_total_timeout=10.0)


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        try:
            os.close(fd)
        except OSError:
            pass


def _read_exactly(fd: int, size: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    while len(data) < size:
        data += gevent.os.nb_read(fd, size - len(data))
    return data


def test_S10_thresholds_are_strictly_above_their_limits(pipe):
    """S10: over_high_water above high water, over_hard_limit above the hard limit, and the input
    pause (over_input_limit) only above twice the hard limit; each exactly at its limit is not over."""
    read_end, write_end = pipe
    failures: list[BaseException] = []
    out = Outbound(write_end, LIMITS, failures.append)
    # The writer runs only when this greenlet yields, and nothing below yields until the read.
    out.put(b"x" * 100)
    assert (out.queued_bytes, out.over_high_water, out.over_hard_limit, out.over_input_limit) == (100, False, False, False)
    out.put(b"x")
    assert out.over_high_water and not out.over_hard_limit
    out.put(b"x" * 899)
    assert out.queued_bytes == 1000 and not out.over_hard_limit
    out.put(b"x")
    assert out.over_hard_limit and not out.over_input_limit
    out.put(b"x" * 999)
    assert out.queued_bytes == 2000 and not out.over_input_limit
    out.put(b"x")
    assert out.over_input_limit
    # The reader drains; everything arrives in order and the counts go back to zero.
    assert _read_exactly(read_end, 2001) == b"x" * 2001
    assert out.close() is True
    assert out.queued_bytes == 0 and failures == []


def test_a_producer_over_high_water_waits_until_the_backlog_is_below_low_water(pipe):
    read_end, write_end = pipe
    os.set_blocking(read_end, False)
    out = Outbound(write_end, LIMITS, lambda exc: None)
    resumed: list[int] = []

    def producer() -> None:
        out.put(b"y" * 150)
        out.wait_below_high_water()
        resumed.append(out.queued_bytes)

    waiting = gevent.spawn(producer)
    gevent.sleep(0)
    assert out.queued_bytes == 150 or resumed, "the writer may have drained it all already"
    waiting.join(10)
    assert resumed and resumed[0] <= LIMITS.low_water
    assert _read_exactly(read_end, 150) == b"y" * 150
    out.close()


def test_a_held_producer_is_released_by_its_cancel_event_or_by_release_producers(pipe):
    _read_end, write_end = pipe
    # A pipe nobody reads: fill it, so the backlog stays over high water.
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"z" * 65536)
    except BlockingIOError:
        pass
    stalls = OutputLimits(high_water=100, low_water=40, hard_limit=1000, flush_stall_timeout=0.1, flush_total_timeout=0.2)
    out = Outbound(write_end, stalls, lambda exc: None)
    out.put(b"w" * 500)
    assert out.over_high_water
    cancel = Event()
    first = gevent.spawn(out.wait_below_high_water, cancel)
    second = gevent.spawn(out.wait_below_high_water)
    gevent.sleep(0.05)
    assert not first.dead and not second.dead
    cancel.set()
    first.join(10)
    assert first.dead and not second.dead
    out.release_producers()
    second.join(10)
    assert second.dead
    out.wait_below_high_water()  # once released, never waits again
    assert out.close() is False, "nobody reads: the final flush gives up after its stall bound"


def test_a_failed_output_reports_once_drops_the_backlog_and_close_returns_at_once(pipe):
    read_end, write_end = pipe
    os.close(read_end)
    failures: list[BaseException] = []
    out = Outbound(write_end, LIMITS, failures.append)
    out.put(b"lost\n")
    gevent.sleep(0.05)
    assert out.failed and out.queued_bytes == 0
    assert len(failures) == 1 and isinstance(failures[0], OSError)
    out.put(b"more")
    assert out.queued_bytes == 0, "nothing is queued after the output failed"
    assert out.close() is False


def test_close_flushes_what_was_queued_then_refuses_more(pipe):
    read_end, write_end = pipe
    out = Outbound(write_end, LIMITS, lambda exc: None)
    out.put(b"a\n")
    out.put(b"b\n")
    assert out.close() is True
    out.put(b"c\n")
    assert out.queued_bytes == 0
    os.close(write_end)
    assert os.read(read_end, 100) == b"a\nb\n"


def test_a_line_of_exactly_the_limit_is_kept_and_one_byte_more_is_too_long(pipe):
    read_end, write_end = pipe
    os.write(write_end, b"a" * 16 + b"\n" + b"b" * 17 + b"\n" + b"c" * 5 + b"\n" + b"d" * 16)
    os.close(write_end)
    reader = LineReader(read_end, 16)
    lines = list(reader.lines())
    reader.close()
    assert lines == [Line(b"a" * 16 + b"\n"), Line(b"", too_long=True), Line(b"c" * 5 + b"\n"), Line(b"d" * 16)]


def test_unread_lines_are_the_complete_lines_left_in_the_buffer(pipe):
    read_end, write_end = pipe
    os.write(write_end, b"one\n" + b"x" * 20 + b"\nthree\npart")
    reader = LineReader(read_end, 16)
    lines = reader.lines()
    assert next(lines) == Line(b"one\n")
    assert reader.unread_lines() == [Line(b"", too_long=True), Line(b"three\n")]
    assert reader.unread_lines() == []
    reader.close()
    reader.close()


def test_read_chunks_reads_to_eof(pipe):
    read_end, write_end = pipe
    os.write(write_end, b"abc")
    os.close(write_end)
    assert b"".join(read_chunks(read_end, 2)) == b"abc"


def test_an_empty_line_left_in_the_buffer_is_still_an_unread_line(pipe):
    read_end, write_end = pipe
    os.write(write_end, b"a\n\npart")
    reader = LineReader(read_end, 16)
    lines = reader.lines()
    assert next(lines) == Line(b"a\n")
    assert reader.unread_lines() == [Line(b"\n")]
    reader.close()


def test_a_line_over_the_limit_that_spans_two_reads_is_too_long(pipe):
    """The limit counts the part read earlier too: 10 bytes, then 10 more and the newline."""
    read_end, write_end = pipe
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
