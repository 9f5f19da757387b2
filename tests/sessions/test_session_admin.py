"""In-process tests of ACP's unstable session methods (protocol/session_admin.py): session/fork,
archive, unarchive, set_title and status, the `archived` filter of session/list, their capabilities
and `--stable-only`. Every message the agent wrote is checked against the newest official SDK's
unstable schema (sdk-2.4.0, tests/sdk_unstable_schema.py)."""

from __future__ import annotations

import gevent.event
import pytest

from acp_green.agent import Agent, SessionView, Turn
from acp_green.demo import DemoAgent
from acp_green.context import ConnectionSnapshot
from acp_green.errors import ForkRefused, UnknownSession
from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from tests import sdk_unstable_schema
from tests.helpers import chunk_texts, wait_gone, wait_until
from tests.mcp_helpers import SDK_TOOLS, stdio_entry


UNSTABLE_METHODS = ("session/fork", "session/archive", "session/unarchive", "session/set_title", "session/status")


class CountingAgent(Agent):
    """Counts its turns in `session.state` and says the count; "hold" waits for `release`;
    refuses to fork a session whose state says so, and marks every fork's state."""

    def __init__(self) -> None:
        self.release = gevent.event.Event()
        self.holding = gevent.event.Event()
        self.forks: list[tuple[str, str]] = []

    def prompt(self, turn: Turn) -> str | None:
        state = turn.session.state
        state["turns"] = state.get("turns", 0) + 1
        if turn.text == "private":
            state["private"] = True
        turn.say(f"{turn.text} #{state['turns']} forked={state.get('forked', False)}")
        if turn.text == "hold":
            self.holding.set()
            self.release.wait(10)
        return None

    def session_started(self, session: SessionView, snapshot: ConnectionSnapshot) -> None:
        session.state["started_on"] = session.cwd

    def on_fork(self, source: SessionView, fork: SessionView, snapshot: ConnectionSnapshot) -> None:
        if source.state.get("private"):
            raise ForkRefused("this session is private")
        fork.state["forked"] = True
        self.forks.append((source.session_id, fork.session_id))


def _start(inprocess, tmp_path, agent=None, **options):
    harness = inprocess(agent or CountingAgent(), state_dir=str(tmp_path / "state"), **options)
    harness.client.initialize()
    return harness


def _sdk_problems(client) -> list[str]:
    return sdk_unstable_schema.problems((record.direction, record.message) for record in client.records
                                        if isinstance(record.message, dict))


