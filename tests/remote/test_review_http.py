"""Review: the HTTP exchange of a listening agent under hostile or merely pipelining clients,
served in this process and read over raw cooperative sockets."""

from __future__ import annotations

import json

import gevent
import gevent.socket

from acp_green.remote import ListenOptions, RemoteListener

BOUND = 30


def _connect(listener: RemoteListener) -> gevent.socket.socket:
    return gevent.socket.create_connection(("127.0.0.1", listener._server.server_port))  # type: ignore[union-attr]


def _read_all(sock, seconds: float = 3.0) -> bytes:
    """What the socket sent until it closed or went quiet for `seconds`."""
    data = b""
    try:
        while True:
            with gevent.Timeout(seconds):
                chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (gevent.Timeout, OSError):
        pass
    return data


def test_pipelined_requests_are_each_answered(served):
    """Requests without a body (DELETE, GET) never have their end read (http.py next_request
    returns at the head), so `reusable()` is False and the socket closes after the first
    answer, without `Connection: close`: the second and third requests are dropped unanswered."""
    _server, listener = served()
    sock = _connect(listener)
    sock.sendall(b"DELETE /acp HTTP/1.1\r\nHost: x\r\nAcp-Connection-Id: nope\r\n\r\n" * 3)
    data = _read_all(sock)
    sock.close()
    assert data.count(b"HTTP/1.1 404 ") == 3, data


def test_a_refusal_before_the_body_is_read_reaches_the_client(listening):
    """A POST refused before its body is read (415 here; 401, 404 alike) closes the socket with
    the body unread and no lingering close: the kernel answers RST and http.client sees
    ConnectionResetError / BrokenPipeError instead of the status (5 of 5 tries at 5 MB)."""
    from tests.remote_peers import exchange

    agent = listening("--ephemeral")
    got = []
    for _ in range(3):
        try:
            got.append(exchange(agent, "POST", b"x" * (5 << 20), {"Content-Type": "text/plain"})[0])
        except OSError as exc:
            got.append(type(exc).__name__)
    assert got == [415, 415, 415], got


def test_an_upgrade_with_an_empty_websocket_key_is_refused_400(served):
    """RFC 6455 4.2.1: the key is a base64 16-byte nonce; routes.py only checks it is present."""
    _server, listener = served()
    sock = _connect(listener)
    sock.sendall(b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: \r\nSec-WebSocket-Version: 13\r\n\r\n")
    data = _read_all(sock, 2)
    sock.close()
    assert data.startswith(b"HTTP/1.1 400 "), data[:200]


def test_http_connections_are_bounded_like_sockets(served):
    """Each POST of initialize makes a connection (four greenlets, ~50 KB) that lives until its
    idle time (600 s); nothing bounds how many: 10 000 in 9 s took the process to 560 MB.
    With max_sockets=8 a client must not hold 100 connections open from one socket."""
    bound = {"max_connections": 8} if "max_connections" in ListenOptions.__dataclass_fields__ else {"max_sockets": 8}
    _server, listener = served(**bound)
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    statuses = []
    for _ in range(100):
        sock = _connect(listener)
        sock.sendall(f"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n{body}".encode())
        head = _read_all(sock, 5)
        sock.close()
        statuses.append(int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0)
    assert listener.routes is not None
    assert len(listener.routes.connections) <= 50, (len(listener.routes.connections), sorted(set(statuses)))
