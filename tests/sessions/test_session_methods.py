"""In-process tests of the stored-session methods: load, resume, list, delete, close (S2, S8, S15)."""

from __future__ import annotations

import json

from acp_green.demo import DemoAgent
from tests.agents import HeldAfterCancelAgent
from tests.helpers import chunk_texts

NEW = {"cwd": "/tmp", "mcpServers": []}


def _start(inprocess, tmp_path, **options):
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"), **options)
    harness.client.initialize()
    return harness


def test_initialize_advertises_session_capabilities(inprocess, tmp_path):
    """loadSession and sessionCapabilities list/delete/resume/close are advertised."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"))
    caps = harness.client.initialize()["agentCapabilities"]
    assert caps["loadSession"] is True
    for name in ("list", "delete", "resume", "close"):
        assert caps["sessionCapabilities"][name] == {}


def test_session_load_replays_history_then_answers(inprocess, tmp_path):
    """session/load replays every stored turn as session/update before its response."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "first").result() == {"stopReason": "end_turn"}
    assert client.prompt(sid, "/stream 3 8").result() == {"stopReason": "end_turn"}
    before = len(client.received())
    pending = client.request("session/load", {"sessionId": sid, "cwd": "/var", "mcpServers": []})
    result = pending.result()
    assert result["modes"]["currentModeId"] == "ask"
    # Everything between the request and the response is the replay, in order, then the
    # session-level updates (commands, title): nothing for the session after the response (S5).
    arrived = client.received()[before:]
    response_at = next(i for i, m in enumerate(arrived) if m.get("id") == pending.id)
    replay = [m["params"]["update"] for m in arrived[:response_at]]
    assert [u["sessionUpdate"] for u in replay] == [
        "user_message_chunk", "agent_message_chunk",
        "user_message_chunk", "agent_message_chunk", "agent_message_chunk", "agent_message_chunk",
        "available_commands_update", "session_info_update",
    ]
    assert chunk_texts(replay, "user_message_chunk") == ["first", "/stream 3 8"]
    assert chunk_texts(replay) == ["first", "0:......", "1:......", "2:......"]
    # The load took the client's cwd.
    assert client.call("session/list", {"cwd": "/var"})["sessions"][0]["sessionId"] == sid


