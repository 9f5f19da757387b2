"""Inbound MCP-over-ACP bridges end to end: the client connects to MCP servers acp_green provides
(the demo's in-process tool server, and real stdio servers given with --provide-mcp) (S7)."""

from __future__ import annotations

import json
import signal

import pytest

from acp_green.tools.rig.client import ClientPolicy
from tests.helpers import process_gone, wait_gone
from tests.mcp_helpers import RECORDER, SDK_TOOLS, call_tool, connect, initialize, provide, text_of, wait_file_lines
from tests.mcp_peer import SdkClientOverAcp

DEMO = "acp-green:demo"
SDK = "acp-green:sdk"
REC = "acp-green:rec"


def serve_args(*extra: str) -> list[str]:
    return ["--ephemeral", *provide("sdk", SDK_TOOLS), *provide("rec", RECORDER), *extra]


def test_initialize_announces_provided_servers_and_acp_capability_S7(launch):
    """Command line: provided servers in _meta.acpGreen.providedMcpServers; mcpCapabilities.acp is true."""
    agent = launch(*serve_args())
    result = agent.initialize()
    assert result["agentCapabilities"]["mcpCapabilities"]["acp"] is True
    announced = result["_meta"]["acpGreen"]["providedMcpServers"]
    assert announced == [
        {"name": "demo", "serverId": DEMO},
        {"name": "sdk", "serverId": SDK},
        {"name": "rec", "serverId": REC},
    ]


@pytest.mark.parametrize("server_id", [DEMO, SDK])
def test_sdk_client_session_lists_and_calls_tools_over_mcp_message_S7(launch, server_id):
    """Acceptance: the official mcp ClientSession, its messages carried in mcp/message, lists and calls tools."""
    agent = launch(*serve_args())
    agent.initialize()
    connection_id, _pid = connect(agent, server_id)

    async def scenario(session):
        await session.initialize()
        tools = await session.list_tools()
        echoed = await session.call_tool("echo", {"text": "over acp"})
        return [t.name for t in tools.tools], echoed

    names, echoed = SdkClientOverAcp(agent, connection_id).run(scenario)
    assert {"echo", "sleep"} <= set(names)
    assert echoed.content[0].text == "over acp"
    assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}


@pytest.mark.parametrize("server_id", [DEMO, SDK])
def test_S7_concurrent_mcp_requests_complete_out_of_order(launch, server_id):
    """S7: a slow tools/call written before a fast one; the fast one is answered while the slow one runs."""
    agent = launch(*serve_args())
    agent.initialize()
    connection_id, _ = connect(agent, server_id)
    initialize(agent, connection_id)
    slow = call_tool(agent, connection_id, "sleep", {"seconds": 600}, request_id="slow")
    fast = call_tool(agent, connection_id, "echo", {"text": "quick"}, request_id="fast")
    agent.send(slow, fast)
    assert text_of(agent.pending_for(fast).result()) == "quick"
    assert not agent.pending_for(slow).done
    agent.notify("$/cancel_request", {"requestId": "slow"})
    assert agent.pending_for(slow).error()["code"] == -32800


def test_S7_notification_written_after_request_reaches_server_after_it(launch, tmp_path):
    """S7: messages of one connection reach the MCP server in receive order; a notification never overtakes."""
    record = str(tmp_path / "record.txt")
    agent = launch(*serve_args(), env={"RECORD": record})
    agent.initialize()
    connection_id, _ = connect(agent, REC)
    initialize(agent, connection_id)
    batch = []
    for i in range(10):
        batch.append(call_tool(agent, connection_id, "echo", {"text": f"r{i}"}, request_id=f"r{i}"))
        batch.append({"jsonrpc": "2.0", "method": "mcp/message",
                      "params": {"connectionId": connection_id, "method": "notifications/progress",
                                 "params": {"progressToken": f"n{i}", "progress": i}}})
    agent.send(*batch)  # one write
    for request in batch[::2]:
        agent.pending_for(request).result()
    lines = wait_file_lines(record, lambda ls: sum('"n9"' in l for l in ls) == 1)
    seen = []
    for line in lines:
        if not line.startswith("IN "):
            continue
        inner = json.loads(line[3:])
        if inner.get("method") == "tools/call":
            seen.append(inner["params"]["arguments"]["text"])
        elif inner.get("method") == "notifications/progress":
            seen.append(inner["params"]["progressToken"])
    assert seen == [x for i in range(10) for x in (f"r{i}", f"n{i}")]


