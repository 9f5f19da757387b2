"""Outbound and session MCP: agent code, during a turn, calls MCP servers the client declared in
`session/new` — `type: "acp"` ones through the client (agent->client mcp/connect, mcp/message),
and stdio ones that acp_green starts for the session (S7)."""

from __future__ import annotations

import gevent
import pytest

from acp_green.tools.rig.client import ClientPolicy
from tests.helpers import said, wait_gone
from tests.mcp_helpers import SDK_TOOLS, connect_shape_schema, mcp_problems, stdio_entry
from tests.mcp_peer import SdkServerOverAcp
from tests.mcp_servers.client_hosted import make_server


@pytest.fixture
def hosted():
    server = SdkServerOverAcp(make_server())
    server.start()
    yield server
    server.stop()


def acp_entry(server: SdkServerOverAcp) -> dict:
    return {"type": "acp", "name": "proj", "serverId": server.server_id}


def tool_status(agent, session_id) -> str:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]["status"]


def test_turn_calls_a_client_provided_acp_server_S7(launch, hosted):
    """S7 outbound: the agent sends mcp/connect to the client, then MCP in mcp/message requests, and uses the tool."""
    policy = ClientPolicy(handlers=hosted.handlers(), notification_handlers=hosted.notification_handlers())
    agent = launch("--ephemeral", policy=policy)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[acp_entry(hosted)])
    assert agent.prompt(session_id, '/mcp proj echo {"text": "hi there"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "client says hi there"
    connects = [m for m in agent.agent_requests if m["method"] == "mcp/connect"]
    assert [m["params"] for m in connects] == [{"serverId": hosted.server_id}]
    assert hosted.inner_methods == ["initialize", "notifications/initialized", "tools/call"]
    # The connection is kept for the session: a second call reuses it.
    assert agent.prompt(session_id, '/mcp proj echo {"text": "again"}').result() == {"stopReason": "end_turn"}
    assert len(hosted.connections) == 1
    # The client answered mcp/connect: the connect shape, every message valid under the older schema.
    sent = [r.message for r in agent.records if r.direction == "in" and r.message and str(r.message.get("method", "")).startswith("mcp/")]
    assert {m["method"] for m in sent} == {"mcp/connect", "mcp/message"}
    for message in sent:
        assert mcp_problems(message, connect_shape_schema()) == [], message


def test_client_mcp_message_requests_on_an_outbound_connection_are_dispatched_S1(launch, hosted):
    """S1/S7: mcp/message requests the client sends back on an outbound connection run as background requests."""
    policy = ClientPolicy(handlers=hosted.handlers(), notification_handlers=hosted.notification_handlers())
    agent = launch("--ephemeral", policy=policy)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[acp_entry(hosted)])
    agent.prompt(session_id, '/mcp proj echo {"text": "x"}').result()
    connection_id = hosted.connections[0]
    assert agent.call("mcp/message", {"connectionId": connection_id, "method": "ping"}) == {}
    error = agent.request("mcp/message", {"connectionId": connection_id, "method": "sampling/createMessage", "params": {}}).error()
    assert error["code"] == -32601


def test_cancelling_a_turn_cancels_its_outbound_mcp_request_S12(launch, hosted):
    """A session/cancel during an outbound MCP call: the agent sends $/cancel_request for its mcp/message; turn ends cancelled."""
    policy = ClientPolicy(handlers=hosted.handlers(), notification_handlers=hosted.notification_handlers())
    agent = launch("--ephemeral", policy=policy)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[acp_entry(hosted)])
    prompt = agent.prompt(session_id, '/mcp proj sleep {"seconds": 600}')
    agent.wait_for(lambda: "tools/call" in hosted.inner_methods, what="the tools/call to reach the client's server")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    calls = [m for m in agent.agent_requests if m["method"] == "mcp/message" and m["params"]["method"] == "tools/call"]
    agent.wait_for(lambda: hosted.cancelled_acp_ids, what="$/cancel_request")
    assert hosted.cancelled_acp_ids == [calls[0]["id"]]


