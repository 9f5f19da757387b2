"""Limits on the MCP servers a session declares: the `--max-mcp-servers` cap (every transport
counts), servers that fail to start (reported at WARNING and to the turn that uses them), many
servers starting while control requests are answered, and a low descriptor limit."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.errors import InvalidParams, TooManyMcpServers
from acp_green.rpc.params import Params
from acp_green.protocol.session_methods import declared_mcp_servers
from acp_green.tools.rig.reaper import descendants, kill_all
from tests.helpers import process_gone, wait_gone
from tests.mcp_helpers import RECORDER, stdio_entry

SLEEPER = {"name": "sleeper", "command": sys.executable, "args": ["-c", "import time; time.sleep(600)"], "env": []}


def not_started(count: int) -> list[dict[str, Any]]:
    """`count` declared servers of every transport acp_green does not start on its own."""
    kinds = [
        lambda i: {"type": "http", "name": f"h{i}", "url": "http://127.0.0.1:9/", "headers": []},
        lambda i: {"type": "sse", "name": f"e{i}", "url": "http://127.0.0.1:9/sse", "headers": []},
        lambda i: {"type": "acp", "name": f"a{i}", "serverId": f"client-{i}"},
    ]
    return [kinds[i % 3](i) for i in range(count)]


def assert_too_many(error: dict[str, Any], method: str, count: int, limit: int) -> None:
    assert error["code"] == -32602
    assert error["data"] == {"reason": "too_many_mcp_servers", "field": "mcpServers", "count": count, "limit": limit}
    assert method in error["message"] and "mcpServers" in error["message"]
    assert str(count) in error["message"] and str(limit) in error["message"]


def last_tool_update(agent: Any, session_id: str) -> dict[str, Any]:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]


def tool_text(agent: Any, session_id: str) -> str:
    return last_tool_update(agent, session_id)["content"][0]["content"]["text"]


def mcp_pid(agent: Any, session_id: str, server: str) -> int:
    assert agent.prompt(session_id, f"/mcp {server} pid").result() == {"stopReason": "end_turn"}
    return int(tool_text(agent, session_id))


def test_declared_mcp_servers_are_capped_for_new_load_and_resume_every_transport_counting(launch, tmp_path):
    """MCP limits: 64 declared servers (the default cap) are accepted, 65 refused with -32602
    too_many_mcp_servers by session/new, session/load and session/resume; a refusal creates no session,
    starts no process and leaves the session's running servers alone."""
    agent = launch("--state-dir", str(tmp_path / "state"))
    agent.initialize()
    refused = agent.request("session/new", {"cwd": "/tmp", "mcpServers": [*not_started(64), SLEEPER]}).error()
    assert_too_many(refused, "session/new", 65, 64)
    assert agent.call("session/list", {})["sessions"] == []
    session_id = agent.new_session(mcp_servers=[*not_started(63), stdio_entry("st", RECORDER)])
    pid = mcp_pid(agent, session_id, "st")
    # The only process the agent ever started: the refused declaration's sleeper never was.
    assert [p.pid for p in descendants(agent.pid)] == [pid]
    for method in ("session/load", "session/resume"):
        params = {"sessionId": session_id, "cwd": "/tmp", "mcpServers": [*not_started(64), SLEEPER]}
        assert_too_many(agent.request(method, params).error(), method, 65, 64)
        assert mcp_pid(agent, session_id, "st") == pid  # the declaration in force is untouched
    assert [p.pid for p in descendants(agent.pid)] == [pid]
    for method in ("session/load", "session/resume"):
        agent.call(method, {"sessionId": session_id, "cwd": "/tmp", "mcpServers": [*not_started(63), stdio_entry("st", RECORDER)]})
    assert wait_gone(pid)  # accepted: the new declaration replaced the old one


def test_max_mcp_servers_option_sets_the_cap(launch):
    """MCP limits: --max-mcp-servers N moves the cap; 0 refuses any declared server."""
    agent = launch("--ephemeral", "--max-mcp-servers", "2")
    agent.initialize()
    agent.new_session(mcp_servers=not_started(2))
    assert_too_many(agent.request("session/new", {"cwd": "/tmp", "mcpServers": not_started(3)}).error(), "session/new", 3, 2)
    none = launch("--ephemeral", "--max-mcp-servers", "0")
    none.initialize()
    none.new_session()
    assert_too_many(none.request("session/new", {"cwd": "/tmp", "mcpServers": not_started(1)}).error(), "session/new", 1, 0)


def test_a_server_that_fails_to_start_is_logged_at_warning_and_fails_the_turns_tool_call(launch):
    """MCP limits: a missing or empty command, or a server that exits at once, is logged at WARNING
    with its name and why; `/mcp` on it fails its tool call with that reason and the turn ends normally."""
    agent = launch("--ephemeral")
    agent.initialize()
    missing = {"name": "ghost", "command": "/nonexistent/mcp-server", "args": [], "env": []}
    quits = {"name": "quitter", "command": sys.executable, "args": [RECORDER, "--exit-now"], "env": []}
    blank = {"name": "blank", "command": "", "args": [], "env": []}
    session_id = agent.new_session(mcp_servers=[missing, quits, blank])
    for name, reason in [("ghost", "No such file or directory"), ("quitter", "exited with code 4"), ("blank", "no command")]:
        assert agent.prompt(session_id, f"/mcp {name} echo").result() == {"stopReason": "end_turn"}
        update = last_tool_update(agent, session_id)
        assert update["status"] == "failed"
        text = tool_text(agent, session_id)
        assert f"MCP server {name!r} failed to start" in text and reason in text
        log = agent.wait_for(lambda: [line for line in agent.stderr.decode().splitlines() if f"'{name}'" in line],
                             what=f"a log line about {name}")
        assert any(line.startswith("acp-green WARNING") and "failed to start" in line and reason in line for line in log), log
    assert agent.call("session/list", {})["sessions"]  # still answering