def test_S7_cancel_request_for_in_flight_mcp_message(launch, tmp_path):
    """S7: $/cancel_request -> we answer -32800, send notifications/cancelled with OUR id, drop the late reply."""
    record = str(tmp_path / "record.txt")
    agent = launch(*serve_args(), env={"RECORD": record})
    agent.initialize()
    connection_id, _ = connect(agent, REC)
    initialize(agent, connection_id)
    slow = call_tool(agent, connection_id, "sleep", {"seconds": 0.5, "late": True}, request_id="slow-1")
    agent.send(slow)
    lines = wait_file_lines(record, lambda ls: any('"tools/call"' in l for l in ls))
    our_id = next(json.loads(l[3:])["id"] for l in lines if l.startswith("IN ") and '"tools/call"' in l)
    assert our_id != "slow-1"  # acp_green's own id space towards the MCP server
    agent.notify("$/cancel_request", {"requestId": "slow-1"})
    assert agent.pending_for(slow).error()["code"] == -32800
    lines = wait_file_lines(record, lambda ls: any(l.startswith("OUT ") and f'"id": {our_id},' in l for l in ls))
    cancelled = [json.loads(l[3:]) for l in lines if l.startswith("IN ") and "notifications/cancelled" in l]
    assert [c["params"]["requestId"] for c in cancelled] == [our_id]
    # The late reply was written by the server; a round trip after it proves it was read and dropped.
    after = call_tool(agent, connection_id, "echo", {"text": "still here"})
    agent.send(after)
    assert text_of(agent.pending_for(after).result()) == "still here"
    answers = [m for m in agent.received() if m.get("id") == "slow-1" and "method" not in m]
    assert len(answers) == 1 and answers[0]["error"]["code"] == -32800


def test_S7_inner_notifications_cancelled_is_translated_to_our_id(launch, tmp_path):
    """S7: an MCP client's notifications/cancelled names the request by its ACP id; the server gets OUR id,
    and the ACP request is answered -32800."""
    record = str(tmp_path / "record.txt")
    agent = launch(*serve_args(), env={"RECORD": record})
    agent.initialize()
    connection_id, _ = connect(agent, REC)
    initialize(agent, connection_id)
    slow = call_tool(agent, connection_id, "sleep", {"seconds": 600}, request_id="slow-2")
    agent.send(slow)
    lines = wait_file_lines(record, lambda ls: any('"tools/call"' in l for l in ls))
    our_id = next(json.loads(l[3:])["id"] for l in lines if l.startswith("IN ") and '"tools/call"' in l)
    agent.notify("mcp/message", {"connectionId": connection_id, "method": "notifications/cancelled",
                                 "params": {"requestId": "slow-2", "reason": "user gave up"}})
    assert agent.pending_for(slow).error()["code"] == -32800
    lines = wait_file_lines(record, lambda ls: any("notifications/cancelled" in l for l in ls))
    cancelled = [json.loads(l[3:]) for l in lines if l.startswith("IN ") and "notifications/cancelled" in l]
    assert cancelled[0]["params"] == {"requestId": our_id, "reason": "user gave up"}


def test_S7_acp_id_alias_and_clear_errors_for_unknown_and_closed(launch):
    """S7: unknown serverId, unknown or closed connectionId get errors, never a hang; the older acpId works."""
    agent = launch(*serve_args())
    agent.initialize()
    error = agent.request("mcp/connect", {"serverId": "nope"}).error()
    assert (error["code"], error["data"]["reason"]) == (-32602, "unknown_mcp_server")
    connection_id, _ = connect(agent, DEMO, key="acpId")
    error = agent.request("mcp/message", {"connectionId": "mcpc-nope", "method": "ping"}).error()
    assert (error["code"], error["data"]["reason"], error["data"]["state"]) == (-32602, "unknown_connection", "unknown")
    mark = len(agent.received())
    agent.notify("mcp/message", {"connectionId": "mcpc-nope", "method": "notifications/initialized"})  # ignored (S6)
    disconnect = agent.request("mcp/disconnect", {"connectionId": connection_id})
    assert disconnect.result() == {}
    # An error for the notification would have been queued when it was read, before this answer.
    assert [m for m in agent.received()[mark:] if "method" not in m] == [disconnect.response()], "a notification was answered"
    error = agent.request("mcp/message", {"connectionId": connection_id, "method": "ping"}).error()
    assert (error["data"]["reason"], error["data"]["state"]) == ("unknown_connection", "closed")
    error = agent.request("mcp/disconnect", {"connectionId": connection_id}).error()
    assert error["data"]["state"] == "closed"
    assert agent.request("mcp/message", {"connectionId": connection_id}).error()["code"] == -32602
    session_id = agent.new_session()
    assert agent.prompt(session_id, "still alive").result() == {"stopReason": "end_turn"}


