"""`/acp`: what each HTTP request means for the connections of one listening agent.

- `POST` carries one JSON-RPC message. `initialize` without `Acp-Connection-Id` makes a
  connection and answers 200 with its answer and the new id; any other message goes to the
  connection its `Acp-Connection-Id` names and is answered 202 (the answer travels on an event
  stream, `event_streams.py`).
- `GET` with `Accept: text/event-stream` reads the connection's stream, or with
  `Acp-Session-Id` a session's; `GET` with `Upgrade: websocket` makes a WebSocket connection.
- `DELETE` ends the connection.

Refusals, before any ACP message is read: 403 (a browser page's Origin not allowed), 401 (the
`Authorize` check), 404 (another path, an
unknown connection), 405, 400 (a missing connection id or session id, ids that disagree), 406,
409 (a session another connection holds, a stream already read), 413, 415, 501 (a batch), 503
(as many connections as the agent serves at once, or shutting down).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent
from gevent.greenlet import Greenlet
from wsproto.utilities import generate_accept_token

from ..client_connection import ClientConnection
from ..rpc.channel import ByteWriter, Line, PushedMessages
from ..serve_options import ServeOptions
from ..sessions import SessionClaims
from .auth import Authorize
from .event_streams import SSE_KEEPALIVE, EventStream, EventStreams, sse_event
from .http import BodyTooLarge, HttpSocket, Request
from .websocket import WebSocketLink

log = logging.getLogger(__name__)

PATH = "/acp"
CONNECTION_ID = "acp-connection-id"
SESSION_ID = "acp-session-id"
#: Methods whose POST must say which session it is for (Acp-Session-Id), as the RFD lists them.
SESSION_SCOPED = frozenset({"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"})
#: How long a POST of `initialize` waits for its answer before giving up (504).
INITIALIZE_TIMEOUT = 30.0


class ConnectionHost(Protocol):
    """What the routes need of the process that serves (`server.Server`)."""

    options: ServeOptions
    claims: SessionClaims

    def new_connection(self, destination: int | ByteWriter, name: str) -> ClientConnection:
        """A connection of the process writing to `destination`; the caller serves it."""


@dataclass(frozen=True, slots=True)
class RouteLimits:
    """The bounds `/acp` keeps, whatever a client sends."""

    max_body_bytes: int
    keepalive_interval: float = 15.0
    idle_timeout: float = 600.0
    max_session_streams: int = 1024
    max_buffered_bytes: int = 1 << 20
    allowed_origins: frozenset[str] = frozenset()
    #: ACP connections at once, HTTP and WebSocket together; more are refused 503.
    max_connections: int = 1024


@dataclass(eq=False)
class RemoteConnection:
    """One ACP connection over the network and what serves it."""

    connection_id: str
    kind: str  # "http" or "websocket"
    client: ClientConnection
    source: PushedMessages | WebSocketLink
    streams: EventStreams | None = None
    greenlet: Greenlet | None = None
    last_activity: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def end(self, reason: str) -> None:
        """A disconnect: the connection ends as stdio does at EOF, with its grace (S13)."""
        self.client.request_end(reason)
        self.source.end()


class AcpRoutes:
    """The connections of one listening `Server`, and the handling of each request to `/acp`."""

    def __init__(self, server: ConnectionHost, limits: RouteLimits, authorize: Authorize | None = None) -> None:
        self.server = server
        self.limits = limits
        self.authorize = authorize
        self.connections: dict[str, RemoteConnection] = {}
        self.accepting = True

    # -- connections ---------------------------------------------------------------------------
    def _open(self, kind: str, destination: EventStreams | WebSocketLink, peer: str) -> RemoteConnection:
        connection_id = uuid.uuid4().hex
        client = self.server.new_connection(destination, name=f"{kind} connection {connection_id[:12]} from {peer}")
        if isinstance(destination, EventStreams):
            remote = RemoteConnection(connection_id, kind, client, PushedMessages(), destination)
        else:
            remote = RemoteConnection(connection_id, kind, client, destination)
        self.connections[connection_id] = remote
        remote.greenlet = Greenlet(self._serve, remote)
        remote.greenlet.name = f"acp-connection-{connection_id[:12]}"
        remote.greenlet.start()
        log.info("%s opened", client.name)
        return remote

    def _serve(self, remote: RemoteConnection) -> None:
        try:
            remote.client.serve(remote.source)
        finally:
            self.connections.pop(remote.connection_id, None)
            if remote.streams is not None:
                remote.streams.close()
            log.info("%s ended: %s", remote.client.name, remote.client.stop_reason)

    def end_all(self, reason: str, timeout: float) -> None:
        """End every connection (each with its grace) and wait for their ends, at most `timeout`."""
        self.accepting = False
        ending = list(self.connections.values())
        for remote in ending:
            remote.end(reason)
        gevent.joinall([r.greenlet for r in ending if r.greenlet is not None], timeout=timeout)

    def end_idle(self, now: float | None = None) -> int:
        """End the HTTP connections nobody has read or written for `idle_timeout`; how many."""
        now = time.monotonic() if now is None else now
        idle = [r for r in self.connections.values()
                if r.streams is not None and r.streams.readers == 0 and now - r.last_activity > self.limits.idle_timeout]
        for remote in idle:
            remote.end(f"idle for {self.limits.idle_timeout:g} s with no request and no stream open")
        return len(idle)

    # -- one request ---------------------------------------------------------------------------
    def handle(self, http: HttpSocket, request: Request, peer: str) -> bool:
        """Answer `request`; True if the socket may carry another request afterwards."""
        if request.path != PATH:
            return _text(http, 404, f"Not found: ACP is served at {PATH}")
        origin = request.headers.get("origin")
        if origin is not None and origin not in self.limits.allowed_origins:
            return _text(http, 403, f"Forbidden: requests from the web origin {origin[:200]!r} are not allowed "
                                    "(serve with --allow-origin to allow a page to connect)")
        if self.authorize is not None and not self.authorize(request.headers):
            return _text(http, 401, "Unauthorized: send the agent's token as 'Authorization: Bearer TOKEN'",
                         [("www-authenticate", 'Bearer realm="acp"')])
        if not self.accepting:
            return _text(http, 503, "The agent is shutting down", close=True)
        if request.method == "POST":
            return self._post(http, request, peer)
        if request.method == "GET":
            if "websocket" in request.headers.get("upgrade", "").lower():
                self._upgrade(http, request, peer)
                return False
            return self._get(http, request)
        if request.method == "DELETE":
            return self._delete(http, request)
        return _text(http, 405, "Method not allowed: POST, GET or DELETE", [("allow", "GET, POST, DELETE")])

    def _connection(self, http: HttpSocket, request: Request) -> RemoteConnection | bool:
        """The connection the request names, or the refusal's keep-alive verdict."""
        connection_id = request.headers.get(CONNECTION_ID)
        if not connection_id:
            return _text(http, 400, "Missing Acp-Connection-Id: POST initialize first, then send its id on every request")
        remote = self.connections.get(connection_id)
        if remote is None or remote.client.stop_reason is not None:
            return _text(http, 404, "Unknown Acp-Connection-Id: the connection ended or never existed; initialize again")
        if remote.kind != "http":
            return _text(http, 400, "That connection is a WebSocket: send its messages on the socket")
        return remote

    def _post(self, http: HttpSocket, request: Request, peer: str) -> bool:
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return _text(http, 415, "Unsupported media type: POST one JSON-RPC message as application/json")
        try:
            body = http.read_body(self.limits.max_body_bytes)
        except BodyTooLarge:
            return _text(http, 413, f"Request body over {self.limits.max_body_bytes} bytes", close=True)
        except (OSError, gevent.Timeout):
            return False
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            message = None  # the connection answers it -32700 like any unreadable line
        if isinstance(message, list):
            return _text(http, 501, "JSON-RPC batches are not supported: POST one message at a time")
        method = message.get("method") if isinstance(message, dict) else None
        if not isinstance(method, str):
            method = None  # not a request or notification: the connection answers it as it is
        if method == "initialize" and isinstance(message, dict) and "id" in message:
            if request.headers.get(CONNECTION_ID):
                return _text(http, 400, "initialize starts a connection: send it without Acp-Connection-Id")
            return self._initialize(http, body, message["id"], peer)
        remote = self._connection(http, request)
        if not isinstance(remote, RemoteConnection):
            return remote
        assert remote.streams is not None
        session_id = _session_of(message)
        header_session = request.headers.get(SESSION_ID)
        if header_session is not None and session_id is not None and header_session != session_id:
            return _text(http, 400, "Acp-Session-Id and the message's sessionId differ")
        if method in SESSION_SCOPED and header_session is None and session_id is None:
            return _text(http, 400, f"Missing Acp-Session-Id: {method} is sent for one session")
        session_id = session_id or header_session
        if method in SESSION_SCOPED and session_id is not None:
            refusal = self._held_elsewhere(session_id, remote)
            if refusal is not None:
                return _text(http, 409, refusal)
        if isinstance(message, dict) and method is not None and "id" in message:
            remote.streams.note_request(message["id"], method, session_id)
        remote.touch()
        if not isinstance(remote.source, PushedMessages) or not remote.source.push(Line(body)):
            return _text(http, 404, "Unknown Acp-Connection-Id: the connection ended")
        return _empty(http, 202)

    def _initialize(self, http: HttpSocket, body: bytes, request_id: Any, peer: str) -> bool:
        if len(self.connections) >= self.limits.max_connections:
            return _text(http, 503, f"This agent serves {self.limits.max_connections} connections already; "
                                    "end one (DELETE) or try again later", [("retry-after", "5")])
        streams = EventStreams(self.limits.max_buffered_bytes, self.limits.max_session_streams)
        answer = streams.capture_answer(request_id)
        remote = self._open("http", streams, peer)
        assert isinstance(remote.source, PushedMessages)
        remote.source.push(Line(body))
        line = answer.get(timeout=INITIALIZE_TIMEOUT) if not answer.ready() else answer.get()
        if line is None:
            remote.end("initialize was not answered")
            return _text(http, 504, "initialize was not answered in time")
        remote.touch()
        http.respond(200, line, [("content-type", "application/json"), (CONNECTION_ID, remote.connection_id)])
        return True

    def _get(self, http: HttpSocket, request: Request) -> bool:
        if "text/event-stream" not in request.headers.get("accept", "").lower():
            return _text(http, 406, "Not acceptable: a GET reads an event stream (Accept: text/event-stream) or upgrades to a WebSocket")
        remote = self._connection(http, request)
        if not isinstance(remote, RemoteConnection):
            return remote
        assert remote.streams is not None
        session_id = request.headers.get(SESSION_ID)
        if session_id is None:
            stream = remote.streams.connection_stream
        else:
            refusal = self._held_elsewhere(session_id, remote)
            if refusal is not None:
                return _text(http, 409, refusal)
            found = remote.streams.session_stream(session_id)
            if found is None:
                return _text(http, 400, f"This connection already has {self.limits.max_session_streams} session streams")
            stream = found
        if stream.reader_attached:
            return _text(http, 409, "That stream is already being read by another request")
        stream.reader_attached = True
        hangup = gevent.spawn(_wait_for_hangup, http, stream)
        try:
            http.start_stream(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")])
            while not hangup.ready():
                remote.touch()
                lines = stream.take(self.limits.keepalive_interval)
                if hangup.ready():
                    if lines:
                        stream.put_back(lines)  # the client left before they were sent: the next reader gets them
                    return False
                if lines is None:
                    break
                http.send_piece(b"".join(sse_event(line) for line in lines) if lines else SSE_KEEPALIVE)
            else:
                return False
            http.end_stream()
            return False
        except OSError:
            return False  # the client stopped reading: what it did not get is not sent again
        finally:
            hangup.kill(block=True, timeout=1)  # its recv must be over before the socket is read or closed
            stream.reader_attached = False
            remote.touch()

    def _delete(self, http: HttpSocket, request: Request) -> bool:
        remote = self._connection(http, request)
        if not isinstance(remote, RemoteConnection):
            return remote
        remote.end("the client ended the connection (DELETE)")
        return _empty(http, 202)

    def _upgrade(self, http: HttpSocket, request: Request, peer: str) -> None:
        key = request.headers.get("sec-websocket-key")
        if not _valid_websocket_key(key) or request.headers.get("sec-websocket-version") != "13":
            _text(http, 400, "A WebSocket upgrade needs Sec-WebSocket-Key (16 bytes, base64) and Sec-WebSocket-Version: 13",
                  close=True)
            return
        assert key is not None
        if len(self.connections) >= self.limits.max_connections:
            _text(http, 503, f"This agent serves {self.limits.max_connections} connections already; try again later",
                  [("retry-after", "5")], close=True)
            return
        # The link exists before the 101 is sent, so the connection id is known for its header.
        link = WebSocketLink(http.sock, b"", self.limits.max_body_bytes)
        remote = self._open("websocket", link, peer)
        try:
            trailing = http.switch_protocols([
                ("upgrade", "websocket"), ("connection", "Upgrade"),
                ("sec-websocket-accept", generate_accept_token(key.encode("ascii", "replace")).decode("ascii")),
                (CONNECTION_ID, remote.connection_id),
            ])
        except OSError:
            remote.end("the client left during the WebSocket handshake")
            return
        link.start_reading(trailing)
        if remote.greenlet is not None:
            remote.greenlet.join()  # the socket is the link's until the connection has ended

    def _held_elsewhere(self, session_id: str, remote: RemoteConnection) -> str | None:
        owner = self.server.claims.owner_of(session_id)
        if owner is not None and owner != remote.client.name:
            return f"Session {session_id[:200]} is open on another connection ({owner}); load it once that connection has ended"
        return None


def _valid_websocket_key(key: str | None) -> bool:
    """A client's Sec-WebSocket-Key is a base64-encoded 16-byte nonce (RFC 6455, 4.1)."""
    if key is None:
        return False
    try:
        return len(base64.b64decode(key.strip().encode("ascii"), validate=True)) == 16
    except (ValueError, UnicodeEncodeError):
        return False


def _wait_for_hangup(http: HttpSocket, stream: EventStream) -> None:
    """Return once the client of an event stream has gone, waking the stream's reader.

    A stream's client sends nothing more on its socket, so whatever the socket yields (its end,
    a reset, a stray byte) means the reader should stop: the stream is free for the next GET at
    once, not only when a write to the dead socket fails.
    """
    try:
        http.sock.recv(1)
    except OSError:
        pass
    stream.wake()


def _session_of(message: Any) -> str | None:
    params = message.get("params") if isinstance(message, dict) else None
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) else None


def _text(http: HttpSocket, status: int, text: str, headers: list[tuple[str, str]] | None = None, *, close: bool = False) -> bool:
    """A plain-text response; whether the socket may be reused."""
    try:
        http.respond(status, (text + "\n").encode("utf-8"), [("content-type", "text/plain; charset=utf-8"), *(headers or [])],
                     close=close)
    except OSError:
        return False
    return not close


def _empty(http: HttpSocket, status: int) -> bool:
    try:
        http.respond(status)
    except OSError:
        return False
    return True


#: What the listener calls for each accepted socket's requests (`AcpRoutes.handle`).
Handler = Callable[[HttpSocket, Request, str], bool]
