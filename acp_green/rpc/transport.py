"""The stdio transport (the wire descriptors, one reader and one writer) and the outbound FIFO
every transport writes through.

Everything else only calls `Outbound.put`. The outbound path is one FIFO: a response
never overtakes the updates queued before it. The queue counts bytes so producers can be
held back at a high-water mark and new work refused above a hard limit.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import gevent
import gevent.os
from gevent.event import Event
from gevent.greenlet import Greenlet

from .channel import ByteWriter, Line

log = logging.getLogger(__name__)

_RETRY_ERRNOS = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)
_READ_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """Byte thresholds of the outbound queue and the bounds of the final flush.

    At exit the writer keeps flushing while the client reads: it gives up once the client has
    read nothing for `flush_stall_timeout` seconds, or after `flush_total_timeout` seconds in
    all, or at once when the client closed its end.
    """

    high_water: int = 64 << 10
    low_water: int = 16 << 10
    hard_limit: int = 64 << 20
    flush_stall_timeout: float = 5.0
    flush_total_timeout: float = 30.0


def claim_stdio() -> tuple[int, int]:
    """Take private duplicates of fds 0 and 1; point fd 0 at /dev/null and fd 1 at stderr.

    A stray print then lands on stderr, and a child that inherits our stdio can neither read
    protocol bytes nor clear O_NONBLOCK on the wire.
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

    For draining a child's stderr, which must never be left as an unread pipe.
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


# The id of a request written as SDKs write one: `{"jsonrpc":"2.0","id":…,"method":…` at the
# very start of the line, so the id is the top-level one and the message a request.
_REQUEST_HEAD = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?(?:0|[1-9][0-9]{0,15})|"[^"\\]{0,200}")\s*,\s*"method"\s*:')


def request_id_of(head: bytes) -> int | str | None:
    """The id of the request a line starts with, read from its first bytes only; None if unsure."""
    match = _REQUEST_HEAD.match(head[:1024])
    if match is None:
        return None
    raw = match.group(1)
    if raw.startswith(b'"'):
        try:
            return raw[1:-1].decode("utf-8")
        except UnicodeDecodeError:
            return None
    return int(raw)


def _assemble(parts: Iterable[bytes]) -> bytes:
    """Pieces joined: the allocation a huge line or backlog can fail (MemoryError)."""
    return b"".join(parts)


class LineFramer:
    """Newline framing with bounded memory over any source of chunks, from a buffer it owns.

    `read_chunk` returns the next bytes that arrived (b"" at the end). A line longer than
    `max_line_bytes` (newline excluded) is skipped without being held in memory and reported as
    `Line(b"", too_long=True)`. A last line without a newline before the end still counts.
    Because the buffer is ours, shutdown can see the complete lines that were read but never
    handed out (`unread_lines`). With `skip_long_lines=False` a line over the limit is reported
    as soon as it passes the limit, and is the last line.
    """

    def __init__(self, read_chunk: Callable[[], bytes], max_line_bytes: int, *, skip_long_lines: bool = True) -> None:
        self._read = read_chunk
        self._max = max_line_bytes
        # False: a line over the limit ends the stream (its source has nothing more worth reading).
        self._skip_long_lines = skip_long_lines
        self._chunk = b""  # the last chunk read; bytes before `_pos` were handed out already
        self._pos = 0
        self._partial: list[bytes] = []  # the start of a line that spans chunks
        self._partial_len = 0

    def lines(self) -> Iterator[Line]:
        """Yield lines until the end; a read failure (OSError, ...) propagates."""
        limit = self._max
        partial = self._partial
        while True:
            chunk, pos = self._chunk, self._pos
            newline = chunk.find(b"\n", pos)
            if newline >= 0:
                self._pos = newline + 1
                if partial:
                    length = self._partial_len + newline - pos
                    try:
                        data = _assemble([*partial, chunk[pos:newline + 1]]) if length <= limit else b""
                    except MemoryError:
                        # Dropped, and the reader goes on: the line is answered, the next one read.
                        yield self._out_of_memory(partial[0])
                        continue
                    partial.clear()
                    self._partial_len = 0
                else:
                    length = newline - pos
                    data = chunk[pos:newline + 1]
                if length <= limit:
                    line, data = Line(data), b""  # the consumer holds the only reference: it can let go
                    yield line
                    del line
                    continue
                yield Line(b"", too_long=True)
                if not self._skip_long_lines:
                    return
                continue
            if pos < len(chunk):
                partial.append(chunk[pos:] if pos else chunk)
                self._partial_len += len(chunk) - pos
            self._chunk, self._pos = b"", 0
            if self._partial_len > limit:
                # Over the limit: discard up to the next newline without holding it in memory.
                partial.clear()
                self._partial_len = 0
                if not self._skip_long_lines:
                    yield Line(b"", too_long=True)
                    return
                found = self._skip_to_newline()
                yield Line(b"", too_long=True)
                if not found:
                    return
                continue
            chunk = self._read()
            if not chunk:
                if partial:
                    try:
                        data = _assemble(partial)
                    except MemoryError:
                        yield self._out_of_memory(partial[0])
                        return
                    partial.clear()
                    self._partial_len = 0
                    yield Line(data)  # final line without a newline before EOF
                return
            self._chunk = chunk

    def _out_of_memory(self, head: bytes) -> Line:
        """Forget the line being assembled, which did not fit in memory; the marker that says so."""
        request_id = request_id_of(head)
        size = max(self._partial_len, len(head))
        self._partial.clear()
        self._partial_len = 0
        log.error("input of at least %d bytes did not fit in memory and was dropped", size)
        return Line(b"", out_of_memory=True, request_id=request_id)

    def _skip_to_newline(self) -> bool:
        """Read and drop bytes up to the next newline; keep what follows. False at EOF."""
        while True:
            chunk = self._read()
            if not chunk:
                return False
            newline = chunk.find(b"\n")
            if newline >= 0:
                self._chunk, self._pos = chunk, newline + 1
                return True

    def unread_lines(self) -> list[Line]:
        """The complete lines read into the buffer but never handed out; takes them out.

        A partial last line is not included: the rest of it was never read.
        """
        if not self._partial and self._pos >= len(self._chunk):
            return []
        try:
            pending = _assemble([*self._partial, self._chunk[self._pos:]])
        except MemoryError:
            head = self._partial[0] if self._partial else self._chunk[self._pos:]
            self._chunk, self._pos = b"", 0
            return [self._out_of_memory(head)]
        self._partial.clear()
        self._partial_len = 0
        self._chunk, self._pos = b"", 0
        cut = pending.rfind(b"\n")
        if cut < 0:
            return []
        return [
            Line(b"", too_long=True) if len(data) > self._max else Line(data + b"\n")
            for data in pending[:cut].split(b"\n")
        ]



