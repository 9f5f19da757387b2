"""Encoding `session/update` notifications: the per-session encoder, session info and titles."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .. import wire
from ..sessions import Session

TITLE_LIMIT = 80


def encode_update(session_id: str, update: dict[str, Any]) -> bytes:
    """One `session/update` line for `session_id`."""
    return wire.encode_notification("session/update", {"sessionId": session_id, "update": update})


class SessionUpdateEncoder:
    """Encodes one session's updates; the envelope and sessionId are encoded once.

    `text_chunk` is the streaming hot path: only the text is encoded per chunk, and the bytes
    equal `update()` of the same chunk (tests/test_wire.py checks it).
    """

    __slots__ = ("update", "_chunk_heads", "_head_length", "_head")

    def __init__(self, session_id: str) -> None:
        self.update = wire.notification_encoder("session/update", {"sessionId": session_id}, "update")
        self._chunk_heads: dict[str, bytes] = {}
        self._head_length = len(self.update(None)) - len(b"null}}\n")
        self._head = self.update(None)[: self._head_length]

    def update_json(self, line: bytes) -> bytes:
        """The update's own JSON inside one of this encoder's lines."""
        return line[self._head_length : -3]

    def wrap(self, update_json: bytes) -> bytes:
        """The line for an update already encoded as JSON (a stored history entry)."""
        return self._head + update_json + b"}}\n"

    def text_chunk(self, kind: str, text: str) -> bytes:
        head = self._chunk_heads.get(kind)
        if head is None:
            sample = self.update({"sessionUpdate": kind, "content": {"type": "text", "text": ""}})
            head = self._chunk_heads[kind] = sample[: -len(b'""}}}}\n')]
        return head + wire.json_text(text) + b"}}}}\n"


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