def test_session_resume_does_not_replay(inprocess, tmp_path):
    """session/resume answers without replaying the conversation: only the session-level updates
    (commands, title) precede its response."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    client.prompt(sid, "remember me").result()
    before = len(client.received())
    pending = client.request("session/resume", {"sessionId": sid, "cwd": "/tmp"})
    pending.result()
    arrived = client.received()[before:]
    response_at = next(i for i, m in enumerate(arrived) if m.get("id") == pending.id)
    kinds = [m["params"]["update"]["sessionUpdate"] for m in arrived[:response_at]]
    assert kinds == ["available_commands_update", "session_info_update"], arrived[:response_at]
    assert client.prompt(sid, "again").result() == {"stopReason": "end_turn"}


def test_session_load_unknown_is_resource_not_found(inprocess, tmp_path):
    """Loading, resuming or closing a session that was never stored: -32002 unknown_session (DESIGN §6)."""
    client = _start(inprocess, tmp_path).client
    for method in ("session/load", "session/resume", "session/close"):
        error = client.request(method, {"sessionId": "sess_nope", "cwd": "/tmp", "mcpServers": []}).error()
        assert error["code"] == -32002 and error["data"] == {"reason": "unknown_session", "sessionId": "sess_nope"}, (method, error)


def test_session_list_pages_and_filters_by_cwd(inprocess, tmp_path):
    """session/list: newest first, cursor pagination without gaps or repeats, cwd filter."""
    harness = _start(inprocess, tmp_path)
    harness.server.protocol.session_methods.list_page_size = 3
    client = harness.client
    in_a = [client.new_session("/a") for _ in range(5)]
    in_b = [client.new_session("/b") for _ in range(2)]
    seen, cursor, pages = [], None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = client.call("session/list", params)
        seen.extend(s["sessionId"] for s in page["sessions"])
        pages += 1
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(in_a + in_b) and len(seen) == 7
    assert seen == list(reversed(in_a + in_b))  # most recently updated first
    only_b = client.call("session/list", {"cwd": "/b"})["sessions"]
    assert [s["sessionId"] for s in only_b] == list(reversed(in_b))
    assert all(s["cwd"] == "/b" and "updatedAt" in s for s in only_b)
    assert client.call("session/list", {"cwd": "/nowhere"}) == {"sessions": []}
    error = client.request("session/list", {"cursor": "not-a-cursor!"}).error()
    assert error["code"] == -32602 and error["data"]["field"] == "cursor"


def test_session_title_from_first_prompt(inprocess, tmp_path):
    """session_info_update carries the first line of the first prompt as title; list shows it."""
    client = _start(inprocess, tmp_path).client
    sid = client.new_session()
    client.prompt(sid, "\n  Fix the parser  \nmore detail").result()
    infos = [u for u in client.updates(sid) if u["sessionUpdate"] == "session_info_update"]
    assert [i["title"] for i in infos] == ["Fix the parser"]
    client.prompt(sid, "another").result()
    assert len([u for u in client.updates(sid) if u["sessionUpdate"] == "session_info_update"]) == 1
    assert client.call("session/list", {})["sessions"][0]["title"] == "Fix the parser"


def test_session_delete_forgets_and_is_idempotent(inprocess, tmp_path):
    """session/delete: gone from list and load; deleting an unknown id succeeds silently."""
    client = _start(inprocess, tmp_path).client
    keep, drop = client.new_session(), client.new_session()
    client.prompt(drop, "bye").result()
    assert client.call("session/delete", {"sessionId": drop}) == {}
    assert [s["sessionId"] for s in client.call("session/list", {})["sessions"]] == [keep]
    error = client.request("session/load", {"sessionId": drop, "cwd": "/tmp", "mcpServers": []}).error()
    assert error["data"]["reason"] == "unknown_session"
    assert client.request("session/prompt", client.prompt_params(drop, "x")).error()["data"]["reason"] == "unknown_session"
    assert client.call("session/delete", {"sessionId": drop}) == {}
    assert client.call("session/delete", {"sessionId": "sess_never"}) == {}


def test_session_close_frees_and_a_later_request_revives(inprocess, tmp_path):
    """session/close frees the live session; it stays stored and comes back when named again."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    client.prompt(sid, "one").result()
    assert client.call("session/close", {"sessionId": sid}) == {}
    assert not harness.server.sessions.is_live(sid)
    assert [s["sessionId"] for s in client.call("session/list", {})["sessions"]] == [sid]
    assert client.prompt(sid, "two").result() == {"stopReason": "end_turn"}
    error = client.request("session/close", {"sessionId": "sess_never"}).error()
    assert error["data"]["reason"] == "unknown_session"


# -- a prompt is running (documented in docs/SESSIONS.md) --------------------------------------
def test_session_load_while_prompt_runs_is_busy_S8(inprocess, tmp_path):
    """S8: load/resume of a session whose prompt runs gets -32000 session_busy; the prompt goes on."""
    client = _start(inprocess, tmp_path).client
    sid = client.new_session()
    running = client.prompt(sid, "/wait")
    for method in ("session/load", "session/resume"):
        error = client.request(method, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}).error()
        assert error["code"] == -32000 and error["data"]["reason"] == "session_busy"
    assert not running.done
    client.cancel(sid)
    assert running.result() == {"stopReason": "cancelled"}