class LineReader(LineFramer):
    """Lines from a descriptor, read cooperatively: non-blocking 64 KiB reads, and on EAGAIN the
    greenlet waits on an io watcher, so the hub runs meanwhile."""

    def __init__(self, fd: int, max_line_bytes: int) -> None:
        super().__init__(self._read_fd, max_line_bytes)
        self._fd = fd
        # Like FileObjectPosix: O_NONBLOCK on the file description, which a duplicate shares.
        # claim_stdio pointed fd 0 elsewhere, so no stray read of fd 0 sees it; a terminal that
        # is also fd 2 does, and the stderr sink waits out EAGAIN for that reason.
        os.set_blocking(fd, False)
        self._watcher = gevent.get_hub().loop.io(fd, 1)
        self._closed = False

    def _read_fd(self) -> bytes:
        hub = gevent.get_hub()
        while True:
            try:
                return os.read(self._fd, _READ_CHUNK)
            except OSError as exc:
                if exc.errno not in _RETRY_ERRNOS:
                    raise
            hub.wait(self._watcher)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._watcher.close()


class FdWriter:
    """Writes to a descriptor made non-blocking, waiting on an io watcher while it is full."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)
        self._watcher = gevent.get_hub().loop.io(fd, 2)

    def write(self, data: memoryview) -> int:
        hub = gevent.get_hub()
        while True:
            try:
                return os.write(self._fd, data)
            except OSError as exc:
                if exc.errno not in _RETRY_ERRNOS:
                    raise
            hub.wait(self._watcher)

    def close(self) -> None:
        """Stop watching; the descriptor itself stays open (its owner closes it)."""
        self._watcher.close()


class Outbound:
    """The single outbound FIFO and the one greenlet that writes it to the wire."""

    def __init__(self, destination: int | ByteWriter, limits: OutputLimits, on_failure: Callable[[BaseException], None],
                 on_written: Callable[[bytes], None] | None = None) -> None:
        """`destination`: a descriptor (the stdio transport) or any `ByteWriter` (a network
        connection's frames). `on_written`, if given, is handed each piece of bytes as soon as it
        is written (a trace)."""
        self._writer_out: ByteWriter = FdWriter(destination) if isinstance(destination, int) else destination
        self.limits = limits
        self._on_failure = on_failure
        self._on_written = on_written
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
        self._last_progress = 0.0
        self.failed = False
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
                data = None
                if len(chunks) > 1:
                    try:
                        data = _assemble(chunks)
                        chunks.clear()
                    except MemoryError:  # no room for one copy of the backlog: write it piece by piece
                        data = None
                if data is None:
                    data = chunks.popleft()
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
        low = self.limits.low_water
        write = self._writer_out.write
        while view:
            written = write(view)
            if self._on_written is not None:
                self._on_written(view[:written].tobytes())
            view = view[written:]
            self.queued_bytes -= written
            if self.queued_bytes <= low and not self._below_high.is_set():
                self._below_high.set()
            if self._closed:
                self._last_progress = time.monotonic()  # the final flush measures stalls from here

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> bool:
        """Stop accepting and let the writer drain while the client keeps reading; True if drained.

        Bounded whatever the client does: `flush_stall_timeout` without progress, at most
        `flush_total_timeout` in all, and no wait at all once the output has failed (EPIPE).
        """
        self._closed = True
        self._wake.set()
        started = self._last_progress = time.monotonic()
        stall = self.limits.flush_stall_timeout
        deadline = started + self.limits.flush_total_timeout
        drained = False
        while not self.failed:
            now = time.monotonic()
            wait = min(self._last_progress + stall, deadline) - now
            if wait <= 0:
                break
            if self._idle.wait(wait):
                drained = True
                break
        if not self._writer.dead:
            self._writer.kill(block=True, timeout=1)
        self._writer_out.close()
        self._below_high.set()
        return bool(drained) and not self.failed
