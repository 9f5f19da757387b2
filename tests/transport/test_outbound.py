"""The unit layer for `transport.Outbound`: the one outbound queue, driven directly on
a pipe the test controls (its size set with F_SETPIPE_SZ, its read end read only when the test
says), with no endpoint and no agent. Byte counting, the high/low water marks (S10), the hard
limit and the input limit, each at its exact byte; held producers and what releases them; a failed
output; and the close/flush rules (S13).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator

import gevent
import gevent.os
import pytest
from gevent.event import Event
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.rpc.transport import Outbound, OutputLimits
from tests.helpers import wait_until

F_SETPIPE_SZ = 1031
PIPE_SIZE = 4096  # the smallest pipe Linux gives: the writer parks after one page


class Pipe:
    """A pipe whose read end only the test reads."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        fcntl.fcntl(self.write_end, F_SETPIPE_SZ, PIPE_SIZE)
        os.set_blocking(self.read_end, False)
        self.received = bytearray()
        self.outbounds: list[Outbound] = []

    def read_some(self, limit: int = PIPE_SIZE) -> int:
        """Read what is in the pipe now, at most `limit` bytes; returns how many."""
        try:
            data = os.read(self.read_end, limit)
        except BlockingIOError:
            return 0
        self.received += data
        return len(data)

    def read_all_until(self, predicate, what: str) -> None:
        """Keep reading (yielding so the writer refills the pipe) until predicate() holds."""
        def step() -> bool:
            self.read_some()
            return bool(predicate())

        wait_until(step, what=what)

    def close(self) -> None:
        """Stop every Outbound on this pipe (its read end closed first: EPIPE ends any flush at
        once), then close the pipe, so no writer outlives it onto a reused descriptor."""
        try:
            os.close(self.read_end)
        except OSError:
            pass
        for outbound in self.outbounds:
            gevent.spawn(outbound.close).join(timeout=30)
        for fd in (self.read_end, self.write_end):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    made = Pipe()
    yield made
    made.close()


def make(pipe: Pipe, **limits: float) -> tuple[Outbound, list[BaseException]]:
    failures: list[BaseException] = []
    outbound = Outbound(pipe.write_end, OutputLimits(**limits), on_failure=failures.append)
    pipe.outbounds.append(outbound)
    return outbound, failures


def finish(outbound: Outbound, pipe: Pipe) -> None:
    """Close the outbound queue while the test reads everything (a well-behaved client)."""
    closing = gevent.spawn(outbound.close)
    pipe.read_all_until(lambda: closing.dead, "the outbound queue to close")
    assert closing.get() is True


# -- byte counting --------------------------------------------------------------------------------
def test_queued_bytes_count_what_was_put_and_drop_to_zero_once_written(pipe):
    """Every byte put is counted until the writer has written it; the wire gets them in order."""
    outbound, failures = make(pipe)
    outbound.put(b"a" * 1000)
    outbound.put(b"b" * 3000)
    assert outbound.queued_bytes == 4000  # put never yields: the writer has not run
    pipe.read_all_until(lambda: outbound.queued_bytes == 0 and len(pipe.received) == 4000, "the queue to drain")
    assert bytes(pipe.received) == b"a" * 1000 + b"b" * 3000
    finish(outbound, pipe)
    assert failures == []


def test_the_on_written_observer_sees_exactly_the_bytes_written_in_order(pipe):
    """An observer (serve --trace) is handed each piece as written: partial writes to a full pipe
    included, the pieces add up to exactly what the wire got, never more."""
    pieces: list[bytes] = []
    outbound = Outbound(pipe.write_end, OutputLimits(), on_failure=lambda exc: None, on_written=pieces.append)
    pipe.outbounds.append(outbound)
    data = [bytes([65 + i % 26]) * (1000 + 37 * i) for i in range(40)]
    for chunk in data:
        outbound.put(chunk)
    wait_until(lambda: pieces, what="the first write")
    assert len(b"".join(pieces)) <= PIPE_SIZE  # the pipe is full: only what it took was observed
    pipe.read_all_until(lambda: len(pipe.received) == sum(map(len, data)), "every byte to be read")
    assert b"".join(pieces) == bytes(pipe.received) == b"".join(data)
    assert len(pieces) > 1
    finish(outbound, pipe)


