"""Terminals a turn runs through the client (`terminal/*`): the `Terminal` object and the turn's tracking of them.

Invariants: a turn releases every terminal it created before its prompt's response, whatever
ends the turn (S5: nothing for a session after its response). `release` and the kill sent on
cancellation are written at once and never awaited (`send_client`), so they work from the hub,
from the receive loop (a `session/cancel`) and from a prompt's settling, and cannot delay the
response. Once the turn's terminals are closed, every operation on them raises
TerminalReleased: no `terminal/*` request can follow the response — but one. A `terminal/create`
the client answers after the turn stopped waiting for it (cancelled, ended) made a terminal
nobody will use: its command would keep running in the editor, so it is killed and released
at once (`TurnTerminals.release_late`), even after the prompt's response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from . import content
from .rpc import wire
from .rpc.cancel import CancelToken
from .errors import ClientError

log = logging.getLogger(__name__)

#: Sends a request and waits (ClientRequests.call): (method, params, token=..., on_late_result=...) -> result.
CallClient = Callable[..., Any]
#: Writes a request nobody waits for (ClientRequests.send): (method, params) -> None.
SendClient = Callable[[str, Any], None]


class TerminalReleased(Exception):
    """The terminal was released (by the agent, or by the runtime when the turn ended)."""

    def __init__(self, terminal_id: str) -> None:
        super().__init__(f"terminal {terminal_id} was released; it can no longer be used")


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a terminal's command ended: an exit code, or the signal that ended it."""

    exit_code: int | None
    signal: str | None

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    @classmethod
    def from_wire(cls, method: str, value: Any) -> "ExitStatus":
        if not isinstance(value, dict):
            raise ClientError(method, {"message": f"malformed result: the exit status is {wire.describe(value)}, not an object"})
        exit_code, signal = value.get("exitCode"), value.get("signal")
        if not (exit_code is None or (isinstance(exit_code, int) and not isinstance(exit_code, bool))):
            raise ClientError(method, {"message": f"malformed result: exitCode is {wire.describe(exit_code)}"})
        if not (signal is None or isinstance(signal, str)):
            raise ClientError(method, {"message": f"malformed result: signal is {wire.describe(signal)}"})
        return cls(exit_code, signal)


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    """What `terminal/output` returned: the output so far, whether it was cut, and the exit once exited."""

    output: str
    truncated: bool
    exit_status: ExitStatus | None


class Terminal:
    """A command running in a client terminal; use it as a context manager so it is released.

    Every wait is cancelled by the turn's token (TurnCancelled); on cancellation the runtime
    has already sent `terminal/kill`. Leaving the `with` block releases the terminal.
    """

    def __init__(self, terminals: "TurnTerminals", terminal_id: str, command: str, args: Sequence[str]) -> None:
        self._terminals = terminals
        self.terminal_id = terminal_id
        self.command = command
        self.args = tuple(args)
        self.exit_status: ExitStatus | None = None  # known once output() or wait_for_exit() saw it
        self.released = False

    @property
    def content(self) -> dict[str, Any]:
        """This terminal as tool-call content (`{"type": "terminal", "terminalId": ...}`)."""
        return content.terminal(self.terminal_id)

    def output(self) -> TerminalOutput:
        """The output so far (`terminal/output`); `exit_status` is set once the command exited."""
        method = "terminal/output"
        result = self._terminals.call(self, method)
        if not isinstance(result, dict) or not isinstance(result.get("output"), str) or not isinstance(result.get("truncated"), bool):
            raise ClientError(method, {"message": f"malformed result: {wire.describe(result)} without a string 'output' and a boolean 'truncated'"})
        status = result.get("exitStatus")
        if status is not None:
            self.exit_status = ExitStatus.from_wire(method, status)
        return TerminalOutput(result["output"], result["truncated"], self.exit_status if status is not None else None)

    def wait_for_exit(self) -> ExitStatus:
        """Wait until the command exits (`terminal/wait_for_exit`)."""
        method = "terminal/wait_for_exit"
        self.exit_status = ExitStatus.from_wire(method, self._terminals.call(self, method))
        return self.exit_status

    def kill(self) -> None:
        """Kill the command (`terminal/kill`); the terminal stays readable until released."""
        self._terminals.call(self, "terminal/kill")

    def release(self) -> None:
        """Release the terminal (`terminal/release`, which also kills a running command); idempotent.

        Written at once and not awaited: a client's error is logged. Embed the terminal in a
        tool call before releasing it if the user should still see its output.
        """
        self._terminals.release(self)

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Terminal({self.terminal_id!r}, command={self.command!r}, released={self.released})"