def _replayed(client, session_id: str) -> list[str]:
    before = len(client.received())
    pending = client.request("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
    pending.result()
    arrived = client.received()[before:]
    response_at = next(i for i, m in enumerate(arrived) if m.get("id") == pending.id)
    updates = [m["params"]["update"] for m in arrived[:response_at] if m.get("method") == "session/update"]
    return chunk_texts([u for u in updates if u["sessionUpdate"] == "agent_message_chunk"])


def _listed(client, **params) -> dict[str, dict]:
    return {info["sessionId"]: info for info in client.call("session/list", params)["sessions"]}


def _unknown(error: dict) -> bool:
    return error["code"] == UnknownSession.code and error["data"]["reason"] == "unknown_session"


def test_initialize_advertises_the_unstable_session_capabilities(inprocess, tmp_path):
    """sessionCapabilities fork, archive, status, title are `{}` beside list, as the unstable schema asks."""
    harness = inprocess(CountingAgent(), state_dir=str(tmp_path / "state"))
    result = harness.client.initialize()
    sdk_unstable_schema.check_response("initialize", result)
    sessions = result["agentCapabilities"]["sessionCapabilities"]
    for name in ("fork", "archive", "status", "title", "list"):
        assert sessions[name] == {}, name
    assert result["agentCapabilities"]["mcpCapabilities"]["acp"] is True


def test_stable_only_hides_the_unstable_surface(inprocess, tmp_path):
    """--stable-only: the unstable methods and MCP-over-ACP answer -32601 and are not advertised;
    session/list reports no archive state and lists archived sessions too."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    conn = statedb.connect(statedb.db_path(str(state)))
    sid, plain = "sess_archived", "sess_plain"
    statedb.save_session(conn, SessionRecord(sid, "/tmp", archived=True))
    statedb.save_session(conn, SessionRecord(plain, "/tmp", updated_at=1.0))
    conn.close()

    stable = inprocess(CountingAgent(), state_dir=str(tmp_path / "state"), stable_only=True)
    result = stable.client.initialize()
    capabilities = result["agentCapabilities"]
    assert not {"fork", "archive", "status", "title"} & set(capabilities["sessionCapabilities"])
    assert "acp" not in capabilities["mcpCapabilities"]
    assert result["_meta"]["acpGreen"]["providedMcpServers"] == []
    for method in UNSTABLE_METHODS + ("mcp/connect", "mcp/disconnect"):
        error = stable.client.request(method, {"sessionId": sid, "cwd": "/tmp", "title": "t", "serverId": "x"}).error()
        assert error["code"] == -32601, (method, error)
    for params in ({}, {"archived": "only"}, {"archived": "exclude"}, {"archived": 5}):  # the unstable filter is not read
        listed = _listed(stable.client, **params)
        assert list(listed) == [sid, plain] and "archived" not in listed[sid], params


def test_stable_only_does_not_reach_a_declared_acp_server(inprocess, tmp_path):
    """--stable-only advertises no `mcpCapabilities.acp`: a `type: "acp"` server a client declares
    anyway is one of a transport this agent does not support (the tool call fails saying so), and
    the agent sends no mcp/connect nor any other unstable request."""
    harness = inprocess(DemoAgent(), state_dir=str(tmp_path / "state"), stable_only=True)
    client = harness.client
    result = client.initialize()
    assert result["_meta"]["acpGreen"]["providedMcpServers"] == []  # the demo provides one otherwise
    sid = client.call("session/new", {"cwd": "/tmp", "mcpServers": [{"type": "acp", "name": "proj", "serverId": "srv-1"}]})["sessionId"]
    assert client.prompt(sid, '/mcp proj echo {"text": "x"}').result() == {"stopReason": "end_turn"}
    failed = [u for u in client.updates(sid) if u.get("status") == "failed"]
    assert "uses the acp transport, which this agent does not support" in failed[0]["content"][0]["content"]["text"]
    assert [r["method"] for r in client.agent_requests if r["method"].startswith("mcp/")] == []


def test_fork_holds_the_history_and_state_and_leaves_the_source_alone(inprocess, tmp_path):
    """session/fork: a new id, the source's turns and state (the agent's hook ran), the source's
    title; the fork's own turns and title are its own; the response is like session/new's."""
    agent = CountingAgent()
    harness = _start(inprocess, tmp_path, agent)
    client = harness.client
    source = client.new_session()
    assert client.prompt(source, "first").result() == {"stopReason": "end_turn"}
    result = client.call("session/fork", {"sessionId": source, "cwd": "/var", "mcpServers": []})
    fork = result["sessionId"]
    assert fork != source and agent.forks == [(source, fork)]
    assert client.call("session/status", {"sessionId": fork}) == {"status": "open"}  # live, as after session/new
    sdk_unstable_schema.check_response("session/fork", result)
    listed = _listed(client)
    assert listed[fork]["cwd"] == "/var" and listed[source]["cwd"] == "/tmp"
    # The fork continues from the source's state; the source does not see the fork's.
    client.prompt(fork, "in fork").result()
    client.prompt(source, "in source").result()
    assert _replayed(client, fork) == ["first #1 forked=False", "in fork #2 forked=True"]
    assert _replayed(client, source) == ["first #1 forked=False", "in source #2 forked=False"]
    listed = _listed(client)
    assert listed[fork]["title"] == listed[source]["title"] == "first"
    client.call("session/set_title", {"sessionId": fork, "title": "the fork"})
    listed = _listed(client)
    assert (listed[fork]["title"], listed[source]["title"]) == ("the fork", "first")
    # Forgetting the source leaves the fork whole.
    client.call("session/delete", {"sessionId": source})
    assert _replayed(client, fork) == ["first #1 forked=False", "in fork #2 forked=True"]
    assert _sdk_problems(client) == []


def test_fork_of_a_prompting_session_holds_its_finished_turns_only(inprocess, tmp_path):
    """Forking while the source runs a turn: the fork holds the turns that had ended and the state
    they left; the running turn finishes in the source alone."""
    agent = CountingAgent()
    harness = _start(inprocess, tmp_path, agent)
    client = harness.client
    source = client.new_session()
    client.prompt(source, "first").result()
    running = client.prompt(source, "hold")
    assert agent.holding.wait(10)
    fork = client.call("session/fork", {"sessionId": source, "cwd": "/tmp"})["sessionId"]
    agent.release.set()
    assert running.result() == {"stopReason": "end_turn"}
    client.prompt(fork, "next").result()
    assert _replayed(client, fork) == ["first #1 forked=False", "next #2 forked=True"]
    assert _replayed(client, source) == ["first #1 forked=False", "hold #2 forked=False"]
    assert _sdk_problems(client) == []


def test_a_fork_gets_the_state_as_it_is_now_when_no_prompt_runs(inprocess, tmp_path):
    """An idle source's state changed outside any turn (here by `session_started`) is stored
    first, so the fork's copy has it; the hook's change is in the fork alone."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    source = client.new_session("/w")
    fork = client.call("session/fork", {"sessionId": source, "cwd": "/tmp"})["sessionId"]
    sessions = harness.server.sessions
    assert sessions.live(fork).state == {"started_on": "/w", "forked": True}
    assert sessions.live(source).state == {"started_on": "/w"}


