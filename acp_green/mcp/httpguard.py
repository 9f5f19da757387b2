"""Bounds on what an HTTP server can make the client do before a response's body, and TLS that yields.

geventhttpclient reads a response head in one loop that never yields while bytes keep coming: it
takes interim (1xx) responses without end, grows one header value by string concatenation
(quadratic in its size) and keeps any number of headers. An HTTP MCP server could freeze the
agent that way. So every connection of an `HttpLink` is a `GuardedSocket` and every head is
parsed into `BoundedHeaders`:

- A head (interim responses included) may take MAX_HEAD_BYTES received bytes, MAX_HEADER_LINES
  header lines and MAX_INTERIM_RESPONSES interim responses; past any of them the response is
  refused at once (`HeadRefused`) and its connection closed.
- Every receive while a head is read yields to the hub, so other greenlets run meanwhile.
- TLS uses gevent's own SSLContext (`gevent.ssl.create_default_context` gives the standard
  library's, whose handshake blocks the whole process), so a handshake waits cooperatively, bounded
  by the link's connect timeout.
- That context is made once per trust store for the whole process, on a thread of its own, and
  shared by every link (`_cooperative_tls_context`). Loading a trust store of ~150 certificates
  takes 35-50 ms of CPU: made per link on the hub, a `session/new` declaring 64 https servers
  held every request of the connection 2.3-3.2 s. A link waits for the one being made
  cooperatively; the trust store file is looked at again (its size and time) for each link, so a
  changed one is loaded anew. Its thread is not gevent's pool, where name lookups (DNS) wait: a
  session whose servers' names never resolve fills that pool, and must not hold another
  session's TLS.
- A server named by an IP address is connected without a name lookup (`_resolve`), so it does
  not wait behind other sessions' lookups in gevent's pool (10 threads) either. A host name is
  looked up there, as geventhttpclient does.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
from typing import Any

import gevent
import gevent.ssl
from gevent.event import AsyncResult
from gevent.threadpool import ThreadPool
import geventhttpclient
from geventhttpclient.connectionpool import ConnectionPool, SSLConnectionPool
from geventhttpclient.header import Headers

#: Interim (1xx) responses accepted before a request's final response.
MAX_INTERIM_RESPONSES = 8
#: Bytes received for one response's head, its interim responses included (counted as received,
#: so up to one receive of the body may count too: a head under this less 4 KiB always passes).
MAX_HEAD_BYTES = 64 << 10
#: Header lines in one response's head, its interim responses' included.
MAX_HEADER_LINES = 256


class HeadRefused(OSError):
    """A response head past a bound; an OSError, so the HTTP client closes its connection."""


class GuardedSocket:
    """A connection that counts and bounds the bytes of each response head and yields while reading one.

    Sending (a request) starts a head; `body_started` ends it, once the client has the response.
    """

    def __init__(self, sock: Any, max_head_bytes: int = MAX_HEAD_BYTES) -> None:
        self._sock = sock
        self._max = max_head_bytes
        self._head_bytes: int | None = None  # None: not reading a head
        self.orphaned = False  # handed back to the pool while its head was read (see _HeadTracking)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def sendall(self, data: Any, *args: Any) -> None:
        self._head_bytes = 0
        self._sock.sendall(data, *args)

    @property
    def in_head(self) -> bool:
        return self._head_bytes is not None

    def body_started(self) -> None:
        self._head_bytes = None

    def recv(self, size: int, *args: Any) -> bytes:
        data: bytes = self._sock.recv(size, *args)
        if self._head_bytes is not None:
            self._head_bytes += len(data)
            if self._head_bytes > self._max:
                raise HeadRefused(f"a response head over {self._max} bytes")
            gevent.sleep(0)  # a server sending a head without pause cannot hold the hub
        return data


class BoundedHeaders(Headers):
    """The headers of one response head: at most MAX_HEADER_LINES lines and MAX_INTERIM_RESPONSES interim responses.

    The parser clears the headers once per interim response, which is what is counted.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lines = 0
        self.interim = 0
        super().__init__(*args, **kwargs)

    def add(self, key: Any, value: Any) -> None:
        self.lines += 1
        if self.lines > MAX_HEADER_LINES:
            raise HeadRefused(f"a response head of more than {MAX_HEADER_LINES} header lines")
        super().add(key, value)

    def clear(self) -> None:
        self.interim += 1
        if self.interim > MAX_INTERIM_RESPONSES:
            raise HeadRefused(f"more than {MAX_INTERIM_RESPONSES} interim (1xx) responses")
        super().clear()


