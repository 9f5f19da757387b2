"""An HTTP MCP server's response head is bounded (acp_green/mcp/httpguard.py): endless interim
(1xx) responses, a huge header, a flood of headers fail the call at once with a clear error and
close the connection, and the agent answers control requests meanwhile.

S10: control stays answered while an HTTP MCP server sends endless or huge heads.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import gevent
import pytest

from acp_green.errors import McpError
from acp_green.mcp import httpguard
from acp_green.mcp.httplink import HttpLink
from tests.mcp.hostile_http_helpers import hostile_servers, http_entry, tool_text, tool_update, worst_control_latency
from tests.mcp.test_http_hostile import reply, scripted  # noqa: F401 - the fixture

#: The longest a control request may wait while a hostile server acts (generous: CPU hogs beside).
CONTROL_BOUND = 2.0


@pytest.mark.parametrize(("mode", "args", "why"), [
    ("continue", (), "more than 8 interim (1xx) responses"),
    ("big-header", (str(64 << 20),), "a response head over 65536 bytes"),
    ("many-headers", (str(4 << 20),), "a response head of more than 256 header lines"),
])
def test_a_hostile_response_head_fails_the_call_and_control_is_answered_meanwhile(launch, mode, args, why):
    """A server in another process answers initialize with endless `100 Continue`, a 64 MiB
    header, or millions of headers: control requests are answered within a bound while it sends,
    the turn's tool call fails saying which bound, and the agent exits at EOF."""
    with hostile_servers(1, mode, *args) as [port]:
        agent = launch("--ephemeral")
        agent.initialize()
        session_id = agent.new_session(mcp_servers=[http_entry("h", f"http://127.0.0.1:{port}/mcp")])
        worst, answered = worst_control_latency(agent, 3.0)
        assert worst < CONTROL_BOUND, f"a control request waited {worst:.2f}s"
        assert agent.prompt(session_id, "/mcp h echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert tool_update(agent, session_id)["status"] == "failed"
        assert why in tool_text(agent, session_id)
        agent.close_input()
        assert agent.wait_exit(timeout=30) == 0


def _answer(body: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"ok": True}}).encode()


@pytest.mark.parametrize("extra", [0, 1])
def test_interim_responses_up_to_the_bound_are_skipped_and_one_more_is_refused(scripted, monkeypatch, extra):
    """MAX_INTERIM_RESPONSES interim responses before the answer are skipped, the answer's body
    (sent a moment after its head) is read, and the connection serves the next request; one more
    interim response fails the call as refused, its connection is closed and its slot in the pool
    comes back (with one slot, the next request is answered)."""
    from acp_green.mcp import httplink

    monkeypatch.setattr(httplink, "MAX_STREAMS", 1)

    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        answer = _answer(body)
        refused = extra if len(server.requests) == 1 else 0
        sock.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" * (httpguard.MAX_INTERIM_RESPONSES + refused)
                     + b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer))
        gevent.sleep(0.05)
        sock.sendall(answer)

    server = scripted(script)
    link = HttpLink(server.url, name="interim", connect_timeout=5)
    try:
        if extra:
            with pytest.raises(McpError, match=r"refused: more than 8 interim \(1xx\) responses"):
                link.request("tools/list", {}, timeout=30)
            gevent.sleep(0.1)
            assert server.closed == 1, "the refused response's connection was kept"
            assert link.request("tools/list", {}, timeout=10) == {"ok": True}
        else:
            assert link.request("tools/list", {}, timeout=30) == {"ok": True}
            assert link.request("tools/list", {}, timeout=30) == {"ok": True}
            assert server.connections == 1, "the connection was not kept for the next request"
    finally:
        link.close()


@pytest.mark.parametrize(("lines", "refused"), [(httpguard.MAX_HEADER_LINES - 2, False), (httpguard.MAX_HEADER_LINES - 1, True)])
def test_header_lines_up_to_the_bound_are_taken_and_one_more_is_refused(scripted, lines, refused):
    """A head of MAX_HEADER_LINES lines (with Content-Type and Content-Length) is read; one more is refused."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        reply(sock, "200 OK", {"Content-Type": "application/json", **{f"X-{i}": "v" for i in range(lines)}}, _answer(body))

    server = scripted(script)
    link = HttpLink(server.url, name="headers", connect_timeout=5)
    try:
        if refused:
            with pytest.raises(McpError, match="more than 256 header lines"):
                link.request("tools/list", {}, timeout=30)
        else:
            assert link.request("tools/list", {}, timeout=30) == {"ok": True}
    finally:
        link.close()


@pytest.mark.parametrize(("size", "refused"), [(httpguard.MAX_HEAD_BYTES - 8192, False), (httpguard.MAX_HEAD_BYTES + 1, True)])
def test_a_head_near_the_byte_bound_is_taken_and_one_over_it_refused(scripted, size, refused):
    """One header of 56 KiB is read; a head over MAX_HEAD_BYTES is refused and its connection closed."""
    def script(sock: socket.socket, body: dict[str, Any]) -> None:
        reply(sock, "200 OK", {"Content-Type": "application/json", "X-Big": "x" * size}, _answer(body))

    server = scripted(script)
    link = HttpLink(server.url, name="bytes", connect_timeout=5)
    try:
        if refused:
            with pytest.raises(McpError, match="a response head over 65536 bytes"):
                link.request("tools/list", {}, timeout=30)
            gevent.sleep(0.1)
            assert server.closed == 1
        else:
            assert link.request("tools/list", {}, timeout=30) == {"ok": True}
    finally:
        link.close()
