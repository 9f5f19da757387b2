"""The listener's clocks and bounds, served in this process with short intervals and read over raw
cooperative sockets: keepalives on a quiet stream, idle HTTP connections ended, a silent socket
closed, the process's stop ending every connection."""

from __future__ import annotations

import json

import gevent
import gevent.socket
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from acp_green.demo import DemoAgent
from acp_green.remote import ListenOptions, RemoteListener
from acp_green.serve_options import ServeOptions
from acp_green.server import Server

BOUND = 30


def _send(listener: RemoteListener, request: bytes) -> gevent.socket.socket:
    sock = gevent.socket.create_connection(("127.0.0.1", listener._server.server_port))  # type: ignore[union-attr]
    sock.sendall(request)
    return sock


def _read_until(sock, marker: bytes, limit: int = 1 << 20, count: int = 1) -> bytes:
    """What the socket sent until `marker` was seen `count` times (or it closed)."""
    data = b""
    with gevent.Timeout(BOUND):
        while data.count(marker) < count and len(data) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def _initialize(listener) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    sock = _send(listener, f"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                           f"{body}".encode())
    head = _read_until(sock, b'"protocolVersion"')
    sock.close()
    line = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"acp-connection-id:"))
    return line.split(b":", 1)[1].strip().decode()


def test_a_quiet_event_stream_gets_keepalive_comments(served):
    _server, listener = served(keepalive_interval=0.1)
    cid = _initialize(listener)
    sock = _send(listener, f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n\r\n".encode())
    data = _read_until(sock, b": keepalive\n\n", count=2)
    assert data.startswith(b"HTTP/1.1 200 ") and data.count(b": keepalive\n\n") >= 2
    sock.close()


def test_an_http_connection_nobody_uses_ends_after_its_idle_time(served):
    _server, listener = served(idle_timeout=0.2)
    cid = _initialize(listener)
    assert listener.routes is not None and cid in listener.routes.connections
    with gevent.Timeout(BOUND):
        while cid in listener.routes.connections:
            gevent.sleep(0.05)
    sock = _send(listener, f"DELETE /acp HTTP/1.1\r\nHost: x\r\nAcp-Connection-Id: {cid}\r\n\r\n".encode())
    assert _read_until(sock, b"\r\n").startswith(b"HTTP/1.1 404 ")


def test_an_open_stream_keeps_its_connection_alive_past_the_idle_time(served):
    _server, listener = served(idle_timeout=0.2, keepalive_interval=0.05)
    cid = _initialize(listener)
    sock = _send(listener, f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n\r\n".encode())
    _read_until(sock, b": keepalive", count=2)
    gevent.sleep(0.6)  # three idle times with the stream open: the connection lives
    assert listener.routes is not None and cid in listener.routes.connections
    sock.close()


def test_a_socket_that_sends_no_request_is_closed_after_the_head_timeout(served):
    _server, listener = served(head_timeout=0.2)
    sock = _send(listener, b"POST /acp HTTP/1.1\r\n")  # never finishes its head
    with gevent.Timeout(BOUND):  # the listener closes it: recv sees the end (408 first, or nothing)
        while sock.recv(100):
            pass


def test_the_process_stop_ends_every_connection_and_their_streams(served):
    server, listener = served()
    cid = _initialize(listener)
    sock = _send(listener, f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n\r\n".encode())
    _read_until(sock, b"\r\n\r\n")
    server.request_stop("test")
    data = _read_until(sock, b"0\r\n\r\n")  # the chunked body's end: the stream ended
    assert data.endswith(b"0\r\n\r\n")
    assert listener.routes is not None and listener.routes.connections == {}


_bodies = st.one_of(
    st.binary(max_size=300),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
                     ["jsonrpc", "id", "method", "params", "sessionId", "result", "error"]), inner, max_size=5),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
    st.builds(lambda method, sid: json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"sessionId": sid}}).encode(),
              st.sampled_from(["session/prompt", "session/load", "session/cancel", "initialize", "session/new", "x"]),
              st.text(max_size=10)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies, content_type=st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]),
       use_connection=st.sampled_from(["real", "unknown", "none"]), session=st.one_of(st.none(), st.text("abc", max_size=3)),
       method=st.sampled_from(["POST", "GET", "DELETE", "PATCH"]))
def test_any_request_gets_one_answer_of_the_documented_statuses_and_the_agent_serves_on(served_once, body, content_type,
                                                                                        use_connection, session, method):
    assume(not (method == "DELETE" and use_connection == "real"))  # that would end the connection every example shares
    listener, cid = served_once
    headers = [f"Content-Length: {len(body)}"]
    if content_type:
        headers.append(f"Content-Type: {content_type}")
    if use_connection != "none":
        headers.append(f"Acp-Connection-Id: {cid if use_connection == 'real' else 'unknown'}")
    if session is not None:
        headers.append(f"Acp-Session-Id: {session}")
    sock = _send(listener, (f"{method} /acp HTTP/1.1\r\nHost: x\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body)
    head = _read_until(sock, b"\r\n")
    sock.close()
    status = int(head.split(b" ", 2)[1])
    assert status in (200, 202, 400, 404, 405, 406, 409, 413, 415, 501), head[:200]


@pytest.fixture(scope="module")
def served_once():
    server = Server(DemoAgent(), ServeOptions(handle_signals=False, ephemeral=True, shutdown_grace=1))
    listener = RemoteListener(ListenOptions())
    greenlet = gevent.spawn(server.serve_listening, listener)
    with gevent.Timeout(BOUND):
        while listener.routes is None:
            gevent.sleep(0.01)
    yield listener, _initialize(listener)
    assert _initialize(listener)  # still serving after every example
    server.request_stop("test over")
    greenlet.join(timeout=BOUND)
    assert greenlet.dead and greenlet.value == 0


def test_a_stream_whose_reader_left_is_free_for_the_next_reader_at_once(served):
    """Without watching for the hangup the stream stays taken until a write fails: with a
    keepalive this long, that would be past the test's bound."""
    _server, listener = served(keepalive_interval=1000)
    cid = _initialize(listener)
    get = f"GET /acp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n\r\n".encode()
    first = _send(listener, get)
    assert _read_until(first, b"\r\n\r\n").startswith(b"HTTP/1.1 200 ")
    first.close()
    with gevent.Timeout(BOUND):
        while True:
            again = _send(listener, get)
            head = _read_until(again, b"\r\n")
            if head.startswith(b"HTTP/1.1 200 "):
                break
            assert head.startswith(b"HTTP/1.1 409 "), head
            again.close()
            gevent.sleep(0.01)
    again.close()


def test_a_browser_pages_origin_is_refused_unless_allowed(served):
    _server, listener = served(allowed_origins=frozenset({"https://editor.example"}))
    body = b"{}"
    for origin, status in (("https://evil.example", b"403"), ("null", b"403"), ("https://editor.example", b"400")):
        sock = _send(listener, f"POST /acp HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\nContent-Type: application/json\r\n"
                               f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert _read_until(sock, b"\r\n").startswith(b"HTTP/1.1 " + status + b" "), origin
        sock.close()
    upgrade = ("GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: https://evil.example\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    sock = _send(listener, upgrade)
    assert _read_until(sock, b"\r\n").startswith(b"HTTP/1.1 403 ")
