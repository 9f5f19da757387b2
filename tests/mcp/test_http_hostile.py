"""HTTP MCP servers that misbehave (MCP over streamable HTTP): a scripted server on
127.0.0.1 answers each POST as the test says; the link must fail that call with a clear reason,
within its bounds, close the connection, and never answer twice or hang."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import gevent.event
import pytest
from gevent.server import StreamServer

from acp_green.errors import McpConnectFailed, McpError, McpServerExited
from acp_green.mcp.httplink import HttpLink
from tests.helpers import wait_until

Script = Callable[[socket.socket, dict[str, Any]], None]


class ScriptedServer:
    """A raw HTTP/1.1 server: reads one request (headers, Content-Length body), hands the socket
    and the request's JSON to `script`; counts connections and sees each one end."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.closed = 0
        self.requests: list[tuple[str, dict[str, Any] | None]] = []
        self.server = StreamServer(("127.0.0.1", 0), self._handle)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/mcp"

    def _handle(self, sock: socket.socket, _address: Any) -> None:
        self.connections += 1
        reader = sock.makefile("rb")
        try:
            while True:
                request_line = reader.readline()
                if not request_line:
                    return
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = json.loads(reader.read(length)) if length else None
                self.requests.append((request_line.split()[0].decode(), body))
                self.script(sock, body)
        except OSError:
            pass
        finally:
            self.closed += 1
            reader.close()
            sock.close()

    def stop(self) -> None:
        self.server.stop(timeout=5)


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        server = ScriptedServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def reply(sock: socket.socket, status: str, headers: dict[str, str], body: bytes = b"") -> None:
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": str(len(body)), **headers}.items())
    sock.sendall(f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body)


def link_for(server: ScriptedServer, **options: Any) -> HttpLink:
    return HttpLink(server.url, name="hostile", connect_timeout=5, **options)


def test_a_body_that_is_not_json_or_an_event_stream_is_refused_with_its_type(scripted):
    """A 200 with `text/html` fails the request as mcp_connect_failed naming the content type."""
    server = scripted(lambda sock, _body: reply(sock, "200 OK", {"Content-Type": "text/html"}, b"<html>hi</html>"))
    link = link_for(server)
    try:
        with pytest.raises(McpConnectFailed, match="text/html"):
            link.request("tools/list", {}, timeout=30)
    finally:
        link.close()


def test_a_redirect_is_not_followed_and_fails_the_request(scripted):
    """A 307 to another URL is not followed (headers, a session id, would go where nobody
    declared); the request fails as mcp_connect_failed with the status; one request was made."""
    server = scripted(lambda sock, _body: reply(sock, "307 Temporary Redirect", {"Location": "http://127.0.0.1:9/elsewhere"}))
    link = link_for(server)
    try:
        with pytest.raises(McpConnectFailed, match="307") as refused:
            link.request("tools/list", {}, timeout=30)
        assert refused.value.to_wire()["data"]["reason"] == "mcp_connect_failed"
        assert len(server.requests) == 1
    finally:
        link.close()


def test_a_json_body_over_the_bound_fails_the_request_and_closes_its_connection(scripted):
    """A JSON body larger than the link's bound (declared, or chunked without a length) fails the
    request as too large without reading it all; the connection is closed, and the next request
    is answered on a fresh one."""
    calls = [0]

    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        calls[0] += 1
        if calls[0] == 1:  # declared too large
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n")
            sock.sendall(b"[" + b"0," * 1000)
        elif calls[0] == 2:  # chunked, growing past the bound
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(64):
                piece = b"0," * 16384
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        else:
            answer = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"tools": []}}).encode()
            reply(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = scripted(script)
    link = link_for(server, max_message_bytes=256 << 10)
    try:
        for _ in range(2):
            with pytest.raises(McpError, match="too large"):
                link.request("tools/list", {}, timeout=30)
        assert link.request("tools/list", {}, timeout=30) == {"tools": []}
        assert server.connections == 3
        gevent.sleep(0.1)
        assert server.closed >= 2  # the two oversized answers' connections
    finally:
        link.close()


def test_a_trickled_sse_line_that_never_ends_is_cut_off_by_the_wait_and_its_connection_closed(scripted):
    """An event stream whose line never ends (no newline, ever), trickled a few KB at a time: the
    call ends at its timeout, the request's stream and its connection are closed, and the server
    sees the connection end."""
    stop = gevent.event.Event()

    def script(sock: socket.socket, _body: dict[str, Any]) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ")
        while not stop.is_set():
            sock.sendall(b"x" * 4096)
            gevent.sleep(0.01)

    server = scripted(script)
    link = link_for(server)
    try:
        with pytest.raises(gevent.Timeout):
            link.request("tools/list", {}, timeout=1)
        assert link.open_streams == 0
        gevent.sleep(0.2)
        assert server.closed == 1, "the endless stream's connection was left open"
    finally:
        stop.set()
        link.close()


def test_a_stream_that_ends_without_the_answer_fails_the_request_at_once(scripted):
    """Errors: a server that opens an event stream for the request and ends it (only a
    notification, never the answer) fails the call at once as mcp_server_exited, not when its
    wait times out."""
    def script(sock: socket.socket, _body: dict[str, Any]) -> None:
        event = b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}\n\n'
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + event)
        sock.shutdown(socket.SHUT_RDWR)  # the body ends with the connection

    server = scripted(script)
    link = link_for(server)
    try:
        with pytest.raises(McpServerExited, match="without answering") as ended:
            link.request("tools/list", {}, timeout=600)
        assert ended.value.to_wire()["data"]["reason"] == "mcp_server_exited"
    finally:
        link.close()


