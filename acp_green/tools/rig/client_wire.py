"""The rig client's wire: what it records, the requests it awaits, and the reader of the agent's lines.

`AcpClient` (client.py) holds a `PendingRequests` and an `Inbox`; this module knows nothing of
ACP, only of JSON-RPC lines.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, SupportsIndex, overload

import gevent
from gevent.event import AsyncResult, Event
from gevent.fileobject import FileObjectPosix
from gevent.greenlet import Greenlet

from ...rpc.wire import IdKey, id_key

__all__ = ["Inbox", "KEPT_OF_A_CUT_LINE", "MAX_LINE_BYTES", "Pending", "PendingRequests", "Record", "RecordLog", "RpcErrorResponse",
           "YIELD_EVERY", "messages_of", "record_cost"]

#: A line the agent writes is read up to this long (the runtime's own bound); what is longer is cut.
MAX_LINE_BYTES = 64 << 20
#: How much of a cut line its record keeps: an endless line must not fill the memory.
KEPT_OF_A_CUT_LINE = 64 << 10
#: The reader yields to the hub every this many lines, so a flooding agent cannot starve the timers.
YIELD_EVERY = 64


class RpcErrorResponse(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.code = error.get("code")
        self.reason = (error.get("data") or {}).get("reason") if isinstance(error.get("data"), dict) else None
        super().__init__(f"{error.get('code')}: {error.get('message')}")


@dataclass(slots=True)
class Record:
    """One message on the wire: who sent it, when, and what it was."""

    t: float
    direction: str  # "in" (agent -> client) or "out" (client -> agent)
    raw: bytes
    message: Any  # decoded JSON, or None when the line did not parse


def record_cost(record: Record) -> int:
    """About what one record costs in memory: its bytes, the message decoded from them (a few
    times as much), and the objects around them; a message the client sent is counted as small."""
    return 3 * len(record.raw) + 1024


class RecordLog(list[Record]):
    """The records of a client that keeps the last `budget` bytes of them (by `record_cost`):
    a list whose indexes stay those of every record the connection had, so that holders of an
    index (a checker fed in order, a turn's first line) keep their place.

    `len` counts every record appended; `log[i]` and `log[i:]` reach those still kept (IndexError
    for a dropped one; a slice starts at the oldest kept); iterating gives those kept. When they
    cost more than `budget`, each callable of `before_drop` is called (a checker catches up), then
    the oldest are dropped until they cost half of it; `first` is the index of the oldest kept,
    `dropped` how many are gone. Only appending is meant: the list's other methods see the kept
    records only, at their place in what is kept."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget
        self.first = 0
        self.before_drop: list[Callable[[], object]] = []
        self._cost = 0

    @property
    def dropped(self) -> int:
        return self.first

    def append(self, record: Record) -> None:
        super().append(record)
        self._cost += record_cost(record)
        if self._cost > self.budget:
            for catch_up in self.before_drop:
                catch_up()
            kept = super().__len__()
            cut = 0
            while cut < kept and self._cost > self.budget // 2:
                self._cost -= record_cost(super().__getitem__(cut))
                cut += 1
            super().__delitem__(slice(0, cut))
            self.first += cut

    def __len__(self) -> int:
        return self.first + super().__len__()

    @overload
    def __getitem__(self, index: SupportsIndex) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a RecordLog is sliced in steps of 1")
            return super().__getitem__(slice(max(start - self.first, 0), max(stop - self.first, 0)))
        position = index.__index__()
        position = position + len(self) if position < 0 else position
        if position < self.first:
            raise IndexError(f"record {position} was dropped (the client keeps the last {self.budget} bytes of records)")
        return super().__getitem__(position - self.first)


class Pending:
    """A request the client sent; resolves to the agent's response message."""

    def __init__(self, request_id: Any, method: str, sent_at: float) -> None:
        self.id = request_id
        self.method = method
        self.sent_at = sent_at
        self.answered_at: float | None = None
        self._result = AsyncResult()

    def resolve(self, message: dict[str, Any], at: float) -> None:
        self.answered_at = at
        self._result.set(message)

    @property
    def done(self) -> bool:
        return self._result.ready()

    @property
    def waitable(self) -> AsyncResult:
        """Something gevent.wait() can wait on together with other events."""
        return self._result

    def response(self, timeout: float | None = 30.0) -> dict[str, Any]:
        """The full response message; raises gevent.Timeout if none arrives in time."""
        return self._result.get(timeout=timeout)

    def result(self, timeout: float | None = 30.0) -> Any:
        """The result, or RpcErrorResponse for an error."""
        message = self.response(timeout)
        if "error" in message:
            raise RpcErrorResponse(message["error"])
        return message.get("result")

    def error(self, timeout: float | None = 30.0) -> dict[str, Any]:
        message = self.response(timeout)
        if "error" not in message:
            raise AssertionError(f"expected an error for {self.method} #{self.id}, got {message}")
        return message["error"]


class PendingRequests:
    """The client's requests awaiting the agent's answer: each one's `Pending` by id, and the
    numbers the client gives new requests."""

    def __init__(self) -> None:
        self.pending: dict[IdKey | None, Pending] = {}
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        return next(self._ids)

    def sent(self, message: Any, at: float) -> None:
        """A message the client wrote: a request awaits its answer from now on."""
        if isinstance(message, dict) and "id" in message and "method" in message:
            self.pending[id_key(message["id"])] = Pending(message["id"], message["method"], at)

    def answered(self, message: dict[str, Any], at: float) -> None:
        """A response of the agent resolves the request it answers (its first answer only)."""
        key = id_key(message.get("id"))
        if "id" in message and key is not None:  # an invalid id answers nothing we sent
            pending = self.pending.get(key)
            if pending is not None and not pending.done:
                pending.resolve(message, at)


class Inbox:
    """Reads the agent's lines in a greenlet of its own: records each one, hands each message it
    holds to `handle`, and wakes whoever `wait_for`s something to arrive."""

    def __init__(self, read_fd: int, records: list[Record], handle: Callable[[dict[str, Any], float], None], *,
                 close_fd: bool = True) -> None:
        self._file = FileObjectPosix(read_fd, "rb", closefd=close_fd)
        self._records = records
        self._handle = handle
        self._changed = Event()
        self._reading = Event()
        self._reading.set()
        self.eof = Event()
        self._greenlet = Greenlet(self._read_loop)
        self._greenlet.start()

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        """Wait until predicate() is truthy; AssertionError naming `what` on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            self._changed.clear()
            value = predicate()
            if value:
                return value
            self._changed.wait(min(remaining, 0.5))

    def record_into(self, records: list[Record]) -> None:
        """Append each line read from now on to `records` instead."""
        self._records = records

    def pause(self) -> None:
        self._reading.clear()

    def resume(self) -> None:
        self._reading.set()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` for the reader to end (it ends once it read the agent's EOF)."""
        self._greenlet.join(timeout=timeout)

    def stop(self) -> None:
        """End the reader now, and close what it reads."""
        self._greenlet.kill(block=True, timeout=2)
        self.close()

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass

    def _read_loop(self) -> None:
        readline = self._file.readline
        try:
            for count in itertools.count(1):
                if not self._reading.is_set():
                    self._reading.wait()
                line = readline(MAX_LINE_BYTES)
                if not line:
                    break
                now = time.monotonic()
                cut = len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n")
                try:
                    message = None if cut else json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
                    message = None
                if cut:  # a line without end: a piece of it is recorded, as a line that is not JSON
                    line = line[:KEPT_OF_A_CUT_LINE]
                if cut or count % YIELD_EVERY == 0:
                    gevent.sleep(0)  # an agent that floods stdout must not starve the waits' timers
                self._records.append(Record(now, "in", line, message))
                for each in [m for m in messages_of(message) if isinstance(m, dict)]:
                    self._handle(each, now)
                self._changed.set()
        except OSError:
            pass
        finally:
            self.eof.set()
            self._changed.set()


def messages_of(message: Any) -> list[Any]:
    """What one line the agent wrote holds: its message, or a batch's answers (ACP v2) each in its
    place, handled as if it came alone; nothing for a line that was not JSON."""
    if message is None:
        return []
    return message if isinstance(message, list) else [message]
