"""A Streamable HTTP connection's way out: its messages routed to server-sent event streams.

The connection's writer greenlet hands `EventStreams` each line it would write to a pipe; the
line goes to one stream, where it waits for the client's GET that reads that stream:

- the answer to `initialize` is captured for the POST that carried it (its 200 body);
- an answer to a request that named a session goes to that session's stream when the client has
  one, else to the connection's stream; answers to `session/new`, `load`, `resume` and `fork`
  always go to the connection's stream (the client may have no session stream yet), and a new
  session's id in an answer makes its stream, so its first updates wait there;
- a notification or request of ours that names a session goes to that session's stream when
  there is one, else to the connection's.

A stream being read holds at most `max_buffered` bytes, and all streams of the connection
together four times that: past either the writer waits for the client to read (the
connection's output backlog then grows, and ACP's pacing and `output_backlog` take over), as it
would on a pipe that is not read. A stream nobody reads yet (a session whose stream the client
has still to open) does not hold up the others until that total is reached.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Any

from gevent.event import AsyncResult, Event

log = logging.getLogger(__name__)

#: Answers to these go to the connection's stream: the client may not have the session's yet.
SESSION_OPENING = frozenset({"session/new", "session/load", "session/resume", "session/fork", "initialize"})

_CONNECTION = ""  # the route of an answer that belongs on the connection's stream


class Unread:
    """What every stream of one connection holds unread, in bytes, and a wake-up when some is read."""

    def __init__(self) -> None:
        self.total = 0
        self.read = Event()


class EventStream:
    """One stream's messages waiting for its reader, and whether a reader is attached."""

    def __init__(self, unread: Unread) -> None:
        self._lines: deque[bytes] = deque()
        self._unread = unread
        self.buffered = 0
        self.reader_attached = False
        self.closed = False
        self._arrived = Event()

    def put(self, line: bytes) -> None:
        if self.closed:
            return
        self._lines.append(line)
        self.buffered += len(line)
        self._unread.total += len(line)
        self._arrived.set()

    def take(self, timeout: float) -> list[bytes] | None:
        """What waits now (at least one line), [] after `timeout` with nothing, None once closed and empty."""
        if not self._lines:
            if self.closed:
                return None
            self._arrived.clear()
            self._arrived.wait(timeout)
            if not self._lines:
                return None if self.closed else []
        lines = list(self._lines)
        self._lines.clear()
        self._unread.total -= self.buffered
        self.buffered = 0
        self._unread.read.set()
        return lines

    def put_back(self, lines: list[bytes]) -> None:
        """Lines taken but never delivered (their reader left), first in line again."""
        size = sum(len(line) for line in lines)
        self._lines.extendleft(reversed(lines))
        self.buffered += size
        self._unread.total += size
        self._arrived.set()

    def wake(self) -> None:
        """End a reader's wait now (its client has gone)."""
        self._arrived.set()

    def close(self) -> None:
        self.closed = True
        self._arrived.set()
        self._unread.read.set()


class EventStreams:
    """The `ByteWriter` of one Streamable HTTP connection: routes each line to its stream."""

    def __init__(self, max_buffered: int, max_session_streams: int) -> None:
        self._unread = Unread()
        self.connection_stream = EventStream(self._unread)
        self.session_streams: dict[str, EventStream] = {}
        self._max_buffered = max_buffered
        self._max_session_streams = max_session_streams
        self._routes: dict[str, str] = {}  # our key of a client request's id -> the session its answer goes to
        self._captured: dict[str, AsyncResult] = {}
        self.closed = False

    # -- what the HTTP routes tell us ----------------------------------------------------------
    def capture_answer(self, request_id: Any) -> AsyncResult:
        """The answer to this request, handed to the caller instead of any stream (initialize)."""
        result = AsyncResult()
        self._captured[_key(request_id)] = result
        return result

    def note_request(self, request_id: Any, method: Any, session_id: str | None) -> None:
        """A client request is about to be read: where its answer goes."""
        if session_id is not None and method not in SESSION_OPENING:
            self._routes[_key(request_id)] = session_id
        else:
            self._routes[_key(request_id)] = _CONNECTION

    def session_stream(self, session_id: str) -> EventStream | None:
        """The session's stream, made if need be; None when the connection has its fill of them."""
        stream = self.session_streams.get(session_id)
        if stream is None:
            if len(self.session_streams) >= self._max_session_streams or self.closed:
                return None
            stream = self.session_streams[session_id] = EventStream(self._unread)
        return stream

    @property
    def readers(self) -> int:
        """How many GETs are reading a stream of this connection now."""
        return int(self.connection_stream.reader_attached) + sum(s.reader_attached for s in self.session_streams.values())

    # -- ByteWriter ----------------------------------------------------------------------------
    def write(self, data: memoryview) -> int:
        if self.closed:
            raise BrokenPipeError("the connection has ended")
        for line in bytes(data).split(b"\n"):
            if line:
                stream = self._route(line)
                if stream is not None:
                    self._wait_for_room(stream, len(line))
                    stream.put(line)
        return len(data)

    def _wait_for_room(self, stream: EventStream, size: int) -> None:
        """Hold the writer until `size` more bytes fit: in a stream being read, `max_buffered` (the
        client reads slowly); in all streams together, four times that (a stream nobody reads).
        A line bigger than the bound alone still goes once what was before it has been read."""
        unread = self._unread
        limit = self._max_buffered
        while not self.closed and ((stream.reader_attached and stream.buffered and stream.buffered + size > limit)
                                   or (unread.total and unread.total + size > 4 * limit)):
            unread.read.clear()
            unread.read.wait()

    def close(self) -> None:
        """The connection ended: each stream's reader gets what is left, then its end."""
        self.closed = True
        self.connection_stream.close()
        for stream in self.session_streams.values():
            stream.close()
        self._unread.read.set()
        for result in self._captured.values():
            if not result.ready():
                result.set(None)

    def _route(self, line: bytes) -> EventStream | None:
        try:
            message = json.loads(line)
        except ValueError:
            return self.connection_stream
        if not isinstance(message, dict):
            return self.connection_stream
        if "method" not in message:  # an answer to the client
            key = _key(message.get("id"))
            captured = self._captured.pop(key, None)
            if captured is not None:
                captured.set(line)
                return None
            result = message.get("result")
            opened = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(opened, str):
                self.session_stream(opened)  # its first updates wait there for the client's GET
            route = self._routes.pop(key, _CONNECTION)
            if route:
                return self.session_streams.get(route) or self.connection_stream
            return self.connection_stream
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(session_id, str):
            return self.session_streams.get(session_id) or self.connection_stream
        return self.connection_stream


def _key(request_id: Any) -> str:
    """A request id as a key: 1 and "1" are different ids (JSON-RPC), and so are their keys."""
    return json.dumps(request_id)


def sse_event(line: bytes) -> bytes:
    """One message as a server-sent event."""
    return b"data: " + line + b"\n\n"


SSE_KEEPALIVE = b": keepalive\n\n"