def test_many_servers_start_while_control_is_answered_and_are_all_reaped_at_eof_S13(launch):
    """MCP limits, S10/S13: 40 stdio servers starting for one session; control requests are
    answered meanwhile, every server works, and at EOF every one is reaped (no orphan)."""
    agent = launch("--ephemeral")
    agent.initialize()
    # Servers that outlive their stdin: only the agent's close path (EOF, SIGTERM, SIGKILL) ends them.
    entries = [{"name": f"s{i}", "command": sys.executable, "args": [RECORDER, "--ignore-eof"], "env": []} for i in range(40)]
    opening = agent.request("session/new", {"cwd": "/tmp", "mcpServers": entries})
    lists = [agent.request("session/list", {}) for _ in range(20)]
    session_id = opening.result()["sessionId"]
    modes = [agent.request("session/set_mode", {"sessionId": session_id, "modeId": m}) for m in ("code", "ask") * 10]
    assert all(p.result() is not None for p in lists + modes)
    assert mcp_pid(agent, session_id, "s39") > 0
    agent.wait_for(lambda: len(descendants(agent.pid)) == 40, what="40 server processes")
    pids = [p.pid for p in descendants(agent.pid)]
    agent.tracker.snapshot()
    agent.close_input()
    try:
        assert agent.wait_exit() == 0
        agent.wait_for(lambda: all(process_gone(pid) for pid in pids), what="every server process reaped")
        assert agent.survivors() == []
    finally:
        kill_all(agent.survivors())


def serve_with_fd_limit(launch: Any, limit: int) -> Any:
    """`acp-green serve --ephemeral` under RLIMIT_NOFILE = limit (set before exec, as `ulimit -n` would)."""
    code = ("import os, resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
            "os.execv(sys.executable, [sys.executable, '-m', 'acp_green', 'serve', '--ephemeral'])")
    return launch(command=[sys.executable, "-c", code])


def test_64_servers_under_a_256_descriptor_limit_all_start(launch):
    """MCP limits: with `ulimit -n 256` the default cap's 64 stdio servers (3 descriptors
    each) all start and answer; nothing is logged at WARNING."""
    agent = serve_with_fd_limit(launch, 256)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[stdio_entry(f"s{i}", RECORDER) for i in range(64)])
    assert mcp_pid(agent, session_id, "s63") > 0
    agent.wait_for(lambda: len(descendants(agent.pid)) == 64, what="64 server processes")
    for name in ("s0", "s31", "s62"):
        assert mcp_pid(agent, session_id, name) > 0
    assert "WARNING" not in agent.stderr.decode()


def test_servers_beyond_the_descriptor_limit_are_reported_and_the_agent_stays_responsive(launch):
    """MCP limits: under a descriptor limit too low for 64 servers, the ones that cannot
    start (EMFILE) are each logged at WARNING with the reason and fail their tool call with it; the
    others work, control requests are answered, and the agent still exits cleanly at EOF."""
    agent = serve_with_fd_limit(launch, 96)
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[stdio_entry(f"s{i}", RECORDER) for i in range(64)])
    assert agent.prompt(session_id, "/mcp s63 echo").result() == {"stopReason": "end_turn"}
    assert last_tool_update(agent, session_id)["status"] == "failed"
    assert "MCP server 's63' failed to start" in tool_text(agent, session_id)
    assert "Too many open files" in tool_text(agent, session_id)
    assert mcp_pid(agent, session_id, "s0") > 0
    started = len(descendants(agent.pid))
    warnings = agent.wait_for(
        lambda: [line for line in agent.stderr.decode().splitlines() if "WARNING" in line and "Too many open files" in line]
        if agent.stderr.decode().count("Too many open files") >= 64 - started else None,
        what="a warning for each server that could not start")
    assert {line.split("'")[1] for line in warnings} == {f"s{i}" for i in range(started, 64)}
    assert agent.call("session/set_mode", {"sessionId": session_id, "modeId": "code"}) == {}
    assert agent.new_session()
    agent.close_input()
    assert agent.wait_exit() == 0


entries = st.one_of(
    st.dictionaries(st.sampled_from(["name", "command", "type", "url"]), st.text(max_size=4), max_size=2),
    st.none(), st.booleans(), st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2),
)


@settings(deadline=None, max_examples=150)
@given(servers=st.lists(entries, max_size=70), limit=st.integers(min_value=0, max_value=70),
       method=st.sampled_from(["session/new", "session/load", "session/resume"]))
def test_mcp_servers_check_refuses_exactly_the_lists_over_the_cap(servers, limit, method):
    """MCP limits, property: a list longer than the cap is refused with too_many_mcp_servers
    whatever its entries hold; one within the cap is refused only for an entry that is not an object,
    and otherwise comes back unchanged."""
    params = {"mcpServers": servers}
    try:
        accepted = declared_mcp_servers(Params(params, method), required=True, limit=limit)
    except TooManyMcpServers as exc:
        assert len(servers) > limit
        assert exc.code == -32602 and exc.data == {"reason": "too_many_mcp_servers", "field": "mcpServers",
                                                   "count": len(servers), "limit": limit}
    except InvalidParams as exc:
        assert len(servers) <= limit and not all(isinstance(s, dict) for s in servers)
        assert exc.data == {"field": "mcpServers"}
    else:
        assert len(servers) <= limit and accepted == servers
