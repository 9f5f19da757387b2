"""The stdio transport: owns the wire descriptors, one reader and one writer.

Everything else only calls `send`. The outbound path is one FIFO (DESIGN §5): a response
never overtakes the updates queued before it. The queue counts bytes so producers can be
held back at a high-water mark and new work refused above a hard limit.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gevent
import gevent.os
from gevent.event import Event
from gevent.fileobject import FileObjectPosix
from gevent.greenlet import Greenlet

log = logging.getLogger(__name__)

_RETRY_ERRNOS = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)
_READ_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """Byte thresholds of the outbound queue (DESIGN §5)."""

    high_water: int = 64 << 10
    low_water: int = 16 << 10
    hard_limit: int = 64 << 20
    flush_timeout: float = 2.0


def claim_stdio() -> tuple[int, int]:
    """Take private duplicates of fds 0 and 1; point fd 0 at /dev/null and fd 1 at stderr.

    A stray print then lands on stderr, and a child that inherits our stdio can neither read
    protocol bytes nor clear O_NONBLOCK on the wire (GEVENT-NOTES A1.6).
    """
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


def read_chunks(fd: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """Cooperatively read a descriptor (made non-blocking) until EOF or a read error.

    For draining a child's stderr, which must never be left as an unread pipe (GEVENT-NOTES A8.3).
    """
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = gevent.os.nb_read(fd, size)
        except OSError:
            return
        if not chunk:
            return
        yield chunk


@dataclass(slots=True)
class Line:
    """One framed input line, or a marker that the line was too long and skipped."""

    data: bytes
    too_long: bool = False


class LineReader:
    """Reads newline-framed lines cooperatively with bounded memory."""

    def __init__(self, fd: int, max_line_bytes: int) -> None:
        self._file = FileObjectPosix(fd, "rb", closefd=False)
        self._max = max_line_bytes

    def lines(self) -> Iterator[Line]:
        """Yield lines until EOF; raises OSError on a read failure."""
        limit = self._max + 1
        readline = self._file.readline
        while True:
            data = readline(limit)
            if not data:
                return
            if data.endswith(b"\n"):
                yield Line(data)
                continue
            if len(data) < limit:
                yield Line(data)  # final line without a newline before EOF
                return
            # Over the limit: discard up to the next newline without holding it in memory.
            while True:
                rest = readline(_READ_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
            yield Line(b"", too_long=True)
            if not rest:
                return

    def close(self) -> None:
        self._file.close()


class Outbound:
    """The single outbound FIFO and the one greenlet that writes it to the wire."""

    def __init__(self, fd: int, limits: OutputLimits, on_failure: Callable[[BaseException], None]) -> None:
        self._fd = fd
        self.limits = limits
        self._on_failure = on_failure
        self._chunks: deque[bytes] = deque()
        self.queued_bytes = 0
        self._wake = Event()
        self._below_high = Event()
        self._below_high.set()
        self._idle = Event()
        self._idle.set()
        self._released = Event()
        self._releasing = False
        self._closed = False
        self.failed = False
        os.set_blocking(fd, False)
        self._watcher = gevent.get_hub().loop.io(fd, 2)
        self._writer = Greenlet(self._run)
        self._writer.name = "acp-writer"
        self._writer.start()

    # -- producers ---------------------------------------------------------------------------
    def put(self, data: bytes) -> None:
        """Queue bytes; never blocks, safe from the hub (rawlink callbacks)."""
        if self._closed or self.failed:
            return
        self._chunks.append(data)
        self.queued_bytes += len(data)
        if self._idle.is_set():
            self._idle.clear()
        if self.queued_bytes > self.limits.high_water and self._below_high.is_set():
            self._below_high.clear()
        if not self._wake.is_set():
            self._wake.set()

    @property
    def over_high_water(self) -> bool:
        return self.queued_bytes > self.limits.high_water

    @property
    def over_hard_limit(self) -> bool:
        return self.queued_bytes > self.limits.hard_limit

    @property
    def over_input_limit(self) -> bool:
        """Twice the hard limit: even error replies to a client that never reads must stop here."""
        return self.queued_bytes > 2 * self.limits.hard_limit

    def wait_below_high_water(self, cancelled: Event | None = None) -> None:
        """Hold a background producer while the backlog is over its high-water mark.

        Returns once the writer has drained below the low-water mark, the given event is set,
        the connection is shutting down (`release_producers`), or the output is gone.
        """
        if self._releasing:
            return
        if cancelled is None:
            gevent.wait([self._below_high, self._released], count=1)
        else:
            gevent.wait([self._below_high, self._released, cancelled], count=1)

    def release_producers(self) -> None:
        """Shutdown: no producer waits on the backlog any more, so cancelled turns end promptly
        and answer while stdout is alive (S13); the shutdown grace bounds what they still send."""
        self._releasing = True
        self._released.set()

    # -- writer ------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                if not self._chunks:
                    self._idle.set()
                    if self._closed:
                        return
                    self._wake.clear()
                    self._wake.wait()
                    continue
                chunks = self._chunks
                if len(chunks) == 1:
                    data = chunks.popleft()
                else:
                    data = b"".join(chunks)
                    chunks.clear()
                self._write_all(data)
        except OSError as exc:
            self.failed = True
            self._chunks.clear()
            self.queued_bytes = 0
            self._below_high.set()
            self._idle.set()
            log.info("output failed: %s", exc)
            self._on_failure(exc)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        hub = gevent.get_hub()
        low = self.limits.low_water
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError as exc:
                if exc.errno not in _RETRY_ERRNOS:
                    raise
                hub.wait(self._watcher)
                continue
            view = view[written:]
            self.queued_bytes -= written
            if self.queued_bytes <= low and not self._below_high.is_set():
                self._below_high.set()

    # -- shutdown ----------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> bool:
        """Stop accepting, let the writer drain for up to `timeout` seconds; True if drained."""
        self._closed = True
        self._wake.set()
        drained = self._idle.wait(self.limits.flush_timeout if timeout is None else timeout)
        if not self._writer.dead:
            self._writer.kill(block=True, timeout=1)
        self._watcher.close()
        self._below_high.set()
        return bool(drained) and not self.failed