def test_a_connection_the_client_opens_after_its_turn_was_cancelled_is_disconnected(launch, hosted):
    """No leaked client resources: an `mcp/connect` the client answers 200 ms after the agent's
    `$/cancel_request` for it (the turn was cancelled meanwhile) opened a connection nobody will
    use; the agent sends `mcp/disconnect` for it at once."""
    held: dict = {}
    handlers = {**hosted.handlers(), "mcp/connect": lambda client, request: held.update({request["id"]: request})}

    def answer_late(client, notification) -> None:
        request = held.pop(notification["params"]["requestId"], None)
        if request is not None:
            gevent.spawn_later(0.2, hosted.handlers()["mcp/connect"], client, request)

    policy = ClientPolicy(handlers=handlers, notification_handlers={"$/cancel_request": answer_late})
    agent = launch("--ephemeral", policy=policy)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[acp_entry(hosted)])
    prompt = agent.prompt(session_id, '/mcp proj echo {"text": "too late"}')
    agent.wait_for(lambda: held, what="the mcp/connect")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    agent.wait_for(lambda: hosted.disconnected, what="the mcp/disconnect of the late connection")
    assert hosted.disconnected == hosted.connections == ["client-conn-1"]
    assert hosted.inner_methods == []  # nothing was sent on it


def test_session_stdio_server_is_started_for_the_session_and_stopped_at_its_end(launch):
    """Session stdio servers: started in the background at session/new, used by a turn, reaped when the session ends."""
    agent = launch("--ephemeral", "--idle-timeout", "0.3")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[stdio_entry("st", SDK_TOOLS)])
    assert agent.prompt(session_id, '/mcp st echo {"text": "from stdio"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "from stdio"
    agent.prompt(session_id, "/mcp st pid").result()
    pid = int(agent.updates(session_id)[-2]["content"]["text"])
    # The end of the session (here: idle eviction drops it from memory) stops and reaps its server.
    assert wait_gone(pid)


def test_unknown_or_broken_session_servers_fail_the_tool_call_clearly(launch):
    """A name the session lacks, or a server that cannot start: the tool call fails with a message; the turn ends normally."""
    agent = launch("--ephemeral")
    agent.initialize()
    broken = {"name": "broken", "command": "/nonexistent/server", "args": [], "env": []}
    session_id = agent.new_session(mcp_servers=[broken, {"type": "http", "name": "web", "url": "http://127.0.0.1:9/", "headers": []}])
    for text, expected in [("/mcp nope echo", "no MCP server named 'nope'"),
                           ("/mcp broken echo", "/nonexistent/server"),
                           ("/mcp web echo", "cannot connect to MCP server 'web' at http://127.0.0.1:9/")]:
        assert agent.prompt(session_id, text).result() == {"stopReason": "end_turn"}
        assert tool_status(agent, session_id) == "failed"
        update = [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]
        assert expected in update["content"][0]["content"]["text"]


def test_demo_mcp_command_reaches_provided_servers_by_name(launch):
    """Demo grammar: /mcp SERVER TOOL [JSON] also reaches servers this process provides (in-process demo tools)."""
    agent = launch("--ephemeral")
    agent.initialize()
    session_id = agent.new_session()
    assert agent.prompt(session_id, '/mcp demo echo {"text": "in process"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "in process"
    prompt = agent.prompt(session_id, '/mcp demo sleep {"seconds": 600}')
    agent.wait_for(lambda: any(u["sessionUpdate"] == "tool_call" for u in agent.updates(session_id)[-3:]), what="tool call")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}


def test_stdio_servers_declared_in_load_and_resume_are_started(launch, tmp_path):
    """session/load and session/resume carry mcpServers too: their stdio servers are started for the
    session, and a server of the previous declaration is stopped and reaped."""
    agent = launch("--state-dir", str(tmp_path / "state"))
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[stdio_entry("st", SDK_TOOLS)])
    agent.prompt(session_id, "/mcp st pid").result()
    first_pid = int(agent.updates(session_id)[-2]["content"]["text"])
    for method in ("session/load", "session/resume"):
        agent.call(method, {"sessionId": session_id, "cwd": "/tmp", "mcpServers": [stdio_entry("again", SDK_TOOLS)]})
        assert agent.prompt(session_id, '/mcp again echo {"text": "after ' + method + '"}').result() == {"stopReason": "end_turn"}
        assert said(agent.updates(session_id)).endswith("after " + method)
    assert wait_gone(first_pid)


def test_session_stdio_server_comes_back_after_idle_eviction_S15(launch):
    """S15: eviction stops a session's stdio servers; the first prompt after revival starts them again."""
    agent = launch("--ephemeral", "--idle-timeout", "0.3")
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[stdio_entry("st", SDK_TOOLS)])
    agent.prompt(session_id, "/mcp st pid").result()
    first_pid = int(agent.updates(session_id)[-2]["content"]["text"])
    assert wait_gone(first_pid)  # evicted: its server was reaped
    assert agent.prompt(session_id, '/mcp st echo {"text": "revived"}').result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).endswith("revived")
    assert tool_status(agent, session_id) == "completed"
