"""ACP over the network: many connections of one agent process, over WebSocket and Streamable HTTP.

| module | holds |
|---|---|
| `options.py` | `ListenOptions` and `HOST:PORT` parsing (importable before patching) |
| `listener.py` | the listening socket (TLS if asked), the bound on sockets, the idle sweeper |
| `http.py` | one socket's HTTP/1.1 exchange, framed by h11 |
| `routes.py` | what POST, GET and DELETE on `/acp` mean; the connections by id |
| `event_streams.py` | a Streamable HTTP connection's messages routed to its event streams |
| `websocket.py` | a WebSocket connection's frames (wsproto) |
| `auth.py` | the check every request and upgrade passes first (`--token`) |

Each connection is a `client_connection.ClientConnection` of the process's `server.Server`,
exactly as a stdio process's one connection is: the transport here only turns frames and
event streams into its `MessageSource` and `ByteWriter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .auth import Authorize, bearer_token
from .options import ListenOptions, parse_address

if TYPE_CHECKING:
    from .listener import RemoteListener


def __getattr__(name: str) -> Any:
    # The listener imports gevent's server and ssl: only once asked for, after patching.
    if name == "RemoteListener":
        from .listener import RemoteListener

        return RemoteListener
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Authorize", "ListenOptions", "RemoteListener", "bearer_token", "parse_address"]
