"""MCP's streamable HTTP transport as the client side of one server URL: POSTs, answers, the MCP session.

- Each request is one POST read by its own greenlet: the answer is a JSON body or an SSE stream
  that may carry the server's own requests and notifications before it. The pending-request
  table is `outgoing.OutgoingRequests` (ids from 1), as for a stdio server.
- A wait that ends without an answer (cancel, timeout, the waiter killed) closes that request's
  stream at once. After an answer the stream is given ANSWERED_STREAM_GRACE to end by itself,
  so its connection is kept for the next request. A cancel also POSTs `notifications/cancelled`;
  it may be set from the hub, so it never blocks: the POST runs in its own greenlet.
- Notifications and our answers to the server's requests are POSTed in the caller's greenlet
  (bounded by NOTIFY_TIMEOUT), so one written before a request reaches the server before it.
- The `Mcp-Session-Id` the server gives `initialize` goes with every later message, and the
  negotiated `MCP-Protocol-Version` too. A 404 for that session means the server forgot it: the
  link initializes again, once, with the same parameters, and sends the request once more.
- geventhttpclient (cooperative sockets, no monkey-patching) is imported on first use, so an agent
  that never reaches an HTTP server never loads it.
- Ids, the pending table, envelopes and strict decoding are the shared core, `peer.McpPeer`, which
  the link holds and is the transport of; a JSON body or an event's data is one message for
  `McpPeer.receive`. The MCP session is `McpHttpSession`'s; the greenlets, `RequestStreams`'.
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

import gevent
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore

from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..rpc.fairness import share
from ..errors import INTERNAL_ERROR, McpConnectFailed, McpError, McpServerExited, RpcError, one_line
from ..rpc.outgoing import PendingRequest
from ..redact import redact_url, scrub, secrets_of
from ..rpc.transport import LineFramer
from .peer import McpPeer, NotificationHandler, RequestHandler, cancel_notification
from .sse import MAX_EVENT_BYTES, SseParser, SseTooLarge

log = logging.getLogger(__name__)

#: How long connecting to the server may take (the answer itself is bounded by the caller's wait).
CONNECT_TIMEOUT = 10.0
#: How long a notification, an answer to the server, or the closing DELETE may take.
NOTIFY_TIMEOUT = 5.0
#: Requests in flight at once to one server (one connection each); more wait for a connection.
MAX_STREAMS = 32
#: How long an answered request's event stream may take to end before its connection is closed.
ANSWERED_STREAM_GRACE = 1.0
#: The largest JSON body or SSE event accepted from the server.
MAX_MESSAGE_BYTES = MAX_EVENT_BYTES
_READ_BLOCK = 64 * 1024
_ACCEPT = "application/json, text/event-stream"
#: Errors that mean no connection could be made at all (the server refuses or is not there).
_CONNECT_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


def _client_module() -> Any:
    import geventhttpclient  # lazy: see the module docstring

    return geventhttpclient


def _guard_module() -> Any:
    from . import httpguard  # lazy, as geventhttpclient which it imports

    return httpguard


class _Refused(Exception):
    """The server answered with an HTTP error status; carries its words."""


class _StreamClosed(gevent.GreenletExit, OSError):
    """Kills a request's greenlet. A socket error to geventhttpclient, which then gives the
    connection's pool slot back even mid-send (a plain GreenletExit there loses the slot for good);
    a kill to gevent, so a greenlet killed before it ran is not reported as a failure."""


class _SessionExpired(Exception):
    """The server answered 404 for the MCP session the request carried."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id


