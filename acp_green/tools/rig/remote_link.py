"""A remote agent, given as a URL where the rig takes an agent command: its lines over the network.

`acp-green serve --listen` (or any agent that serves ACP the same way) is reached at a URL:

- `ws://` and `wss://`: a WebSocket (wsproto on a cooperative socket); each line the rig writes
  is one text frame, each text frame that arrives one line the rig reads. The end of the rig's
  input is a close frame (1000); the link ends with the agent's close.
- `http://` and `https://`: Streamable HTTP (geventhttpclient). `initialize` is POSTed without a
  connection id and its 200 answer is the first line read; the `Acp-Connection-Id` it gives goes
  with every later POST (202), with `Acp-Session-Id` when the message names a session. What the
  agent sends arrives on event streams: the connection's, opened after `initialize`, and one per
  session, opened when a session id first appears (the answer to `session/new` or `fork`, the
  answer to `session/load` or `resume`, or before a request naming it that is sent). The end of
  the rig's input is a DELETE; the link ends when the agent has closed every stream.

`RemoteProcess` stands where the rig starts a subprocess: three pipes as a child's stdin, stdout
and stderr, pumped by greenlets (a `RemoteLink`, which owns the descriptors, and its transport,
`WebSocketTransport` or `HttpTransport`, which owns the sockets), so the rig's client reads and
writes lines as it does with any stdio agent. Its "stderr" carries the link's own notes (where it connected, what the agent refused
and why), never anything of the agent's. It has no pid and takes no signal.

Words after the URL are the link's options: `--header 'NAME: VALUE'` (repeatable) and
`--token TOKEN` (`--header 'Authorization: Bearer TOKEN'`); without either naming Authorization,
the environment's ACP_GREEN_TOKEN (the variable `serve --listen` reads) is sent as the bearer
token. Whatever shows a URL target (a report, a trace, chat's banner) shows `shown_command`: no
token, no userinfo, no secret-looking header value.

`python -m acp_green.tools.rig.remote_link URL` is the same link between its own stdin and
stdout (headers from REMOTE_HEADERS_ENV, out of the process list): what `acp-green record URL`
runs as its agent.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.socket
import gevent.ssl
from gevent import subprocess
from gevent.event import Event
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore

from ...redact import HIDDEN, redact_url, scrub, secret_name, secrets_of
from ...rpc.transport import FdWriter, LineFramer, LineReader
from ...rpc.wire import IdKey, id_key

__all__ = ["RemoteProcess", "RemoteRefused", "RemoteTarget", "bridge_command", "is_agent_url", "remote_target",
           "shown_command"]

SCHEMES = ("ws", "wss", "http", "https")
#: The variable `serve --listen --token` reads; sent as the bearer token unless a header says otherwise.
TOKEN_ENV = "ACP_GREEN_TOKEN"
#: How the bridge (`python -m ...remote_link`) gets its headers: JSON [[name, value], ...].
REMOTE_HEADERS_ENV = "ACP_GREEN_REMOTE_HEADERS"
#: How long connecting (TCP, TLS, the WebSocket handshake, the first HTTP request) may take.
CONNECT_TIMEOUT = 10.0
#: How long the POST of `initialize` may take (the agent answers it within 30 s or says 504).
INITIALIZE_TIMEOUT = 60.0
#: How long the DELETE that ends an HTTP connection, or a close frame, may take to be sent.
CLOSE_TIMEOUT = 10.0
#: A line (a message) is read up to this long either way, the rig's own bound.
MAX_LINE_BYTES = 64 << 20
#: Event streams of one HTTP connection at once (the connection's, and one per session).
MAX_STREAMS = 1100
_RECV = 64 * 1024
#: Methods whose answer says which session opens: its stream is opened after the answer, so
#: the updates they replay stay on the connection's stream, in order with the answer.
OPENED_BY_ANSWER = frozenset({"session/load", "session/resume"})
#: What GETs and DELETEs say, so their sockets never return to the pool: `serve --listen` closes
#: the socket after answering a request without a body that it did not read to its end (a refused
#: GET, a DELETE) yet does not say so, and a POST sent next on that socket would fail (a POST is
#: not retried). POSTs keep their connection alive.
NOT_REUSED = ("Connection", "close")


class RemoteRefused(OSError):
    """The remote agent cannot be reached, or refused the connection (its HTTP status and words)."""


@dataclass(frozen=True, slots=True)
class RemoteTarget:
    """Where the remote agent listens, and the headers every request and the upgrade carry."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme.lower()

    @property
    def websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def shown(self) -> str:
        """The URL as anything may show it: no userinfo, no secret query values."""
        return redact_url(self.url)

    def secrets(self) -> list[str]:
        return secrets_of(self.url, dict(self.headers))