FLOOD_SERVER = r"""
import socket, sys
head, unit, repeat, limit = sys.argv[1].encode(), sys.argv[2].encode(), int(sys.argv[3]), int(sys.argv[4])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
request = b""
while b"\r\n\r\n" not in request:
    request += conn.recv(65536)
conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + head)
block, sent = unit * repeat, 0
try:
    while sent < limit:
        conn.sendall(block)
        sent += len(block)
except OSError:
    pass
print(sent, flush=True)
"""


@contextmanager
def flood_server(head: str, unit: str, repeat: int, limit: int) -> Iterator[tuple[int, Any]]:
    """A server in another process: an event stream that starts with `head`, then `unit` *
    `repeat` sent again and again until `limit` bytes or the connection closes; it prints its
    port first and the bytes it sent last. Yields (port, process)."""
    import subprocess
    import sys

    server = subprocess.Popen([sys.executable, "-c", FLOOD_SERVER, head, unit, str(repeat), str(limit)],
                              stdout=subprocess.PIPE, text=True)
    try:
        yield int(server.stdout.readline()), server
    finally:
        server.kill()
        server.wait()


def test_an_sse_line_flooded_without_end_fails_at_the_bound_and_the_agent_keeps_running():
    """A server in another process floods one event-stream line with no newline as fast as it
    can: the call fails as too large once the line passes the link's bound (the link stops
    reading and closes the connection long before the server's 256 MiB are sent), and other
    greenlets keep running while the flood is read."""
    with flood_server("data: ", "x", 65536, 256 << 20) as (port, server):
        link = HttpLink(f"http://127.0.0.1:{port}/mcp", name="flood", connect_timeout=5, max_message_bytes=256 << 10)
        ticks = 0
        in_flight = gevent.event.Event()

        def tick() -> None:
            nonlocal ticks
            in_flight.wait()
            while True:
                ticks += 1
                gevent.sleep(0)

        ticker = gevent.spawn(tick)
        try:
            call = link.start_request("tools/list", {})
            in_flight.set()
            with pytest.raises(McpError, match="too large"):
                link.wait(call, timeout=120)
        finally:
            ticker.kill()
            link.close()
        sent = int(server.stdout.readline())
        assert sent < (64 << 20), f"the link read {sent} bytes of one line"
        assert ticks > 1, "no other greenlet ran while the flood was read"


def test_a_request_ended_while_its_body_is_still_being_sent_gives_its_connection_back(scripted, monkeypatch):
    """A server that stops reading while a large request is being sent to it: the call ends at its
    timeout and its connection's slot in the pool comes back, so later requests still get a
    connection (with one slot, a lost one would hold every later request forever)."""
    from acp_green.mcp import httplink

    monkeypatch.setattr(httplink, "MAX_STREAMS", 1)
    stalled, release = gevent.event.Event(), gevent.event.Event()
    connections = [0]

    def handle(sock: socket.socket, _address: Any) -> None:
        connections[0] += 1
        if connections[0] == 1:
            sock.recv(1, socket.MSG_PEEK)  # the request is arriving: never read the rest
            stalled.set()
            release.wait()
            sock.close()
            return
        server._handle(sock, _address)

    server = scripted(lambda sock, body: reply(sock, "200 OK", {"Content-Type": "application/json"},
                                               json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {}}).encode()))
    server.server.stop()
    stalling = StreamServer(("127.0.0.1", 0), handle)
    stalling.start()
    link = HttpLink(f"http://127.0.0.1:{stalling.server_port}/mcp", name="stalled", connect_timeout=5)
    try:
        call = link.start_request("tools/call", {"blob": "x" * (32 << 20)})  # far more than socket buffers hold
        assert stalled.wait(60)
        with pytest.raises(gevent.Timeout):
            link.wait(call, timeout=0.2)
        assert link.request("tools/list", {}, timeout=60) == {}
        assert connections[0] == 2
    finally:
        release.set()
        link.close()
        stalling.stop(timeout=5)


