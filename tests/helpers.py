"""The helpers every test shares: what an agent said, whether a process is gone, bounded waits,
and the invariant check every agent-launching fixture runs at teardown.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import termios
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent.event import Event

from acp_green.tools.rig.client import Record
from acp_green.tools.rig.invariants import InvariantChecker
from acp_green.tools.rig.reaper import proc_info
from acp_green.tools.rig.schema import StreamChecker
from acp_green.tools.rig.schema_v2 import schema_for_version

#: The tests directory and the repository root, for the files a test reads or runs by path
#: (test modules sit one folder down, so their own __file__ is not where these are).
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# -- what an agent said ---------------------------------------------------------------------------


def chunk_texts(updates: Iterable[dict[str, Any]], kind: str = "agent_message_chunk") -> list[str]:
    """The text of every `kind` update (agent_message_chunk by default), in order."""
    return [u["content"]["text"] for u in updates if u.get("sessionUpdate") == kind]


def said(updates: Iterable[dict[str, Any]]) -> str:
    """Everything the agent said in these updates, joined."""
    return "".join(chunk_texts(updates))


class FakeClock:
    """Stands in for the `time` module a unit under test reads (monkeypatch it in): monotonic()
    and time() both return `now`, which only the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


# -- processes ------------------------------------------------------------------------------------


def process_gone(pid: int) -> bool:
    """No process with this pid runs and none is owed a wait by the code under test.

    The one rule for zombies: a zombie has exited, but its parent still owes it a wait. If that
    parent is this test process (the rig makes itself the child subreaper, and gevent reaps every
    child of ours) or init, reaping is not the tested code's job: the zombie counts as gone. If
    the parent is any other process (an agent, an MCP server), that process has not reaped its
    child: the zombie counts as alive.
    """
    info = proc_info(pid)
    if info is None or info.state == "X":
        return True
    return info.state == "Z" and info.ppid in (1, os.getpid())