class _HeadTracking:
    """Pool behaviour: each greenlet's connection is known until its response head is read.

    geventhttpclient hands a connection back to the pool as soon as an interim response is
    complete, while the final response is still to be read from it; such a connection is kept out
    of the pool here ("orphaned") until `head_read` gives it back to its response, or `abandon_head`
    closes it.
    """

    _current: dict[Any, GuardedSocket]
    _connection_host: str
    _connection_port: int

    def _resolve(self) -> Any:
        """An IP address as it is (no lookup, no thread); a host name looked up as geventhttpclient does."""
        host = self._connection_host
        try:
            address = ipaddress.ip_address(host[1:-1] if host.startswith("[") else host)
        except ValueError:
            return super()._resolve()  # type: ignore[misc]
        if address.version == 6:
            if "%" in host:  # a scoped address: its interface needs the resolver
                return super()._resolve()  # type: ignore[misc]
            return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(address), self._connection_port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(address), self._connection_port))]

    def _create_socket(self) -> Any:
        return GuardedSocket(super()._create_socket())  # type: ignore[misc]

    def get_socket(self) -> Any:
        sock = super().get_socket()  # type: ignore[misc]
        self._current[gevent.getcurrent()] = sock
        return sock

    def return_socket(self, sock: Any) -> None:
        if isinstance(sock, GuardedSocket) and sock.in_head:
            sock.orphaned = True  # a response is still being read from it: not reusable yet
            return
        super().return_socket(sock)  # type: ignore[misc]

    def head_read(self, response: Any) -> None:
        sock = self._current.pop(gevent.getcurrent(), None)
        if sock is None:
            return
        sock.body_started()
        if not sock.orphaned:
            return
        sock.orphaned = False
        if not response.message_complete:
            response._sock, response._pool = sock, self  # the final response reads on, and releases it
        elif response.should_close():
            self.release_socket(sock)  # type: ignore[attr-defined]
        else:
            super().return_socket(sock)  # type: ignore[misc]

    def abandon_head(self) -> None:
        sock = self._current.pop(gevent.getcurrent(), None)
        if sock is not None and sock.orphaned:
            sock.orphaned = False
            self.release_socket(sock)  # type: ignore[attr-defined]


class _GuardedPool(_HeadTracking, ConnectionPool):
    pass


class _GuardedTlsPool(_HeadTracking, SSLConnectionPool):
    pass


#: The shared TLS contexts, by trust store (its file, size and modification time), made or being made.
_contexts: dict[tuple[str | None, int, int], AsyncResult] = {}


def _cooperative_tls_context(cafile: str | None = None, **_ignored: Any) -> ssl.SSLContext:
    """What `ssl.create_default_context` makes, as gevent's SSLContext, whose sockets yield: the
    process's one for this trust store, made on a thread the first time (see the module)."""
    try:
        info = os.stat(cafile) if cafile else None
    except OSError:
        info = None  # loading it fails below, with the reason, as it would have
    key = (cafile or None, info.st_size if info else -1, info.st_mtime_ns if info else -1)
    made = _contexts.get(key)
    if made is None:
        made = _tls_thread().spawn(_tls_context, cafile)
        _contexts[key] = made
        made.rawlink(lambda result: result.successful() or _contexts.pop(key, None))  # a failure is not kept
    context: ssl.SSLContext = made.get()
    return context


_tls_pool: ThreadPool | None = None


def _tls_thread() -> ThreadPool:
    """The one thread TLS contexts are made on (made on first use; not gevent's pool: see the module)."""
    global _tls_pool
    if _tls_pool is None:
        _tls_pool = ThreadPool(1)
    return _tls_pool


def _tls_context(cafile: str | None) -> ssl.SSLContext:
    """A new client context trusting `cafile` (or the default trust store); runs on a thread."""
    context = gevent.ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cafile:
        context.load_verify_locations(cafile=cafile)
    else:
        context.load_default_certs()
    return context


def guarded_client(url: Any, *, concurrency: int, connect_timeout: float) -> Any:
    """A geventhttpclient HTTPClient for `url` (a parsed URL) whose connections are guarded and TLS cooperative."""
    client = geventhttpclient.HTTPClient.from_url(
        url, concurrency=concurrency, connection_timeout=connect_timeout, network_timeout=None,
        headers_type=BoundedHeaders, ssl_context_factory=_cooperative_tls_context,
    )
    pool: Any = client._connection_pool
    # The client builds its pool itself; the guarded classes only add methods (and one table).
    pool.__class__ = _GuardedTlsPool if isinstance(pool, SSLConnectionPool) else _GuardedPool
    pool._current = {}
    return client


def send(client: Any, method: str, path: str, **options: Any) -> Any:
    """`client.request(...)` of a `guarded_client`: the response, its head read within the bounds."""
    pool = client._connection_pool
    try:
        response = client.request(method, path, **options)
    except BaseException:  # ok: re-raised at once, a kill included; only the pool's bookkeeping runs first
        pool.abandon_head()
        raise
    pool.head_read(response)
    return response
