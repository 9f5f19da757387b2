"""The listening socket: accepts TCP connections (TLS if asked) and serves `/acp` on each.

At most `max_sockets` sockets are served at once (gevent's pool: further clients wait in the
listen backlog); HTTP connections idle past their limit are ended by a sweeper.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable

import gevent
from gevent.greenlet import Greenlet
from gevent.pool import Pool
from gevent.server import StreamServer

from .http import HttpSocket
from .options import ListenOptions
from .routes import PATH, AcpRoutes, ConnectionHost, RouteLimits

log = logging.getLogger(__name__)


class RemoteListener:
    """Serves one `Server`'s connections over WebSocket and Streamable HTTP (`server.Listener`)."""

    def __init__(self, options: ListenOptions) -> None:
        self.options = options
        self.routes: AcpRoutes | None = None
        self._server: StreamServer | None = None
        self._sweeper: Greenlet | None = None
        #: Called with `url` once the socket listens (the command line says where clients connect).
        self.on_started: Callable[[str], None] | None = None

    @property
    def url(self) -> str:
        """Where clients reach `/acp` (the real port once started)."""
        host, port = self.options.host, self.options.port
        if self._server is not None:
            port = self._server.server_port
        shown = f"[{host}]" if ":" in host else host
        return f"{self.options.scheme}://{shown}:{port}{PATH}"

    def start(self, server: ConnectionHost) -> None:
        options = self.options
        limits = RouteLimits(max_body_bytes=server.options.max_line_bytes, keepalive_interval=options.keepalive_interval,
                             idle_timeout=options.idle_timeout, max_session_streams=options.max_session_streams,
                             allowed_origins=options.allowed_origins, max_connections=options.max_connections)
        self.routes = AcpRoutes(server, limits, options.authorize)
        ssl_args = {}
        if options.certfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(options.certfile, options.keyfile)
            ssl_args["ssl_context"] = context
        self._server = StreamServer((options.host, options.port), self._handle, spawn=Pool(options.max_sockets), **ssl_args)
        self._server.start()
        self._sweeper = gevent.spawn(self._sweep_idle)
        self._sweeper.name = "acp-idle-connections"
        log.info("listening at %s", self.url)
        if self.on_started is not None:
            self.on_started(self.url)

    def stop(self, grace: float) -> None:
        if self._server is None or self.routes is None:
            return
        self._server.close()  # no new sockets
        if self._sweeper is not None:
            self._sweeper.kill(block=False)
        # Each connection takes its grace, then flushes (bounded by the output limits).
        self.routes.end_all("the agent is shutting down", timeout=grace + 10)
        self._server.stop(timeout=1)

    def _sweep_idle(self) -> None:
        assert self.routes is not None
        interval = max(0.05, min(self.options.idle_timeout / 4, 30.0))
        while True:
            gevent.sleep(interval)
            self.routes.end_idle()

    def _handle(self, sock: socket.socket, address: tuple) -> None:
        assert self.routes is not None
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        http = HttpSocket(sock, head_timeout=self.options.head_timeout, max_head_bytes=self.options.max_head_bytes)
        upgraded = False
        try:
            while True:
                request = http.next_request()
                if request is None:
                    return
                if request.method == "GET" and "websocket" in request.headers.get("upgrade", "").lower():
                    upgraded = True  # the WebSocket link owns the socket from here and closes it
                keep = self.routes.handle(http, request, peer)
                if not keep or not http.reusable():
                    return
        except OSError as exc:
            log.debug("socket from %s: %s", peer, exc)
        except Exception:
            log.exception("serving a request from %s failed", peer)
        finally:
            if not upgraded:
                http.close()
