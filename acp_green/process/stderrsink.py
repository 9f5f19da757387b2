"""The one writer of fd 2: stderr output that can never stall the agent.

Editors often never read an agent's stderr pipe. Once it is full, one blocking write to fd 2
would stop the whole hub: no input read, no cancel, no exit. During `acp-green serve`
everything that writes stderr — logging, gevent's hub error reports, `warnings`, stray prints
(`sys.stdout` and fd 1 both lead to stderr after `claim_stdio`) — writes into a bounded
in-memory buffer instead, and one real OS thread owns the blocking writes to fd 2. What does
not fit is dropped and counted; a line saying how much was dropped follows once the pipe drains.

O_NONBLOCK is never set on fd 2: its file description is shared with the parent (a terminal,
the editor), and the flag would leak to them.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

import gevent
from gevent.event import Event
from gevent.monkey import get_original

# The real thread, lock and queue even under --monkey-patch, which would turn them into
# greenlet primitives; the sink thread must block in write(2) without blocking the hub.
_start_new_thread = get_original("_thread", "start_new_thread")
_RLock = get_original("_thread", "RLock")
_SimpleQueue = get_original("queue", "SimpleQueue")
_Empty = get_original("queue", "Empty")
_select = get_original("select", "select")

DEFAULT_CAPACITY = 256 << 10
_BATCH_BYTES = 64 << 10


class StderrSink:
    """A bounded buffer in front of a descriptor, written by one OS thread."""

    def __init__(self, fd: int = 2, capacity: int = DEFAULT_CAPACITY) -> None:
        self.fd = fd
        self.capacity = capacity
        # Reentrant: a garbage-collector finalizer may write (an "Exception ignored" report)
        # while this thread is already inside write().
        self._lock = _RLock()
        self._queue: Any = _SimpleQueue()
        self._buffered = 0
        self._dropped_writes = 0
        self._dropped_bytes = 0
        self.dropped_writes_total = 0
        self.broken = False  # fd 2 failed (closed, EPIPE): everything is discarded from now on
        self._hub = gevent.get_hub()
        self._drain_waiters: list[Event] = []
        _start_new_thread(self._thread_main, ())

    # -- any thread, any greenlet, the hub ---------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue bytes for the descriptor; never blocks. Dropped (and counted) when they do not fit."""
        if not data:
            return
        with self._lock:
            if self.broken:
                return
            if self._buffered + len(data) > self.capacity:
                self._dropped_writes += 1
                self._dropped_bytes += len(data)
                self.dropped_writes_total += 1
                return
            self._buffered += len(data)
            self._queue.put(data)

    def flush(self, timeout: float) -> bool:
        """Wait cooperatively, at most `timeout` seconds, until everything queued is written.

        False when the reader of the descriptor did not take it in time: nothing here may
        wait on a reader that never reads.
        """
        drained = Event()
        with self._lock:
            if self._buffered == 0 or self.broken:
                return not self.broken
            self._drain_waiters.append(drained)
        return bool(drained.wait(timeout))

    # -- the sink thread ---------------------------------------------------------------------
    def _thread_main(self) -> None:
        queue = self._queue
        while True:
            batch = [queue.get()]
            size = len(batch[0])
            while size < _BATCH_BYTES:
                try:
                    data = queue.get_nowait()
                except _Empty:
                    break
                batch.append(data)
                size += len(data)
            self._write_all(b"".join(batch))
            with self._lock:
                self._buffered = 0 if self.broken else self._buffered - size
                dropped = (self._dropped_writes, self._dropped_bytes)
                self._dropped_writes = self._dropped_bytes = 0
            if dropped[0]:
                self._write_all(
                    f"acp-green: stderr was not being read: {dropped[0]} writes ({dropped[1]} bytes) were dropped\n".encode()
                )
            self._notify_if_drained()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.broken:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                # fd 2 shares a non-blocking description with the wire (the client ran 2>&1):
                # wait for room here, in this thread, never in the hub.
                _select([], [self.fd], [], 1.0)
                continue
            except InterruptedError:
                continue
            except OSError:  # closed or nobody will ever read it: discard from now on
                with self._lock:
                    self.broken = True
                    self._buffered = 0
                return
            view = view[written:]

    def _notify_if_drained(self) -> None:
        with self._lock:
            if self._buffered > 0 and not self.broken:
                return
            waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            self._hub.loop.run_callback_threadsafe(waiter.set)


class SinkTextStream(io.TextIOBase):
    """A text stream over a sink: what sys.stderr, sys.stdout and the hub's exception_stream become."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, sink: StderrSink, name: str) -> None:
        self._sink = sink
        self._name = name
        self.buffer = SinkBinaryStream(sink)

    @property
    def name(self) -> str:
        return self._name

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._sink.write(text.encode("utf-8", "backslashreplace"))
        return len(text)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        """Nothing to do: the sink thread writes as soon as it can; flushing must never wait."""

    def fileno(self) -> int:
        return self._sink.fd

    def isatty(self) -> bool:
        try:
            return os.isatty(self._sink.fd)
        except OSError:
            return False


class SinkBinaryStream(io.RawIOBase):
    """The `.buffer` of a SinkTextStream, for code that writes bytes to sys.stdout.buffer."""

    def __init__(self, sink: StderrSink) -> None:
        self._sink = sink

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._sink.write(chunk)
        return len(chunk)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sink.fd


def install(capacity: int = DEFAULT_CAPACITY) -> StderrSink:
    """Route sys.stderr, sys.stdout and gevent's hub error reports through one new sink on fd 2.

    Logging handlers made afterwards on sys.stderr, `warnings`, tracebacks and prints follow.
    Call from the main thread before serving; sys.__stderr__ and sys.__stdout__ are left alone.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    sink = StderrSink(2, capacity)
    sys.stderr = SinkTextStream(sink, "<stderr>")
    sys.stdout = SinkTextStream(sink, "<stdout>")
    gevent.get_hub().exception_stream = sys.stderr
    return sink
