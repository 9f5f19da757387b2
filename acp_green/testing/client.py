"""The editor a test scripts: sessions, prompts, cancel at a chosen moment, and what came back.

A thin layer over the rig's `AcpClient` (which records the lines both ways, keeping the last
32 MiB's worth, and answers the agent by its policy); every wait is bounded by the connection's
`timeout` and fails naming what it waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..tools.rig.client import AcpClient, Pending, RpcErrorResponse
from ..tools.rig.run import CheckedAgent
from ..tools.rig.terminals import HostedTerminal
from ..version import __version__
from .editor import Editor
from .turns import TurnResult, read_turn

__all__ = ["AgentClient", "RunningTurn", "UpdatePredicate"]

#: What `RunningTurn.wait_for_update` waits for: an update's `sessionUpdate` kind, or a predicate on the update.
UpdatePredicate = str | Callable[[dict[str, Any]], Any]


class AgentRuns(Protocol):
    """What stops and starts the agent behind a client (serving.py's connection)."""

    def stop(self) -> None: ...

    def restart(self) -> AcpClient | CheckedAgent: ...


class RunningTurn:
    """A prompt that has been sent and may still run: wait for an update, cancel it, wait for its end."""

    def __init__(self, client: AgentClient, session_id: str, pending: Pending, first_record: int) -> None:
        self.session_id = session_id
        self.request_id = pending.id
        self._client = client
        self._rpc = client.rpc  # the run it was sent to: a restart does not move it
        self._pending = pending
        self._first = first_record  # index in the client's records where this turn's messages start
        self._cancelled_at: float | None = None  # when cancel() was sent, to name the rule a silent agent breaks

    @property
    def done(self) -> bool:
        """Whether the agent has answered the prompt."""
        return self._pending.done

    @property
    def updates(self) -> list[dict[str, Any]]:
        """This turn's updates so far."""
        return [m["params"]["update"] for m in self._messages() if m.get("method") == "session/update"
                and isinstance(m.get("params"), dict) and m["params"].get("sessionId") == self.session_id]

    def wait_for_update(self, predicate: UpdatePredicate, timeout: float | None = None) -> dict[str, Any]:
        """The first update of this turn that matches (`"tool_call"`, or a predicate), waiting for it.

        AssertionError when the turn ends, or `timeout` passes, with no such update."""
        matches = (lambda u: u.get("sessionUpdate") == predicate) if isinstance(predicate, str) else predicate

        def found() -> dict[str, Any] | bool:
            match = next((u for u in self.updates if matches(u)), None)
            if match is None and self.done:
                raise AssertionError(f"the turn ended ({self._pending.response(0)}) with no update matching {predicate!r}; "
                                     f"its updates: {self.updates}")
            if match is None and self._rpc.eof.is_set():
                raise AssertionError(f"the agent closed its output with no update matching {predicate!r}"
                                     f"{self._client.stderr_tail()}")
            return match or False

        limit = self._client.timeout if timeout is None else timeout
        return self._rpc.wait_for(found, limit, what=f"an update matching {predicate!r}")

    def cancel(self) -> None:
        """Send `session/cancel` for this turn's session (the turn should then end `cancelled`)."""
        self._client.cancel(self.session_id)
        if self._cancelled_at is None:
            self._cancelled_at = time.monotonic()

    def wait(self, timeout: float | None = None) -> TurnResult:
        """Wait for the prompt's response; the whole turn."""
        try:
            response = self._client.answer(self._pending, timeout, self._rpc)
        except AssertionError as exc:
            if self._cancelled_at is None or self._pending.done:
                raise
            ago = time.monotonic() - self._cancelled_at
            raise AssertionError(f"{exc}; it was cancelled {ago:.1f}s before: cancelled_answers_cancelled (S14: a "
                                 "cancelled prompt is still answered, with stopReason \"cancelled\")") from None
        return read_turn(self.session_id, self._messages(), response, self.dropped)

    @property
    def dropped(self) -> int:
        """How many lines since the prompt the client no longer keeps (`TurnResult.dropped`)."""
        return max(getattr(self._rpc.records, "first", 0) - self._first, 0)

    def _messages(self) -> list[dict[str, Any]]:
        """What the agent sent since the prompt went out, up to its response."""
        messages = []
        for record in self._rpc.records[self._first:]:
            message = record.message
            if record.direction != "in" or not isinstance(message, dict):
                continue
            if "method" not in message and message.get("id") == self.request_id:
                break
            messages.append(message)
        return messages


class AgentClient:
    """One initialized connection to the agent under test, from the editor's side."""

    def __init__(self, rpc: AcpClient | CheckedAgent, editor: Editor, *, cwd: str, timeout: float,
                 runs: AgentRuns | None = None) -> None:
        self.rpc = rpc  # the rig's client of the current run: raw requests (`rpc.request`), every record (`rpc.records`)
        self.editor = editor
        self.cwd = cwd
        self.timeout = timeout
        self.initialize_result: dict[str, Any] = {}
        self.closed = False
        self._runs = runs
        self._earlier_terminals: list[HostedTerminal] = []  # those of the runs before a restart

    def close(self) -> None:
        """Stop the agent now, as the test's end would (its input closed; it must exit); what it broke
        is reported when the test ends. Sending anything afterwards fails, until `restart()`."""
        self._agent_runs("close").stop()
        self.closed = True

    def restart(self) -> dict[str, Any]:
        """Stop the agent (as `close`, unless closed already), then start it again as `acp_connect`
        started it — the same agent or command line, options, environment and state directory,
        editor and workspace — and send `initialize` again; its result. An agent at a URL is not
        restarted: the client connects to it again."""
        runs = self._agent_runs("restart")
        self._earlier_terminals += self.terminals
        self.closed = True  # until the new run is up: a start that fails leaves the client closed
        self.rpc = runs.restart()
        self.closed = False
        return self.initialize()

    def _agent_runs(self, call: str) -> AgentRuns:
        if self._runs is None:
            raise RuntimeError(f"AgentClient.{call}: this client was not made by acp_connect, which alone can stop and start its agent")
        return self._runs

    @property
    def workspace(self) -> Path:
        """The directory the editor serves files from (and the default cwd of sessions)."""
        return self.editor.root

    @property
    def written(self) -> dict[str, str]:
        """What the agent wrote through `fs/write_text_file`, by absolute path."""
        return self.editor.written

    @property
    def received(self) -> list[dict[str, Any]]:
        """Every message the agent sent since it was last started that the client still keeps
        (the last 32 MiB's worth of lines), in order."""
        return self.rpc.received()

    @property
    def terminals(self) -> list[HostedTerminal]:
        """The terminals the agent created, as the editor ran them (argv, cwd, output, killed, released), restarts included."""
        return self._earlier_terminals + list(self.rpc.terminal_host.terminals.values())

    def initialize(self) -> dict[str, Any]:
        """Send `initialize` with this editor's capabilities; done by `acp_connect` already."""
        params = {"protocolVersion": 1, "clientCapabilities": self.editor.capabilities,
                  "clientInfo": {"name": "acp_green.testing", "version": __version__}}
        self.initialize_result = self.call("initialize", params)
        return self.initialize_result

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        """Any request; its result, or `RpcErrorResponse` (`.code`, `.error`) when answered with an error."""
        response = self.answer(self.request(method, params), timeout)
        if "error" in response:
            raise RpcErrorResponse(response["error"])
        return response.get("result")

    def request(self, method: str, params: Any = None) -> Pending:
        """Send a request without waiting; AssertionError if the agent no longer reads its input."""
        message = self.rpc.make_request(method, params)
        self.send(message)
        return self.rpc.pending_for(message)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message to the agent; AssertionError if it no longer reads its input (it exited)."""
        if self.closed:
            raise RuntimeError(f"AgentClient: cannot send {message.get('method')}: the agent was stopped by close(); "
                               "restart() starts it again")
        try:
            self.rpc.send(message)
        except (BrokenPipeError, ConnectionResetError):
            what = f"{message.get('method')} #{message['id']}" if "id" in message else str(message.get("method"))
            raise AssertionError(f"the agent stopped reading its input before {what} could be sent{self.stderr_tail()}") from None

    def answer(self, pending: Pending, timeout: float | None = None, rpc: AcpClient | CheckedAgent | None = None) -> dict[str, Any]:
        """The response to a request already sent (to `rpc`, the current run's by default), waited
        for; AssertionError naming it on timeout."""
        limit = self.timeout if timeout is None else timeout
        rpc = self.rpc if rpc is None else rpc
        rpc.wait_for(lambda: pending.done or rpc.eof.is_set(), limit, what=f"the answer to {pending.method} #{pending.id}")
        if not pending.done:  # the reader sets eof only after the last line it read was handled
            raise AssertionError(f"the agent closed its output without answering {pending.method} #{pending.id}"
                                 f"{self.stderr_tail()}")
        return pending.response(0)

    def stderr_tail(self, lines: int = 10) -> str:
        """The last lines the agent (as a subprocess) wrote to stderr, to append to a message; "" in process."""
        if isinstance(self.rpc, AcpClient):  # in process: no stderr of its own
            return ""
        text = self.rpc.stderr_text(timeout=2).strip()
        whose = "the link to it says" if self.rpc.remote is not None else "its stderr ends"
        return f"; {whose}:\n" + "\n".join("    " + line for line in text.splitlines()[-lines:]) if text else ""

    def new_session(self, cwd: str | None = None) -> str:
        """`session/new` in `cwd` (the workspace by default); its session id."""
        return str(self.call("session/new", {"cwd": cwd or self.cwd, "mcpServers": []})["sessionId"])

    def load_session(self, session_id: str, cwd: str | None = None) -> list[dict[str, Any]]:
        """`session/load`; the updates the agent replayed before its response."""
        first = len(self.rpc.records)
        self.call("session/load", {"sessionId": session_id, "cwd": cwd or self.cwd, "mcpServers": []})
        return [r.message["params"]["update"] for r in self.rpc.records[first:]
                if r.direction == "in" and isinstance(r.message, dict) and r.message.get("method") == "session/update"
                and isinstance(r.message.get("params"), dict) and r.message["params"].get("sessionId") == session_id]

    def start_prompt(self, session_id: str, text: str) -> RunningTurn:
        """Send a text prompt and return at once; the turn runs while the test acts."""
        first = len(self.rpc.records)
        return RunningTurn(self, session_id, self.request("session/prompt", self.rpc.prompt_params(session_id, text)), first)

    def prompt(self, session_id: str, text: str) -> TurnResult:
        """Send a text prompt and wait for the turn's end."""
        return self.start_prompt(session_id, text).wait()

    def cancel(self, session_id: str) -> None:
        """`session/cancel` (a notification: nothing comes back for it)."""
        self.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