def test_connect_fails_clearly_for_missing_command_and_instant_exit(launch):
    """A server command that does not exist, or exits at once: mcp/connect fails clearly; the connection survives."""
    agent = launch("--ephemeral", "--provide-mcp", "missing=/nonexistent/mcp-server --x",
                   *provide("quits", RECORDER, "--exit-now"))
    agent.initialize()
    error = agent.request("mcp/connect", {"serverId": "acp-green:missing"}).error()
    assert (error["code"], error["data"]["reason"]) == (-32603, "mcp_connect_failed")
    assert "/nonexistent/mcp-server" in error["message"]
    error = agent.request("mcp/connect", {"serverId": "acp-green:quits"}).error()
    assert error["data"]["reason"] == "mcp_connect_failed"
    assert "exited" in error["message"] and "code 4" in error["message"]
    assert agent.prompt(agent.new_session(), "fine").result() == {"stopReason": "end_turn"}


def test_server_crash_mid_request_fails_pending_at_once_and_closes_bridge(launch):
    """A server that dies mid-request: every pending request errors at once, the bridge is closed, all else lives."""
    agent = launch(*serve_args())
    agent.initialize()
    connection_id, pid = connect(agent, REC)
    initialize(agent, connection_id)
    slow = call_tool(agent, connection_id, "sleep", {"seconds": 600})
    crash = call_tool(agent, connection_id, "crash", {})
    agent.send(slow, crash)
    for request in (slow, crash):
        error = agent.pending_for(request).error()
        assert error["data"]["reason"] == "mcp_server_exited" and "code 7" in error["message"]
    assert wait_gone(pid)
    error = agent.request("mcp/message", {"connectionId": connection_id, "method": "ping"}).error()
    assert error["data"]["state"] == "closed"
    assert agent.prompt(agent.new_session(), "fine").result() == {"stopReason": "end_turn"}


def test_garbage_stdout_stderr_flood_and_multi_megabyte_results(launch):
    """Garbage lines on stdout are skipped, a stderr flood is drained, a several-MB result arrives whole."""
    agent = launch(*serve_args())
    agent.initialize()
    connection_id, _ = connect(agent, REC)
    initialize(agent, connection_id)
    garbage = call_tool(agent, connection_id, "garbage", {})
    flood = call_tool(agent, connection_id, "flood", {"mb": 8})
    big = call_tool(agent, connection_id, "big", {"size": 5 << 20})
    agent.send(garbage, flood, big)
    assert text_of(agent.pending_for(garbage).result()) == "after garbage"
    assert text_of(agent.pending_for(flood).result()) == "flooded"
    assert len(text_of(agent.pending_for(big).result(timeout=60))) == 5 << 20
    demo_id, _ = connect(agent, DEMO)
    demo_big = call_tool(agent, demo_id, "big", {"size": 4 << 20})
    agent.send(demo_big)
    assert len(text_of(agent.pending_for(demo_big).result(timeout=60))) == 4 << 20


def test_server_originated_requests_and_notifications_are_relayed_to_the_client_S7(launch):
    """S7 both ways: the stdio server's own request and notification reach the client as mcp/message."""
    roots = {"roots": [{"uri": "file:///work", "name": "work"}]}
    policy = ClientPolicy(handlers={"mcp/message": lambda client, request: client.respond(request["id"], roots)})
    agent = launch(*serve_args(), policy=policy)
    agent.initialize()
    connection_id, _ = connect(agent, REC)
    initialize(agent, connection_id)
    ask = call_tool(agent, connection_id, "ask", {})
    agent.send(ask)
    assert json.loads(text_of(agent.pending_for(ask).result())) == roots
    relayed = [m for m in agent.agent_requests if m["method"] == "mcp/message"]
    assert [(m["params"]["connectionId"], m["params"]["method"]) for m in relayed] == [(connection_id, "roots/list")]
    notes = [m for m in agent.received() if m.get("method") == "mcp/message" and "id" not in m]
    assert [n["params"]["method"] for n in notes] == ["notifications/message"]


