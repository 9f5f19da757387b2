"""Server-sent events (the WHATWG `text/event-stream` format) assembled from a response's lines.

The caller reads the body line by line (each line with or without its `\\n` or `\\r\\n`) and feeds
every line; an event is complete at the blank line that ends it. A stream that ends mid-event
drops that event, as the format says. Memory is bounded: an event whose data grows past
`max_event_bytes` raises `SseTooLarge`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The largest event accepted by default: the same bound as a line from a stdio MCP server.
MAX_EVENT_BYTES = 64 << 20
_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched event: its type (`message` when unnamed), data lines joined by `\\n`, last id."""

    event: str
    data: bytes
    id: str | None = None


class SseTooLarge(ValueError):
    """An event's data grew past the parser's bound."""


class SseParser:
    """Turns the lines of one event stream into events."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._data: list[bytes] = []
        self._size = 0
        self._event = ""
        self._last_id: str | None = None
        self._first = True

    def feed_line(self, line: bytes) -> SseEvent | None:
        """One line of the stream; the event it completes, if any."""
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._first:
            self._first = False
            if line.startswith(_BOM):
                line = line[len(_BOM):]
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment (servers send them as keep-alives)
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            self._size += len(value) + (1 if self._data else 0)  # the size of the joined data, exactly
            if self._size > self.max_event_bytes:
                self._data.clear()
                self._size = 0
                raise SseTooLarge(f"an event's data is over {self.max_event_bytes} bytes")
            self._data.append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id" and b"\0" not in value:
            self._last_id = value.decode("utf-8", "replace")
        # `retry` and unknown fields change nothing here: this client never reconnects a stream.
        return None

    def _dispatch(self) -> SseEvent | None:
        event_type, self._event = self._event, ""
        if not self._data:
            return None
        data = b"\n".join(self._data)
        self._data.clear()
        self._size = 0
        return SseEvent(event_type or "message", data, self._last_id)