class McpHttpSession:
    """The MCP session a server keeps for this client: its id, the protocol version negotiated in
    it, and the `initialize` that opened it, sent again (once per expiry) when the server forgets it."""

    def __init__(self, name: str, request: Callable[..., Any], notify: Callable[[str], None]) -> None:
        """`request` and `notify`: the link's own, as any caller's."""
        self._name = name
        self._request = request
        self._notify = notify
        self.id: str | None = None
        self.protocol_version: str | None = None
        self._initialize_params: Any = None
        self._initialize_ids: set[int] = set()
        self._reinitializing = Semaphore()

    def initializing(self, request_id: int, params: Any) -> None:
        """An `initialize` is being sent: kept to be sent again, and its reply read for the version."""
        self._initialize_params = params
        self._initialize_ids.add(request_id)

    def opened(self, response: Any) -> None:
        """The HTTP response to an `initialize`: the session id the server gives it, if any."""
        session_id = response.get("mcp-session-id")
        self.id = session_id if isinstance(session_id, str) and session_id else None

    def note_reply(self, reply: wire.Response) -> None:
        """Every reply, before its call gets it: the version a server chose in its answer to `initialize`."""
        result = reply.result
        if reply.error is None and reply.id in self._initialize_ids and isinstance(result, dict):
            # The version a server chose is sent back on every later request (MCP-Protocol-Version).
            self._initialize_ids.discard(reply.id)
            version = result.get("protocolVersion")
            self.protocol_version = version if isinstance(version, str) else None

    def headers(self, headers: dict[str, str], with_session: bool) -> dict[str, str]:
        """`headers` plus this session's id and version, those known, when `with_session`."""
        if with_session and self.id is not None:
            headers["Mcp-Session-Id"] = self.id
        if with_session and self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def initialize_again(self, expired: str) -> None:
        """The server forgot MCP session `expired`: a new `initialize` (same parameters), once per expiry."""
        with self._reinitializing:
            if self.id != expired:
                return  # another request already did it
            if self._initialize_params is None:
                raise McpConnectFailed(f"MCP server {self._name!r} does not know this client's MCP session")
            log.info("MCP %s: the server forgot MCP session %s; initializing again", self._name, expired)
            self.id = None
            self.protocol_version = None
            try:
                self._request("initialize", self._initialize_params, timeout=CONNECT_TIMEOUT + NOTIFY_TIMEOUT)
            except gevent.Timeout:
                raise McpConnectFailed(f"MCP server {self._name!r} forgot the MCP session and did not answer a new initialize") from None
            except RpcError as exc:
                raise McpConnectFailed(f"MCP server {self._name!r} forgot the MCP session and a new initialize failed: {exc.message}") from None
            self._notify("notifications/initialized")


class RequestStreams:
    """The greenlets of one link: each request's stream (its POST and the answer read), an answered
    request's stream read to its end for ANSWERED_STREAM_GRACE at most, and each cancel's POST."""

    def __init__(self) -> None:
        self._streams: dict[wire.IdKey | None, Greenlet] = {}
        self._helpers: set[Greenlet] = set()
        self._lingering: set[Greenlet] = set()  # answered requests' streams, read to their end

    @property
    def open(self) -> int:
        """Requests whose stream is still being read, answered or not."""
        return len(self._streams) + len(self._lingering)

    def start(self, request_id: int, name: str, run: Callable[..., None], *args: Any) -> None:
        """Start the stream of our request `request_id`: `run(*args)` in a greenlet of its own."""
        stream = Greenlet(run, *args)
        stream.name = name
        self._streams[wire.id_key(request_id)] = stream
        stream.start()

    def ended(self, request_id: int) -> None:
        """Called by a stream as it ends: it is no longer the request's (unless it was replaced)."""
        key = wire.id_key(request_id)
        if self._streams.get(key) is gevent.getcurrent():
            del self._streams[key]

    def spawn(self, run: Callable[..., None], *args: Any) -> None:
        """`run(*args)` in a greenlet of its own, ended with the streams at close; never blocks."""
        helper = gevent.spawn(run, *args)
        self._helpers.add(helper)
        helper.rawlink(self._helpers.discard)

    def close(self, request_id: int, answered: bool = False) -> None:
        """The request's wait is over: close its stream now, or, `answered`, once it ends or the grace is up."""
        stream = self._streams.pop(wire.id_key(request_id), None)
        if stream is None or stream is gevent.getcurrent() or stream.dead:
            return
        if not answered:
            _end_stream(stream)
            return
        # The server ends an answered request's event stream right after the answer (MCP says it
        # should): read to that end, so the connection goes back to the pool for the next request
        # rather than being closed, but for no longer than the grace.
        self._lingering.add(stream)
        grace = gevent.get_hub().loop.timer(ANSWERED_STREAM_GRACE)
        grace.start(_end_stream, stream)

        def finished(ended: Greenlet) -> None:
            grace.close()
            self._lingering.discard(ended)

        stream.rawlink(finished)

    def close_all(self, timeout: float) -> None:
        """Kill every greenlet and wait for them, `timeout` at most."""
        streams = list(self._streams.values()) + list(self._helpers) + list(self._lingering)
        self._streams.clear()
        self._lingering.clear()  # their links (which close each grace timer) run after killall returns
        gevent.killall(streams, block=True, timeout=timeout)


