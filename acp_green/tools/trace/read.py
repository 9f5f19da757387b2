"""Read a trace file (docs/TRACES.md) into typed events, whatever the file holds.

Reading never raises on content: a line that is not an event (damaged, truncated by a crash,
nested too deep, not UTF-8) becomes a `Damage` naming its line and why. Traces of the Rust
conductor (`sacp-conductor --trace`), which lack acp_green's `seq`, `raw` and `newline`, read
too: their messages are rebuilt from the event's fields.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ...errors import RpcError
from ...rpc.wire import decode_value
from ..rig.schema import message_kind

__all__ = ["Damage", "Note", "Trace", "TraceEvent", "WireEvent", "parse_line", "read_lines", "read_trace", "visible"]

FORMAT = "acp-green-trace/1"
WIRE_TYPES = frozenset({"request", "response", "notification", "line", "batch"})
_EXCERPT = 120
_MESSAGE_TYPES = frozenset({"request", "response", "notification"})


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One line that passed between two peers: a request, a response, a notification, a `batch`
    (its `message` the list of its members, as they passed), or a `line` that is no JSON-RPC
    message (garbage, an empty array, bad UTF-8)."""

    line: int  # 1-based line number in the trace file
    ts: float
    kind: str  # "request" | "response" | "notification" | "batch" | "line"
    sender: str  # "client", "agent" (or "proxy:N" in a conductor's trace)
    receiver: str
    raw: bytes | None  # the exact bytes, without the newline; None when the trace kept no raw line
    message: Any  # the JSON-RPC message as it passed (decoded from `raw`, else rebuilt); None if unreadable
    newline: bool = True  # False only for a last line that had no final newline
    why: str | None = None  # for a `line` event: why it is no message
    seq: int | None = None

    @property
    def method(self) -> str | None:
        method = self.message.get("method") if isinstance(self.message, dict) else None
        return method if isinstance(method, str) else None

    @property
    def id(self) -> Any:
        return self.message.get("id") if isinstance(self.message, dict) else None

    @property
    def params(self) -> Any:
        return self.message.get("params") if isinstance(self.message, dict) else None

    @property
    def session(self) -> str | None:
        """params.sessionId when it is a string."""
        params = self.params
        found = params.get("sessionId") if isinstance(params, dict) else None
        return found if isinstance(found, str) else None

    @property
    def is_error(self) -> bool:
        return isinstance(self.message, dict) and "error" in self.message

    def text(self) -> str:
        """The line as text (invalid UTF-8 bytes as \\xNN), or the rebuilt message as JSON."""
        if self.raw is not None:
            return self.raw.decode("utf-8", "backslashreplace")
        return json.dumps(self.message, separators=(",", ":"), default=repr)


@dataclass(frozen=True, slots=True)
class Note:
    """A `trace` event: a line of the agent's stderr, or the recorder's own note."""

    line: int
    ts: float
    component: str
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Damage:
    """A line of the file that is no event; `excerpt` is its start, decoded with replacement."""

    line: int
    reason: str
    excerpt: str


TraceEvent = Union[WireEvent, Note]