def test_no_orphans_after_mcp_disconnect_S7(launch):
    """S7: mcp/disconnect closes the bridge and reaps its process before it answers (checked by pid)."""
    agent = launch(*serve_args())
    agent.initialize()
    connection_id, pid = connect(agent, SDK)
    assert pid is not None and not process_gone(pid)
    assert agent.call("mcp/disconnect", {"connectionId": connection_id}) == {}
    assert process_gone(pid)


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_no_orphans_after_eof_or_sigterm_S13(launch, how):
    """S13: on EOF (within the grace) or SIGTERM, every MCP process the agent started is gone (by pid)."""
    agent = launch(*serve_args("--shutdown-grace", "2", *provide("stubborn", RECORDER, "--ignore-eof")))
    agent.initialize()
    pids = []
    for server_id in (SDK, "acp-green:stubborn", REC):
        connection_id, pid = connect(agent, server_id)
        pids.append(pid)
    initialize(agent, connection_id)
    in_flight = call_tool(agent, connection_id, "sleep", {"seconds": 600})
    agent.send(in_flight)
    from tests.mcp_helpers import SDK_TOOLS as script, stdio_entry

    session_id = agent.new_session(mcp_servers=[stdio_entry("st", script)])
    result = agent.prompt(session_id, "/mcp st pid").result()
    assert result == {"stopReason": "end_turn"}
    pids.append(int(agent.updates(session_id)[-2]["content"]["text"]))
    assert not any(process_gone(p) for p in pids)
    if how == "eof":
        agent.close_input()
    else:
        agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=30) == 0
    assert agent.pending_for(in_flight).error()["code"] == -32800
    assert all(wait_gone(p) for p in pids)


def _stall_args(tmp_path) -> tuple[list[str], object]:
    pid_file = tmp_path / "stall.pid"
    return ["--provide-mcp", f"stall=sh -c 'echo $$ > {pid_file}; exec sleep 600'"], pid_file


def _wait_pid(agent, pid_file) -> int:
    agent.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the stalled server's pid")
    return int(pid_file.read_text())


def test_S7_connect_that_never_becomes_ready_is_cancellable_and_reaped(launch, tmp_path):
    """S7: mcp/connect answers only when the bridge can carry messages; cancelling it reaps the process."""
    args, pid_file = _stall_args(tmp_path)
    agent = launch("--ephemeral", *args)
    agent.initialize()
    pending = agent.request("mcp/connect", {"serverId": "acp-green:stall"}, request_id="c1")
    pid = _wait_pid(agent, pid_file)
    assert not pending.done
    agent.notify("$/cancel_request", {"requestId": "c1"})
    assert pending.error()["code"] == -32800
    assert wait_gone(pid)


def test_S13_shutdown_during_a_pending_connect_reaps_the_process(launch, tmp_path):
    """S13: EOF while mcp/connect waits for its server: the agent exits 0 and the server is gone."""
    args, pid_file = _stall_args(tmp_path)
    agent = launch("--ephemeral", "--shutdown-grace", "30", *args)
    agent.initialize()
    pending = agent.request("mcp/connect", {"serverId": "acp-green:stall"})
    pid = _wait_pid(agent, pid_file)
    agent.close_input()
    assert agent.wait_exit(timeout=60) == 0
    assert pending.error()["data"]["reason"] == "mcp_connect_failed"
    assert wait_gone(pid)


def test_S7_each_connect_gets_a_fresh_connection_and_its_own_process(launch):
    """S7: two mcp/connect to one provided server: two connectionIds, two processes, independent lifetimes."""
    agent = launch(*serve_args())
    agent.initialize()
    (first, pid1), (second, pid2) = connect(agent, SDK), connect(agent, SDK)
    assert first != second and pid1 != pid2
    assert agent.call("mcp/disconnect", {"connectionId": first}) == {}
    assert process_gone(pid1) and not process_gone(pid2)
    initialize(agent, second)
    echo = call_tool(agent, second, "echo", {"text": "second lives"})
    agent.send(echo)
    assert text_of(agent.pending_for(echo).result()) == "second lives"