class HttpLink:
    """Our end of the MCP conversation with one streamable-HTTP server; a `client.Channel` itself.

    It holds the JSON-RPC core (`peer`), whose transport it is, the MCP session the server keeps
    for it (`session`), and the greenlets that carry each request (`streams`).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        headers: dict[str, str] | None = None,
        on_request: RequestHandler | None = None,
        on_notification: NotificationHandler | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        """Prepare the link (nothing is sent yet); ValueError for a URL that is not http(s)."""
        ghc = _client_module()
        parsed = ghc.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {redact_url(url)!r}")
        self.name = name
        self.url = url
        self.shown_url = redact_url(url)  # the URL as any message shows it: no userinfo, no secret parameters
        self._secrets = secrets_of(url, headers or {})
        self._path = parsed.request_uri or "/"
        self._headers = dict(headers or {})
        self._client = _guard_module().guarded_client(parsed, concurrency=MAX_STREAMS, connect_timeout=connect_timeout)
        self._max = max_message_bytes
        self.session = McpHttpSession(name, self.request, self.notify)
        self.streams = RequestStreams()
        self.peer = McpPeer(name, self._send_request, self._post_one_way, on_request=on_request,
                            on_notification=on_notification, send_cancel=self._write_cancel,
                            on_response=self.session.note_reply)
        self._closed = False

    @property
    def open_streams(self) -> int:
        """Requests whose stream is still being read, answered or not (diagnostics, tests)."""
        return self.streams.open

    @property
    def alive(self) -> bool:
        return self.peer.alive

    @property
    def invalid_messages(self) -> int:
        return self.peer.invalid_messages

    # -- sending -------------------------------------------------------------------------------
    def start_request(self, method: str, params: Any) -> PendingRequest:
        return self.peer.start_request(method, params)

    def wait(self, call: PendingRequest, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The call's result; McpError for an error reply; a set token cancels it (TurnCancelled).

        As for a stdio server, a timeout tells the server (`notifications/cancelled`) only when a
        token was given; either way the request's stream is closed when the wait ends.
        """
        try:
            return self.peer.wait(call, token, timeout)
        except RpcError as exc:  # the server's own words may repeat what its URL or headers hold
            if self._secrets:
                exc.message = scrub(exc.message, self._secrets)
                exc.args = tuple(scrub(a, self._secrets) if isinstance(a, str) else a for a in exc.args)
            raise
        finally:
            self.streams.close(call.id, answered=_server_replied(call))

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.wait(self.start_request(method, params), token, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.peer.notify(method, params)

    def respond(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        self.peer.respond(request_id, result, error)

    def cancel(self, call: PendingRequest, reason: str, error: BaseException | None = None) -> None:
        self.peer.cancel(call, reason, error)

    # -- the transport the core is given -------------------------------------------------------
    def _send_request(self, request_id: int, method: str, params: Any, data: bytes) -> None:
        """Start the request's own greenlet, which POSTs it and reads the answer."""
        if method == "initialize":
            self.session.initializing(request_id, params)
        self.streams.start(request_id, f"mcp-http-{self.name}-{request_id}", self._exchange, request_id, method, data)

    def _write_cancel(self, request_id: int, reason: str) -> None:
        """Close the request's stream and POST the cancel from a greenlet of its own (may run in the hub)."""
        self.streams.close(request_id)
        self.streams.spawn(self._post_one_way, cancel_notification(request_id, reason), "notifications/cancelled")

    def _request_headers(self, *, with_session: bool = True) -> dict[str, str]:
        return self.session.headers({**self._headers, "Content-Type": "application/json", "Accept": _ACCEPT}, with_session)

    def _post_one_way(self, body: bytes, what: str) -> None:
        """POST a notification or an answer and wait (bounded) for the server to take it; failures are logged."""
        if self._closed:
            return
        try:
            with gevent.Timeout(NOTIFY_TIMEOUT):
                response = _guard_module().send(self._client, "POST", self._path, body=body, headers=self._request_headers())
                with response:
                    status = response.status_code
                    response.read(_READ_BLOCK)  # a 202 has no body; anything else is not kept
            if not 200 <= status < 300:
                log.info("MCP %s: the server answered HTTP %d to %s", self.name, status, what)
        except _StreamClosed:
            raise  # a request's stream is being closed while it answers the server: it must end
        except (gevent.Timeout, OSError, RuntimeError, _client_module().HTTPParseError) as exc:
            log.info("MCP %s: sending %s failed: %s", self.name, what, scrub(one_line(str(exc) or type(exc).__name__), self._secrets))

    # -- one request's exchange ----------------------------------------------------------------
    def _exchange(self, request_id: int, method: str, body: bytes) -> None:
        """POST one request and read its answer (runs in the request's own greenlet)."""
        fail = self.peer.fail_request  # nobody waits any more (answered, cancelled): nothing happens
        try:
            try:
                self._post_and_read(request_id, method, body)
            except _SessionExpired as expired:
                self.session.initialize_again(expired.session_id)
                self._post_and_read(request_id, method, body)
        except _SessionExpired:
            fail(request_id, McpConnectFailed(f"MCP server {self.name!r} forgot the MCP session again right after it was initialized anew"))
        except _Refused as exc:
            fail(request_id, McpConnectFailed(f"MCP server {self.name!r} refused {method}: {exc}"))
        except RpcError as exc:
            fail(request_id, exc)
        except _guard_module().HeadRefused as exc:
            fail(request_id, McpError(INTERNAL_ERROR, f"MCP server {self.name!r} sent a response to {method} that is refused: {exc}"))
        except OSError as exc:
            fail(request_id, _connection_error(self.name, self.shown_url, method, exc, self._secrets))
        except SseTooLarge as exc:
            fail(request_id, McpError(INTERNAL_ERROR, f"MCP server {self.name!r} sent an answer to {method} that is too large: {exc}"))
        except Exception as exc:  # the HTTP client's parse errors, a pool closed under us
            fail(request_id, McpServerExited(scrub(
                f"MCP server {self.name!r} broke off its answer to {method}: {one_line(str(exc) or type(exc).__name__)}", self._secrets)))
        else:
            fail(request_id, McpServerExited(
                f"MCP server {self.name!r} ended its response to {method} without answering it"))
        finally:
            self.streams.ended(request_id)

    def _post_and_read(self, request_id: int, method: str, body: bytes) -> None:
        sent_session = None if method == "initialize" else self.session.id
        headers = self._request_headers(with_session=method != "initialize")
        response = _guard_module().send(self._client, "POST", self._path, body=body, headers=headers)
        with response:
            status = response.status_code
            if status == 404 and sent_session is not None:
                raise _SessionExpired(sent_session)
            if not 200 <= status < 300:
                raise _Refused(scrub(f"HTTP {status} {response.status_message or ''}".rstrip() + _excerpt(response), self._secrets))
            if method == "initialize":
                self.session.opened(response)
            content_type = str(response.get("content-type") or "").split(";")[0].strip().lower()
            if content_type == "text/event-stream":
                self._read_events(response)
            elif content_type == "application/json":
                self.peer.receive(_read_body(response, self._max))
            else:
                raise _Refused(f"HTTP {status} with content type {content_type or 'none'!r}, not JSON or an event stream")

    def _read_events(self, response: Any) -> None:
        parser = SseParser(self._max)
        fair = share()
        # A line may carry a whole event's data after "data: ": allow for the field name.
        for line in LineFramer(_body_blocks(response), self._max + 64, skip_long_lines=False).lines():
            if line.too_long:
                raise SseTooLarge(f"an event stream line is over {self._max} bytes")
            event = parser.feed_line(line.data)
            if event is not None and event.event == "message" and event.data:
                self.peer.receive(event.data)
            fair.yield_if_due()  # a stream of tiny events cannot hold the hub between two polls for I/O

    # -- ending --------------------------------------------------------------------------------
    def close(self, error: Exception | None = None) -> None:
        """Fail what is pending, close every stream, end the MCP session (DELETE, best effort), close the connections."""
        if self._closed:
            return
        self.peer.fail(error or McpServerExited(f"MCP server {self.name!r} was disconnected"))
        self.streams.close_all(NOTIFY_TIMEOUT)
        if self.session.id is not None:
            self._delete_session()
        self._closed = True
        self._client.close()

    def _delete_session(self) -> None:
        try:
            with gevent.Timeout(NOTIFY_TIMEOUT):
                response = _guard_module().send(self._client, "DELETE", self._path, headers=self._request_headers())
                with response:
                    response.read(_READ_BLOCK)
        except (gevent.Timeout, OSError, RuntimeError, _client_module().HTTPParseError) as exc:
            log.info("MCP %s: ending the MCP session failed: %s", self.name, scrub(one_line(str(exc) or type(exc).__name__), self._secrets))


def _server_replied(call: PendingRequest) -> bool:
    """True once the server answered the call, with a result or an error of its own (McpError);
    not when a cancel, a timeout or the link's end settled it."""
    answer = call.result
    return answer.ready() and (answer.successful() or isinstance(answer.exception, McpError))


def _end_stream(stream: Greenlet) -> None:
    """Close a request's stream now (its socket is closed); safe from the hub."""
    if not stream.dead:
        stream.kill(_StreamClosed(errno.ECANCELED, "the request's stream was closed"), block=False)


def _body_blocks(response: Any) -> Callable[[], bytes]:
    """The response body as it arrives, one receive at a time, for the line framer.

    geventhttpclient's `readline` holds a line of any length and, while bytes keep arriving,
    never lets another greenlet run; its `read(n)` waits for n bytes, which would hold back an
    event the server sends before a pause. So this takes what the response's own parser has
    buffered, receives once more only when nothing is buffered, and yields to the hub after
    every block: a server streaming without end cannot starve the agent.
    """
    buffered: bytearray = response._body_buffer

    def next_block() -> bytes:
        while not buffered:
            sock = response._sock
            if sock is None or response.message_complete:
                return b""
            data = sock.recv(_READ_BLOCK)
            response.feed(data)
            if not data:
                break  # the server closed the connection: whatever the parser kept is the end
        block = bytes(buffered)
        del buffered[:]
        gevent.sleep(0)
        return block

    return next_block


def _read_body(response: Any, limit: int) -> bytes:
    """A JSON response's whole body; SseTooLarge once it is over `limit` bytes."""
    length = response.content_length
    if length is not None and length > limit:
        raise SseTooLarge(f"a JSON body of {length} bytes is over {limit}")
    chunks: list[bytes] = []
    size = 0
    next_block = _body_blocks(response)
    while True:
        chunk = next_block()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise SseTooLarge(f"a JSON body is over {limit} bytes")
        chunks.append(chunk)


def _connection_error(name: str, url: str, method: str, exc: OSError, secrets: list[str]) -> RpcError:
    """A socket error as the request's failure: no connection at all, or an answer broken off.
    `url` is the one shown; the error's words are scrubbed of `secrets` (a certificate's complaint
    names the host)."""
    words = scrub(one_line(exc.strerror or str(exc)), secrets)
    if isinstance(exc, ssl.SSLError):  # the handshake: no TLS there, a certificate refused, no answer in time
        return McpConnectFailed(f"cannot connect to MCP server {name!r} at {url}: TLS failed: {words}")
    if isinstance(exc, (ConnectionRefusedError, socket.gaierror, socket.timeout)) or exc.errno in _CONNECT_ERRNOS:
        return McpConnectFailed(f"cannot connect to MCP server {name!r} at {url}: {words}")
    return McpServerExited(f"MCP server {name!r} broke off its answer to {method}: {words}")


def _excerpt(response: Any) -> str:
    """A bounded, one-line excerpt of an error response's body, for the message."""
    try:
        text = response.read(1024).decode("utf-8", "replace")
    except Exception:  # ok: the words are a courtesy; the status already says what happened
        return ""
    return f": {one_line(text, 200)}" if text.strip() else ""