BOUND = 1000


def answer_padded_to(body: dict[str, Any], size: int) -> bytes:
    answer = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"ok": True}}).encode()
    return answer + b" " * (size - len(answer))


def send_chunked(sock: socket.socket, head: bytes, payload: bytes, piece: int) -> None:
    """`payload` in chunks of `piece` bytes, each its own send, then the last chunk."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"Transfer-Encoding: chunked\r\n\r\n")
    for at in range(0, len(payload), piece):
        part = payload[at:at + piece]
        sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
        gevent.sleep(0.001)  # separate segments: lines and CRLFs split across receives
    sock.sendall(b"0\r\n\r\n")


@pytest.mark.parametrize("framing", ["content-length", "chunked", "event-stream"])
def test_an_answer_of_exactly_the_bound_is_taken_and_one_byte_more_refused(scripted, framing):
    """The bound is inclusive whatever the framing: a JSON body (declared or chunked) or an
    event's data of exactly max_message_bytes is the answer; one byte more fails as too large.
    The event stream's lines end in CRLF, split across chunks."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        size = BOUND + (len(server.requests) - 1)  # first request: exactly the bound; second: one more
        payload = answer_padded_to(body, size)
        if framing == "content-length":
            reply(sock, "200 OK", {"Content-Type": "application/json"}, payload)
        elif framing == "chunked":
            send_chunked(sock, b"Content-Type: application/json\r\n", payload, 7)
        else:
            send_chunked(sock, b"Content-Type: text/event-stream\r\n", b": hi\r\ndata: " + payload + b"\r\n\r\n", 5)

    server = scripted(script)
    link = link_for(server, max_message_bytes=BOUND)
    try:
        assert link.request("tools/list", {}, timeout=60) == {"ok": True}
        with pytest.raises(McpError, match="too large"):
            link.request("tools/list", {}, timeout=60)
    finally:
        link.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_connection_closed_mid_body_breaks_off_the_answer_even_if_what_came_is_json(scripted, framing):
    """The server sends a whole JSON answer but closes before its declared length (or inside a
    chunk): the body is incomplete, so the call fails as mcp_server_exited, not answered."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        answer = answer_padded_to(body, 0)
        if framing == "content-length":
            head = b"Content-Length: %d\r\n\r\n" % (len(answer) + 50)
        else:
            head = b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % (len(answer) + 50)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + head + answer)
        sock.shutdown(socket.SHUT_RDWR)

    server = scripted(script)
    link = link_for(server)
    try:
        with pytest.raises(McpServerExited, match="broke off"):
            link.request("tools/list", {}, timeout=60)
    finally:
        link.close()




def test_a_flood_of_tiny_events_leaves_other_greenlets_running_while_it_lasts():
    """A server in another process sends small notifications without pause and never answers:
    while they are being delivered, a greenlet waiting on a timer gets to run again and again
    (the reader yields to the hub between receives), and cancelling the call ends it."""
    event = 'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
    with flood_server("", event, 1000, 512 << 20) as (port, server):
        delivered = [0]
        flooding = gevent.event.Event()

        def on_notification(_message: Any) -> None:
            delivered[0] += 1
            flooding.set()

        link = HttpLink(f"http://127.0.0.1:{port}/mcp", name="flood", connect_timeout=5, on_notification=on_notification)
        seen_by_ticker: list[int] = []

        def ticker() -> None:
            flooding.wait()
            for _ in range(5):
                gevent.sleep(0.01)  # a timer, not a callback: the hub must poll to run it
                seen_by_ticker.append(delivered[0])

        ticking = gevent.spawn(ticker)
        try:
            call = link.start_request("tools/list", {})
            assert ticking.join(timeout=120) is None and ticking.dead, "the ticker never got to run during the flood"
            assert server.poll() is None, "the flood ended before the ticker ran"
            assert len(set(seen_by_ticker)) == 5, f"events were not delivered between the ticks: {seen_by_ticker}"
            with pytest.raises(gevent.Timeout):
                link.wait(call, timeout=0.1)
            assert link.open_streams == 0
        finally:
            ticking.kill()
            link.close()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _answer_event(body: dict[str, Any]) -> bytes:
    answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"tools": []}}
    return b"data: " + json.dumps(answer).encode() + b"\n\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_an_answered_event_stream_that_ends_a_moment_later_keeps_its_connection_for_the_next_request(scripted):
    """The answer comes first and the stream's end a moment after (a server that sets
    TCP_NODELAY sends them apart): the link reads to that end instead of closing the stream when
    the answer arrives, so the next request goes over the same connection."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        sock.sendall(SSE_HEAD + _chunk(_answer_event(body)))
        gevent.sleep(0.05)
        sock.sendall(b"0\r\n\r\n")

    server = scripted(script)
    link = link_for(server)
    try:
        for _ in range(3):
            assert link.request("tools/list", {}, timeout=30) == {"tools": []}
            wait_until(lambda: link.open_streams == 0, 30, "the answered stream to end")
        assert server.connections == 1, "each request made a new connection"
    finally:
        link.close()


