"""The trace format (docs/TRACES.md): one event per line that passed, appended to a file as it passes.

Used by `acp-green record` (a proxy process, several threads) and `acp-green serve --trace` (in the
agent's own process, on the hub): nothing here waits on anything but a regular file's write, and a
trace that cannot be written never stops the traffic it records (said once on stderr, then dropped).
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ParseError
from .rpc import wire

log = logging.getLogger(__name__)

FORMAT = "acp-green-trace/1"
CLIENT = "client"
AGENT = "agent"
_OTHER_SIDE = {CLIENT: AGENT, AGENT: CLIENT}
LEVELS = ("trace", "debug", "info", "warn", "error")

Event = dict[str, Any]


def wire_event(data: bytes, sender: str, *, newline: bool = True) -> Event:
    """The event for one line `sender` ("client" or "agent") wrote, without ts and seq.

    `data` is the line without its final newline; `newline` False for a last line that had none.
    Never raises for any bytes: a JSON-RPC batch (a non-empty array) is one `batch` event whose
    `members` describe its elements in order; anything else that is not one JSON-RPC message is a
    `line` event saying why.
    """
    event = _message_event(data, sender, _OTHER_SIDE[sender])
    try:
        event["raw"] = data.decode("utf-8")
    except UnicodeDecodeError:
        event["raw_b64"] = base64.b64encode(data).decode("ascii")
    if not newline:
        event["newline"] = False
    return event


def _message_event(data: bytes, sender: str, to: str) -> Event:
    """The event's fields for the one JSON-RPC message (or batch) `data` holds, or a `line` event saying why none."""
    try:
        value = wire.decode_value(data)
    except ParseError as exc:
        return {"type": "line", "from": sender, "to": to, "error": str(exc).removeprefix("Parse error: ")}
    if isinstance(value, list) and value:
        members = []
        for member in value:  # each as the event it would be alone, without from, to and raw (the batch's)
            fields = _value_event(member, sender, to)
            del fields["from"], fields["to"]
            members.append(fields)
        return {"type": "batch", "from": sender, "to": to, "members": members}
    if isinstance(value, list):
        return {"type": "line", "from": sender, "to": to, "error": "an empty batch (JSON array): no JSON-RPC message"}
    return _value_event(value, sender, to)


def _value_event(value: Any, sender: str, to: str) -> Event:
    """The event's fields for one decoded JSON value: a message's, or a `line`'s saying why it is none."""
    if isinstance(value, list):
        error = "a batch (JSON array) inside a batch: not a JSON-RPC message"
    elif not isinstance(value, dict):
        error = f"{wire.describe(value)}: a JSON-RPC message is an object"
    else:
        try:
            message = wire.classify(value)
        except wire.InvalidMessage as exc:
            error = str(exc)
        else:
            if isinstance(message, wire.Response):
                is_error = message.error is not None
                return {"type": "response", "from": sender, "to": to, "id": message.id, "is_error": is_error,
                        "payload": message.error if is_error else message.result}
            params = value.get("params")
            session = params.get("sessionId") if isinstance(params, dict) else None
            session = session if isinstance(session, str) else None
            if isinstance(message, wire.Request):
                return {"type": "request", "from": sender, "to": to, "protocol": "acp", "id": message.id,
                        "method": message.method, "session": session, "params": params}
            return {"type": "notification", "from": sender, "to": to, "protocol": "acp", "method": message.method,
                    "session": session, "params": params}
    return {"type": "line", "from": sender, "to": to, "error": error}


def note_event(component: str, level: str, message: str, fields: dict[str, Any] | None = None) -> Event:
    """A `trace` event (not wire traffic): the agent's stderr or the tool's own notes."""
    event: Event = {"type": "trace", "component": component, "level": level, "message": message}
    if fields is not None:
        event["fields"] = fields
    return event