def test_session_close_cancels_running_prompt_S8(inprocess, tmp_path):
    """session/close cancels the running prompt as session/cancel would; until it answers the
    session keeps its reservation (S8), then it is freed; its turn and usage are stored."""
    agent = HeldAfterCancelAgent()
    harness = inprocess(agent, state_dir=str(tmp_path / "state"))
    client = harness.client
    client.initialize()
    sid = client.new_session()
    running = client.prompt(sid, "/wait")
    close = client.make_request("session/close", {"sessionId": sid})
    busy = client.make_request("session/prompt", client.prompt_params(sid, "too soon"))
    client.send(close, busy)  # one write: the prompt is read right after close (S2)
    assert client.pending_for(close).result() == {}
    assert client.pending_for(busy).error()["data"]["reason"] == "session_busy"
    assert harness.server.sessions.is_live(sid)
    agent.release.set()
    assert running.result() == {"stopReason": "cancelled"}
    client.wait_for(lambda: not harness.server.sessions.is_live(sid), what="the closed session to be freed")
    store = harness.server.store
    assert [u.stop_reason for u in store.usage(sid)] == ["cancelled"]
    entries = [json.loads(e) for e in store.history(sid)]
    assert [e["content"]["text"] for e in entries if e["sessionUpdate"] == "user_message_chunk"] == ["/wait"]


def test_session_delete_cancels_running_prompt_S16(inprocess, tmp_path):
    """session/delete of a running session cancels the prompt; the prompt answers `cancelled`,
    its usage record is kept (S16) but no history of the deleted session is written."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    running = client.prompt(sid, "/wait")
    assert client.call("session/delete", {"sessionId": sid}) == {}
    assert running.result() == {"stopReason": "cancelled"}
    store = harness.server.store
    store.sync()
    assert store.load_session(sid) is None
    assert store.history(sid) == []
    assert [u.stop_reason for u in store.usage(sid)] == ["cancelled"]
    assert client.call("session/list", {}) == {"sessions": []}


def test_session_methods_run_in_receive_order_S2(inprocess, tmp_path):
    """S2 (amended for session/load): load, prompt, set_mode, delete, prompt in one write. The
    load's control part (check, register, reserve) runs in order, so the prompt read right after
    it is refused as busy (S8) while the replay holds the session; set_mode and delete are handled
    in order after it; the delete ends the replay early (the load answers unknown_session, after
    whatever it replayed, S5) unless the replay was already whole (then its result); the late
    prompt finds the session gone."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    client.prompt(sid, "stored").result()
    harness.server.sessions.drop(sid)  # as after a restart: only the store knows it
    load = client.make_request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    prompt = client.make_request("session/prompt", client.prompt_params(sid, "/wait"))
    set_mode = client.make_request("session/set_mode", {"sessionId": sid, "modeId": "code"})
    delete = client.make_request("session/delete", {"sessionId": sid})
    late = client.make_request("session/prompt", client.prompt_params(sid, "after delete"))
    mark = len(client.received())
    client.send(load, prompt, set_mode, delete, late)
    load_answer = client.pending_for(load).response()
    assert client.pending_for(prompt).error()["data"]["reason"] == "session_busy"
    assert client.pending_for(set_mode).result() == {}
    assert client.pending_for(delete).result() == {}
    assert client.pending_for(late).error()["data"]["reason"] == "unknown_session"
    arrived = client.received()[mark:]
    answered = [m["id"] for m in arrived if "method" not in m]
    in_order = [prompt["id"], set_mode["id"], delete["id"], late["id"]]
    assert [i for i in answered if i in in_order] == in_order
    load_at = next(i for i, m in enumerate(arrived) if "method" not in m and m.get("id") == load["id"])
    replay = [m["params"]["update"]["sessionUpdate"] for m in arrived[:load_at] if m.get("method") == "session/update"]
    if replay[:2] == ["user_message_chunk", "agent_message_chunk"]:
        assert replay[2:] in ([], ["available_commands_update", "session_info_update"]), replay
        assert "modes" in load_answer["result"]
    else:
        assert replay == ["user_message_chunk"][: len(replay)]
        assert load_answer["error"]["data"]["reason"] == "unknown_session"
    assert not [m for m in arrived[load_at:] if m.get("method") == "session/update"]  # nothing for a deleted session


def test_set_mode_persists_across_eviction_S15(inprocess, tmp_path):
    """S15: mode and config set before eviction come back with the revived session."""
    harness = _start(inprocess, tmp_path, idle_timeout=0.1)
    client = harness.client
    sid = client.new_session()
    client.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
    client.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "echo-careful"})
    client.wait_for(lambda: not harness.server.sessions.is_live(sid), what="eviction")
    result = client.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
    assert result["modes"]["currentModeId"] == "code"
    assert result["configOptions"][0]["currentValue"] == "echo-careful"


