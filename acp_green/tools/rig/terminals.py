"""The rig client's side of `terminal/*`: runs each command locally, keeps a bounded tail of its output.

A test sees what the agent did through `TerminalHost.terminals` (created, killed, released, how
the command ended). Waits run in their own greenlets, so the client keeps reading while a
command runs; a `$/cancel_request` for a pending `terminal/wait_for_exit` answers it -32800.
Every command runs in its own process group, and `close` kills whatever is left.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent import subprocess
from gevent.greenlet import Greenlet

from ...errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_CANCELLED
from ...rpc.transport import read_chunks

#: Output kept when the agent sets no outputByteLimit: a runaway command cannot fill the rig's memory.
DEFAULT_OUTPUT_LIMIT = 1 << 20

Respond = Callable[[Any, Any], None]
RespondError = Callable[[Any, dict[str, Any]], None]


def tail_at_char_boundary(data: bytes, limit: int) -> tuple[str, bool]:
    """The last `limit` bytes or fewer of `data`, starting on a UTF-8 character boundary; and
    whether anything was cut (ACP: truncate from the beginning, at a character boundary)."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace"), False
    start = len(data) - limit
    while start < len(data) and (data[start] & 0xC0) == 0x80:  # a continuation byte
        start += 1
    return data[start:].decode("utf-8", errors="replace"), True


@dataclass
class HostedTerminal:
    """One command the agent started, as the rig ran it."""

    terminal_id: str
    argv: list[str]
    cwd: str | None
    env: dict[str, str]
    limit: int
    proc: subprocess.Popen
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    killed: bool = False
    released: bool = False
    reader: Greenlet | None = None

    @property
    def exit_status(self) -> dict[str, Any] | None:
        code = self.proc.poll()
        if code is None:
            return None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}

    def text(self) -> tuple[str, bool]:
        text, cut = tail_at_char_boundary(bytes(self.output), self.limit)
        return text, cut or self.truncated


class TerminalHost:
    """Answers the agent's `terminal/*` requests by running the commands on this machine."""

    def __init__(self) -> None:
        self.terminals: dict[str, HostedTerminal] = {}
        self._next = 0
        self._waits: dict[Any, Greenlet] = {}  # request id of a pending wait_for_exit -> its greenlet

    def handle(self, request: dict[str, Any], respond: Respond, respond_error: RespondError) -> None:
        """Answer one `terminal/*` request (a wait answers later, from its own greenlet)."""
        method, request_id = request["method"], request["id"]
        params = request.get("params") or {}
        if method == "terminal/create":
            self._create(request_id, params, respond, respond_error)
            return
        terminal_id = params.get("terminalId")
        terminal = self.terminals.get(terminal_id) if isinstance(terminal_id, str) else None
        if terminal is None or terminal.released:
            respond_error(request_id, {"code": INVALID_PARAMS, "message": f"Invalid params: unknown terminal {params.get('terminalId')!r}"})
        elif method == "terminal/output":
            text, truncated = terminal.text()
            result: dict[str, Any] = {"output": text, "truncated": truncated}
            status = terminal.exit_status
            if status is not None:
                result["exitStatus"] = status
            respond(request_id, result)
        elif method == "terminal/wait_for_exit":
            self._waits[request_id] = gevent.spawn(self._wait, terminal, request_id, respond)
        elif method == "terminal/kill":
            self._kill(terminal)
            respond(request_id, {})
        elif method == "terminal/release":
            self._kill(terminal)
            terminal.released = True
            respond(request_id, {})
        else:
            respond_error(request_id, {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"})

    def cancel(self, request_id: Any, respond_error: RespondError) -> bool:
        """A `$/cancel_request` from the agent: answer a pending wait -32800; False if none."""
        waiter = self._waits.pop(request_id, None)
        if waiter is None:
            return False
        waiter.kill(block=False)
        respond_error(request_id, {"code": REQUEST_CANCELLED, "message": "Request cancelled"})
        return True

    def close(self) -> None:
        """Kill every command still running and stop every wait."""
        for waiter in list(self._waits.values()):
            waiter.kill(block=False)
        for terminal in self.terminals.values():
            self._kill(terminal)
            try:
                terminal.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    # -- internals -----------------------------------------------------------------------------
    def _create(self, request_id: Any, params: dict[str, Any], respond: Respond, respond_error: RespondError) -> None:
        argv = [params.get("command", ""), *params.get("args", [])]
        env = {e["name"]: e["value"] for e in params.get("env", [])}
        limit = params.get("outputByteLimit")
        limit = DEFAULT_OUTPUT_LIMIT if limit is None else min(limit, DEFAULT_OUTPUT_LIMIT)
        try:
            proc = subprocess.Popen(argv, cwd=params.get("cwd"), env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            respond_error(request_id, {"code": INTERNAL_ERROR, "message": "Internal error", "data": {"details": f"cannot start {argv[0]!r}: {exc}"}})
            return
        self._next += 1
        terminal = HostedTerminal(f"term-{self._next}", argv, params.get("cwd"), env, limit, proc)
        terminal.reader = gevent.spawn(self._read, terminal)
        self.terminals[terminal.terminal_id] = terminal
        respond(request_id, {"terminalId": terminal.terminal_id})

    @staticmethod
    def _read(terminal: HostedTerminal) -> None:
        for chunk in read_chunks(terminal.proc.stdout.fileno()):
            terminal.output.extend(chunk)
            excess = len(terminal.output) - 2 * terminal.limit  # trim in batches, keep a char-boundary margin
            if excess > 0:
                del terminal.output[:excess]
                terminal.truncated = True
        terminal.proc.stdout.close()

    def _wait(self, terminal: HostedTerminal, request_id: Any, respond: Respond) -> None:
        terminal.proc.wait()
        if terminal.reader is not None:
            terminal.reader.join(timeout=5)
        self._waits.pop(request_id, None)
        respond(request_id, terminal.exit_status)

    @staticmethod
    def _kill(terminal: HostedTerminal) -> None:
        if terminal.proc.poll() is None:
            terminal.killed = True
            try:
                os.killpg(terminal.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
