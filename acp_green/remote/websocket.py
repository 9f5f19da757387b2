"""ACP over one WebSocket (wsproto): each text frame one JSON-RPC message, both ways.

The link is both ends of its connection: its `ByteWriter` (the connection's writer greenlet
sends each line as a text frame) and its `MessageSource` (the connection's receive loop reads
the socket itself). A lock keeps the reader's pongs and close frames from interleaving with a
message being sent.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

from gevent.event import Event
from gevent.lock import Semaphore
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import FrameProtocol
from wsproto.utilities import RemoteProtocolError

from ..rpc.channel import Line

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
        self._upgraded = Event()
        self._ended = False
        self._eof = False
        self._parts: list[str] = []  # the message being received, frame by frame
        self._size = 0
        self._too_long = False
        self._max = max_message_bytes
        self._lock = Semaphore()
        self._warned_binary = False

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

    # -- MessageSource -------------------------------------------------------------------------
    def start_reading(self, early: bytes) -> None:
        """The upgrade is answered: take the bytes the client sent right after its request, and
        let `lines` read the socket."""
        if early:
            self._ws.receive_data(early)
        self._upgraded.set()

    def end(self) -> None:
        """No message after the one being read (the agent is stopping, or the connection idle)."""
        self._ended = True
        self._upgraded.set()

    def lines(self) -> Iterator[Line]:
        """Each text message, read by the connection's own receive loop as it arrives, until the
        client closes: no greenlet between the socket and the connection, so a control request
        waits for no hand-off. A message over `max_message_bytes` is dropped as it arrives (never
        held) and reaches the connection as a too-long line, answered -32600 like any other.
        """
        self._upgraded.wait()
        try:
            while not self._ended:
                for line in self._messages():
                    yield line
                    if self._ended:
                        return
                if self._closing is not None or self._eof:
                    return
                data = self.sock.recv(_RECV)
                self._eof = not data
                self._ws.receive_data(data or None)
        except (OSError, RemoteProtocolError) as exc:
            log.debug("WebSocket read ended: %s", exc)

    def unread_lines(self) -> list[Line]:
        """The whole messages already received but not handed out (a shutdown answers each)."""
        try:
            return list(self._messages())
        except (OSError, RemoteProtocolError):
            return []

    def _messages(self) -> Iterator[Line]:
        """The messages completed by what was received so far; pongs and the close on the way."""
        for event in self._ws.events():
            if isinstance(event, TextMessage):
                self._size += len(event.data.encode("utf-8", "surrogatepass"))  # the limit is in bytes, as on stdio
                if self._size > self._max:
                    self._too_long, self._parts = True, []
                elif not self._too_long:
                    self._parts.append(event.data)
                if event.message_finished:
                    whole = "".join(self._parts)
                    line = Line(b"", too_long=True) if self._too_long else Line(whole.encode("utf-8", "surrogatepass"))
                    self._parts, self._size, self._too_long = [], 0, False
                    yield line
            elif isinstance(event, BytesMessage):
                if not self._warned_binary:
                    self._warned_binary = True
                    log.info("a WebSocket client sent a binary frame; ACP messages are text frames: ignored")
            elif isinstance(event, Ping):
                self._send(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                self._closing = event  # answered by `close`, after the connection's last answers
                return
