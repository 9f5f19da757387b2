"""Encoding `session/update` notifications: the per-session encoder, session info and titles."""

from __future__ import annotations

import unicodedata
from datetime import datetime, timezone
from typing import Any

from ..rpc import wire
from ..sessions import Session

TITLE_LIMIT = 80
#: Characters of a text a title is taken from at most (a prompt's, or a title a client sets): it
#: is cut there first and only then cleaned, so a title costs the same from a 50 MB text as from
#: a short one. A small multiple of the longest title, so runs of whitespace or control
#: characters the cleaning removes still leave a whole title in all but contrived text.
TITLE_SCAN = 4096
#: Unicode's control characters (category Cc: exactly U+0000-U+001F and U+007F-U+009F), each
#: made a space by `str.translate`, in C.
CONTROLS_AS_SPACES = {code: " " for code in (*range(0x20), *range(0x7F, 0xA0))}
_ZWJ = "\u200d"
#: How far a cut moves back at most to keep a character together with its marks and joiners.
_CLUSTER_BACKOFF = 16


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
    """The first non-blank line of the first prompt, cut to TITLE_LIMIT characters ("…" last).

    Only the first TITLE_SCAN characters are read (cut first): a line that runs past them counts
    as cut there; a prompt with nothing but blank lines in them names nothing.
    """
    lines = text[:TITLE_SCAN].splitlines(keepends=True)
    for index, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        runs_on = len(text) > TITLE_SCAN and index == len(lines) - 1 and raw.splitlines()[0] == raw  # no line end read
        return cut_title(line, TITLE_LIMIT) if runs_on or len(line) > TITLE_LIMIT else line
    return None


def cut_title(title: str, limit: int) -> str:
    """`title` cut to fewer than `limit` characters with "…" last (at most `limit` in all).

    The cut is on a character boundary as a reader sees one: never between a character and the
    combining marks, variation selectors, emoji modifiers or joined characters that follow it
    (unless no boundary lies within a few characters), and whitespace before it is dropped.
    """
    end = limit - 1
    back = end
    while back > 0 and end - back < _CLUSTER_BACKOFF and back < len(title) and _attached(title, back):
        back -= 1
    if back > 0 and end - back < _CLUSTER_BACKOFF:
        end = back
    return title[:end].rstrip() + "…"


def _attached(text: str, index: int) -> bool:
    """Whether text[index] belongs to the character before it."""
    char = text[index]
    return (unicodedata.category(char)[0] == "M" or char == _ZWJ or "\U0001F3FB" <= char <= "\U0001F3FF"
            or text[index - 1] == _ZWJ)


def iso_time(timestamp: float) -> str:
    """A Unix time as ACP writes it: ISO 8601, UTC, milliseconds, `Z`."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_info(session: Session) -> dict[str, Any]:
    """The `session_info_update` that tells the client a session's title and updated time."""
    record = session.record
    return {"sessionUpdate": "session_info_update", "title": record.title, "updatedAt": iso_time(record.updated_at)}