@dataclass(slots=True)
class Trace:
    """A whole trace file: its events and its unreadable lines, in file order."""

    events: list[TraceEvent] = field(default_factory=list)
    damaged: list[Damage] = field(default_factory=list)
    lines: int = 0  # lines in the file
    _index: dict[int, TraceEvent | Damage] | None = field(default=None, repr=False, compare=False)

    @property
    def wire(self) -> list[WireEvent]:
        return [e for e in self.events if isinstance(e, WireEvent)]

    @property
    def header(self) -> dict[str, Any] | None:
        """The recorder's `fields` of the first event, when it is the acp_green header."""
        first = self.events[0] if self.events else None
        if isinstance(first, Note) and "format" in first.fields:
            return first.fields
        return None

    @property
    def footer(self) -> dict[str, Any] | None:
        """The recorder's last `fields` ({"exit", "signal"}) when the recording ended cleanly."""
        last = self.events[-1] if self.events else None
        if isinstance(last, Note) and "exit" in last.fields:
            return last.fields
        return None

    def at(self, line: int) -> TraceEvent | Damage | None:
        """What stands on one line of the file (None: a blank line or past the end); indexed on
        first use, once the file is read."""
        if self._index is None:
            self._index = {e.line: e for e in self.events}
            self._index.update((d.line, d) for d in self.damaged)
        return self._index.get(line)


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; OSError if it cannot be opened, never an error for what it holds."""
    from ...redact import open_no_follow  # the file named, never one a symbolic link points to
    with open_no_follow(path) as handle:
        return read_lines(handle)


def read_lines(lines: Iterable[bytes]) -> Trace:
    """Read the lines of a trace (each with its newline, as a binary file yields them)."""
    trace = Trace()
    for number, data in enumerate(lines, 1):
        trace.lines = number
        found = parse_line(number, data)
        if isinstance(found, Damage):
            trace.damaged.append(found)
        elif found is not None:
            trace.events.append(found)
    return trace


def parse_line(number: int, data: bytes) -> TraceEvent | Damage | None:
    """One line of the file as an event, a `Damage`, or None for a blank line."""
    ended = data.endswith(b"\n")
    body = data[:-1] if ended else data
    if not body.strip():
        return None
    try:
        value = _load(body)
    except ValueError as exc:
        reason = f"not a JSON event ({exc})"
        if not ended:
            reason = f"truncated last line, no final newline: {reason}"
        return Damage(number, reason, _excerpt(body))
    if not isinstance(value, dict):
        return Damage(number, "not a JSON object", _excerpt(body))
    try:
        return _event(number, value)
    except _Unreadable as exc:
        return Damage(number, str(exc), _excerpt(body))


class _Unreadable(ValueError):
    """A JSON object that is no event of the format."""


def _load(body: bytes) -> Any:
    """Strict JSON first (the format's); a writer's non-standard numbers (NaN, Infinity) are read
    leniently. ValueError for anything unreadable, nesting too deep included."""
    try:
        return decode_value(body)
    except RpcError as strict:
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise ValueError(str(strict).removeprefix("Parse error: ")) from None


def _event(number: int, value: dict[str, Any]) -> TraceEvent:
    kind = value.get("type")
    when = _seconds(value.get("ts"))
    if when is None:
        raise _Unreadable(f"event without a numeric ts (type {_short(kind)})")
    if kind == "trace":
        fields = value.get("fields")
        return Note(number, when, _string(value.get("component"), "?"), _string(value.get("level"), "info"),
                    _string(value.get("message"), ""), fields if isinstance(fields, dict) else {})
    if kind not in WIRE_TYPES:
        raise _Unreadable(f"unknown event type {_short(kind)}")
    sender, receiver = value.get("from"), value.get("to")
    if not isinstance(sender, str) or not isinstance(receiver, str):
        raise _Unreadable(f"{kind} event without from and to")
    raw = _raw(value)
    seq = value.get("seq")

    def wire(kind: str, message: Any, why: str | None = None) -> WireEvent:
        return WireEvent(number, when, kind, sender, receiver, raw, message, value.get("newline") is not False, why,
                         seq if isinstance(seq, int) and not isinstance(seq, bool) else None)

    if raw is not None:
        message, why = _decoded(raw)
        if isinstance(message, list):  # the raw line decides: a trace written before batches had events reads so too
            return wire("batch", message)
        if kind == "line" or message is None:
            return wire("line", message, why or _string(value.get("error"), "not a JSON-RPC message"))
        return wire(message_kind(message) or kind, message)
    if kind == "line":
        return wire("line", None, _string(value.get("error"), "not a JSON-RPC message"))
    if kind == "batch":
        members = value.get("members")
        if not isinstance(members, list) or not members:
            raise _Unreadable("batch event without members")
        return wire("batch", [_rebuilt(m["type"], m) if isinstance(m, dict) and m.get("type") in _MESSAGE_TYPES else None
                              for m in members])
    return wire(kind, _rebuilt(kind, value))


def _raw(value: dict[str, Any]) -> bytes | None:
    raw = value.get("raw")
    if isinstance(raw, str):
        return raw.encode("utf-8", "surrogatepass")
    encoded = value.get("raw_b64")
    if isinstance(encoded, str):
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise _Unreadable("raw_b64 is not base64") from None
    return None


def _decoded(raw: bytes) -> tuple[Any, str | None]:
    """The message (or a non-empty batch's list) a raw line holds, or (None or the value, why it is no message)."""
    try:
        value = decode_value(raw)
    except RpcError as exc:
        return None, str(exc).removeprefix("Parse error: ")
    if isinstance(value, list) and value:
        return value, None
    if isinstance(value, list):
        return None, "an empty batch (JSON array)"
    if message_kind(value) is None:
        return None, "not a JSON-RPC request, notification or response"
    return value, None


def _rebuilt(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC message a conductor's event stands for (it keeps no raw line)."""
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind in ("request", "response"):
        message["id"] = value.get("id")
    if kind == "response":
        message["error" if value.get("is_error") is True else "result"] = value.get("payload")
        return message
    message["method"] = value.get("method")
    if value.get("params") is not None:
        message["params"] = value["params"]
    return message


def visible(text: str) -> str:
    """`text` with every character a terminal would act on written as a visible escape (an agent's
    text may carry ESC sequences; a trace may hold anything)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text)


def _seconds(value: Any) -> float | None:
    """A finite number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def _string(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, default=repr)
    except (ValueError, RecursionError):
        text = "?"
    return text if len(text) <= 40 else text[:37] + "..."


def _excerpt(body: bytes) -> str:
    text = body[: _EXCERPT * 4].decode("utf-8", "replace")
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
