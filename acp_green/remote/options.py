"""Where and how a listening agent serves: its options, parsed without importing the network code.

The command line reads these before gevent patches the process, so nothing here may import
`ssl`, `socket` users or gevent's servers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .auth import Authorize


@dataclass(frozen=True, slots=True)
class ListenOptions:
    """Where and how `acp-green serve --listen` serves."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port, which `RemoteListener.url` then names
    #: Run on every request and upgrade; None: anyone who reaches the port may connect (`--token`).
    authorize: Authorize | None = None
    #: ACP connections at once (HTTP and WebSocket together); another initialize or upgrade gets 503.
    max_connections: int = 1024
    #: Sockets at once; more clients wait in the listen backlog. A Streamable HTTP client holds
    #: one per open event stream beside those it POSTs on, so this is a few per connection.
    max_sockets: int = 4096
    #: An HTTP connection with no request and no stream open for this long ends (its sessions stay stored).
    idle_timeout: float = 600.0
    keepalive_interval: float = 15.0
    #: Seconds a client has to send a request's head (and then its body).
    head_timeout: float = 30.0
    max_head_bytes: int = 64 << 10
    max_session_streams: int = 1024
    #: Web origins (scheme://host[:port]) whose pages may connect. A request that carries an Origin
    #: header (a browser's) from anywhere else is refused 403: a page the user visits must not reach
    #: an agent on their machine (`--allow-origin`). Clients outside a browser send no Origin.
    allowed_origins: frozenset[str] = frozenset()
    certfile: str | None = None
    keyfile: str | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [HOST]:PORT) -> (host, port); ValueError naming what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:8765, or 0.0.0.0:0 for any free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    number = int(port)
    if number > 65535:
        raise ValueError(f"port {number} is over 65535")
    return host, number