def test_an_answered_event_stream_that_never_ends_is_closed_after_the_grace(scripted, monkeypatch):
    """The answer is returned at once; a stream the server then keeps open is closed after
    ANSWERED_STREAM_GRACE (its connection with it), and the link has nothing left open."""
    import acp_green.mcp.httplink as httplink

    monkeypatch.setattr(httplink, "ANSWERED_STREAM_GRACE", 0.2)

    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        sock.sendall(SSE_HEAD + _chunk(_answer_event(body)))
        sock.recv(1)  # nothing more is sent: returns when the client closes the connection

    server = scripted(script)
    link = link_for(server)
    try:
        assert link.request("tools/list", {}, timeout=30) == {"tools": []}
        wait_until(lambda: server.closed == 1, 30, "the connection of the stream left open to be closed")
        assert link.open_streams == 0
    finally:
        link.close()


def _event(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\n\n"


@pytest.mark.parametrize("ended_by", ["the grace after the answer", "a cancel before it"])
def test_a_stream_closed_while_it_answers_the_servers_request_is_closed_with_its_connection(scripted, monkeypatch, ended_by):
    """The server sends a request (ping) on a request's event stream and holds our answer's POST;
    the stream is closed then (the grace after its answer ran out, or the call was cancelled).
    The close reaches the stream through that POST: the stream still ends and its connection is
    closed, rather than the stream reading on unseen by the link (and by its close)."""
    import acp_green.mcp.httplink as httplink

    monkeypatch.setattr(httplink, "ANSWERED_STREAM_GRACE", 0.2)
    answered = ended_by.startswith("the grace")
    reply_posted = gevent.event.Event()
    stream_closed = gevent.event.Event()

    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        if body.get("method") == "tools/list":
            events = (_answer_event(body) if answered else b"") + _event({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
            sock.sendall(SSE_HEAD + _chunk(events))
            sock.recv(1)  # the stream stays open: returns when the client closes the connection
            stream_closed.set()
        elif "result" in body:  # our answer to the ping: held until the client gives up on it
            reply_posted.set()
            sock.recv(1)
        else:
            reply(sock, "202 Accepted", {})

    server = scripted(script)
    link = link_for(server)
    try:
        if answered:
            assert link.request("tools/list", {}, timeout=30) == {"tools": []}
            assert reply_posted.wait(30), "the answer to the server's ping was not posted"
        else:
            call = link.start_request("tools/list", {})
            assert reply_posted.wait(30), "the answer to the server's ping was not posted"
            link.cancel(call, "stopped")
        assert stream_closed.wait(10), "the stream's connection was left open"
        wait_until(lambda: link.open_streams == 0, 30, "the stream to end")
    finally:
        link.close()


def test_an_error_answer_on_an_event_stream_that_ends_a_moment_later_keeps_its_connection(scripted):
    """An error reply is an answer too: its stream is read to its end, so the next request goes
    over the same connection, and the call raises the server's error."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        error = {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32602, "message": "no such tool"}}
        sock.sendall(SSE_HEAD + _chunk(_event(error)))
        gevent.sleep(0.05)
        sock.sendall(b"0\r\n\r\n")

    server = scripted(script)
    link = link_for(server)
    try:
        for _ in range(3):
            with pytest.raises(McpError, match="no such tool"):
                link.request("tools/call", {"name": "nope"}, timeout=30)
            wait_until(lambda: link.open_streams == 0, 30, "the answered stream to end")
        assert server.connections == 1, "each request made a new connection"
    finally:
        link.close()


def test_closing_the_link_closes_an_answered_stream_still_open(scripted, monkeypatch):
    """close() does not leave an answered stream the server keeps open to its grace: when close()
    returns, the link has nothing open and that stream's connection is closed."""
    import acp_green.mcp.httplink as httplink

    monkeypatch.setattr(httplink, "ANSWERED_STREAM_GRACE", 3600.0)
    stream_closed = gevent.event.Event()

    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        sock.sendall(SSE_HEAD + _chunk(_answer_event(body)))
        sock.recv(1)  # returns when the client closes the connection
        stream_closed.set()

    server = scripted(script)
    link = link_for(server)
    assert link.request("tools/list", {}, timeout=30) == {"tools": []}
    assert link.open_streams == 1  # answered, read on for its end
    link.close()
    assert link.open_streams == 0
    assert stream_closed.wait(10), "the answered stream's connection was left open"