def test_evicted_session_revives_without_replay_S15(inprocess, tmp_path):
    """S15: an idle session leaves memory; a prompt naming it brings it back, replaying nothing."""
    harness = _start(inprocess, tmp_path, idle_timeout=0.1)
    client = harness.client
    sid = client.new_session()
    client.prompt(sid, "before").result()
    client.wait_for(lambda: not harness.server.sessions.is_live(sid), what="eviction")
    count = len(client.updates(sid))
    assert client.prompt(sid, "after").result() == {"stopReason": "end_turn"}
    revived = client.updates(sid)[count:]
    assert "user_message_chunk" not in {u["sessionUpdate"] for u in revived}
    assert chunk_texts(revived) == ["after"]
    history = [json.loads(e) for e in harness.server.store.history(sid)]
    assert chunk_texts(history, "user_message_chunk") == ["before", "after"]


def test_active_prompt_is_never_evicted_S15(inprocess, tmp_path):
    """S15: a session with an active prompt stays live through many eviction passes."""
    harness = _start(inprocess, tmp_path, idle_timeout=0.05)
    client = harness.client
    registry = harness.server.sessions
    passes = []
    original = registry.evict_idle
    registry.evict_idle = lambda now=None: passes.append(1) or original(now)
    sid = client.new_session()
    running = client.prompt(sid, "/wait")
    client.wait_for(lambda: harness.server.protocol.prompts.get(sid), what="the prompt to be admitted")
    start = len(passes)
    client.wait_for(lambda: len(passes) >= start + 5, what="five eviction passes")
    assert registry.is_live(sid)
    client.cancel(sid)
    assert running.result() == {"stopReason": "cancelled"}
    client.wait_for(lambda: not registry.is_live(sid), what="eviction once idle")


def test_session_new_and_set_mode_never_wait_for_the_disk(inprocess, tmp_path):
    """No disk access in the receive loop: with the database locked by another process,
    session/new, set_mode and prompts still answer; the writes land once the lock is gone."""
    import sqlite3

    from acp_green.store.statedb import db_path

    harness = _start(inprocess, tmp_path)
    client = harness.client
    # The store opens in the background after the first request, and opening it takes the write
    # lock (migrations): lock only once it is open, which the first read waits for.
    assert client.call("session/list", {}) == {"sessions": []}
    blocker = sqlite3.connect(db_path(str(tmp_path / "state")), isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        sid = client.new_session()
        assert client.call("session/set_mode", {"sessionId": sid, "modeId": "code"}) == {}
        assert client.prompt(sid, "while locked").result() == {"stopReason": "end_turn"}
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert client.call("session/list", {})["sessions"][0]["sessionId"] == sid
    assert harness.server.store.load_session(sid).mode_id == "code"
    harness.server.store.sync()  # the writes that waited for the lock are retried with backoff
    assert len(harness.server.store.usage(sid)) == 1


def test_evicted_session_gets_its_mcp_servers_back_S15(inprocess, tmp_path):
    """S15: the MCP server declarations of an evicted session (not stored: they may hold
    secrets) come back with it when a request names it; a closed session forgets them."""
    harness = _start(inprocess, tmp_path, idle_timeout=0.1)
    client = harness.client
    registry = harness.server.sessions
    servers = [{"name": "tools", "command": "/bin/true", "args": [], "env": [{"name": "TOKEN", "value": "s3cret"}]}]
    sid = client.new_session("/tmp", servers)
    client.wait_for(lambda: not registry.is_live(sid), what="eviction")
    client.prompt(sid, "back").result()
    assert registry.live(sid).mcp_servers == servers
    client.call("session/close", {"sessionId": sid})
    client.prompt(sid, "again").result()
    assert registry.live(sid).mcp_servers == []
    export = harness.server.store.load_session(sid)
    assert "s3cret" not in repr(export)