def group_members(pgid: int) -> list[int]:
    """Pids of the process group `pgid` that are not gone (by `process_gone`'s rule)."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = proc_info(int(name))
            if info is not None and info.pgid == pgid and not process_gone(info.pid):
                members.append(info.pid)
    return members


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
               changed: Event | None = None) -> Any:
    """The tests' one bounded wait: until predicate() is truthy (returned), else AssertionError
    naming `what` once `timeout` passes. It always yields to the hub while it waits.

    `changed` is an event the owner of the state sets whenever it changes (a sink's new line, a
    server's new request): the predicate is re-checked as soon as it is set, and at least every
    50 ms. Without one (another process, another thread) it re-checks every 20 ms. The rig's
    client has its own `AcpClient.wait_for`, the same wait on the lines it reads.
    """
    deadline = time.monotonic() + timeout
    while True:
        if changed is not None:
            changed.clear()  # before the check: a change after it wakes the wait below
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        if changed is not None:
            changed.wait(min(remaining, 0.05))
        else:
            gevent.sleep(min(remaining, 0.02))


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Wait (generously bounded) until `process_gone(pid)`; False if it is still there."""
    try:
        return wait_until(lambda: process_gone(pid), timeout, f"pid {pid} to be gone")
    except AssertionError:
        return False


def unread_bytes(fd: int) -> int:
    """Bytes written into the pipe `fd` reads from and not read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def pipe_is_full(fd: int) -> bool:
    """True when the pipe `fd` reads from has no room for a write that needs a new page: its
    writer is blocked, or will be at its next write. Linux only.

    Asked of the kernel, not guessed from a byte count: a pipe holds up to 16 pages, but a page
    written in pieces (or partly read) holds less than 4096 bytes, so a full pipe may hold far
    less than its capacity. A second write end of the same pipe (/proc/self/fd) is polled for
    POLLOUT, which Linux reports exactly while a page slot is free.
    """
    probe = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        poller = select.poll()
        poller.register(probe, select.POLLOUT)
        return not poller.poll(0)
    finally:
        os.close(probe)


def wait_pipe_full(fd: int, timeout: float = 30.0) -> None:
    """Wait until the pipe `fd` reads from is full (`pipe_is_full`): its writer is blocked, or
    about to be. Linux only."""
    wait_until(lambda: pipe_is_full(fd), timeout, "the pipe to fill")


# -- the invariant check at teardown --------------------------------------------------------------

#: Invariants the teardown check skips: the schema is checked by `schema_problems` (with its
#: rule for id-null errors), exit and orphans by the fixtures themselves.
_CHECKED_ELSEWHERE = frozenset({"schema", "exit_after_eof", "no_orphan_processes"})


def tolerated_invariants(request: pytest.FixtureRequest) -> frozenset[str]:
    """Invariants the test declared it breaks on purpose with `@pytest.mark.breaks_invariants`.

    The marker must name each invariant and give a reason: nothing is switched off silently.
    """
    tolerated: set[str] = set()
    for marker in request.node.iter_markers("breaks_invariants"):
        reason = marker.kwargs.get("reason")
        if not marker.args or not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(f"{request.node.nodeid}: breaks_invariants needs invariant names and a reason=")
        tolerated.update(marker.args)
    return frozenset(tolerated)


def invariant_problems(records: Sequence[Record], tolerated: frozenset[str] = frozenset(),
                       complete: bool | str = "read") -> list[str]:
    """The rig's invariants (acp_green/tools/rig/invariants.py) over one connection's records.

    `complete="read"`: every request sent before the last one answered must have been answered
    (the agent reads in order; a test may stop it before it read the rest).
    """
    checker = InvariantChecker()
    checker.finish(records, complete=complete)
    return [str(v) for v in checker.violations if v.invariant not in _CHECKED_ELSEWHERE | tolerated]


# -- what a third-party client and the agent said (a tests/peers/tee_agent.py log) ----------------


def wire_log_records(path: str | os.PathLike[str]) -> list[Record]:
    """The lines a tee_agent.py log holds, as rig records ("in" = agent -> client, "out" = client -> agent)."""
    records = []
    for line in open(path, "rb").read().splitlines():
        tag, _, raw = line.partition(b" ")
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        records.append(Record(0.0, "in" if tag == b"in" else "out", raw, message))
    return records


def stream_schema_problems(records: Iterable[Record], sender: str = "agent") -> list[str]:
    """Schema problems (stable and unstable schema) of what `sender` ("agent" or "client") wrote in these records."""
    records = batch_members(records)
    checker = StreamChecker(sender)
    own = "in" if sender == "agent" else "out"
    problems: list[str] = []
    initialize_ids: set[Any] = set()
    for record in records:
        if record.message is None:
            if record.direction == own:
                problems.append(f"unparseable line from the {sender}: {record.raw[:200]!r}")
            continue
        message = record.message
        if isinstance(message, dict) and message.get("method") == "initialize":
            initialize_ids.add(repr(message.get("id")))
        result = message.get("result") if isinstance(message, dict) and repr(message.get("id")) in initialize_ids else None
        if isinstance(result, dict) and "protocolVersion" in result:
            # Validated from this answer on against the schema of the version it negotiated (v2: the draft).
            checker.schema = schema_for_version(result["protocolVersion"]) or checker.schema
        problems.extend(checker.observe(message, from_sender=record.direction == own))
    return problems


def batch_members(records: Iterable[Record]) -> list[Record]:
    """The records, with a JSON-RPC batch line (an array) as one record per member, in its place."""
    found: list[Record] = []
    for record in records:
        if isinstance(record.message, list):
            found.extend(Record(record.t, record.direction, record.raw, member) for member in record.message)
        else:
            found.append(record)
    return found


FINAL_TOOL_STATUSES = frozenset({"completed", "failed"})


def unfinished_tool_calls(records: Iterable[Record]) -> list[str]:
    """Tool calls a prompt started that had no final status (completed/failed) when its response came."""
    prompts: dict[Any, str] = {}  # prompt request id -> session id
    open_calls: dict[str, dict[str, str]] = {}  # session id -> tool call id -> last status
    problems = []
    for record in records:
        message = record.message
        if not isinstance(message, dict):
            continue
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if record.direction == "out" and message.get("method") == "session/prompt":
            prompts[message.get("id")] = params.get("sessionId")
            open_calls[params.get("sessionId")] = {}
        elif record.direction == "in" and message.get("method") == "session/update":
            update = params.get("update") or {}
            if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
                calls = open_calls.setdefault(params.get("sessionId"), {})
                calls[update.get("toolCallId")] = update.get("status") or calls.get(update.get("toolCallId"), "pending")
        elif record.direction == "in" and "method" not in message and message.get("id") in prompts:
            session = prompts.pop(message.get("id"))
            for call, status in open_calls.pop(session, {}).items():
                if status not in FINAL_TOOL_STATUSES:
                    problems.append(f"tool call {call} of {session} was {status!r} when its prompt was answered {message}")
    return problems


def record_peak_backlog(monkeypatch: Any, outbound: Any) -> list[int]:
    """Watch an Outbound's queued bytes: the returned one-item list holds the highest seen after any put."""
    peak = [0]
    original = outbound.put

    def put(data: bytes) -> None:
        original(data)
        peak[0] = max(peak[0], outbound.queued_bytes)

    monkeypatch.setattr(outbound, "put", put)
    return peak