class TurnTerminals:
    """The terminals one turn opened and has not released; kills them on cancel, releases leftovers at the end."""

    def __init__(self, session_id: str, token: CancelToken, call_client: CallClient, send_client: SendClient) -> None:
        self.session_id = session_id
        self._token = token
        self._call_client = call_client
        self._send_client = send_client
        self._open: dict[str, Terminal] = {}
        self._closed = False
        self._stop_watching: Callable[[], None] | None = None  # takes `_kill_all` off the token; set while a terminal is open

    @property
    def open(self) -> list[Terminal]:
        """Terminals created and not yet released, oldest first."""
        return list(self._open.values())

    def create(self, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
               cwd: str | None = None, output_byte_limit: int | None = None) -> Terminal:
        """Start `command` with `args` in a client terminal (`terminal/create`); `cwd` must be absolute."""
        if self._closed:
            raise RuntimeError("this turn has ended; it cannot start a terminal")
        params = create_params(self.session_id, command, args, env=env, cwd=cwd, output_byte_limit=output_byte_limit)
        method = "terminal/create"
        result = self._call_client(method, params, token=self._token, on_late_result=self.release_late)
        terminal_id = result.get("terminalId") if isinstance(result, dict) else None
        if not isinstance(terminal_id, str):
            raise ClientError(method, {"message": f"malformed result: {wire.describe(result)} without a string 'terminalId'"})
        terminal = Terminal(self, terminal_id, command, params.get("args", ()))
        if self._closed:  # the turn ended while the client created it: it must not outlive the turn
            self._send(terminal, "terminal/release")
            terminal.released = True
            raise TerminalReleased(terminal_id)
        self._open[terminal_id] = terminal
        if self._stop_watching is None:
            self._stop_watching = self._token.on_cancel(self._kill_all)
        return terminal

    def call(self, terminal: Terminal, method: str) -> Any:
        """A `terminal/*` request about `terminal`, awaited; cancelled by the turn's token."""
        if terminal.released:
            raise TerminalReleased(terminal.terminal_id)
        return self._call_client(method, {"sessionId": self.session_id, "terminalId": terminal.terminal_id}, token=self._token)

    def release(self, terminal: Terminal) -> None:
        """Send `terminal/release` once for `terminal`, without waiting."""
        if terminal.released:
            return
        terminal.released = True
        self._open.pop(terminal.terminal_id, None)
        if not self._open and self._stop_watching is not None:
            # Nothing is left to kill on cancel. The token is the session's current one, which
            # outlives the turn unless it is cancelled: a callback left on it would stay there for
            # every later turn, one more per turn that ran a terminal. The next create watches again.
            self._stop_watching()
            self._stop_watching = None
        self._send(terminal, "terminal/release")

    def close(self) -> None:
        """The turn is ending: release every terminal still open, and refuse any later use.

        Releasing the last one takes the cancel callback off the token (`release`). Never blocks
        nor raises (it runs while the prompt settles, perhaps on the hub).
        """
        self._closed = True
        for terminal in self.open:
            try:
                self.release(terminal)
            except Exception:  # the response must still go out (S14)
                log.exception("releasing terminal %s of %s failed", terminal.terminal_id, self.session_id)

    def release_late(self, result: Any) -> None:
        """A `terminal/create` answered after the turn stopped waiting for it: kill and release
        the terminal the client made (see the module). Written at once, never awaited."""
        terminal_id = result.get("terminalId") if isinstance(result, dict) else None
        if not isinstance(terminal_id, str):
            return  # nothing the agent could name was made
        log.info("terminal %s of %s was created after its turn stopped waiting: killing and releasing it",
                 ascii(terminal_id), self.session_id)
        for method in ("terminal/kill", "terminal/release"):
            self._send_client(method, {"sessionId": self.session_id, "terminalId": terminal_id})

    def _kill_all(self) -> None:
        """On cancellation (from the receive loop or the hub): kill every command that may still run."""
        for terminal in self.open:
            if terminal.exit_status is None:
                try:
                    self._send(terminal, "terminal/kill")
                except Exception:
                    log.exception("killing terminal %s of %s failed", terminal.terminal_id, self.session_id)

    def _send(self, terminal: Terminal, method: str) -> None:
        self._send_client(method, {"sessionId": self.session_id, "terminalId": terminal.terminal_id})


def create_params(session_id: str, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                  cwd: str | None = None, output_byte_limit: int | None = None) -> dict[str, Any]:
    """`terminal/create` params, with the agent's arguments checked (TypeError/ValueError name the fault)."""
    if not isinstance(command, str) or not command:
        raise ValueError("a terminal needs a non-empty command string")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError("terminal args must be a sequence of strings (not one string)")
    params: dict[str, Any] = {"sessionId": session_id, "command": command}
    if args:
        params["args"] = list(args)
    if env:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError("terminal env must map strings to strings")
        params["env"] = [{"name": name, "value": value} for name, value in env.items()]
    if cwd is not None:
        params["cwd"] = cwd
    if output_byte_limit is not None:
        if isinstance(output_byte_limit, bool) or not isinstance(output_byte_limit, int) or not 0 <= output_byte_limit < 1 << 64:
            raise ValueError(f"output_byte_limit must be an integer from 0 to 2**64-1 (uint64), not {output_byte_limit!r}")
        params["outputByteLimit"] = output_byte_limit
    return params