def is_agent_url(text: Any) -> bool:
    """Whether `text` is a ws://, wss://, http:// or https:// URL (the rig's remote targets)."""
    if not isinstance(text, str) or "://" not in text:
        return False
    scheme = text.split("://", 1)[0].lower()
    return scheme in SCHEMES and bool(urlsplit(text).hostname)


def remote_target(command: Sequence[str], env: dict[str, str] | None = None) -> RemoteTarget | None:
    """The target when the command's first word is a URL (None for a command line to run).

    The other words are the link's options: `--header 'NAME: VALUE'` (repeatable), `--token T`.
    ValueError names a word that is neither."""
    if not command or not is_agent_url(command[0]):
        return None
    headers: list[tuple[str, str]] = []
    words = list(command[1:])
    while words:
        word = words.pop(0)
        option, equals, inline = word.partition("=")
        if option not in ("--header", "--token"):
            raise ValueError(f"after an agent URL only --header 'NAME: VALUE' and --token TOKEN may follow, not {word!r}")
        if equals:
            value = inline
        elif words:
            value = words.pop(0)
        else:
            raise ValueError(f"{option} needs a value")
        if option == "--token":
            headers.append(("Authorization", f"Bearer {value}"))
            continue
        name, colon, text = value.partition(":")
        if not colon or not name.strip() or any(c in value for c in "\r\n"):
            raise ValueError(f"--header takes 'NAME: VALUE', not {value!r}")
        headers.append((name.strip(), text.strip()))
    token = (os.environ if env is None else env).get(TOKEN_ENV)
    if token and not any(name.lower() == "authorization" for name, _ in headers):
        headers.append(("Authorization", f"Bearer {token}"))
    return RemoteTarget(command[0], tuple(headers))


def shown_command(command: Sequence[str]) -> list[str]:
    """The command as a report or a trace may show it: for a URL target, its secrets hidden."""
    if not command or not is_agent_url(command[0]):
        return list(command)
    shown = [redact_url(command[0])]
    option = ""  # the option whose value the next word is
    for word in command[1:]:
        if option:
            shown.append(_shown_value(option, word))
            option = ""
        elif word in ("--header", "--token"):
            shown.append(word)
            option = word
        elif word.startswith(("--header=", "--token=")):
            name, _, value = word.partition("=")
            shown.append(f"{name}={_shown_value(name, value)}")
        else:
            shown.append(word)
    return shown


def _shown_value(option: str, value: str) -> str:
    if option == "--token":
        return HIDDEN
    name = value.partition(":")[0]
    return value if not secret_name(name.strip()) else f"{name}: {HIDDEN}"


def bridge_command(target: RemoteTarget) -> tuple[list[str], dict[str, str]]:
    """A process that is the link between its stdin and stdout (for a tool that needs a real
    process, `acp-green record`), and the environment that carries its headers."""
    env = {**os.environ, REMOTE_HEADERS_ENV: json.dumps([list(pair) for pair in target.headers])}
    env.pop(TOKEN_ENV, None)  # the headers say everything: the token is among them if it was sent
    return [sys.executable, "-m", "acp_green.tools.rig.remote_link", target.url], env


