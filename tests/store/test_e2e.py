"""End-to-end through the real CLI: sessions that survive restarts, the usage ledger, faults.

Every agent here gets `--state-dir` under tmp_path; the ledger is read back with
`acp-green usage --json` after the agent exited (S16).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import sys
import time
from typing import Any

import gevent
from gevent import subprocess

from acp_green.store.statedb import db_path
from tests.sessions.test_history_flow import SESSION_LEVEL, history_part

LIVE_ONLY = {"available_commands_update", "session_info_update", "usage_update"}


def acp_green(*args: str) -> str:
    """Run an `acp-green` inspection command; its stdout."""
    done = subprocess.run([sys.executable, "-m", "acp_green", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def usage_json(state_dir: str) -> dict[str, Any]:
    return json.loads(acp_green("usage", "--json", "--records", "--state-dir", state_dir))


def export(state_dir: str) -> dict[str, Any]:
    return {s["sessionId"]: s for s in json.loads(acp_green("sessions", "export", "--state-dir", state_dir))["sessions"]}


def serve_args(state_dir: str, *extra: str) -> list[str]:
    return ["--state-dir", state_dir, *extra]


def updates_of(agent, pending, session_id: str, since: int = 0) -> list[dict[str, Any]]:
    """The session/update objects for `session_id` that arrived (after message `since`) before
    `pending`'s response."""
    pending.response()
    out = []
    for message in agent.received()[since:]:
        if message.get("id") == pending.id and "method" not in message:
            return out
        if message.get("method") == "session/update" and message["params"]["sessionId"] == session_id:
            out.append(message["params"]["update"])
    raise AssertionError("response not found")


def test_session_load_after_restart_replays_what_was_sent(launch, tmp_path):
    """session/load after a restart of the real CLI replays exactly the updates of each turn."""
    state = str(tmp_path / "state")
    first = launch(*serve_args(state))
    first.initialize()
    sid = first.new_session("/tmp")
    expected: list[dict[str, Any]] = []
    for text in ("hello there", "/stream 5 20", "/think", "/plan"):
        mark = len(first.received())
        pending = first.prompt(sid, text)
        assert pending.result() == {"stopReason": "end_turn"}
        sent = [
            m["params"]["update"] for m in first.received()[mark:]
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
        ]
        expected.append({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
        expected.extend(u for u in sent if u["sessionUpdate"] not in LIVE_ONLY)
    assert first.close() == 0

    second = launch(*serve_args(state))
    second.initialize()
    listed = second.call("session/list", {})["sessions"]
    assert [(s["sessionId"], s["title"]) for s in listed] == [(sid, "hello there")]
    mark = len(second.received())
    load = second.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    assert load.result()["modes"]["currentModeId"] == "ask"
    replayed = updates_of(second, load, sid)
    assert tuple(u["sessionUpdate"] for u in replayed[-2:]) == SESSION_LEVEL  # after the history, before the response
    replayed = history_part(replayed)
    assert len(second.received()) > mark
    # Each prompt is a user message of its own (its id is stored with it); the rest is exactly
    # what each turn sent, agent message ids included.
    user_ids = [u.pop("messageId") for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert len(set(user_ids)) == 4 and all(isinstance(i, str) for i in user_ids)
    assert replayed == expected
    assert second.prompt(sid, "and now").result() == {"stopReason": "end_turn"}
    assert second.close() == 0
    last_two = export(state)[sid]["history"][-2:]
    assert last_two[0]["messageId"] != last_two[1].pop("messageId")
    last_two[0].pop("messageId")
    assert last_two == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "and now"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "and now"}},
    ]


def test_session_resume_after_restart_does_not_replay(launch, tmp_path):
    """session/resume after a restart replays nothing (only the commands and the title precede its
    answer) and keeps mode and config."""
    state = str(tmp_path / "state")
    first = launch(*serve_args(state))
    first.initialize()
    sid = first.new_session("/tmp")
    first.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
    first.prompt(sid, "one").result()
    assert first.close() == 0
    second = launch(*serve_args(state))
    second.initialize()
    resume = second.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    assert resume.result()["modes"]["currentModeId"] == "code"
    assert tuple(u["sessionUpdate"] for u in updates_of(second, resume, sid)) == SESSION_LEVEL


