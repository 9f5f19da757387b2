"""ACP over one WebSocket (wsproto): each text frame one JSON-RPC message, both ways.

The link is its connection's `ByteWriter` (the connection's writer greenlet sends each line
as a text frame) and its reader (`run`: frames into the connection's `PushedMessages`). A
lock keeps the reader's pongs and close frames from interleaving with a message being sent.
"""

from __future__ import annotations

import logging
import socket

from gevent.lock import Semaphore
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import FrameProtocol
from wsproto.utilities import RemoteProtocolError

from ..rpc.channel import PushedMessages
from ..rpc.transport import Line

log = logging.getLogger(__name__)

_RECV = 64 * 1024


class WebSocketLink:
    """One upgraded socket: reads frames into `source`, writes lines as frames."""

    def __init__(self, sock: socket.socket, trailing: bytes, max_message_bytes: int) -> None:
        self.sock = sock
        self._ws = Connection(ConnectionType.SERVER, trailing_data=trailing)
        # Data frames are framed apart from `_ws`, which refuses them once the client's close has
        # arrived: the connection's last answers (a cancelled prompt's) still go out before our
        # own close frame, which `close` sends once the connection has ended (RFC 6455 lets an
        # endpoint finish sending before it answers a close). No extension is negotiated.
        self._frames = FrameProtocol(client=False, extensions=[])
        self._closing: CloseConnection | None = None  # the client's close, answered by `close`
        self._max = max_message_bytes
        self._lock = Semaphore()
        self._warned_binary = False

    def receive_early(self, data: bytes) -> None:
        """Bytes the client sent right after its upgrade request, read with the request's head."""
        if data:
            self._ws.receive_data(data)

    # -- ByteWriter ----------------------------------------------------------------------------
    def write(self, data: memoryview) -> int:
        """Send each whole line of `data` as one text frame; OSError once the socket is gone."""
        if self._ws.state not in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING):
            raise BrokenPipeError("the WebSocket is closed")
        frames = b"".join(
            self._frames.send_data(line.decode("utf-8", "replace"))
            for line in bytes(data).split(b"\n") if line
        )
        self._send(frames)
        return len(data)

    def close(self) -> None:
        """The connection has nothing more to say: a normal close frame, then the socket."""
        try:
            if self._ws.state is ConnectionState.REMOTE_CLOSING and self._closing is not None:
                self._send(self._ws.send(self._closing.response()))
            elif self._ws.state is ConnectionState.OPEN:
                self._send(self._ws.send(CloseConnection(code=1000)))
        except (OSError, RemoteProtocolError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def _send(self, data: bytes) -> None:
        if data:
            with self._lock:
                self.sock.sendall(data)

    # -- reading -------------------------------------------------------------------------------
    def run(self, source: PushedMessages) -> None:
        """Push each text message into `source` until the client closes; then end the source.

        A message over `max_message_bytes` is dropped as it arrives (never held) and reaches the
        connection as a too-long line, which is answered -32600 like any other.
        """
        parts: list[str] = []
        size = 0
        too_long = False
        try:
            data = b"-"  # events first: the client's first frame may have come with its upgrade request
            while True:
                for event in self._ws.events():
                    if isinstance(event, TextMessage):
                        size += len(event.data.encode("utf-8", "surrogatepass"))  # the limit is in bytes, as on stdio
                        if size > self._max:
                            too_long, parts = True, []
                        elif not too_long:
                            parts.append(event.data)
                        if event.message_finished:
                            line = Line(b"", too_long=True) if too_long else Line("".join(parts).encode("utf-8", "surrogatepass"))
                            parts, size, too_long = [], 0, False
                            if not source.push(line):
                                return
                    elif isinstance(event, BytesMessage):
                        if not self._warned_binary:
                            self._warned_binary = True
                            log.info("a WebSocket client sent a binary frame; ACP messages are text frames: ignored")
                    elif isinstance(event, Ping):
                        self._send(self._ws.send(event.response()))
                    elif isinstance(event, CloseConnection):
                        self._closing = event  # answered by `close`, after the connection's last answers
                        return
                if not data:
                    return
                data = self.sock.recv(_RECV)
                self._ws.receive_data(data or None)
        except (OSError, RemoteProtocolError) as exc:
            log.debug("WebSocket read ended: %s", exc)
        finally:
            source.end()
