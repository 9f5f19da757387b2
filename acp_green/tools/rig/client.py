"""A gevent ACP client for driving any stdio agent: the rig's foundation.

It records every message in both directions with a timestamp, answers the agent's requests
by a policy, and lets a scenario wait on what it has seen. Used by the tests, the soak runs,
the probe and the benchmarks. `AcpClient` talks over a pair of descriptors; `AgentProcess`
launches an agent and holds the `AcpClient` that talks to it, whose surface is its own.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent import subprocess
from gevent.event import Event
from gevent.fileobject import FileObjectPosix
from gevent.lock import Semaphore

from . import reaper

from ...errors import METHOD_NOT_FOUND, REQUEST_CANCELLED, RESOURCE_NOT_FOUND
from ...rpc.transport import read_chunks
from ...rpc.wire import IdKey, id_key, is_valid_id
from .client_wire import (KEPT_OF_A_CUT_LINE, MAX_LINE_BYTES, YIELD_EVERY, Inbox, Pending, PendingRequests, Record, RecordLog,
                          RpcErrorResponse, messages_of)
from .forwarding import ForwardedAttribute, ForwardedMethod
from .remote_link import RemoteProcess, remote_target, shown_command
from .terminals import TerminalHost

__all__ = ["AcpClient", "AgentProcess", "ClientPolicy", "PolicyAnswers", "KEPT_OF_A_CUT_LINE", "MAX_LINE_BYTES", "PROTOCOL_VERSION", "Pending",
           "Record", "RecordLog", "RpcErrorResponse", "V2_CLIENT_CAPABILITIES", "YIELD_EVERY", "default_signal_dispositions", "messages_of",
           "v2_initialize_params"]

PROTOCOL_VERSION = 1
#: The agent's requests a client that keeps only its last records (`keep_at_most`) keeps, at most.
KEPT_AGENT_REQUESTS = 1000
#: What of a policy's client capabilities ACP v2 (the draft) still has.
V2_CLIENT_CAPABILITIES = frozenset({"elicitation", "auth"})


@dataclass
class ClientPolicy:
    """How the client answers the agent's requests."""

    capabilities: dict[str, Any] = field(default_factory=lambda: {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False})
    permission: str = "allow"  # "allow", "reject" or "hold" (never answer)
    files: dict[str, str] = field(default_factory=dict)  # what fs/read_text_file returns, by path
    use_disk: bool = False  # read and write real files when a path is not in `files`
    written: dict[str, str] = field(default_factory=dict)
    # Custom answers to agent->client requests by method (e.g. mcp/connect, mcp/message); each
    # gets (client, request) and answers with client.respond/respond_error, now or later.
    handlers: dict[str, Callable[[AcpClient, dict[str, Any]], None]] = field(default_factory=dict)
    # Observers of agent->client notifications by method (e.g. mcp/message, $/cancel_request).
    notification_handlers: dict[str, Callable[[AcpClient, dict[str, Any]], None]] = field(default_factory=dict)
    # Answers to elicitation/create, used in order (a result object, or "hold": never answered
    # until the agent sends $/cancel_request for it, then -32800). Served only when the
    # capabilities advertise elicitation.form; terminal/* only when they advertise terminal.
    elicitations: list[Any] = field(default_factory=list)
    # Answers every agent->client request itself, in place of all of the above (a trace replay
    # answers with what its trace's client answered).
    answer_all: Callable[[AcpClient, dict[str, Any]], None] | None = None

    @classmethod
    def coding(cls, **fields: Any) -> "ClientPolicy":
        """A client that can read and write files, run terminals and show forms."""
        capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True, "elicitation": {"form": {}}}
        return cls(capabilities=capabilities, **fields)