def test_an_agent_may_refuse_a_fork(inprocess, tmp_path):
    """Agent.on_fork raising ForkRefused: -32602 fork_refused, and no session was made."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    source = client.new_session()
    client.prompt(source, "private").result()
    error = client.request("session/fork", {"sessionId": source, "cwd": "/tmp"}).error()
    assert error["code"] == -32602 and error["data"]["reason"] == "fork_refused"
    assert list(_listed(client, archived="include")) == [source]
    assert len(harness.server.sessions) == 1


def test_archive_hides_a_session_from_the_default_list_until_unarchived(inprocess, tmp_path):
    """session/archive: out of the default list, in `include` and `only`, `archived` on every
    SessionInfo; idempotent both ways; the state is stored (a new process sees it)."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    kept, archived = client.new_session(), client.new_session()
    assert client.call("session/archive", {"sessionId": archived}) == {}
    assert client.call("session/archive", {"sessionId": archived}) == {}
    assert list(_listed(client)) == [kept]
    assert list(_listed(client, archived="exclude")) == [kept]
    assert list(_listed(client, archived="only")) == [archived]
    both = _listed(client, archived="include")
    assert {sid: info["archived"] for sid, info in both.items()} == {kept: False, archived: True}
    assert _listed(client)[kept]["archived"] is False
    assert client.call("session/unarchive", {"sessionId": archived}) == {}
    assert client.call("session/unarchive", {"sessionId": archived}) == {}
    assert set(_listed(client)) == {kept, archived}
    client.call("session/archive", {"sessionId": kept})
    assert _sdk_problems(client) == []
    harness.finish()
    conn = statedb.connect_existing(statedb.db_path(str(tmp_path / "state")))
    try:
        assert {r.session_id: r.archived for r in statedb.list_sessions(conn)} == {kept: True, archived: False}
    finally:
        conn.close()


def test_archiving_a_prompting_session_cancels_it_and_closes_it(inprocess, tmp_path):
    """Archive acts as session/close on a live session: its running prompt is cancelled, it leaves
    memory, and it stays stored (status `saved`)."""
    agent = CountingAgent()
    harness = _start(inprocess, tmp_path, agent)
    client = harness.client
    sid = client.new_session()
    running = client.prompt(sid, "hold")
    assert agent.holding.wait(10)
    client.call("session/archive", {"sessionId": sid})
    agent.release.set()
    assert running.result() == {"stopReason": "cancelled"}
    wait_until(lambda: not harness.server.sessions.is_live(sid))
    assert client.call("session/status", {"sessionId": sid}) == {"status": "saved"}
    assert list(_listed(client, archived="only")) == [sid]


def test_list_refuses_an_archive_filter_it_does_not_support(inprocess, tmp_path):
    """An unknown `archived` value (the schema's `other`) is -32602, never read as `exclude`."""
    client = _start(inprocess, tmp_path).client
    for value in ("_custom", "everything", ""):
        error = client.request("session/list", {"archived": value}).error()
        assert error["code"] == -32602 and error["data"]["field"] == "archived", value


def test_set_title_stores_the_normalized_title_and_no_prompt_replaces_it(inprocess, tmp_path):
    """session/set_title answers the stored title (trimmed, control characters gone); the first
    prompt then does not name the session; a stored (closed) session can be retitled too."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    result = client.call("session/set_title", {"sessionId": sid, "title": "  My\ttitle\n\x1b[31m "})
    assert result == {"title": "My title [31m"}
    client.prompt(sid, "a prompt that would name it").result()
    assert _listed(client)[sid]["title"] == "My title [31m"
    client.call("session/close", {"sessionId": sid})
    assert client.call("session/set_title", {"sessionId": sid, "title": "closed"}) == {"title": "closed"}
    assert not harness.server.sessions.is_live(sid)
    assert _listed(client)[sid]["title"] == "closed"
    for empty in ("", "   ", "\n\t\x00"):
        error = client.request("session/set_title", {"sessionId": sid, "title": empty}).error()
        assert error["code"] == -32602 and error["data"]["field"] == "title"
    assert _listed(client)[sid]["title"] == "closed"
    assert _sdk_problems(client) == []


def test_status_says_open_or_saved_and_changes_nothing(inprocess, tmp_path):
    """session/status: `open` while in memory, `saved` once closed, and asking revives nothing."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    sid = client.new_session()
    assert client.call("session/status", {"sessionId": sid}) == {"status": "open"}
    client.call("session/close", {"sessionId": sid})
    assert client.call("session/status", {"sessionId": sid}) == {"status": "saved"}
    assert not harness.server.sessions.is_live(sid)
    assert _sdk_problems(client) == []


