"""What an MCP server sends is decoded as strictly as ACP input (mcp/peer.McpPeer.receive, shared
by the stdio and HTTP links): NaN, invalid ids, ids already in flight and unrepresentable numbers
are refused as for ACP; what cannot be answered is logged (bounded) and dropped."""

from __future__ import annotations

import json
import logging
import socket
import sys
import textwrap
from typing import Any

import gevent
import pytest
from gevent.server import StreamServer

from acp_green.rpc import wire
from acp_green.errors import McpError
from acp_green.mcp import peer as peer_module
from acp_green.mcp.httplink import HttpLink
from acp_green.mcp.jsonrpc import JsonRpcLink
from acp_green.mcp.peer import McpPeer


class _Recorded(McpPeer):
    """The core with a transport that only records what it would send."""

    def __init__(self, **handlers: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__("recorded", self._record_request, self._record, **handlers)

    def _record_request(self, request_id: int, method: str, params: Any, data: bytes) -> None:
        self.sent.append(json.loads(data))

    def _record(self, data: bytes, what: str) -> None:
        self.sent.append(json.loads(data))


def test_a_reply_holding_nan_is_dropped_and_the_call_still_waits_for_a_readable_one():
    peer = _Recorded()
    call = peer.start_request("tools/list", {})
    peer.receive(b'{"jsonrpc": "2.0", "id": 1, "result": {"x": NaN}}')
    assert not call.result.ready() and peer.invalid_messages == 1
    peer.receive(b'{"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}')
    assert peer.wait(call, timeout=1) == {"x": 1}


@pytest.mark.parametrize("reply_id", ["1.0", "true", '"1"', "[1]"])
def test_a_reply_whose_id_is_not_ours_exactly_answers_nothing(reply_id):
    peer = _Recorded()
    call = peer.start_request("ping", None)
    peer.receive(b'{"jsonrpc": "2.0", "id": %s, "result": {}}' % reply_id.encode())
    assert not call.result.ready()


def test_a_servers_request_with_an_invalid_id_is_dropped_and_one_with_a_bad_shape_refused():
    requests: list[wire.Request] = []
    peer = _Recorded(on_request=requests.append)
    peer.receive(b'{"jsonrpc": "2.0", "id": 1.5, "method": "sampling/createMessage", "params": {}}')
    assert requests == [] and peer.sent == [] and peer.invalid_messages == 1
    peer.receive(b'{"jsonrpc": "2.0", "id": "s1", "method": "roots/list", "params": "not an object"}')
    assert requests == [] and peer.sent[0]["id"] == "s1" and peer.sent[0]["error"]["code"] == -32600


def test_a_servers_request_reusing_an_id_in_flight_is_refused_until_it_is_answered():
    requests: list[wire.Request] = []
    peer = _Recorded(on_request=requests.append)
    line = b'{"jsonrpc": "2.0", "id": "a", "method": "sampling/createMessage", "params": {}}'
    peer.receive(line)
    peer.receive(line)
    assert len(requests) == 1
    assert peer.sent == [{"jsonrpc": "2.0", "id": "a", "error": {"code": -32600, "message": "Request id is already in flight"}}]
    peer.respond("a", {"ok": True})
    peer.receive(line)
    assert len(requests) == 2


def test_a_servers_request_with_an_unrepresentable_number_is_refused_with_invalid_params():
    requests: list[wire.Request] = []
    peer = _Recorded(on_request=requests.append)
    peer.receive(b'{"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"n": 1e400}}')
    assert requests == [] and peer.sent[0]["id"] == 7 and peer.sent[0]["error"]["code"] == -32602


def test_unreadable_messages_are_logged_a_bounded_number_of_times_and_all_counted(caplog):
    caplog.set_level(logging.WARNING, logger="acp_green.mcp.peer")
    peer = _Recorded()
    for _ in range(100):
        peer.receive(b"not json at all")
    assert peer.invalid_messages == 100
    assert len(caplog.records) == peer_module.LOGGED_INVALID + 1


def test_the_links_default_answers_ping_and_refuses_other_requests():
    peer = _Recorded()
    peer.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    peer.receive(b'{"jsonrpc": "2.0", "id": 2, "method": "roots/list"}')
    assert peer.sent == [{"jsonrpc": "2.0", "id": 1, "result": {}},
                         {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found: roots/list"}}]


# A stdio server answering every request twice: first with NaN (not JSON), then readably.
NAN_FIRST = textwrap.dedent('''
    import sys, json
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:
            sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "result": {"n": NaN}}\\n' % message["id"])
            sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "error": {"code": -32042, "message": "readable"}}\\n' % message["id"])
            sys.stdout.flush()
''')


def test_a_stdio_server_writing_nan_is_read_strictly(tmp_path):
    script = tmp_path / "nan_first.py"
    script.write_text(NAN_FIRST)
    link = JsonRpcLink([sys.executable, str(script)], name="nan")
    try:
        with pytest.raises(McpError) as info:
            link.request("tools/list", {}, timeout=30)
        assert info.value.code == -32042 and link.invalid_messages == 1
    finally:
        link.close()
    gevent.sleep(0)


class _SseServer:
    """A raw HTTP server on 127.0.0.1: answers a request of ours with an event stream of the
    given events (then closes), and anything else (our notifications and answers) with 202."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.posted: list[dict[str, Any]] = []
        self.server = StreamServer(("127.0.0.1", 0), self._handle)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/mcp"

    def _handle(self, sock: socket.socket, _address: Any) -> None:
        reader = sock.makefile("rb")
        try:
            while reader.readline():
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = json.loads(reader.read(length)) if length else {}
                self.posted.append(body)
                if "method" in body and "id" in body:
                    stream = b"".join(b"data: " + event + b"\n\n" for event in self.events)
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + stream)
                    return
                sock.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        finally:
            reader.close()
            sock.close()


def test_an_http_server_is_read_through_the_same_strict_core():
    """Over streamable HTTP too: a server request of a bad shape is refused with its id (POSTed
    back), a reply holding NaN is dropped, and the readable reply that follows answers the call."""
    server = _SseServer([
        b'{"jsonrpc": "2.0", "id": "s1", "method": "roots/list", "params": "not an object"}',
        b'{"jsonrpc": "2.0", "id": 1, "result": {"n": NaN}}',
        b'{"jsonrpc": "2.0", "id": 1, "result": {"n": 1}}',
    ])
    link = HttpLink(server.url, name="strict", connect_timeout=5)
    try:
        assert link.request("tools/list", {}, timeout=30) == {"n": 1}
        assert link.invalid_messages == 2
        refusals = [body for body in server.posted if body.get("id") == "s1"]
        assert [r["error"]["code"] for r in refusals] == [-32600]
    finally:
        link.close()
        server.server.stop(timeout=5)
