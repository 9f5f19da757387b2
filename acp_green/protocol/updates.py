"""Encoding `session/update` notifications: the per-session encoder, session info and titles."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..rpc import wire
from ..sessions import Session

TITLE_LIMIT = 80


def encode_update(session_id: str, update: dict[str, Any] | None) -> bytes:
    """One `session/update` line for `session_id` (with None: the layout SessionUpdateEncoder cuts its head from)."""
    return wire.encode_notification("session/update", {"sessionId": session_id, "update": update})


class SessionUpdateEncoder:
    """Encodes one session's updates: each update's JSON once, and the wire line around it.

    The envelope and sessionId are encoded once, so a line is `line(update_json)`: the update
    JSON is what history stores, and the line is derived from it without re-encoding anything.
    `chunk_head` and `message_tail` are the fixed parts of a text chunk's JSON, so the streaming
    hot path encodes only the text; the bytes equal `wire.encode_json` of the same chunk
    (tests/wire/test_wire.py checks it).
    """

    __slots__ = ("_head", "_chunk_heads")

    def __init__(self, session_id: str) -> None:
        sample = encode_update(session_id, None)
        if not sample.endswith(_NULL_UPDATE):  # pragma: no cover - ujson keeps insertion order
            raise RuntimeError("unexpected session/update layout")
        self._head = sample[: -len(_NULL_UPDATE)]
        self._chunk_heads: dict[str, bytes] = {}

    @property
    def head(self) -> bytes:
        """The bytes of every line of this session before its update's JSON."""
        return self._head

    def line(self, update_json: bytes) -> bytes:
        """The `session/update` line carrying an update already encoded as JSON."""
        return self._head + update_json + LINE_END

    def update(self, update: dict[str, Any]) -> bytes:
        """The line of an update given as an object."""
        return self._head + wire.encode_json(update) + LINE_END

    def chunk_head(self, kind: str) -> bytes:
        """A text chunk's JSON up to its text: `{"sessionUpdate":KIND,"content":{"type":"text","text":`."""
        head = self._chunk_heads.get(kind)
        if head is None:
            sample = wire.encode_json({"sessionUpdate": kind, "content": {"type": "text", "text": ""}})
            head = self._chunk_heads[kind] = sample[: -len(b'""}}')]
        return head

    def text_chunk(self, kind: str, text: str, message_id: str | None = None) -> bytes:
        """A text chunk's update JSON (the hot path builds the same bytes from cached parts)."""
        return self.chunk_head(kind) + wire.json_text(text) + message_tail(message_id)


_NULL_UPDATE = b"null}}\n"
LINE_END = b"}}\n"  # closes `params` and the message after the update's JSON


def message_tail(message_id: str | None) -> bytes:
    """What follows a text chunk's text: the content's end, its messageId (if any), the chunk's end."""
    if message_id is None:
        return b"}}"
    return b'},"messageId":' + wire.json_text(message_id) + b"}"


def title_from_prompt(text: str) -> str | None:
    """The first non-blank line of the first prompt, cut to TITLE_LIMIT characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1] + "…"
    return None


def iso_time(timestamp: float) -> str:
    """A Unix time as ACP writes it: ISO 8601, UTC, milliseconds, `Z`."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_info(session: Session) -> dict[str, Any]:
    """The `session_info_update` that tells the client a session's title and updated time."""
    record = session.record
    return {"sessionUpdate": "session_info_update", "title": record.title, "updatedAt": iso_time(record.updated_at)}