def header_fields(command: Sequence[str] | None, pid: int | None) -> dict[str, Any]:
    """The `fields` of a trace's first event."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"format": FORMAT, "command": list(command) if command is not None else None, "started": started, "pid": pid}


def encode_event(event: Event) -> bytes:
    """One event as a line of the trace file (ASCII JSON and a newline)."""
    try:
        return wire.encode_json(event) + b"\n"
    except (TypeError, OverflowError, ValueError):  # whatever the fast encoder refuses, the slow one writes
        return json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


class TraceWriter:
    """Appends events to one trace file, each written as it is given (no buffer a crash could lose).

    Safe from several threads. `ts` never decreases along the file (an event given a time before
    the last one written takes the last one's). When the file cannot be opened or written, one
    WARNING says so and every later event is dropped: the traffic never waits for its trace.
    """

    def __init__(self, path: str, component: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.component = component
        self._clock = clock
        self._origin = clock()
        self._last_ts = 0.0
        self._seq = 0
        self._lock = threading.Lock()
        #: True once nothing more is written: the file failed, or the trace was closed.
        self.failed = False
        self._fd: int | None = None
        try:
            # Private: a trace holds prompts, files and whatever else crossed the wire.
            # O_NOFOLLOW: a link planted where the trace goes cannot make it write another file.
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._fail(exc)

    def now(self) -> float:
        """Seconds since the trace started, on the writer's clock."""
        return self._clock() - self._origin

    def write(self, events: Sequence[Event], ts: float | None = None) -> None:
        """Append events that happened at `ts` (default: now), in one write."""
        if self.failed or not events:
            return
        bodies = [encode_event(event) for event in events]  # the costly part, outside the lock
        with self._lock:
            if self.failed:  # another thread's write failed, or the trace was closed, meanwhile
                return
            ts = self.now() if ts is None else ts
            ts = self._last_ts = max(ts, self._last_ts)
            stamp = b'{"ts":' + repr(round(ts, 6)).encode("ascii") + b',"seq":'
            lines = []
            for body in bodies:  # each `{"type":...}`: ts and seq go first
                lines.append(b"%s%d,%s" % (stamp, self._seq, body[1:]))
                self._seq += 1
            self._write_all(b"".join(lines))

    def start(self, command: Sequence[str] | None, pid: int | None) -> None:
        """The first event of every trace: the format, the agent's command and pid, the wall time."""
        self.write([note_event(self.component, "info", f"recording started ({FORMAT})", header_fields(command, pid))])

    def finish(self, exit_code: int | None, signal_name: str | None) -> None:
        """The last event of a recording that ended cleanly; closes the file."""
        ended = f"the agent exited with {exit_code}" if signal_name is None else f"the agent ended by {signal_name}"
        self.write([note_event(self.component, "info", ended, {"exit": exit_code, "signal": signal_name})])
        self.close()

    def note(self, level: str, message: str) -> None:
        """A note of the tool's own, in the trace."""
        self.write([note_event(self.component, level, message)])

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
            self.failed = True  # nothing more is written
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                if self._fd is None:
                    return
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        log.warning("cannot write the trace file %s (%s); the traffic goes on unrecorded", self.path,
                    exc.strerror or exc)


class StreamTrace:
    """One direction of the wire (or the agent's stderr) cut into lines for the trace, from
    chunks of any size; holds at most the partial line the last chunk ended in."""

    def __init__(self, writer: TraceWriter, sender: str, *, stderr: bool = False) -> None:
        self._writer = writer
        self._sender = sender
        self._stderr = stderr
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes, ts: float | None = None) -> None:
        """The bytes that just passed; every line they complete is written to the trace."""
        if self._writer.failed:
            return
        if b"\n" not in chunk:
            if chunk:
                self._partial.append(chunk)
            return
        lines = chunk.split(b"\n")
        if self._partial:
            lines[0] = b"".join([*self._partial, lines[0]])
            self._partial.clear()
        rest = lines.pop()
        if rest:
            self._partial.append(rest)
        self._writer.write([self._event(line, True) for line in lines], ts)

    def end(self, ts: float | None = None) -> None:
        """The stream ended: a last line without a final newline is written now."""
        if self._partial and not self._writer.failed:
            line = b"".join(self._partial)
            self._partial.clear()
            self._writer.write([self._event(line, False)], ts)

    def _event(self, line: bytes, newline: bool) -> Event:
        if self._stderr:
            return note_event(self._sender, "info", line.decode("utf-8", errors="replace"))
        return wire_event(line, self._sender, newline=newline)


class WireTrace:
    """The trace of one connection served in this process (`serve --trace`): what the reader
    read and what the writer wrote, with the runtime's notes."""

    def __init__(self, path: str, command: Sequence[str] | None, pid: int | None) -> None:
        self.writer = TraceWriter(path, "runtime")
        self.writer.start(command, pid)
        self._sent = StreamTrace(self.writer, AGENT)

    def received(self, line: bytes) -> None:
        """One line the reader handed on, with its newline (none for a last line that had none)."""
        if not self.writer.failed:
            newline = line.endswith(b"\n")
            self.writer.write([wire_event(line[:-1] if newline else line, CLIENT, newline=newline)])

    def sent(self, data: bytes) -> None:
        """Bytes the writer wrote to the wire."""
        self._sent.feed(data)

    def note(self, level: str, message: str) -> None:
        self.writer.note(level, message)

    def finish(self, exit_code: int | None, signal_name: str | None) -> None:
        """The connection is over: a last line written without a newline, then the closing event."""
        self._sent.end()
        self.writer.finish(exit_code, signal_name)
