"""The recorder's lines: each line that passes `acp-green record` cut out of its stream and
written to the trace in bounded memory, whatever its length.

A line up to SPOOL_AT bytes is held in memory and traced as `tracing.wire_event` traces it. A
longer one goes, as it passes, into an unlinked temporary file beside the trace instead of into
memory, and is read once on its way there: whether it is UTF-8, and its JSON *skeleton*, the line
with each string longer than LONG_STRING bytes replaced by a placeholder (each such string
checked against strict JSON as it passes). Decoding the skeleton says what the line is (the event
`wire_event` would make of the whole line); the event is then written in pieces, each placeholder
and the `raw` line streamed back from the file. So the recorder holds at most the skeleton
(SKELETON_MAX bytes) and a few pieces of PIECE bytes, whatever the line's length. A line with more
than SKELETON_MAX bytes outside its long strings is not decoded: it is recorded as a `line` event
saying so, its raw bytes exact (readers that decode `raw`, as acp_green's do, still read it).
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii
from typing import Any

from ...rpc import wire
from ...tracing import AGENT, CLIENT, Event, TraceWriter, note_event, wire_event

__all__ = ["LONG_STRING", "LineTracer", "PIECE", "RecordWriter", "SKELETON_MAX", "SPOOL_AT"]

#: A line longer than this goes to a temporary file as it passes, not into memory.
SPOOL_AT = 1 << 20
#: A string longer than this, in a spooled line, stands in its skeleton as a placeholder (it
#: must be longer than any member name or value the event is made of: "sessionId", "2.0").
LONG_STRING = 1024
#: The most of a spooled line's JSON outside its long strings that is decoded.
SKELETON_MAX = 4 << 20
#: A spooled line is read back and written in pieces of this many bytes.
PIECE = 1 << 20

# The body of a JSON string as strict JSON has it (no raw control character, valid escapes); it
# stops at the closing quote, at anything invalid, or at an escape the next bytes may complete.
_BODY = re.compile(rb'(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+')
_TEXT_BODY = re.compile(r'(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+')
_SPACES = re.compile(rb"[ \t\r\n]{2,}")
_AT_BYTE = re.compile(r" at byte \d+(, where the line ends)?")
_MARKER = "acp-green-record-"
_PLACEHOLDER = re.compile(r"(?:\\u0000|\x00)" + _MARKER + r"[0-9a-f]*:?\d*")


class RecordWriter(TraceWriter):
    """The trace writer of `acp-green record`: also writes one event in pieces (a spooled line's)."""

    def write_pieces(self, pieces: Iterator[bytes], ts: float | None = None) -> None:
        """Append one event given as its encoding in pieces, the first opening with `{`."""
        if self.failed:
            return
        with self._lock:
            if self.failed:
                return
            ts = self.now() if ts is None else ts
            ts = self._last_ts = max(ts, self._last_ts)
            first = next(pieces)
            self._write_all(b'{"ts":' + repr(round(ts, 6)).encode("ascii") + b',"seq":%d,' % self._seq + first[1:])
            self._seq += 1
            try:
                for piece in pieces:
                    if self.failed:
                        return
                    self._write_all(piece)
            except BaseException:  # ok: re-raised; only closes the cut-short event's line first
                self._write_all(b"\n")  # the event cut short stays a line of its own (a reader names it damaged)
                raise

    def give_up(self, why: str, exc: OSError) -> None:
        """Nothing more is recorded: said in the trace, and once on stderr as any trace failure is."""
        self.note("error", f"{why}; nothing more is recorded")
        self._fail(exc)


class _Skeleton:
    """One long line read as it passes: whether it is UTF-8, and its JSON with each long string a placeholder."""

    def __init__(self, marker: str) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.utf8_error: int | None = None  # the offset of the first byte that is not UTF-8
        self.size = 0
        self.text = bytearray()
        self.broken: str | None = None  # why the line is no JSON, when a string shows it
        self.overflow = False  # more than SKELETON_MAX bytes outside long strings: not decoded
        self.strings: dict[str, tuple[int, int]] = {}  # placeholder -> where the string's body lies in the line
        self._marker = marker
        self._in_string = False
        self._long = False
        self._start = 0
        self._head = bytearray()
        self._carry = b""  # an escape cut by the end of a piece

    def feed(self, data: bytes) -> None:
        base = self.size - len(self._carry)
        if self.utf8_error is None:
            pending = len(self._utf8.getstate()[0])
            try:
                self._utf8.decode(data)
            except UnicodeDecodeError as exc:
                self.utf8_error = self.size - pending + exc.start
        self.size += len(data)
        if self.utf8_error is None and self.broken is None and not self.overflow:
            self._scan(self._carry + data if self._carry else data, base)

    def finish(self) -> None:
        if self.utf8_error is None:
            pending = len(self._utf8.getstate()[0])
            try:
                self._utf8.decode(b"", True)
            except UnicodeDecodeError as exc:
                self.utf8_error = self.size - pending + exc.start
        if self._in_string and self.broken is None:
            self.broken = "unterminated string"

    def _scan(self, data: bytes, base: int) -> None:
        self._carry = b""
        position, end = 0, len(data)
        while position < end:
            if not self._in_string:
                quote = data.find(b'"', position)
                self._add(data[position:end if quote < 0 else quote])
                if quote < 0:
                    return
                self._in_string, self._long, self._start = True, False, base + quote + 1
                self._head.clear()
                position = quote + 1
                continue
            stop = _BODY.match(data, position).end()  # type: ignore[union-attr]  # always matches
            if not self._long:
                self._head += data[position:stop]
                if len(self._head) > LONG_STRING:
                    self._long = True
                    self._head.clear()
            if stop == end:
                return
            if data[stop] == 0x22:  # the closing quote
                self._close_string(base + stop)
                position = stop + 1
            elif data[stop] == 0x5C and end - stop < 6:  # a backslash whose escape the next bytes complete
                self._carry = data[stop:]
                return
            else:
                self.broken = "a raw control character or an invalid escape inside a string"
                return

    def _close_string(self, end: int) -> None:
        self._in_string = False
        if self._long:
            placeholder = f"{self._marker}{len(self.strings)}"
            self.strings[placeholder] = (self._start, end)
            self._add(json.dumps(placeholder).encode("ascii"))
        else:
            self._add(b'"' + self._head + b'"')

    def _add(self, part: bytes) -> None:
        if self.overflow:
            return
        self.text += _SPACES.sub(b" ", part) if len(part) > 1 else part
        if len(self.text) > SKELETON_MAX:
            self.overflow = True
            self.text = bytearray()


class _Spool:
    """A long line in an unlinked temporary file, and its skeleton."""

    def __init__(self, directory: str | None, marker: str) -> None:
        try:
            self._file = tempfile.TemporaryFile(dir=directory)
        except OSError:
            self._file = tempfile.TemporaryFile()  # the trace's directory refuses: the system's
        self.fd = self._file.fileno()
        self.skeleton = _Skeleton(marker)

    def append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.skeleton.feed(data)

    def close(self) -> None:
        self._file.close()

    def read(self, start: int, end: int) -> Iterator[bytes]:
        while start < end:
            data = os.pread(self.fd, min(PIECE, end - start), start)
            if not data:
                raise OSError(f"the spooled line ended at byte {start} of {end}")
            start += len(data)
            yield data

    def text_pieces(self, errors: str) -> Iterator[bytes]:
        """The whole line decoded as UTF-8, as the body of a JSON string (ASCII)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors)
        for data in self.read(0, self.skeleton.size):
            yield _ascii_body(decoder.decode(data))
        yield _ascii_body(decoder.decode(b"", True))

    def base64_pieces(self) -> Iterator[bytes]:
        carry = b""
        for data in self.read(0, self.skeleton.size):
            data = carry + data
            cut = len(data) - len(data) % 3
            carry = data[cut:]
            yield base64.b64encode(data[:cut])
        yield base64.b64encode(carry)

    def excerpt(self, start: int, end: int, limit: int = 40) -> str:
        """A long string of the line as `wire.excerpt` shows it: its first characters, or all of it."""
        data = os.pread(self.fd, min(end - start, 12 * limit + 16), start)  # a character escaped is at most 12 bytes (a surrogate pair)
        text = codecs.getincrementaldecoder("utf-8")().decode(data, start + len(data) == end)
        value = scanstring('"' + text[:_TEXT_BODY.match(text).end()] + '"', 1)[0]  # type: ignore[union-attr]
        return wire.excerpt(value, limit)

    def string_pieces(self, start: int, end: int) -> Iterator[bytes]:
        """A long string of the line (its checked body at start:end) as the body of an ASCII JSON string."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        carry = ""
        for data in self.read(start, end):
            text = carry + decoder.decode(data)
            cut = _TEXT_BODY.match(text).end()  # type: ignore[union-attr]  # up to an escape the next piece completes
            carry = text[cut:]
            yield _ascii_body(scanstring('"' + text[:cut] + '"', 1)[0])
        if carry or decoder.decode(b"", True):
            raise ValueError("a long string ended inside an escape")  # it was checked as it passed: never


def _ascii_body(text: str) -> bytes:
    return encode_basestring_ascii(text)[1:-1].encode("ascii") if text else b""


def _json(value: Any) -> bytes:
    """Any JSON value as compact ASCII, as the trace writer encodes it."""
    try:
        return wire.encode_json(value)
    except (TypeError, OverflowError, ValueError):
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _other_side(sender: str) -> str:
    return AGENT if sender == CLIENT else CLIENT


def _skeleton_event(spool: _Spool, sender: str) -> Event:
    """The event of a spooled line, without its raw bytes: the skeleton's, or a `line` saying why there is none."""
    skeleton = spool.skeleton
    why: str | None = None
    if skeleton.utf8_error is not None:
        why = f"invalid UTF-8 at byte {skeleton.utf8_error}"
    elif skeleton.broken is not None:
        why = f"{skeleton.broken} (a line of {skeleton.size} bytes)"
    elif skeleton.overflow:
        why = (f"not decoded by the recorder: more than {SKELETON_MAX} bytes of this line of {skeleton.size} lie outside "
               f"its strings longer than {LONG_STRING} bytes (its raw bytes are exact)")
    if why is not None:
        return {"type": "line", "from": sender, "to": _other_side(sender), "error": why}
    event = wire_event(bytes(skeleton.text), sender)
    event.pop("raw", None)
    if event["type"] == "line":  # positions are the skeleton's, not the line's
        event["error"] = _AT_BYTE.sub("", str(event.get("error", "")))
    for described in [event, *event.get("members", ())]:  # why a line, or a member of a batch, is no message
        if "error" in described and _MARKER in described["error"]:
            described["error"] = _real_strings(spool, described["error"])
    return event


def _real_strings(spool: _Spool, error: str) -> str:
    """An error that quotes a placeholder (`the string "..."`), quoting the string it stands for."""
    for placeholder, span in spool.skeleton.strings.items():
        quoted = json.dumps(wire.excerpt(placeholder, 40), ensure_ascii=False)
        if quoted in error:
            error = error.replace(quoted, json.dumps(spool.excerpt(*span), ensure_ascii=False))
    return _PLACEHOLDER.sub("…", error)


class _Encoder:
    """A decoded skeleton encoded in pieces, each placeholder streamed from the spool as the string it stands for."""

    def __init__(self, spool: _Spool) -> None:
        self.spool = spool
        self.strings = spool.skeleton.strings
        self.holders: set[int] = set()  # ids of the objects and arrays a placeholder lies in

    def members(self, event: Event) -> Iterator[bytes]:
        """The event's opening brace and members; the caller closes it."""
        self._mark(event)
        yield b"{"
        for index, (key, value) in enumerate(event.items()):
            yield (b"," if index else b"") + _json(key) + b":"
            yield from self.value(value)

    def value(self, value: Any) -> Iterator[bytes]:
        if isinstance(value, str):
            span = self.strings.get(value)
            if span is None:
                yield _json(value)
                return
            yield b'"'
            yield from self.spool.string_pieces(*span)
            yield b'"'
        elif id(value) not in self.holders:
            yield _json(value)
        elif isinstance(value, dict):
            for index, (key, item) in enumerate(value.items()):
                yield b"," if index else b"{"
                yield from self.value(key)
                yield b":"
                yield from self.value(item)
            yield b"}"
        else:
            for index, item in enumerate(value):
                yield b"," if index else b"["
                yield from self.value(item)
            yield b"]"

    def _mark(self, node: Any) -> bool:
        """Whether a placeholder lies in `node`; marks each object and array that holds one."""
        if isinstance(node, str):
            return node in self.strings
        if isinstance(node, dict):
            children: list[Any] = [*node.keys(), *node.values()]
        elif isinstance(node, list):
            children = node
        else:
            return False
        held = False
        for child in children:
            held = self._mark(child) or held
        if held:
            self.holders.add(id(node))
        return held


def _spooled_pieces(spool: _Spool, sender: str, stderr: bool, newline: bool) -> Iterator[bytes]:
    """The whole event of a spooled line, in pieces."""
    if stderr:
        yield b'{"type":"trace","component":' + _json(sender) + b',"level":"info","message":"'
        yield from spool.text_pieces("replace")
        yield b'"}\n'
        return
    skeleton = spool.skeleton
    yield from _Encoder(spool).members(_skeleton_event(spool, sender))
    if skeleton.utf8_error is None:
        yield b',"raw":"'
        yield from spool.text_pieces("strict")
    else:
        yield b',"raw_b64":"'
        yield from spool.base64_pieces()
    yield b'"' + (b"" if newline else b',"newline":false') + b"}\n"


class LineTracer:
    """One direction of the wire (or the agent's stderr) cut into lines for the trace, from
    chunks of any size. Holds the line being passed up to SPOOL_AT bytes; a longer one is
    spooled (in `directory`, the trace's) and its event written in pieces."""

    def __init__(self, writer: RecordWriter, sender: str, *, stderr: bool = False, directory: str | None = None) -> None:
        self._writer = writer
        self._sender = sender
        self._stderr = stderr
        self._directory = directory
        self._marker = f"\0{_MARKER}{secrets.token_hex(8)}:"
        self._line = bytearray()
        self._spool: _Spool | None = None

    def feed(self, chunk: bytes) -> None:
        """The bytes that just passed; every line they complete is written to the trace."""
        if self._writer.failed:
            self._drop()
            return
        if b"\n" not in chunk:
            self._add(chunk)
            return
        parts = chunk.split(b"\n")
        tail = parts.pop()
        batch: list[Event] = []
        for part in parts:
            if self._spool is None and not self._line and len(part) <= SPOOL_AT:
                batch.append(self._event(part, True))  # the common case: a whole line in this chunk, no copy
                continue
            self._add(part)
            if self._spool is None:
                batch.append(self._event(bytes(self._line), True))
                self._line.clear()
            else:
                self._writer.write(batch)
                batch = []
                self._write_spooled(True)
        self._writer.write(batch)
        if tail:
            self._add(tail)

    def end(self) -> None:
        """The stream ended: a last line without a final newline is written now."""
        if self._writer.failed:
            self._drop()
        elif self._spool is not None:
            self._write_spooled(False)
        elif self._line:
            self._writer.write([self._event(bytes(self._line), False)])
            self._line.clear()

    def _add(self, data: bytes) -> None:
        if self._spool is None and len(self._line) + len(data) <= SPOOL_AT:
            self._line += data
            return
        try:
            if self._spool is None:
                self._spool = _Spool(self._directory, self._marker)
                self._spool.append(bytes(self._line))
                self._line.clear()
            self._spool.append(data)
        except OSError as exc:  # a trace with a line left out would misstate what passed: it ends here
            self._drop()
            self._writer.give_up(f"{self._sender}: cannot keep a line longer than {SPOOL_AT} bytes for the trace "
                                 f"({exc.strerror or exc})", exc)

    def _write_spooled(self, newline: bool) -> None:
        spool, self._spool = self._spool, None
        assert spool is not None
        try:
            spool.skeleton.finish()
            self._writer.write_pieces(_spooled_pieces(spool, self._sender, self._stderr, newline))
        except OSError as exc:
            self._writer.give_up(f"{self._sender}: cannot read back a spooled line ({exc.strerror or exc})", exc)
        finally:
            spool.close()

    def _drop(self) -> None:
        self._line.clear()
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def _event(self, line: bytes, newline: bool) -> Event:
        if self._stderr:
            return note_event(self._sender, "info", line.decode("utf-8", errors="replace"))
        return wire_event(line, self._sender, newline=newline)