def test_usage_ledger_after_eof_S16(launch, tmp_path):
    """S16: one usage record per admitted prompt (end, exception, cancel), none for a refused one;
    all in the store after EOF, read back with `acp-green usage --json`."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state))
    agent.initialize()
    a, b = agent.new_session(), agent.new_session()
    assert agent.prompt(a, "one").result() == {"stopReason": "end_turn"}
    assert agent.prompt(b, "/fail").error()["code"] == -32603
    waiting = agent.prompt(a, "/wait")
    assert agent.prompt(a, "refused").error()["data"]["reason"] == "session_busy"
    agent.cancel(a)
    assert waiting.result() == {"stopReason": "cancelled"}
    assert agent.prompt(b, "two").result() == {"stopReason": "end_turn"}
    assert agent.close() == 0
    report = usage_json(state)
    assert report["totals"]["prompts"] == 4
    assert report["totals"]["byStopReason"] == {"cancelled": 1, "end_turn": 2, "error": 1}
    per_session = {s["sessionId"]: s["prompts"] for s in report["sessions"]}
    assert per_session == {a: 2, b: 2}
    assert len(report["records"]) == 4


def test_usage_ledger_after_sigterm_S16(launch, tmp_path):
    """S16: SIGTERM cancels running prompts; their records and the finished ones are stored."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state))
    agent.initialize()
    a, b, c = agent.new_session(), agent.new_session(), agent.new_session()
    assert agent.prompt(a, "done").result() == {"stopReason": "end_turn"}
    running = [agent.prompt(b, "/wait"), agent.prompt(c, "/sleep 600")]
    agent.wait_for(lambda: len([u for u in agent.updates() if u["sessionUpdate"] == "session_info_update"]) == 3,
                   what="both prompts admitted")
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit() == 0
    assert [p.result() for p in running] == [{"stopReason": "cancelled"}] * 2
    report = usage_json(state)
    assert report["totals"]["prompts"] == 3
    assert report["totals"]["byStopReason"] == {"cancelled": 2, "end_turn": 1}


