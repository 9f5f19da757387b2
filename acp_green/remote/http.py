"""One TCP connection's HTTP/1.1 exchange, parsed and framed by h11 on a cooperative socket.

Bounded: a request head must arrive within `head_timeout` seconds and fit in `max_head_bytes`;
a body is read only up to the limit its caller gives (`read_body`).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus

import gevent
import h11

log = logging.getLogger(__name__)

_RECV = 64 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """A request head: its method, path (without the query), and headers with lower-cased names."""

    method: str
    path: str
    headers: dict[str, str]

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


class BodyTooLarge(Exception):
    """The request's body is over the limit its route accepts."""


class HttpSocket:
    """Reads requests from and writes responses to one socket; the socket is its own."""

    def __init__(self, sock: socket.socket, *, head_timeout: float, max_head_bytes: int) -> None:
        self.sock = sock
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self._head_timeout = head_timeout

    # -- reading -----------------------------------------------------------------------------
    def _next_event(self) -> object:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = self.sock.recv(_RECV)
            self._h11.receive_data(data)  # b"": the peer closed; h11 turns it into ConnectionClosed

    def next_request(self) -> Request | None:
        """The next request's head; None when the client closed, went quiet or sent garbage."""
        try:
            with gevent.Timeout(self._head_timeout):
                event = self._next_event()
        except gevent.Timeout:
            return None
        except h11.RemoteProtocolError as exc:
            self._refuse_malformed(exc)
            return None
        except OSError:
            return None
        if not isinstance(event, h11.Request):
            return None
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("ascii").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        target = event.target.decode("latin-1")
        return Request(event.method.decode("ascii").upper(), target.split("?", 1)[0], headers)

    def _refuse_malformed(self, exc: h11.RemoteProtocolError) -> None:
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                self.respond(exc.error_status_hint, f"Bad request: {exc}\n".encode("utf-8"), close=True)
            except (OSError, h11.LocalProtocolError):
                pass

    def read_body(self, limit: int) -> bytes:
        """The request's body; BodyTooLarge once it passes `limit` (the rest is left unread)."""
        if self._h11.they_are_waiting_for_100_continue:
            self._send(h11.InformationalResponse(status_code=100, headers=[]))
        parts: list[bytes] = []
        size = 0
        with gevent.Timeout(self._head_timeout):
            while True:
                event = self._next_event()
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        raise BodyTooLarge(size)
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(parts)
                else:
                    raise OSError("the client closed the connection before its request body ended")

    # -- writing -----------------------------------------------------------------------------
    def _send(self, event: h11.Request | h11.InformationalResponse | h11.Response | h11.Data | h11.EndOfMessage) -> None:
        data = self._h11.send(event)
        if data:
            self.sock.sendall(data)

    def respond(self, status: int, body: bytes = b"", headers: Iterable[tuple[str, str]] = (), *, close: bool = False) -> None:
        """A whole response; `close`: the socket is not reused for another request."""
        fields = [("content-length", str(len(body))), *headers]
        if close:
            fields.append(("connection", "close"))
        self._send(h11.Response(status_code=status, headers=fields, reason=_reason(status)))
        if body:
            self._send(h11.Data(data=body))
        self._send(h11.EndOfMessage())

    def start_stream(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Begin a response whose body is sent piece by piece (`send_piece`), chunked."""
        self._send(h11.Response(status_code=status, headers=list(headers), reason=_reason(status)))

    def send_piece(self, data: bytes) -> None:
        self._send(h11.Data(data=data))

    def end_stream(self) -> None:
        self._send(h11.EndOfMessage())

    def switch_protocols(self, headers: Iterable[tuple[str, str]]) -> bytes:
        """Answer 101 and hand the socket over; returns the bytes the client sent after its head."""
        self._send(h11.InformationalResponse(status_code=101, headers=list(headers), reason=b"Switching Protocols"))
        data, _closed = self._h11.trailing_data
        return bytes(data)

    def reusable(self, unread_limit: int = _RECV) -> bool:
        """Ready for the client's next request on this socket (keep-alive), after a whole exchange.

        A body the route did not read (a GET's empty one, a refused POST's) is read past first,
        up to `unread_limit` bytes: a longer one costs the socket instead.
        """
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.SEND_BODY:
            skipped = 0
            try:
                with gevent.Timeout(self._head_timeout):
                    while self._h11.their_state is h11.SEND_BODY:
                        event = self._next_event()
                        if isinstance(event, h11.Data):
                            skipped += len(event.data)
                            if skipped > unread_limit:
                                return False
                        elif not isinstance(event, h11.EndOfMessage):
                            return False
            except (gevent.Timeout, OSError, h11.RemoteProtocolError):
                return False
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            return True
        return False

    def close(self, linger: float = 2.0) -> None:
        """Close the socket once the client has had our last response.

        Closing with bytes of the client's still unread makes the kernel send a reset, which can
        destroy that response before the client reads it (a 401 or 413 to a big POST): so our
        side is shut first and what the client still sends is read and dropped, for at most
        `linger` seconds.
        """
        try:
            self.sock.shutdown(socket.SHUT_WR)
            with gevent.Timeout(linger, False):
                while self.sock.recv(_RECV):
                    pass
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""