@settings(deadline=None, max_examples=40)
@given(sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=12),
       high=st.integers(min_value=1, max_value=8000))
def test_thresholds_compare_the_queued_bytes_strictly_S10(sizes, high):
    """S10: over_high_water is queued > high_water, over_hard_limit queued > hard_limit, and the
    input pause over_input_limit queued > twice the hard limit (not at high water)."""
    pipe = Pipe()
    try:
        hard = high * 2
        outbound, _ = make(pipe, high_water=high, low_water=high // 4, hard_limit=hard)
        total = 0
        for size in sizes:
            outbound.put(b"x" * size)  # never yields: nothing is written in between
            total += size
            assert outbound.queued_bytes == total
            assert outbound.over_high_water == (total > high)
            assert outbound.over_hard_limit == (total > hard)
            assert outbound.over_input_limit == (total > 2 * hard)
        finish(outbound, pipe)
        assert len(pipe.received) == total
    finally:
        pipe.close()


# -- high and low water (S10) ---------------------------------------------------------------------
def test_a_producer_over_high_water_waits_until_the_backlog_is_below_low_water_S10(pipe):
    """S10: a producer held at the high-water mark is let go only once the writer drained the
    backlog to the low-water mark, not as soon as it dips under high water."""
    outbound, _ = make(pipe, high_water=16 << 10, low_water=4 << 10)
    outbound.put(b"x" * (32 << 10))
    assert outbound.over_high_water
    released = Event()
    producer = gevent.spawn(lambda: (outbound.wait_below_high_water(), released.set()))
    # Read until the backlog is under high water but still over low water: still held.
    pipe.read_all_until(lambda: outbound.queued_bytes <= (12 << 10), "the backlog to fall under high water")
    assert outbound.queued_bytes > (4 << 10)
    gevent.sleep(0)  # let the producer run if it were released
    assert not released.is_set(), f"released at {outbound.queued_bytes} bytes, above the low-water mark"
    pipe.read_all_until(released.is_set, "the producer to be released")
    assert outbound.queued_bytes <= (4 << 10)
    producer.join()
    finish(outbound, pipe)


def test_a_producer_under_high_water_never_waits_S10(pipe):
    """S10: at or under the high-water mark a producer goes on at once (the mark is exclusive)."""
    outbound, _ = make(pipe, high_water=8 << 10, low_water=2 << 10)
    outbound.put(b"x" * (8 << 10))
    assert not outbound.over_high_water
    producer = gevent.spawn(outbound.wait_below_high_water)
    producer.join(timeout=10)
    assert producer.dead
    finish(outbound, pipe)


def test_a_cancelled_producer_stops_waiting_on_the_backlog(pipe):
    """A producer waiting on the backlog goes on when its cancellation event is set."""
    outbound, _ = make(pipe, high_water=1024, low_water=256)
    outbound.put(b"x" * (64 << 10))
    cancelled = Event()
    producer = gevent.spawn(outbound.wait_below_high_water, cancelled)
    gevent.sleep(0)
    assert not producer.dead
    cancelled.set()
    producer.join(timeout=10)
    assert producer.dead and outbound.over_high_water
    finish(outbound, pipe)


def test_release_producers_lets_every_waiting_producer_go_and_later_ones_pass_S13(pipe):
    """S13: at shutdown no producer waits on the backlog: those waiting go on, later ones never wait."""
    outbound, _ = make(pipe, high_water=1024, low_water=256)
    outbound.put(b"x" * (64 << 10))
    waiting = [gevent.spawn(outbound.wait_below_high_water) for _ in range(3)]
    gevent.sleep(0)
    assert not any(g.dead for g in waiting)
    outbound.release_producers()
    gevent.joinall(waiting, timeout=10)
    assert all(g.dead for g in waiting)
    later = gevent.spawn(outbound.wait_below_high_water)
    later.join(timeout=10)
    assert later.dead
    assert outbound.over_high_water  # released, not drained
    finish(outbound, pipe)


# -- close and flush (S13) -------------------------------------------------------------------------
def test_close_drains_everything_while_the_client_reads_and_then_drops_new_output_S13(pipe):
    """S13: close() flushes the whole backlog to a reading client and returns True; what is put
    after close is dropped, never written."""
    outbound, failures = make(pipe)
    outbound.put(b"y" * (40 << 10))
    finish(outbound, pipe)
    assert len(pipe.received) == 40 << 10
    outbound.put(b"late")
    assert outbound.queued_bytes == 0
    assert pipe.read_some() == 0 and failures == []


def test_close_of_an_empty_queue_returns_at_once_true(pipe):
    outbound, _ = make(pipe, flush_stall_timeout=600, flush_total_timeout=600)
    assert gevent.spawn(outbound.close).get(timeout=10) is True


def test_close_gives_up_after_the_stall_timeout_when_the_client_reads_nothing_S13(pipe):
    """S13: a client that reads nothing cannot hold the flush past flush_stall_timeout: close()
    returns False with bytes still queued."""
    outbound, _ = make(pipe, flush_stall_timeout=0.2, flush_total_timeout=600)
    outbound.put(b"z" * (64 << 10))
    assert gevent.spawn(outbound.close).get(timeout=30) is False
    assert outbound.queued_bytes > 0


def test_a_write_error_fails_the_output_once_and_empties_the_queue(pipe):
    """EPIPE: on_failure is called once with the error, the queue is emptied, producers are freed,
    and later output is dropped."""
    outbound, failures = make(pipe, high_water=1024, low_water=256)
    outbound.put(b"x" * (64 << 10))
    producer = gevent.spawn(outbound.wait_below_high_water)
    gevent.sleep(0)
    os.close(pipe.read_end)
    wait_until(lambda: outbound.failed, what="the write to fail")
    assert len(failures) == 1 and isinstance(failures[0], OSError) and failures[0].errno == errno.EPIPE
    assert outbound.queued_bytes == 0
    producer.join(timeout=10)
    assert producer.dead
    outbound.put(b"after")
    assert outbound.queued_bytes == 0
    assert gevent.spawn(outbound.close).get(timeout=10) is False


# -- each threshold at its exact byte, held producers, a failed output (plain pipes) --------------
LIMITS = OutputLimits(high_water=100, low_water=40, hard_limit=1000, flush_stall_timeout=5.0, flush_total_timeout=10.0)


def _read_exactly(fd: int, size: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    while len(data) < size:
        data += gevent.os.nb_read(fd, size - len(data))
    return data


def test_S10_thresholds_are_strictly_above_their_limits(os_pipe):
    """S10: over_high_water above high water, over_hard_limit above the hard limit, and the input
    pause (over_input_limit) only above twice the hard limit; each exactly at its limit is not over."""
    read_end, write_end = os_pipe
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


def test_a_producer_over_high_water_waits_until_the_backlog_is_below_low_water(os_pipe):
    read_end, write_end = os_pipe
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


def test_a_held_producer_is_released_by_its_cancel_event_or_by_release_producers(os_pipe):
    _read_end, write_end = os_pipe
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


def test_a_failed_output_reports_once_drops_the_backlog_and_close_returns_at_once(os_pipe):
    read_end, write_end = os_pipe
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


def test_close_flushes_what_was_queued_then_refuses_more(os_pipe):
    read_end, write_end = os_pipe
    out = Outbound(write_end, LIMITS, lambda exc: None)
    out.put(b"a\n")
    out.put(b"b\n")
    assert out.close() is True
    out.put(b"c\n")
    assert out.queued_bytes == 0
    os.close(write_end)
    assert os.read(read_end, 100) == b"a\nb\n"
