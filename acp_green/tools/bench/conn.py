"""A lean client connection to one agent process: raw pipe reads, lazy scanning, matched replies.

The rig's AgentProcess decodes and records every line, which is right for tests and too slow
for 200k chunks/s. This one reads the pipe in big non-blocking reads, lets the Scanner count
chunks, and decodes only responses. Timestamps are taken when a read returns.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gevent
from gevent import subprocess
from gevent.event import AsyncResult
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore

from ..rig.reaper import end_process

from .scan import Scanner

READ_SIZE = 1 << 20
PROTOCOL_VERSION = 1
CLIENT_INFO = {"name": "acp-green-bench", "version": "0.1.0"}


class AgentFailed(Exception):
    """The agent exited, answered with an error, or did not answer in time."""


@dataclass(slots=True)
class Call:
    """One request: when it was written and when its response was read."""

    id: int
    method: str
    sent_at: float
    read_at_send: int = 0  # bytes of output the client had read when it sent the request
    chunks_at_send: int = 0  # session/update chunks the client had read when it sent the request
    answered_at: float = 0.0
    answered_pos: int = 0  # byte offset of the response in the agent's output: exact ordering
    response: dict[str, Any] | None = None
    session_id: str | None = None  # a prompt's session (ACP v2 ends it by a state_update there)
    acknowledged_at: float | None = None  # ACP v2: when the prompt's acknowledgement was read

    @property
    def done(self) -> bool:
        return self.response is not None

    @property
    def latency(self) -> float:
        """Seconds from writing the request to reading its response."""
        return self.answered_at - self.sent_at

    @property
    def queued_ahead(self) -> int:
        """Bytes of output the response came behind: what the agent had written (pipe, queues) or
        wrote before it, that the client had not read when it sent the request."""
        return max(0, self.answered_pos - self.read_at_send)


class AgentConn:
    """One agent process over pipes, read either by a background greenlet or by `pump`."""

    def __init__(self, command: Sequence[str], *, keep_limit: int = 0, read_pause: float = 0.0, env: dict[str, str] | None = None,
                 protocol_version: int = PROTOCOL_VERSION) -> None:
        self.command = list(command)
        self.requested_version = protocol_version
        self.protocol_version = PROTOCOL_VERSION  # what `initialize` negotiated
        # ACP v2: a prompt's response only acknowledges it; its turn ends with an idle state_update,
        # which completes the prompt's call (by session: one running prompt per session).
        self._turns: dict[str, Call] = {}
        self.read_pause = read_pause
        self._stderr = tempfile.TemporaryFile(prefix="acp-bench-stderr-")
        self.started_at = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                env=env, start_new_session=True,
            )
        except OSError as exc:
            raise AgentFailed(f"cannot start {self.command[0]}: {exc}") from None
        self.pid = self.proc.pid
        self._in_fd = self.proc.stdout.fileno()
        self._out_fd = self.proc.stdin.fileno()
        os.set_blocking(self._in_fd, False)
        os.set_blocking(self._out_fd, False)
        hub = gevent.get_hub()
        self._hub = hub
        self._read_watcher = hub.loop.io(self._in_fd, 1)
        self._write_watcher = hub.loop.io(self._out_fd, 2)
        self._write_lock = Semaphore()
        self._ids = itertools.count(1)
        self.calls: dict[int, Call] = {}
        self._waiters: dict[int, AsyncResult] = {}
        self.on_response: Callable[[Call], None] | None = None
        self.scanner = Scanner(self._matched, keep_limit=keep_limit,
                               on_state=self._state_update if protocol_version >= 2 else None)
        self.eof = False
        self._reader: Greenlet | None = None

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Write all of `data`, waiting cooperatively while the agent's stdin pipe is full."""
        view = memoryview(data)
        with self._write_lock:
            while view:
                try:
                    n = os.write(self._out_fd, view)
                except BlockingIOError:
                    self._hub.wait(self._write_watcher)
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    raise AgentFailed(f"agent closed its stdin ({self.describe_exit()})") from None
                view = view[n:]

    def make_call(self, method: str, params: Any) -> tuple[Call, bytes]:
        """A request's bookkeeping and its encoded line (not yet written)."""
        request_id = next(self._ids)
        call = Call(request_id, method, 0.0)
        self.calls[request_id] = call
        if method == "session/prompt" and self.protocol_version >= 2:
            call.session_id = params["sessionId"]
            self._turns[call.session_id] = call
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, separators=(",", ":"))
        return call, line.encode() + b"\n"

    def send(self, method: str, params: Any) -> Call:
        """Write one request; its send time is taken just before the write."""
        call, line = self.make_call(method, params)
        call.read_at_send = self.scanner.bytes
        call.chunks_at_send = self.scanner.chunks
        call.sent_at = time.perf_counter()
        self.write(line)
        return call

    def send_many(self, requests: Sequence[tuple[str, Any]]) -> list[Call]:
        """Write several requests in one write (all stamped with the same send time)."""
        pairs = [self.make_call(method, params) for method, params in requests]
        now = time.perf_counter()
        for call, _ in pairs:
            call.sent_at = now
        self.write(b"".join(line for _, line in pairs))
        return [call for call, _ in pairs]

    def notify(self, method: str, params: Any) -> float:
        """Write one notification; returns the time just before the write."""
        line = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}, separators=(",", ":")).encode() + b"\n"
        now = time.perf_counter()
        self.write(line)
        return now

    # -- reading ---------------------------------------------------------------------------
    def read_once(self) -> bool:
        """One read from the agent's stdout into the scanner; False at EOF."""
        if self.read_pause:
            # A lazy client (calibration only): an agent that writes one small write per message
            # runs faster when no reader is parked on the pipe to be woken by each write.
            gevent.sleep(self.read_pause)
        while True:
            try:
                data = os.read(self._in_fd, READ_SIZE)
            except BlockingIOError:
                self._hub.wait(self._read_watcher)
                continue
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return False
            self.scanner.feed(data, time.perf_counter())
            return True

    def pump(self, until: Callable[[], bool], timeout: float = 60.0, what: str = "the agent") -> None:
        """Read in the calling greenlet until `until()` holds (no background reader running)."""
        with gevent.Timeout(timeout, False):
            while not until():
                if not self.read_once():
                    raise AgentFailed(f"{what}: agent closed its stdout ({self.describe_exit()})")
            return
        raise AgentFailed(f"{what}: no answer within {timeout:g}s")

    def start_reader(self) -> None:
        """Read in a background greenlet (for workloads that send while the agent streams)."""
        self._reader = gevent.spawn(self._read_loop)

    def _read_loop(self) -> None:
        while self.read_once():
            pass
        for waiter in self._waiters.values():
            if not waiter.ready():
                waiter.set(None)

    def wait(self, call: Call, timeout: float = 60.0) -> dict[str, Any]:
        """The call's response; with a background reader it blocks, otherwise it pumps."""
        if not call.done:
            if self._reader is None:
                self.pump(lambda: call.done, timeout, call.method)
            else:
                waiter = self._waiters.setdefault(call.id, AsyncResult())
                if not call.done:
                    try:
                        waiter.get(timeout=timeout)
                    except gevent.Timeout:
                        raise AgentFailed(f"{call.method}: no answer within {timeout:g}s") from None
                if not call.done:
                    raise AgentFailed(f"{call.method}: agent closed its stdout ({self.describe_exit()})")
        assert call.response is not None
        if "error" in call.response:
            raise AgentFailed(f"{call.method} failed: {call.response['error']}")
        return call.response.get("result") or {}

    def call(self, method: str, params: Any, timeout: float = 60.0) -> dict[str, Any]:
        """Send a request and wait for its result."""
        return self.wait(self.send(method, params), timeout)

    def _matched(self, message: dict[str, Any], now: float, position: int) -> None:
        call = self.calls.get(message.get("id"))  # type: ignore[arg-type]
        if call is None or call.done:
            return
        if call.session_id is not None and self._turns.get(call.session_id) is call:
            if "result" in message:
                call.acknowledged_at = now  # ACP v2: the turn goes on; its idle state_update ends the call
                return
            del self._turns[call.session_id]  # refused: no turn will end
        self._complete(call, message, now, position)

    def _state_update(self, message: dict[str, Any], now: float, position: int) -> None:
        params = message.get("params") or {}
        update = params.get("update") or {}
        if update.get("sessionUpdate") != "state_update" or update.get("state") != "idle":
            return
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            return
        call = self._turns.get(session_id)
        if call is None or call.acknowledged_at is None:
            return  # an idle report of no prompt of ours (e.g. a new session's first state)
        del self._turns[session_id]
        self._complete(call, {"id": call.id, "result": {"stopReason": update.get("stopReason")}}, now, position)

    def _complete(self, call: Call, message: dict[str, Any], now: float, position: int) -> None:
        call.answered_at = now
        call.answered_pos = position
        call.response = message
        if self.on_response is not None:
            self.on_response(call)
        waiter = self._waiters.pop(call.id, None)
        if waiter is not None:
            waiter.set(None)

    # -- ACP conveniences ------------------------------------------------------------------
    def initialize(self, timeout: float = 60.0) -> Call:
        """Send `initialize` and wait for it; returns the call (its latency is W5's figure)."""
        if self.requested_version >= 2:
            params = {"protocolVersion": self.requested_version, "info": CLIENT_INFO, "capabilities": {}}
        else:
            params = {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}, "clientInfo": CLIENT_INFO}
        call = self.send("initialize", params)
        result = self.wait(call, timeout)
        version = result.get("protocolVersion")
        self.protocol_version = version if isinstance(version, int) else PROTOCOL_VERSION
        return call

    def new_sessions(self, count: int, batch: int = 50, timeout: float = 60.0) -> list[str]:
        """Open `count` sessions, `batch` requests per write."""
        ids: list[str] = []
        while len(ids) < count:
            calls = self.send_many([("session/new", {"cwd": "/tmp", "mcpServers": []})] * min(batch, count - len(ids)))
            ids.extend(self.wait(call, timeout)["sessionId"] for call in calls)
        return ids

    @staticmethod
    def prompt_params(session_id: str, text: str) -> dict[str, Any]:
        return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}

    # -- ending ----------------------------------------------------------------------------
    def describe_exit(self) -> str:
        code = self.proc.poll()
        tail = self.stderr_tail()
        state = "still running" if code is None else f"exit code {code}"
        return f"{state}; stderr: {tail!r}" if tail else state

    def stderr_tail(self, limit: int = 400) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def close(self, grace: float = 5.0) -> int | None:
        """EOF to the agent, then SIGKILL its process group if it lingers; reap everything."""
        code = end_process(self.proc, self.pid, grace)
        if self._reader is not None:
            self._reader.kill(block=True, timeout=2)
        for handle in (self.proc.stdout, self._stderr):
            try:
                handle.close()
            except OSError:
                pass
        self._read_watcher.close()
        self._write_watcher.close()
        return code

    def __enter__(self) -> "AgentConn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
