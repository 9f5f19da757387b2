"""Session MCP servers of `type: "http"` (MCP over streamable HTTP), against a real
server on the official `mcp` SDK started by the test on 127.0.0.1, reached through the real CLI
with the demo's `/mcp SERVER TOOL [JSON]` — and, for what a turn cannot show, through the link."""

from __future__ import annotations

import json

import gevent
import pytest
from geventhttpclient import HTTPClient
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.errors import McpConnectFailed, McpServerExited
from acp_green.mcp.client import McpClientSession
from acp_green.mcp.httplink import HttpLink
from acp_green.rpc.cancel import CancelToken
from tests.helpers import said, wait_until
from tests.mcp_http_peer import HttpMcpServer, established_to


@pytest.fixture(params=["sse", "json"])
def server(request, tmp_path):
    """The server answering with SSE streams, then with single JSON bodies."""
    peer = HttpMcpServer(tmp_path, *(["--json"] if request.param == "json" else []))
    yield peer
    peer.stop()


@pytest.fixture
def sse_server(tmp_path):
    peer = HttpMcpServer(tmp_path)
    yield peer
    peer.stop()


def outcome(function, *args):
    """Run in a greenlet; its value or the exception it raised (an expected failure is no hub error)."""
    def run():
        try:
            return function(*args)
        except Exception as exc:
            return exc

    return gevent.spawn(run)


def last_tool_update(agent, session_id) -> dict:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]


def tool_text(update: dict) -> str:
    return update["content"][0]["content"]["text"]


def rpc_records(server: HttpMcpServer, rpc: str) -> list[dict]:
    return [r for r in server.records() if r.get("rpc") == rpc and "status" in r]