# -- the link --------------------------------------------------------------------------------
class RemoteLink:
    """One connection to a remote agent, pumping lines between two descriptors and the network.

    `start` connects (RemoteRefused, or another OSError, when it cannot); then the greenlets run
    until the agent ends the connection, or `kill`. `returncode` is then 0 (the agent ended it, or
    the rig's input ended and the agent closed), 1 when it broke off or refused what it needed.
    The transport (WebSocket or Streamable HTTP) sends and reads; the link owns the descriptors.
    """

    def __init__(self, target: RemoteTarget, input_fd: int, output_fd: int, notes: Callable[[str], None], *,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self.secrets = target.secrets()
        self.returncode: int | None = None
        self.ended = Event()
        self.input_ended = False  # the rig closed its input (the transport then ends the connection)
        self._input_fd = input_fd
        self._output_fd = output_fd
        self._notes = notes
        self._reader: LineReader | None = None
        self._writer: FdWriter | None = None
        self._write_lock = Semaphore()
        self._greenlets: set[Greenlet] = set()
        self._outbound: Greenlet | None = None
        self.transport: Transport = (WebSocketTransport if target.websocket else HttpTransport)(self)

    @property
    def connection_id(self) -> str | None:
        return self.transport.connection_id

    # -- for the owner -------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self.transport.connect()
        except BaseException:  # ok: cleans up and re-raises, a kill included
            self._close_fds()
            raise
        self._reader = LineReader(self._input_fd, MAX_LINE_BYTES)
        self._writer = FdWriter(self._output_fd)
        self._outbound = self.spawn(self._pump_out)
        self.transport.started()

    def end_input(self) -> None:
        """As if the rig closed its input (a signal to the bridge): end the connection."""
        if self._outbound is not None and not self._outbound.dead:
            self._outbound.kill(block=False)
            self.spawn(self._input_done)

    def kill(self) -> None:
        """Drop the connection at once (SIGKILL's part): nothing more is sent or read."""
        self.finish(1, "the rig dropped the connection")

    # -- for the transport ---------------------------------------------------------------------
    def spawn(self, run: Callable[..., None], *args: Any) -> Greenlet:
        greenlet = Greenlet(self._guarded, run, *args)
        self._greenlets.add(greenlet)
        greenlet.rawlink(self._greenlets.discard)
        greenlet.start()
        return greenlet

    def note(self, text: str) -> None:
        """One line of the link's own on its notes (the rig's "stderr" of the agent)."""
        self._notes(f"acp-green link: {scrub(text, self.secrets)}\n")

    def deliver(self, data: bytes) -> None:
        """A message from the agent, as one line the rig reads."""
        writer = self._writer
        if writer is None or self.returncode is not None:
            return
        view = memoryview(data.rstrip(b"\r\n") + b"\n")
        with self._write_lock:
            while view:
                view = view[writer.write(view):]

    def finish(self, code: int, note: str | None = None) -> None:
        """The link is over: the rig reads the end of its input, its writes fail as to a dead process."""
        if self.returncode is not None:
            return
        if note:
            self.note(note)
        self.returncode = code
        try:
            self.transport.abort()
            current = gevent.getcurrent()
            # Before the descriptors close: a pump waiting on one must not wake to a closed watcher.
            gevent.killall([g for g in self._greenlets if g is not current], block=True, timeout=CLOSE_TIMEOUT)
        finally:
            self._close_fds()
            self.ended.set()

    # -- inside --------------------------------------------------------------------------------
    def _guarded(self, run: Callable[..., None], *args: Any) -> None:
        try:
            run(*args)
        except gevent.GreenletExit:
            raise
        except (OSError, ValueError) as exc:  # the agent or the rig went away mid-exchange
            self.finish(1, f"the connection broke: {_error_text(exc)}")
        except Exception as exc:  # a parse error of the HTTP client, a protocol error of wsproto...
            self.finish(1, f"the connection broke: {type(exc).__name__}: {_error_text(exc)}")

    def _pump_out(self) -> None:
        assert self._reader is not None
        for line in self._reader.lines():
            if line.too_long or line.out_of_memory:
                self.note(f"a line over {MAX_LINE_BYTES} bytes was not sent")
                continue
            data = line.data.rstrip(b"\r\n")
            if not data.strip():
                continue
            try:
                message = json.loads(data)
            except (ValueError, RecursionError):
                message = None
            self.transport.send_line(data, message)
        self._input_done()

    def _input_done(self) -> None:
        self.input_ended = True
        self.transport.input_done()

    def _close_fds(self) -> None:
        for closer in (self._reader, self._writer):
            if closer is not None:
                closer.close()
        for fd in (self._input_fd, self._output_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._input_fd = self._output_fd = -1


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _what(message: Any) -> str:
    """A message in a few words, for a note: its method and id, the id it answers, or that it is not JSON."""
    if isinstance(message, list):
        return "a batch"
    if not isinstance(message, dict):
        return "a line that is not JSON"
    if "method" in message:
        return f"{message['method']}" + (f" #{json.dumps(message['id'])}" if "id" in message else "")
    return f"the answer to #{json.dumps(message.get('id'))}"


def _session_of(message: Any) -> str | None:
    params = message.get("params") if isinstance(message, dict) else None
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) and session_id else None


def _words(body: bytes) -> str:
    """The first words of a refusal's body, on one line."""
    return " ".join(body.decode("utf-8", "replace").split())[:300]


def _refusal(what: str, status: int | None, words: str) -> str:
    return f"{what}: HTTP {status}" + (f": {words}" if words else "")


def _tls_context() -> ssl.SSLContext:
    """A client context whose sockets yield (gevent's SSLContext); the default CAs, or SSL_CERT_FILE."""
    context: ssl.SSLContext = gevent.ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_default_certs()
    return context


class Transport:
    """How a `RemoteLink` reaches the agent: connects, sends each line the rig wrote, reads what the
    agent sends (handing each message to `link.deliver`), ends the connection, and drops it."""

    def __init__(self, link: RemoteLink) -> None:
        self.link = link
        self.target = link.target
        self.connection_id: str | None = None

    def connect(self) -> None:
        """Connect (RemoteRefused, or another OSError, when it cannot); nothing is read yet."""
        raise NotImplementedError

    def started(self) -> None:
        """Connected; the outbound pump runs: start reading what the agent sends."""

    def send_line(self, data: bytes, message: Any) -> None:
        """Send one line the rig wrote (its newline removed; `message` its JSON, or None)."""
        raise NotImplementedError

    def input_done(self) -> None:
        """The rig's input ended: end the connection (the agent's end then ends the link)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Close the sockets (the link's `finish` calls it once)."""


# -- WebSocket -----------------------------------------------------------------------------------
class WebSocketTransport(Transport):
    """The link over one WebSocket: a text frame per message both ways."""

    def __init__(self, link: RemoteLink) -> None:
        super().__init__(link)
        self._sock: Any = None
        self._ws: Any = None
        self._send_lock = Semaphore()
        self._closed_by_us = False

    def connect(self) -> None:
        parts = urlsplit(self.target.url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme.lower() == "wss" else 80)
        timeout = self.link.connect_timeout
        try:
            sock = gevent.socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise RemoteRefused(exc.errno or errno.ECONNREFUSED, f"cannot connect to {self.target.shown}: {_error_text(exc)}") from None
        try:
            with gevent.Timeout(timeout, RemoteRefused(errno.ETIMEDOUT, f"no WebSocket handshake from {self.target.shown} "
                                                                        f"within {timeout:g}s")):
                if parts.scheme.lower() == "wss":
                    sock = _tls_context().wrap_socket(sock, server_hostname=host)
                self._handshake(sock, host if parts.port is None else f"{host}:{parts.port}",
                                (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
            sock.settimeout(None)
        except BaseException:  # ok: cleans up and re-raises, a kill included
            sock.close()
            raise

    def _handshake(self, sock: Any, netloc: str, path: str) -> None:
        """Upgrade: the 101 gives the connection id; a refusal is RemoteRefused with its status and words."""
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request

        ws = WSConnection(ConnectionType.CLIENT)
        extra = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self.target.headers]
        sock.sendall(ws.send(Request(host=netloc, target=path, extra_headers=extra)))
        status: int | None = None
        body = b""
        while True:
            data = sock.recv(_RECV)
            ws.receive_data(data or None)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.extra_headers}
                    self.connection_id = headers.get("acp-connection-id")
                    self._sock, self._ws = sock, ws
                    return
                if isinstance(event, RejectConnection):
                    status = event.status_code
                    if not event.has_body:
                        raise self._refused(status, b"")
                elif isinstance(event, RejectData):
                    body += event.data
                    if event.body_finished or len(body) > 4096:
                        raise self._refused(status, body)
            if not data:
                raise RemoteRefused(errno.ECONNRESET, f"{self.target.shown} closed the connection during the WebSocket handshake")

    def _refused(self, status: int | None, body: bytes) -> RemoteRefused:
        text = _refusal(f"{self.target.shown} refused the WebSocket", status, _words(body))
        return RemoteRefused(errno.ECONNREFUSED, scrub(text, self.link.secrets))

    def started(self) -> None:
        self.link.note(f"connected to {self.target.shown} over WebSocket (Acp-Connection-Id {self.connection_id})")
        self.link.spawn(self._pump_in)

    def _send(self, event: Any) -> None:
        with self._send_lock:
            data = self._ws.send(event)
            if data:
                self._sock.sendall(data)

    def send_line(self, data: bytes, message: Any) -> None:
        from wsproto.connection import ConnectionState
        from wsproto.events import TextMessage

        if self._ws.state is not ConnectionState.OPEN:
            raise BrokenPipeError(errno.EPIPE, "the WebSocket is closed")
        self._send(TextMessage(data=data.decode("utf-8", "replace")))

    def input_done(self) -> None:
        from wsproto.connection import ConnectionState
        from wsproto.events import CloseConnection

        if self._ws.state is ConnectionState.OPEN:
            self._closed_by_us = True
            with gevent.Timeout(CLOSE_TIMEOUT, False):
                self._send(CloseConnection(code=1000, reason="the client's input ended"))

    def _pump_in(self) -> None:
        """Frames to lines until the agent closes (its close frame, answered) or the socket ends."""
        from wsproto.connection import ConnectionState
        from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

        parts: list[str] = []
        size = 0
        warned_binary = False
        while True:
            for event in self._ws.events():
                if isinstance(event, TextMessage):
                    size += len(event.data)
                    if size <= MAX_LINE_BYTES:
                        parts.append(event.data)
                    if event.message_finished:
                        if size > MAX_LINE_BYTES:
                            self.link.note(f"a message over {MAX_LINE_BYTES} bytes was dropped")
                        else:
                            self.link.deliver("".join(parts).encode("utf-8", "surrogatepass"))
                        parts, size = [], 0
                elif isinstance(event, BytesMessage) and not warned_binary:
                    warned_binary = True
                    self.link.note("the agent sent a binary frame (ACP messages are text frames): ignored")
                elif isinstance(event, Ping):
                    self._send(event.response())
                elif isinstance(event, CloseConnection):
                    if self._ws.state is ConnectionState.REMOTE_CLOSING:
                        with gevent.Timeout(CLOSE_TIMEOUT, False):
                            self._send(event.response())
                    normal = event.code in (1000, 1001) or self._closed_by_us
                    said = f"the agent closed the WebSocket with code {event.code}" + (f": {event.reason}" if event.reason else "")
                    self.link.finish(0 if normal else 1, None if normal else said)
                    return
            data = self._sock.recv(_RECV)
            if not data:
                self.link.finish(0 if self._closed_by_us else 1,
                                 None if self._closed_by_us else "the agent closed the socket without a close frame")
                return
            self._ws.receive_data(data)

    def abort(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass


# -- Streamable HTTP -----------------------------------------------------------------------------
class HttpTransport(Transport):
    """The link over Streamable HTTP: a POST per message, event streams for what the agent sends."""

    def __init__(self, link: RemoteLink) -> None:
        super().__init__(link)
        self._client: Any = None
        self._path = "/"
        self._sessions: dict[str, tuple[Greenlet, Event]] = {}
        self._opening: dict[IdKey | None, str] = {}  # load/resume request ids -> the session their answer opens

    def connect(self) -> None:
        """Make the client, and check the endpoint: a GET that names no connection must be refused
        for that (400), not for want of a token (401, 403) or of an endpoint (404)."""
        import geventhttpclient

        from ...mcp import httpguard

        timeout = self.link.connect_timeout
        parsed = geventhttpclient.URL(self.target.url)
        self._path = parsed.request_uri or "/"
        self._client = httpguard.guarded_client(parsed, concurrency=MAX_STREAMS, connect_timeout=timeout)
        try:
            with gevent.Timeout(timeout, RemoteRefused(errno.ETIMEDOUT, f"no answer from {self.target.shown} within {timeout:g}s")):
                status, words = self._request("GET", headers={"Accept": "text/event-stream"})
        except RemoteRefused:
            self._client.close()
            raise
        except (OSError, geventhttpclient.HTTPParseError) as exc:
            self._client.close()
            raise RemoteRefused(getattr(exc, "errno", None) or errno.ECONNREFUSED,
                                f"cannot connect to {self.target.shown}: {_error_text(exc)}") from None
        if status in (401, 403, 404) or status >= 500:
            self._client.close()
            raise RemoteRefused(errno.ECONNREFUSED, scrub(_refusal(f"{self.target.shown} refused", status, words), self.link.secrets))

    def started(self) -> None:
        self.link.note(f"reached {self.target.shown} over Streamable HTTP")

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        headers = dict(self.target.headers)
        if self.connection_id is not None:
            headers["Acp-Connection-Id"] = self.connection_id
        headers.update(extra)
        if "Content-Type" not in extra:  # a GET or a DELETE
            headers[NOT_REUSED[0]] = NOT_REUSED[1]
        return headers

    def _request(self, method: str, body: bytes = b"", headers: dict[str, str] | None = None) -> tuple[int, str]:
        """One request whose answer is small; (its status, its body's first words)."""
        from ...mcp import httpguard

        response = httpguard.send(self._client, method, self._path, body=body, headers=self._headers(headers or {}))
        with response:
            return response.status_code, _words(response.read(4096))

    # -- what the rig sends --------------------------------------------------------------------
    def send_line(self, data: bytes, message: Any) -> None:
        if self.connection_id is None:
            if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
                self._initialize(data)
            else:
                self.link.note(f"{_what(message)} not sent: over Streamable HTTP a connection starts with initialize")
            return
        method = message.get("method") if isinstance(message, dict) else None
        extra = {"Content-Type": "application/json"}
        session_id = _session_of(message)
        if session_id is not None:
            extra["Acp-Session-Id"] = session_id
            if method in OPENED_BY_ANSWER and isinstance(message, dict) and "id" in message:
                self._opening[id_key(message["id"])] = session_id
            else:
                self._open_session_stream(session_id, wait=True)  # before the request: its answer goes there
        status, words = self._request("POST", data, extra)
        if status != 202:
            self.link.note(_refusal(f"{_what(message)} refused", status, words))

    def _initialize(self, data: bytes) -> None:
        from ...mcp import httpguard
        from ...mcp.httplink import _read_body

        with gevent.Timeout(INITIALIZE_TIMEOUT, RemoteRefused(errno.ETIMEDOUT, f"initialize not answered within {INITIALIZE_TIMEOUT:g}s")):
            response = httpguard.send(self._client, "POST", self._path, body=data,
                                      headers=self._headers({"Content-Type": "application/json", "Accept": "application/json"}))
            with response:
                status = response.status_code
                connection_id = response.get("acp-connection-id")
                body = _read_body(response, MAX_LINE_BYTES)
        if status != 200 or not connection_id:
            self.link.finish(1, _refusal("initialize refused", status, _words(body)) + (" (no Acp-Connection-Id)" if status == 200 else ""))
            return
        self.connection_id = str(connection_id)
        self.link.deliver(body)
        self.link.note(f"Acp-Connection-Id {self.connection_id}")
        ready = Event()
        self.link.spawn(self._read_stream, None, ready)
        ready.wait(self.link.connect_timeout)

    def input_done(self) -> None:
        if self.connection_id is None:
            self.link.finish(0)
            return
        try:
            with gevent.Timeout(CLOSE_TIMEOUT):
                status, words = self._request("DELETE")
        except (gevent.Timeout, OSError) as exc:
            self.link.note(f"DELETE failed: {_error_text(exc)}")
            return
        if status not in (200, 202, 204, 404):
            self.link.note(_refusal("DELETE refused", status, words))

    # -- what the agent sends ------------------------------------------------------------------
    def _open_session_stream(self, session_id: str, wait: bool) -> None:
        entry = self._sessions.get(session_id)
        if entry is None:
            ready = Event()
            entry = self._sessions[session_id] = (self.link.spawn(self._read_stream, session_id, ready), ready)
        if wait:
            entry[1].wait(self.link.connect_timeout)

    def _read_stream(self, session_id: str | None, ready: Event) -> None:
        """Read one event stream to its end, each event's data one line for the rig."""
        from ...mcp import httpguard
        from ...mcp.httplink import _body_blocks
        from ...mcp.sse import SseParser, SseTooLarge

        what = "the connection's event stream" if session_id is None else f"the event stream of session {session_id}"
        extra = {"Accept": "text/event-stream"}
        if session_id is not None:
            extra["Acp-Session-Id"] = session_id
        try:
            response = httpguard.send(self._client, "GET", self._path, headers=self._headers(extra))
            with response:
                if response.status_code != 200:
                    self.link.note(_refusal(f"{what} refused", response.status_code, _words(response.read(4096))))
                    return
                ready.set()
                parser = SseParser(MAX_LINE_BYTES)
                for line in LineFramer(_body_blocks(response), MAX_LINE_BYTES + 64, skip_long_lines=False).lines():
                    if line.too_long:
                        raise SseTooLarge(f"an event stream line is over {MAX_LINE_BYTES} bytes")
                    event = parser.feed_line(line.data)
                    if event is not None and event.event == "message" and event.data:
                        self._arrived(event.data)
        except gevent.GreenletExit:
            raise
        except Exception as exc:  # the socket, the HTTP client's parser, an event too large
            if self.link.returncode is None:
                self.link.note(f"{what} broke off: {_error_text(exc)}")
        finally:
            ready.set()
            if session_id is None:
                self._connection_ended()

    def _arrived(self, data: bytes) -> None:
        """One message for the rig; the answer that opens a session opens its stream too."""
        self.link.deliver(data)
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(message, dict) or "method" in message:
            return
        opened = self._opening.pop(id_key(message.get("id")), None) if "id" in message else None
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            opened = result["sessionId"]  # session/new, fork
        elif not isinstance(result, dict):
            opened = None  # refused: no session opened
        if opened:
            self._open_session_stream(opened, wait=False)

    def _connection_ended(self) -> None:
        """The connection's stream ended: the agent ended the connection (the session streams end with it)."""
        gevent.joinall([greenlet for greenlet, _ in self._sessions.values()], timeout=CLOSE_TIMEOUT)
        self.link.finish(0 if self.link.input_ended else 1, None if self.link.input_ended else "the agent ended the connection")

    def abort(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # ok: closing what is already broken
                pass


# -- where the rig starts a process ----------------------------------------------------------------
class _End:
    """One end of a pipe, as a Popen's stdin, stdout or stderr: a descriptor to close once."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class RemoteProcess:
    """A remote agent standing where a `gevent.subprocess.Popen` would: pipes as stdin, stdout and
    stderr (the link's notes), `poll`, `wait`, `kill`; no pid and no signals."""

    pid = None

    def __init__(self, target: RemoteTarget, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.target = target
        self.args = [target.shown]
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, self._notes_fd = os.pipe()
        os.set_blocking(self._notes_fd, False)
        self.stdin, self.stdout, self.stderr = _End(in_w), _End(out_r), _End(err_r)
        self.link = RemoteLink(target, in_r, out_w, self._note, connect_timeout=connect_timeout)
        self.link.ended.rawlink(lambda _event: self._close_notes())
        try:
            self.link.start()
        except BaseException:  # ok: cleans up and re-raises, a kill included
            for end in (self.stdin, self.stdout, self.stderr):
                end.close()
            self._close_notes()
            raise

    def _note(self, text: str) -> None:
        if self._notes_fd < 0:
            return
        try:
            os.write(self._notes_fd, text.encode("utf-8", "replace"))
        except OSError:  # full (nobody drains it) or closed: a note is never worth a wait
            pass

    def _close_notes(self) -> None:
        fd, self._notes_fd = self._notes_fd, -1
        if fd >= 0:
            os.close(fd)

    @property
    def returncode(self) -> int | None:
        return self.link.returncode

    def poll(self) -> int | None:
        return self.link.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The link's end: subprocess.TimeoutExpired if it has not ended within `timeout`."""
        if not self.link.ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        assert self.link.returncode is not None
        return self.link.returncode

    def send_signal(self, signum: int) -> None:
        raise OSError(errno.EINVAL, f"{self.target.shown} is reached over the network: it takes no signal "
                                    f"({signal.Signals(signum).name})")

    def kill(self) -> None:
        self.link.kill()

    def end(self, grace: float) -> int:
        """The rig's end of the conversation: its input closed, `grace` for the agent to end the
        connection, then dropped."""
        self.stdin.close()
        try:
            return self.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.wait(10)


# -- as a process of its own ----------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """`python -m acp_green.tools.rig.remote_link URL`: the link between stdin and stdout; its
    notes on stderr; the exit status is the link's. SIGTERM, SIGINT and SIGHUP end the input."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not is_agent_url(args[0]):
        sys.stderr.write(f"usage: python -m acp_green.tools.rig.remote_link URL (headers in ${REMOTE_HEADERS_ENV})\n")
        return 2
    try:
        pairs = json.loads(os.environ.get(REMOTE_HEADERS_ENV) or "[]")
        headers = tuple((str(name), str(value)) for name, value in pairs)
    except (ValueError, TypeError):
        sys.stderr.write(f"acp-green link: ${REMOTE_HEADERS_ENV} is not a JSON list of [name, value] pairs\n")
        return 2

    def to_stderr(text: str) -> None:
        try:
            os.write(2, text.encode("utf-8", "replace"))
        except OSError:
            pass

    link = RemoteLink(RemoteTarget(args[0], headers), 0, 1, to_stderr)
    try:
        link.start()
    except OSError as exc:
        to_stderr(f"acp-green link: {_error_text(exc)}\n")
        return 1
    handlers = [gevent.signal_handler(signum, link.end_input) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]
    try:
        link.ended.wait()
    finally:
        for handler in handlers:
            handler.cancel()
    return link.returncode if link.returncode is not None else 1


if __name__ == "__main__":
    sys.exit(main())
