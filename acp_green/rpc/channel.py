"""The transport seam: what a connection reads messages from and writes them to.

A transport gives a connection a `MessageSource` (the client's messages, one `Line` each) and
a `ByteWriter` under the connection's `Outbound` (the one FIFO every message leaves through).
stdio is one transport (`rpc.transport.LineReader`, `rpc.transport.FdWriter`); a network
transport pushes each message it receives into a `PushedMessages` and writes each line the
FIFO hands it as a frame of its own (`remote/`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from gevent.event import Event


@dataclass(slots=True)
class Line:
    """One framed input line, or a marker that the line was skipped: too long, or out of memory.

    `request_id` is the id of a skipped request when its first bytes gave it away cheaply
    (`request_id_of`), else None.
    """

    data: bytes
    too_long: bool = False
    out_of_memory: bool = False
    request_id: int | str | None = None


class ByteWriter(Protocol):
    """Where an `Outbound`'s writer greenlet puts bytes: whole JSON-RPC lines, newline-ended."""

    def write(self, data: memoryview) -> int:
        """Write some of `data` (at least one byte), waiting cooperatively; OSError ends the output."""

    def close(self) -> None:
        """Nothing more will be written (the destination itself may belong to someone else)."""


class MessageSource(Protocol):
    """The client's messages, in the order they arrived."""

    def lines(self) -> Iterator[Line]:
        """Each message until the end of input; OSError for a failed read."""

    def unread_lines(self) -> list[Line]:
        """The messages received but never handed out (shutdown answers each); takes them out."""

    def close(self) -> None:
        """Release what the source holds; nothing more is read."""


class PushedMessages:
    """A `MessageSource` fed by a network transport: one pushed message is one line.

    Bounded: `push` waits while `max_pending` messages are unread, so a client that sends faster
    than the connection reads is held back at its own socket (or its POST is answered later).
    """

    def __init__(self, max_pending: int = 64) -> None:
        self._pending: deque[Line] = deque()
        self._max_pending = max_pending
        self._arrived = Event()
        self._room = Event()
        self._room.set()
        self._ended = False

    def push(self, line: Line) -> bool:
        """Queue one message; False if the input has ended (the message is not read)."""
        while len(self._pending) >= self._max_pending and not self._ended:
            self._room.clear()
            self._room.wait()
        if self._ended:
            return False
        self._pending.append(line)
        self._arrived.set()
        return True

    def end(self) -> None:
        """The client is gone (socket closed, DELETE, idle): `lines` ends once the queue is read."""
        self._ended = True
        self._arrived.set()
        self._room.set()

    @property
    def ended(self) -> bool:
        return self._ended

    def lines(self) -> Iterator[Line]:
        while True:
            if self._pending:
                line = self._pending.popleft()
                if not self._room.is_set():
                    self._room.set()
                yield line
                continue
            if self._ended:
                return
            self._arrived.clear()
            self._arrived.wait()

    def unread_lines(self) -> list[Line]:
        lines = list(self._pending)
        self._pending.clear()
        self._room.set()
        return lines

    def close(self) -> None:
        self.end()