def test_initialize_advertises_http_mcp_servers(launch):
    """mcpCapabilities says exactly what works: http yes, legacy sse no, acp yes."""
    agent = launch("--ephemeral")
    assert agent.initialize()["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False, "acp": True}


def test_turn_calls_a_tool_of_an_http_server(launch, server):
    """A turn's `/mcp web echo` reaches the HTTP server; the MCP session id, the negotiated
    protocol version and the declared headers go with every message after initialize."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[server.entry(headers={"Authorization": "Bearer t0k"})])
    assert agent.prompt(session_id, '/mcp web echo {"text": "over http"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "over http"
    assert last_tool_update(agent, session_id)["status"] == "completed"
    records = [r for r in server.records() if "status" in r]
    assert [r["rpc"] for r in records] == ["initialize", "notifications/initialized", "tools/call"]
    assert [r["status"] for r in records] == [200, 202, 200]
    first, *later = records
    assert first["session"] is None and first["version"] is None
    assert {r["session"] for r in later} != {None} and len({r["session"] for r in later}) == 1
    assert {r["version"] for r in later} == {"2025-11-25"}
    assert {r["auth"] for r in records} == {"Bearer t0k"}


def test_list_tools_and_call_through_the_link(server):
    """`McpClientSession` over an HttpLink: the same calls as over stdio (list, call, an error result)."""
    link = HttpLink(server.url, name="web")
    session = McpClientSession("web", link)
    try:
        assert session.initialize(timeout=30)["serverInfo"]["name"] == "sdk-tools"
        assert {"echo", "sleep", "pid", "big", "crash"} <= {t["name"] for t in session.list_tools(timeout=30)}
        assert session.call_tool("big", {"size": 200_000}, timeout=30)["content"][0]["text"] == "x" * 200_000
        assert session.call_tool("nope", {}, timeout=30)["isError"] is True
    finally:
        link.close()


def test_cancelled_turn_cancels_its_http_request_and_closes_its_stream_S12(launch, sse_server):
    """session/cancel during an HTTP tool call: the agent POSTs notifications/cancelled for that
    request's id, closes its response stream, and the turn answers cancelled."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[sse_server.entry()])
    prompt = agent.prompt(session_id, '/mcp web sleep {"seconds": 600}')
    wait_until(lambda: sse_server.marked("sleep-started"), 60, "the tool to start")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    call_id = rpc_records(sse_server, "tools/call")[0]["id"]
    wait_until(lambda: rpc_records(sse_server, "notifications/cancelled"), 30, "notifications/cancelled")
    assert [r["requestId"] for r in rpc_records(sse_server, "notifications/cancelled")] == [call_id]
    wait_until(lambda: any(r.get("disconnect") and r.get("id") == call_id for r in sse_server.records()), 30,
               "the tools/call stream to be closed")
    wait_until(lambda: sse_server.marked("sleep-cancelled"), 30, "the server to cancel the tool")
    # The session goes on: the next call works.
    assert agent.prompt(session_id, '/mcp web echo {"text": "after"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).endswith("after")


def test_server_killed_mid_call_fails_the_tool_call_clearly(launch, sse_server):
    """The HTTP server dies during a tool call: the call fails saying so, the turn still answers;
    the next call fails with a clear 'cannot connect'."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[sse_server.entry()])
    prompt = agent.prompt(session_id, '/mcp web sleep {"seconds": 600}')
    wait_until(lambda: sse_server.marked("sleep-started"), 60, "the tool to start")
    sse_server.kill()
    assert prompt.result() == {"stopReason": "end_turn"}
    update = last_tool_update(agent, session_id)
    assert update["status"] == "failed"
    assert "MCP server 'web' broke off its answer to tools/call" in tool_text(update)
    assert agent.prompt(session_id, '/mcp web echo {"text": "x"}').result() == {"stopReason": "end_turn"}
    update = last_tool_update(agent, session_id)
    assert update["status"] == "failed"
    assert f"cannot connect to MCP server 'web' at {sse_server.url}" in tool_text(update)


def test_link_errors_carry_the_design_reasons(sse_server):
    """Errors:reasons: a server gone mid-request is mcp_server_exited; one that refuses the
    connection is mcp_connect_failed."""
    link = HttpLink(sse_server.url, name="web")
    session = McpClientSession("web", link)
    try:
        session.initialize(timeout=30)
        call = outcome(session.call_tool, "sleep", {"seconds": 600}, None, 60)
        wait_until(lambda: sse_server.marked("sleep-started"), 60, "the tool to start")
        sse_server.kill()
        gone = call.get(timeout=60)
        assert isinstance(gone, McpServerExited)
        assert gone.to_wire()["data"]["reason"] == "mcp_server_exited"
        with pytest.raises(McpConnectFailed) as refused:
            session.call_tool("echo", {"text": "x"}, timeout=60)
        assert refused.value.to_wire()["data"]["reason"] == "mcp_connect_failed"
    finally:
        link.close()


def test_an_expired_mcp_session_is_initialized_again_once(launch, sse_server):
    """A 404 for the MCP session (the server forgot it): the agent initializes again, once,
    and the tool call goes through on the new session."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[sse_server.entry()])
    assert agent.prompt(session_id, '/mcp web echo {"text": "one"}').result() == {"stopReason": "end_turn"}
    client = HTTPClient("127.0.0.1", sse_server.port)
    forgotten = json.loads(client.post("/forget", b"").read())
    client.close()
    assert len(forgotten) == 1
    assert agent.prompt(session_id, '/mcp web echo {"text": "two"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).endswith("two")
    records = [r for r in sse_server.records() if "status" in r]
    assert [(r["rpc"], r["status"]) for r in records] == [
        ("initialize", 200), ("notifications/initialized", 202), ("tools/call", 200),
        ("tools/call", 404), ("initialize", 200), ("notifications/initialized", 202), ("tools/call", 200)]
    assert records[3]["session"] == forgotten[0]
    assert records[4]["session"] is None and records[6]["session"] not in (None, forgotten[0])


def test_an_mcp_session_forgotten_again_fails_the_call_without_looping(sse_server):
    """Initialize again only once per expiry: a server that forgets every session fails the call."""
    link = HttpLink(sse_server.url, name="web")
    session = McpClientSession("web", link)
    forget = HTTPClient("127.0.0.1", sse_server.port)
    original = link._post_and_read

    def forgetting_first(request_id, method, body):
        if method == "tools/call":
            forget.post("/forget", b"").read()
        return original(request_id, method, body)

    try:
        session.initialize(timeout=30)
        link._post_and_read = forgetting_first
        with pytest.raises(McpConnectFailed, match="forgot the MCP session again"):
            session.call_tool("echo", {"text": "x"}, timeout=60)
        assert [r["rpc"] for r in sse_server.records() if "status" in r].count("initialize") == 2
    finally:
        forget.close()
        link.close()


def test_session_close_ends_the_mcp_session_and_leaves_no_connection(launch, sse_server):
    """session/close: the agent DELETEs its MCP session and closes every connection to the server."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[sse_server.entry()])
    assert agent.prompt(session_id, '/mcp web echo {"text": "x"}').result() == {"stopReason": "end_turn"}
    assert established_to(sse_server.port) >= 1  # the kept-alive connection
    mcp_session = rpc_records(sse_server, "tools/call")[0]["session"]
    agent.call("session/close", {"sessionId": session_id})
    wait_until(lambda: any(r["http"] == "DELETE" for r in sse_server.records()), 30, "the DELETE")
    deletes = [r for r in sse_server.records() if r["http"] == "DELETE"]
    assert [(r["session"], r["status"]) for r in deletes] == [(mcp_session, 200)]
    wait_until(lambda: established_to(sse_server.port) == 0, 30, "no connection to the server")


def test_agent_exit_ends_the_mcp_session_and_leaves_no_connection(launch, sse_server):
    """Shutdown (stdin EOF) with an HTTP server in use: its MCP session is DELETEd before exit."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[sse_server.entry()])
    assert agent.prompt(session_id, '/mcp web echo {"text": "x"}').result() == {"stopReason": "end_turn"}
    agent.close()
    assert [r["status"] for r in sse_server.records() if r["http"] == "DELETE"] == [200]
    assert established_to(sse_server.port) == 0


def test_an_unreachable_or_malformed_http_server_fails_the_tool_call_with_why(launch):
    """A refused connection, a non-http URL, a header that cannot be sent: the tool call fails, saying why."""
    agent = launch("--ephemeral")
    agent.initialize()
    servers = [
        {"type": "http", "name": "down", "url": "http://127.0.0.1:9/mcp", "headers": []},
        {"type": "http", "name": "ftp", "url": "ftp://127.0.0.1/mcp", "headers": []},
        {"type": "http", "name": "crlf", "url": "http://127.0.0.1:9/", "headers": [{"name": "X", "value": "a\r\nHost: evil"}]},
    ]
    session_id = agent.new_session(mcp_servers=servers)
    for text, expected in [("/mcp down echo", "'down' failed to connect: cannot connect to MCP server 'down' at http://127.0.0.1:9/mcp"),
                           ("/mcp ftp echo", "'ftp' failed to connect: its url is not an http:// or https:// URL"),
                           ("/mcp crlf echo", "header 'X' has a line break or NUL in its value")]:
        assert agent.prompt(session_id, text).result() == {"stopReason": "end_turn"}
        update = last_tool_update(agent, session_id)
        assert update["status"] == "failed"
        assert expected in tool_text(update)


def test_http_servers_count_toward_max_mcp_servers(launch):
    """--max-mcp-servers counts HTTP entries like any other transport."""
    agent = launch("--ephemeral", "--max-mcp-servers", "1")
    agent.initialize()
    entry = {"type": "http", "name": "a", "url": "http://127.0.0.1:9/", "headers": []}
    error = agent.request("session/new", {"cwd": "/tmp", "mcpServers": [entry, {**entry, "name": "b"}]}).error()
    assert error["code"] == -32602 and error["data"]["reason"] == "too_many_mcp_servers"


def test_a_token_set_while_waiting_cancels_over_http(sse_server):
    """The one pending-request core: a set token releases the waiter at once (TurnCancelled) and the
    server is told with notifications/cancelled naming our id."""
    from acp_green.errors import TurnCancelled

    link = HttpLink(sse_server.url, name="web")
    session = McpClientSession("web", link)
    try:
        session.initialize(timeout=30)
        token = CancelToken()
        call = outcome(session.call_tool, "sleep", {"seconds": 600}, token)
        wait_until(lambda: sse_server.marked("sleep-started"), 60, "the tool to start")
        token.set()
        assert isinstance(call.get(timeout=30), TurnCancelled)
        wait_until(lambda: rpc_records(sse_server, "notifications/cancelled"), 30, "notifications/cancelled")
        assert rpc_records(sse_server, "notifications/cancelled")[0]["requestId"] == rpc_records(sse_server, "tools/call")[0]["id"]
        wait_until(lambda: link.open_streams == 0, 30, "the stream to be closed")
    finally:
        link.close()


@settings(deadline=None, max_examples=200)
@given(name=st.text(max_size=12), value=st.text(max_size=30))
def test_declared_headers_are_sent_only_when_http_can_carry_them(name, value):
    """Property (input boundary): a header from the declaration is accepted exactly when its name
    is an HTTP token and its value holds no line break or NUL; anything else is refused with why."""
    from acp_green.mcp.session import _http_target

    entry = {"type": "http", "name": "web", "url": "http://127.0.0.1:9/", "headers": [{"name": name, "value": value}]}
    sendable = bool(name) and all(c in "!#$%&'*+.^_`|~-" or (c.isascii() and c.isalnum()) for c in name) \
        and not any(c in value for c in "\r\n\0")
    if sendable:
        assert _http_target(entry) == ("http://127.0.0.1:9/", {name: value})
    else:
        with pytest.raises(ValueError):
            _http_target(entry)