class PolicyAnswers:
    """Answers the agent's requests and follows its notifications as the policy says; keeps what
    the policy holds back (`hold`, `held_elicitations`) and the terminals it runs."""

    def __init__(self, policy: ClientPolicy) -> None:
        self.policy = policy
        self.hold: dict[Any, dict[str, Any]] = {}
        self.held_elicitations: dict[IdKey | None, dict[str, Any]] = {}
        self.terminal_host = TerminalHost()

    def answer(self, client: AcpClient, request: dict[str, Any]) -> None:
        """Answer one request of the agent (now, or later for what the policy holds)."""
        method = request["method"]
        params = request.get("params") or {}
        policy = self.policy
        handler = policy.handlers.get(method)
        if policy.answer_all is not None:
            policy.answer_all(client, request)
        elif handler is not None:
            handler(client, request)
        elif method == "session/request_permission":
            if policy.permission == "hold":
                self.hold[request["id"]] = request
                return
            kinds = ("allow_once", "allow_always") if policy.permission == "allow" else ("reject_once", "reject_always")
            option = next((o for o in params.get("options", []) if o.get("kind") in kinds), None)
            outcome = {"outcome": "selected", "optionId": option["optionId"]} if option else {"outcome": "cancelled"}
            client.respond(request["id"], {"outcome": outcome})
        elif method == "fs/read_text_file":
            self._read(client, request["id"], params.get("path", ""))
        elif method == "fs/write_text_file":
            policy.written[params.get("path", "")] = params.get("content", "")
            client.respond(request["id"], {})
        elif method.startswith("terminal/") and policy.capabilities.get("terminal") is True:
            self.terminal_host.handle(request, client.respond, client.respond_error)
        elif method == "elicitation/create" and isinstance((policy.capabilities.get("elicitation") or {}).get("form"), dict):
            answer = policy.elicitations.pop(0) if policy.elicitations else {"action": "decline"}
            if answer == "hold":
                self.held_elicitations[id_key(request["id"])] = request
            else:
                client.respond(request["id"], answer)
        else:
            client.respond_error(request["id"], {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"})

    def _read(self, client: AcpClient, request_id: Any, path: str) -> None:
        """fs/read_text_file: the policy's `files`, else the disk when it may, else -32002."""
        if path in self.policy.files:
            client.respond(request_id, {"content": self.policy.files[path]})
        elif self.policy.use_disk and os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                client.respond(request_id, {"content": handle.read()})
        else:
            client.respond_error(request_id, {"code": RESOURCE_NOT_FOUND, "message": f"Resource not found: {path}", "data": {"uri": path}})

    def notified(self, client: AcpClient, message: dict[str, Any]) -> None:
        """A notification of the agent: `$/cancel_request` withdraws what the client still works on; the policy's observer sees it."""
        if message["method"] == "$/cancel_request":
            self._cancelled_by_agent(client, _param(message, "requestId"))
        handler = self.policy.notification_handlers.get(message["method"])
        if handler is not None:
            handler(client, message)

    def _cancelled_by_agent(self, client: AcpClient, request_id: Any) -> None:
        """The agent cancelled one of its requests: a held form or a terminal wait answers -32800."""
        if not is_valid_id(request_id):
            return
        if self.held_elicitations.pop(id_key(request_id), None) is not None:
            client.respond_error(request_id, {"code": REQUEST_CANCELLED, "message": "Request cancelled"})
        else:
            self.terminal_host.cancel(request_id, client.respond_error)


def _param(message: dict[str, Any], name: str) -> Any:
    """`params[name]`, or None when params are absent or no object (an agent's line is untrusted)."""
    params = message.get("params")
    return params.get(name) if isinstance(params, dict) else None


class AcpClient:
    """The client end of one ACP connection over a pair of descriptors.

    It writes what it sends itself; its `Inbox` reads the agent's lines, its `PendingRequests`
    keeps each request until the agent answers it, its `PolicyAnswers` answers the agent's
    requests. Under the ACP v2 draft a prompt is acknowledged at once and its turn ends with an
    idle `state_update` (`wait_idle`).
    """

    policy: ForwardedAttribute[ClientPolicy] = ForwardedAttribute("answers")
    hold: ForwardedAttribute[dict[Any, dict[str, Any]]] = ForwardedAttribute("answers")
    held_elicitations: ForwardedAttribute[dict[IdKey | None, dict[str, Any]]] = ForwardedAttribute("answers")
    terminal_host: ForwardedAttribute[TerminalHost] = ForwardedAttribute("answers")
    pending: ForwardedAttribute[dict[IdKey | None, Pending]] = ForwardedAttribute("requests")
    eof: ForwardedAttribute[Event] = ForwardedAttribute("inbox")

    def __init__(self, read_fd: int, write_fd: int, policy: ClientPolicy | None = None, *, close_fds: bool = True) -> None:
        self.records: list[Record] = []
        self.requests = PendingRequests()
        self.answers = PolicyAnswers(policy or ClientPolicy())
        self.agent_requests: list[dict[str, Any]] = []
        # Called (in the reader greenlet) with every message the agent sends, after it is recorded.
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        # Called with every message `send` wrote, once written (where the probe's v2 turns begin).
        self.send_listeners: list[Callable[[dict[str, Any]], None]] = []
        # What the caller of a request waits on in place of its own Pending, by id (the probe's
        # v2 prompts: their whole turn); `request` and `pending_for` return it.
        self.stand_ins: dict[IdKey | None, Pending] = {}
        self.lost_answers = 0  # answers the agent could no longer read
        self._writer_file = FileObjectPosix(write_fd, "wb", closefd=close_fds)
        # Several greenlets send (scenario, sampler, the reader answering the agent); a buffered
        # FileObjectPosix raises "reentrant call" if a second writer arrives while one waits.
        self._write_lock = Semaphore()
        self.inbox = Inbox(read_fd, self.records, self._received, close_fd=close_fds)

    def keep_at_most(self, budget: int) -> RecordLog:
        """From now on keep only the last `budget` bytes of records (RecordLog: indexes stay
        those of every record; `before_drop` is where a checker catches up first), and the last
        KEPT_AGENT_REQUESTS of the agent's requests. Call it before the agent's first line is read."""
        log = RecordLog(budget)
        for record in self.records:
            log.append(record)
        self.records = log
        self.inbox.record_into(log)
        return log

    # -- sending ---------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (several messages, garbage, no newline...)."""
        self.records.append(Record(time.monotonic(), "out", data, None))
        self._write(data)

    def send(self, *messages: dict[str, Any]) -> None:
        """Write messages in one write."""
        data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
        now = time.monotonic()
        for message in messages:
            self.records.append(Record(now, "out", b"", message))
            self.requests.sent(message, now)
        self._write(data)
        for message in messages:
            for listener in self.send_listeners:
                listener(message)

    def send_batch(self, *messages: Any) -> None:
        """Write messages (any JSON values) as one batch line (ACP v2 has them), recorded as one
        list; its requests are awaited as any other."""
        now = time.monotonic()
        self.records.append(Record(now, "out", b"", list(messages)))
        for message in messages:
            self.requests.sent(message, now)
        self._write(json.dumps(list(messages)).encode() + b"\n")

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            self._writer_file.write(data)
            self._writer_file.flush()

    def make_request(self, method: str, params: Any = None, request_id: Any = None) -> dict[str, Any]:
        if request_id is None:
            request_id = self.requests.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return message

    def request(self, method: str, params: Any = None, request_id: Any = None) -> Pending:
        message = self.make_request(method, params, request_id)
        self.send(message)
        return self.pending_for(message)

    def call(self, method: str, params: Any = None, timeout: float = 30.0) -> Any:
        return self.request(method, params).result(timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def pending_for(self, message: dict[str, Any]) -> Pending:
        key = id_key(message["id"])
        return self.stand_ins.get(key) or self.requests.pending[key]

    # -- ACP conveniences ------------------------------------------------------------------
    def initialize(self, capabilities: dict[str, Any] | None = None, version: int = PROTOCOL_VERSION) -> dict[str, Any]:
        return self.call("initialize", self.initialize_params(capabilities, version))

    def initialize_params(self, capabilities: dict[str, Any] | None = None, version: int = PROTOCOL_VERSION) -> dict[str, Any]:
        if version >= 2:
            return v2_initialize_params(version, capabilities, self.policy.capabilities)
        return {
            "protocolVersion": version,
            "clientCapabilities": capabilities if capabilities is not None else self.policy.capabilities,
            "clientInfo": {"name": "acp-green-rig", "version": "0.1.0"},
        }

    def new_session(self, cwd: str = "/tmp", mcp_servers: Sequence[dict[str, Any]] = ()) -> str:
        return self.call("session/new", {"cwd": cwd, "mcpServers": list(mcp_servers)})["sessionId"]

    def prompt(self, session_id: str, text: str, request_id: Any = None) -> Pending:
        return self.request("session/prompt", self.prompt_params(session_id, text), request_id)

    @staticmethod
    def prompt_params(session_id: str, text: str) -> dict[str, Any]:
        return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}

    def cancel(self, session_id: str) -> None:
        self.notify("session/cancel", {"sessionId": session_id})

    # -- what was received -----------------------------------------------------------------
    def received(self) -> list[dict[str, Any]]:
        return [m for r in self.records if r.direction == "in" for m in messages_of(r.message)]

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """`update` objects of session/update notifications, in arrival order."""
        return [
            m["params"]["update"]
            for m in self.received()
            if m.get("method") == "session/update" and (session_id is None or m["params"].get("sessionId") == session_id)
        ]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        """Wait until predicate() is truthy; AssertionError naming `what` on timeout."""
        return self.inbox.wait_for(predicate, timeout, what)

    def idle_states(self, session_id: str) -> list[dict[str, Any]]:
        """The session's idle `state_update`s so far (each ends a turn where v1 answered its prompt)."""
        return [u for u in self.updates(session_id) if u.get("sessionUpdate") == "state_update" and u.get("state") == "idle"]

    def wait_idle(self, session_id: str, count: int = 1, timeout: float = 30.0) -> dict[str, Any]:
        """Wait for the session's `count`-th idle `state_update` and return it."""
        self.wait_for(lambda: len(self.idle_states(session_id)) >= count, timeout, f"idle state_update #{count} of {session_id}")
        return self.idle_states(session_id)[count - 1]

    # -- flow control ----------------------------------------------------------------------
    def pause_reading(self) -> None:
        """Stop reading the agent's stdout (a slow or stuck client)."""
        self.inbox.pause()

    def resume_reading(self) -> None:
        self.inbox.resume()

    def close_input(self) -> None:
        """Close the agent's stdin (EOF)."""
        try:
            self._writer_file.close()
        except OSError:
            pass

    # -- the agent's messages, in the reader greenlet ----------------------------------------
    def _received(self, message: dict[str, Any], now: float) -> None:
        if "method" not in message:
            self.requests.answered(message, now)
        elif "id" in message:
            self.agent_requests.append(message)
            if isinstance(self.records, RecordLog) and len(self.agent_requests) > KEPT_AGENT_REQUESTS:
                del self.agent_requests[:KEPT_AGENT_REQUESTS // 2]
            self.answers.answer(self, message)
        else:
            self.answers.notified(self, message)
        for listener in self.listeners:
            listener(message)

    def respond(self, request_id: Any, result: Any) -> None:
        self._send_answer({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, error: dict[str, Any]) -> None:
        self._send_answer({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _send_answer(self, message: dict[str, Any]) -> None:
        """Answer the agent; a broken pipe (its input closed) loses the answer but must not end
        the reading: a shutting-down agent's last chunk may still hold a prompt's response."""
        try:
            self.send(message)
        except (BrokenPipeError, ConnectionResetError):
            self.lost_answers += 1

    def stop(self) -> None:
        self.answers.terminal_host.close()
        self.inbox.stop()
        self.close_input()


def v2_initialize_params(version: int, capabilities: dict[str, Any] | None, policy: dict[str, Any]) -> dict[str, Any]:
    """The v2 draft's initialize: `info` and `capabilities` (no fs, no terminal: v2 removed them)."""
    if capabilities is None:
        capabilities = {k: v for k, v in policy.items() if k in V2_CLIENT_CAPABILITIES}
    return {"protocolVersion": version, "capabilities": capabilities, "info": {"name": "acp-green-rig", "version": "0.1.0"}}


def default_signal_dispositions() -> Callable[[], None]:
    """The launched agent's pre-exec step: give it default signal dispositions and an empty mask.

    An ignored signal and the signal mask survive exec: a rig run under `nohup` (SIGHUP
    ignored), or from a shell that ignores SIGINT for background jobs, would otherwise launch
    agents that ignore them too, and the probe would judge their SIGHUP handling wrongly.
    The ignored set is read here, before the fork; the child only resets.
    """
    ignored = [s for s in signal.valid_signals()
               if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) == signal.SIG_IGN]

    def reset() -> None:
        for signum in ignored:
            try:
                signal.signal(signum, signal.SIG_DFL)  # ok: in the forked child before exec, no hub there
            except (OSError, ValueError):  # ValueError: launched from a thread other than the main one
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

    return reset


class ClientSurface:
    """The `AcpClient`'s surface offered as its holder's own, forwarded to its `client`: what a
    test calls on an agent (`agent.request(...)`, `agent.records`). No state of its own."""

    client: AcpClient

    policy: ForwardedAttribute[ClientPolicy] = ForwardedAttribute("client")
    records: ForwardedAttribute[list[Record]] = ForwardedAttribute("client")
    pending: ForwardedAttribute[dict[IdKey | None, Pending]] = ForwardedAttribute("client")
    eof: ForwardedAttribute[Event] = ForwardedAttribute("client")
    agent_requests: ForwardedAttribute[list[dict[str, Any]]] = ForwardedAttribute("client")
    listeners: ForwardedAttribute[list[Callable[[dict[str, Any]], None]]] = ForwardedAttribute("client")
    hold: ForwardedAttribute[dict[Any, dict[str, Any]]] = ForwardedAttribute("client")
    held_elicitations: ForwardedAttribute[dict[IdKey | None, dict[str, Any]]] = ForwardedAttribute("client")
    terminal_host: ForwardedAttribute[TerminalHost] = ForwardedAttribute("client")
    lost_answers: ForwardedAttribute[int] = ForwardedAttribute("client")
    send_raw = ForwardedMethod("client", AcpClient.send_raw)
    send = ForwardedMethod("client", AcpClient.send)
    send_batch = ForwardedMethod("client", AcpClient.send_batch)
    make_request = ForwardedMethod("client", AcpClient.make_request)
    request = ForwardedMethod("client", AcpClient.request)
    call = ForwardedMethod("client", AcpClient.call)
    notify = ForwardedMethod("client", AcpClient.notify)
    pending_for = ForwardedMethod("client", AcpClient.pending_for)
    initialize = ForwardedMethod("client", AcpClient.initialize)
    initialize_params = ForwardedMethod("client", AcpClient.initialize_params)
    new_session = ForwardedMethod("client", AcpClient.new_session)
    prompt = ForwardedMethod("client", AcpClient.prompt)
    prompt_params = staticmethod(AcpClient.prompt_params)
    cancel = ForwardedMethod("client", AcpClient.cancel)
    received = ForwardedMethod("client", AcpClient.received)
    updates = ForwardedMethod("client", AcpClient.updates)
    wait_for = ForwardedMethod("client", AcpClient.wait_for)
    idle_states = ForwardedMethod("client", AcpClient.idle_states)
    wait_idle = ForwardedMethod("client", AcpClient.wait_idle)
    pause_reading = ForwardedMethod("client", AcpClient.pause_reading)
    resume_reading = ForwardedMethod("client", AcpClient.resume_reading)
    respond = ForwardedMethod("client", AcpClient.respond)
    respond_error = ForwardedMethod("client", AcpClient.respond_error)
    stop = ForwardedMethod("client", AcpClient.stop)


class AgentProcess(ClientSurface):
    """An ACP agent command launched as a subprocess over real pipes, in its own session, and the
    `AcpClient` on those pipes (`client`), whose surface is the agent's own: `agent.request(...)`.

    A command whose first word is a URL (ws://, wss://, http://, https://) reaches a remote agent
    instead (remote_link.py): `remote` is then its `RemoteProcess`, which stands as `proc` with
    pipes of its own; there is no pid, no process to signal, measure or reap, and `stderr` holds
    the link's notes. ValueError for words after the URL that are not the link's options."""


    def __init__(self, command: Sequence[str], policy: ClientPolicy | None = None, *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.command = list(command)
        target = remote_target(self.command)
        self.remote: RemoteProcess | None = None
        self.tracker: reaper.Tracker | None = None
        self.pid: int | None = None
        self.proc: Any  # a gevent.subprocess.Popen, or the RemoteProcess standing for one
        if target is not None:
            self.proc = self.remote = RemoteProcess(target)
        else:
            # Orphans of the agent must come back to us, or they vanish from any walk (reaper.py).
            reaper.become_subreaper()
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=default_signal_dispositions(),
            )
            pid: int = self.proc.pid
            self.pid = pid
            self.tracker = reaper.Tracker(pid)
        self.stderr = bytearray()
        self._stderr_drain = gevent.spawn(self._drain_stderr)
        self.client = AcpClient(self.proc.stdout.fileno(), self.proc.stdin.fileno(), policy, close_fds=False)

    def _drain_stderr(self) -> None:
        for chunk in read_chunks(self.proc.stderr.fileno()):
            if len(self.stderr) < (4 << 20):
                self.stderr.extend(chunk)

    def stderr_text(self, timeout: float = 2.0) -> str:
        """What the agent wrote to stderr so far, all of it once the agent closed stderr (waited for up to `timeout`)."""
        self._stderr_drain.join(timeout=timeout)
        return bytes(self.stderr).decode("utf-8", "replace")

    def close_input(self) -> None:
        """Close the agent's stdin (EOF)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def signal(self, signum: int = signal.SIGTERM) -> None:
        """Send the agent a signal (OSError for a remote agent: it takes none)."""
        self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the agent's process group (it runs in a session of its own), or drop a remote
        agent's connection; the caller reaps it (`close`)."""
        if self.remote is not None:
            self.remote.kill()
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    @property
    def shown_command(self) -> str:
        """The command as a message may show it (a remote agent's token hidden)."""
        return " ".join(shown_command(self.command))

    @property
    def exited(self) -> bool:
        return self.proc.poll() is not None

    def memory_rss(self) -> int | None:
        """Resident set size in bytes from /proc, or None once the process is gone."""
        if self.pid is None:
            return None
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as handle:
                return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return None

    def open_fds(self) -> int | None:
        """How many descriptors the agent holds open, from /proc, or None once it is gone."""
        if self.pid is None:
            return None
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            return None

    def survivors(self) -> list[reaper.ProcInfo]:
        """Processes the agent started that are still alive (call after it exited); none for a remote agent."""
        return self.tracker.survivors() if self.tracker is not None else []

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit; AssertionError if it does not in time."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"agent {self.shown_command} did not exit within {timeout}s") from None

    def close(self) -> int | None:
        """End the agent: EOF, then SIGKILL its process group if it lingers; reap everything.
        A remote agent: EOF (a close frame, a DELETE), then its connection dropped if it lingers."""
        if self.remote is not None:
            code = self.remote.end(grace=10)
        else:
            code = reaper.end_process(self.proc, self.proc.pid, grace=10)
        self.client.terminal_host.close()
        self.client.inbox.join(timeout=5)
        self._stderr_drain.join(timeout=5)
        if self.pid is not None:
            reaper.LAUNCHED.discard(self.pid)  # reaped: the pid may be reused by anyone
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        return code

    def __enter__(self) -> "AgentProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