def test_usage_ledger_kill_at_end_of_grace_S16(launch, tmp_path):
    """S16: a prompt that ignores cancellation is killed at the end of the shutdown grace; its
    record ("aborted") still reaches the store before the process exits."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state, "--agent", "tests.agents:IgnoresCancelAgent", "--shutdown-grace", "0.3"))
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "fine").result() == {"stopReason": "end_turn"}
    stuck = agent.prompt(sid, "/stubborn")
    agent.wait_for(lambda: any(u.get("content", {}).get("text") == "not listening" for u in agent.updates(sid)),
                   what="the stubborn prompt to start")
    agent.close_input()
    assert agent.wait_exit() == 0
    assert stuck.result() == {"stopReason": "cancelled"}
    agent.close()
    assert b"killed 1 background requests" in bytes(agent.stderr)
    report = usage_json(state)
    assert report["totals"]["byStopReason"] == {"aborted": 1, "end_turn": 1}
    assert [r["stopReason"] for r in report["records"]] == ["end_turn", "aborted"]


def test_sigkill_mid_stream_leaves_a_clean_store(launch, tmp_path):
    """SIGKILL during a streamed turn: the store opens cleanly, completed turns are there, the
    interrupted turn keeps its prompt and what of its stream was committed, in order, with no
    outcome (its usage record says interrupted), and the session takes new prompts after
    session/load."""
    state = str(tmp_path / "state")
    # A SIGKILL can cut the last line in half: the stream is not schema-checked, the rest is.
    agent = launch(*serve_args(state), check_schema=False)
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "kept").result() == {"stopReason": "end_turn"}
    agent.prompt(sid, "/stream 1000000 64")
    agent.wait_for(lambda: len(agent.updates(sid)) > 500, what="the stream to be well under way")
    os.killpg(agent.pid, signal.SIGKILL)
    assert agent.wait_exit() == -signal.SIGKILL
    agent.eof.wait(10)
    last = agent.records[-1]
    if last.direction == "in" and last.message is None and not last.raw.endswith(b"\n"):
        agent.records.pop()  # the kill cut the last line in half (a partial write); everything before it is checked

    conn = sqlite3.connect(db_path(state))
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    stored = export(state)[sid]["history"]
    assert [e["content"]["text"] for e in stored if e["sessionUpdate"] == "user_message_chunk"] == ["kept", "/stream 1000000 64"]

    again = launch(*serve_args(state))
    again.initialize()
    load = again.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    load.result()
    replayed = history_part(updates_of(again, load, sid))
    assert [u["sessionUpdate"] for u in replayed[:3]] == ["user_message_chunk", "agent_message_chunk", "user_message_chunk"]
    streamed = [u["content"]["text"].split(":")[0] for u in replayed[3:]]
    assert streamed == [str(i) for i in range(len(streamed))]  # a prefix of the stream, in order
    assert {u["sessionUpdate"] for u in replayed[3:]} <= {"agent_message_chunk"}
    assert again.prompt(sid, "/stream 3").result() == {"stopReason": "end_turn"}  # nothing left locked
    assert again.close() == 0
    # The killed prompt never settled: its admission record stays, shown as interrupted.
    assert usage_json(state)["totals"]["byStopReason"] == {"end_turn": 2, "interrupted": 1}


def test_S16_what_a_sigkill_keeps_is_what_a_later_read_was_answered_after(launch, tmp_path):
    """S16, the exact promise to a SIGKILL: a prompt's response waits for its turn's commit, but
    not for a disk that refuses writes (with another process holding the write lock the prompt
    answers end_turn while nothing of its turn is committed: the writes wait and are retried), so
    a SIGKILL then may lose that turn; once the writes are retried and a later request that reads
    the store (here session/list) is answered, the turn and its settled usage record are
    committed, and a SIGKILL keeps them."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state))
    agent.initialize()
    sid = agent.new_session()
    agent.call("session/list", {})  # the session itself is committed now
    holder = sqlite3.connect(db_path(state), timeout=0, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer: the agent's next commit must wait
    try:
        assert agent.prompt(sid, "kept").result() == {"stopReason": "end_turn"}
        assert holder.execute("SELECT count(*) FROM turns").fetchone() == (0,)
        assert holder.execute("SELECT count(*) FROM usage").fetchone() == (0,)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    agent.wait_for(lambda: agent.call("_acp_green/stats", {})["storeWaitingWrites"] == 0, what="the waiting writes to be retried")
    agent.call("session/list", {})  # answered only after everything queued before it committed
    os.killpg(agent.pid, signal.SIGKILL)
    assert agent.wait_exit() == -signal.SIGKILL

    stored = export(state)[sid]["history"]
    assert [e["content"]["text"] for e in stored if e["sessionUpdate"] == "user_message_chunk"] == ["kept"]
    assert [r["stopReason"] for r in usage_json(state)["records"]] == ["end_turn"]


def test_two_processes_on_one_state_dir_both_store_everything(launch, tmp_path):
    """Two agents started together on one state dir (docs/SESSIONS.md) both serve from it, each
    owning its own sessions: every session, turn and usage record of both is stored, counted
    exactly, and neither's writes revert the other's."""
    state = str(tmp_path / "state")
    agents = [launch(*serve_args(state)) for _ in range(2)]
    for agent in agents:
        agent.initialize()
    sessions: dict[int, list[str]] = {}
    rounds, per_agent = 3, 8

    def drive(index: int) -> None:
        agent = agents[index]
        news = [agent.make_request("session/new", {"cwd": f"/p{index}", "mcpServers": []}) for _ in range(per_agent)]
        agent.send(*news)
        ids = [agent.pending_for(m).result()["sessionId"] for m in news]
        sessions[index] = ids
        for r in range(rounds):
            prompts = [agent.make_request("session/prompt", agent.prompt_params(sid, f"/stream 20 32 round {r}")) for sid in ids]
            agent.send(*prompts, agent.make_request("session/list", {}))
            for message in prompts:
                assert agent.pending_for(message).result() == {"stopReason": "end_turn"}

    gevent.joinall([gevent.spawn(drive, i) for i in range(2)], raise_error=True)
    in_memory = [agent.call("_acp_green/stats", {})["storeInMemory"] for agent in agents]
    assert in_memory == [False, False], in_memory
    for agent in agents:
        assert agent.close() == 0
    stored = export(state)
    assert set(stored) == set(sessions[0]) | set(sessions[1]) and len(stored) == 2 * per_agent
    assert all(len([e for e in s["history"] if e["sessionUpdate"] == "user_message_chunk"]) == rounds for s in stored.values())
    assert {s["cwd"] for sid, s in stored.items() if sid in sessions[1]} == {"/p1"}
    report = usage_json(state)
    assert report["totals"]["prompts"] == 2 * per_agent * rounds


def test_sessions_and_usage_commands(launch, tmp_path):
    """`acp-green sessions list/show/delete/export` and `acp-green usage` (table and --json)."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state))
    agent.initialize()
    sid = agent.new_session("/work")
    agent.prompt(sid, "hello table").result()
    agent.prompt(sid, "/think").result()
    assert agent.close() == 0
    listing = acp_green("sessions", "list", "--state-dir", state)
    assert sid in listing and "hello table" in listing and "2 turns" in listing
    assert json.loads(acp_green("sessions", "list", "--json", "--cwd", "/work", "--state-dir", state))[0]["turns"] == 2
    assert json.loads(acp_green("sessions", "list", "--json", "--cwd", "/elsewhere", "--state-dir", state)) == []
    shown = acp_green("sessions", "show", sid, "--state-dir", state)
    # Each prompt is a turn of its own, headed by its outcome.
    assert re.search(r"turn 1 \([^)]*\): end_turn\nuser: hello table\nagent: hello table\nturn 2 \([^)]*\): end_turn\nuser: /think\nthought: ", shown), shown
    assert json.loads(acp_green("sessions", "show", sid, "--json", "--state-dir", state))["title"] == "hello table"
    out = tmp_path / "export.json"
    acp_green("sessions", "export", sid, "-o", str(out), "--state-dir", state)
    assert json.loads(out.read_text())["sessions"][0]["history"][0]["content"]["text"] == "hello table"
    table = acp_green("usage", "--state-dir", state)
    assert table.splitlines()[0].split()[:2] == ["session", "prompts"]
    assert any(line.startswith("TOTAL") and line.split()[1] == "2" for line in table.splitlines())
    assert "deleted 1 of 1" in acp_green("sessions", "delete", sid, "--state-dir", state)
    assert json.loads(acp_green("sessions", "list", "--json", "--state-dir", state)) == []
    assert usage_json(state)["totals"]["prompts"] == 2  # the ledger outlives the session
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "state.sqlite3").write_bytes(b"garbage" * 1000)
    done = subprocess.run([sys.executable, "-m", "acp_green", "usage", "--state-dir", str(bad)], capture_output=True, text=True)
    assert done.returncode == 1 and "cannot open" in done.stderr and "Traceback" not in done.stderr


def test_default_state_dir_of_tests_is_never_home(launch, tmp_path_factory):
    """Agents launched by tests without --state-dir keep state under a tmp XDG_STATE_HOME."""
    agent = launch()
    environ = open(f"/proc/{agent.pid}/environ", "rb").read().split(b"\0")
    xdg = next(e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"XDG_STATE_HOME="))
    assert xdg.startswith(str(tmp_path_factory.getbasetemp()))
    agent.initialize()
    sid = agent.new_session()
    agent.prompt(sid, "where am I").result()
    assert agent.close() == 0
    assert sid in acp_green("sessions", "list", "--state-dir", os.path.join(xdg, "acp-green"))


def test_ephemeral_writes_nothing(launch, tmp_path):
    """`--ephemeral`: sessions work (list, load within the process) and nothing touches the disk."""
    state = tmp_path / "state"
    agent = launch("--ephemeral", "--state-dir", str(state))
    agent.initialize()
    sid = agent.new_session()
    agent.prompt(sid, "in memory").result()
    assert [s["sessionId"] for s in agent.call("session/list", {})["sessions"]] == [sid]
    mark = len(agent.received())
    load = agent.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    replay = updates_of(agent, load, sid, since=mark)
    assert [u["sessionUpdate"] for u in replay] == ["user_message_chunk", "agent_message_chunk", *SESSION_LEVEL]
    assert agent.close() == 0
    assert not state.exists()


def test_stored_sessions_are_no_way_around_authentication(launch, tmp_path):
    """An agent that requires authentication refuses every request naming a stored session until
    the connection authenticates, not only session/new and session/load (-32000 auth_required)."""
    state = str(tmp_path / "state")
    first = launch(*serve_args(state), "--agent", "tests.agents:NeedsAuthAgent")
    first.initialize()
    first.call("authenticate", {"methodId": "token"})
    sid = first.new_session()
    assert first.close() == 0
    second = launch(*serve_args(state), "--agent", "tests.agents:NeedsAuthAgent")
    second.initialize()
    for method, params in [
        ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/set_mode", {"sessionId": sid, "modeId": "x"}),
        ("session/set_config_option", {"sessionId": sid, "configId": "x", "value": "y"}),
        ("session/close", {"sessionId": sid}),
    ]:
        error = second.request(method, params).error()
        assert error["code"] == -32000 and error["data"]["reason"] == "auth_required", (method, error)
    second.call("authenticate", {"methodId": "token"})
    assert second.prompt(sid, "hi").result() == {"stopReason": "end_turn"}


def test_shutdown_is_bounded_and_control_is_answered_when_the_store_is_locked_S13(launch, tmp_path):
    """S13: with another process holding the state database's write lock, session/list is
    answered at once (reads do not need the lock; the save queued before it waits and is
    retried), and SIGTERM still exits 0 in bounded time."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state, "--shutdown-grace", "1"))
    agent.initialize()
    sid = agent.new_session()
    agent.call("session/list", {})  # the database exists and is in use
    locker = sqlite3.connect(db_path(state), timeout=0, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        # A save queued ahead of the read: the store thread's batch needs the write lock first.
        assert agent.call("session/set_mode", {"sessionId": sid, "modeId": "code"}) == {}
        started = time.monotonic()
        listed = agent.call("session/list", {}, timeout=30)
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        assert time.monotonic() - started < 2.0  # was a 5 s busy wait per attempt, up to 60 s
        agent.signal(signal.SIGTERM)
        assert agent.wait_exit(timeout=60) == 0
    finally:
        locker.execute("ROLLBACK")
        locker.close()


def unread_bytes(fd: int) -> int:
    """Bytes written to a pipe and not yet read by the other end (FIONREAD works on either end)."""
    import array
    import fcntl
    import termios

    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]