def test_every_unstable_method_refuses_an_unknown_session(inprocess, tmp_path):
    """Fork, archive, unarchive, set_title and status of a session never stored: unknown_session."""
    client = _start(inprocess, tmp_path).client
    for method in UNSTABLE_METHODS:
        error = client.request(method, {"sessionId": "sess_nope", "cwd": "/tmp", "title": "t"}).error()
        assert _unknown(error), (method, error)
        assert error["data"]["sessionId"] == "sess_nope"
    assert list(_listed(client, archived="include")) == []


def test_a_fork_is_announced_like_a_new_session_and_remembers_its_source(inprocess, tmp_path):
    """After (never before) the fork's response: the agent's commands and the title it took from the
    source, as for session/new; the fork keeps the source's mode, and the store names its source."""
    harness = _start(inprocess, tmp_path, DemoAgent())
    client = harness.client
    source = client.new_session()
    client.prompt(source, "the source").result()
    client.call("session/set_mode", {"sessionId": source, "modeId": "code"})
    pending = client.request("session/fork", {"sessionId": source, "cwd": "/tmp"})
    fork = pending.result()["sessionId"]
    assert pending.result()["modes"]["currentModeId"] == "code"
    wait_until(lambda: len(client.updates(fork)) >= 2, what="the fork's commands and title")
    arrived = client.received()
    answered_at = next(i for i, m in enumerate(arrived) if m.get("id") == pending.id)
    for_fork = [(i, m["params"]["update"]) for i, m in enumerate(arrived)
                if m.get("method") == "session/update" and m["params"]["sessionId"] == fork]
    assert all(i > answered_at for i, _ in for_fork)
    assert [u["sessionUpdate"] for _, u in for_fork] == ["available_commands_update", "session_info_update"]
    assert for_fork[1][1]["title"] == "the source"
    harness.finish()
    conn = statedb.connect_existing(statedb.db_path(str(tmp_path / "state")))
    try:
        stored = {r.session_id: r for r in statedb.list_sessions(conn)}
    finally:
        conn.close()
    assert (stored[fork].forked_from, stored[fork].mode_id) == (source, "code")
    assert stored[source].forked_from is None


def test_a_forks_state_is_stored_when_it_is_made(inprocess, tmp_path):
    """The fork's state (the source's, and the hook's change) is stored at once: a new process that
    loads a fork never prompted continues from it."""
    first = _start(inprocess, tmp_path)
    source = first.client.new_session()
    first.client.prompt(source, "first").result()
    fork = first.client.call("session/fork", {"sessionId": source, "cwd": "/tmp"})["sessionId"]
    first.finish()
    second = _start(inprocess, tmp_path)
    try:
        second.client.call("session/load", {"sessionId": fork, "cwd": "/tmp", "mcpServers": []})
        second.client.prompt(fork, "next").result()
        assert _replayed(second.client, fork) == ["first #1 forked=False", "next #2 forked=True"]
    finally:
        second.finish()  # before the teardown's check of the first, which sees every server's greenlets


def test_a_forks_own_mcp_servers_start_when_it_is_made(inprocess, tmp_path):
    """The servers the fork request declares are started in the background at once, as for
    session/new (the source's are its own), and stop with the fork."""
    harness = _start(inprocess, tmp_path)
    client = harness.client
    source = client.new_session()
    fork = client.call("session/fork", {"sessionId": source, "cwd": "/tmp",
                                        "mcpServers": [stdio_entry("st", SDK_TOOLS)]})["sessionId"]
    servers = harness.server.protocol.session_mcp
    pids = wait_until(lambda: fork in servers and servers[fork].pids().get("st"), what="the fork's stdio server to start")
    assert source not in servers
    harness.server.sessions.drop(fork)
    assert wait_gone(pids)
