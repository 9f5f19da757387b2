"""What a turn sends the client, end to end through `acp-green serve`: absolute paths, the
client's own error reasons, permission refusals that fail one tool call and not the turn,
capability checks before asking, and a final status for every tool call a turn started; on the
unit layer, an answer of the client's that is malformed fails the tool call, not the turn."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import paths
from acp_green.demo import DemoAgent
from acp_green.errors import ClientError, client_reason
from acp_green.tools.rig.client import AcpClient, ClientPolicy
from tests.helpers import said, wait_until
from tests.unit_harness import UnitConnection

DEMO_CWD = "/work/project"


def session(agent: AcpClient, cwd: str = DEMO_CWD) -> str:
    agent.initialize()
    return agent.new_session(cwd=cwd)


def tool_updates(agent: AcpClient, session_id: str, tool_call_id: str | None) -> list[dict[str, Any]]:
    return [u for u in agent.updates(session_id)
            if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] == tool_call_id]


def demo_tool(agent: AcpClient, session_id: str, title: str) -> str | None:
    """The id of the demo's latest tool call whose title starts with `title` (the runtime chooses
    the demo's ids, unique within the session), or None before there is one."""
    ids = [u["toolCallId"] for u in agent.updates(session_id)
           if u["sessionUpdate"] == "tool_call" and u["title"].startswith(title)]
    return ids[-1] if ids else None


def text_of(update: dict[str, Any]) -> str:
    return update["content"][0]["content"]["text"]


def answer_error(error: dict[str, Any]):
    """A client handler answering the agent's request with `error` (as a TypeScript-SDK client would)."""
    return lambda client, request: client.respond_error(request["id"], error)


def arrival(agent: AcpClient, predicate) -> int:
    """The position among the agent's messages of the first one `predicate` accepts."""
    for index, message in enumerate(agent.received()):
        if predicate(message):
            return index
    raise AssertionError("no such message")


def final_update_then_response(agent: AcpClient, prompt_id: Any, tool_call_id: str | None) -> dict[str, Any]:
    """The final update of the tool call, checked to arrive before the prompt's response (S5)."""
    is_final = lambda m: (m.get("method") == "session/update" and m["params"]["update"].get("toolCallId") == tool_call_id  # noqa: E731
                          and m["params"]["update"].get("status") in ("completed", "failed"))
    closed = arrival(agent, is_final)
    answered = arrival(agent, lambda m: "method" not in m and m.get("id") == prompt_id)
    assert closed < answered, "the tool call's final status came after the prompt's response"
    return agent.received()[closed]["params"]["update"]


# -- relative paths ---------------------------------------------------------------------------------


def test_relative_read_and_write_paths_are_sent_absolute_against_cwd(launch):
    """Relative paths: `/read in.txt` asks the client for `<cwd>/in.txt` and its tool
    call's location is absolute; `/write sub/../out.txt` asks permission and writes with
    `<cwd>/out.txt` (ACP: every file path on the wire is absolute)."""
    policy = ClientPolicy(files={f"{DEMO_CWD}/in.txt": "file body"})
    agent = launch("--ephemeral", policy=policy)
    session_id = session(agent)
    assert agent.prompt(session_id, "/read in.txt").result() == {"stopReason": "end_turn"}
    assert agent.prompt(session_id, "/write sub/../out.txt new text").result() == {"stopReason": "end_turn"}
    read, asked, written = agent.agent_requests
    assert read["params"]["path"] == f"{DEMO_CWD}/in.txt"
    assert text_of(tool_updates(agent, session_id, demo_tool(agent, session_id, "Read "))[-1]) == "file body"
    assert tool_updates(agent, session_id, demo_tool(agent, session_id, "Read "))[0]["locations"] == [{"path": f"{DEMO_CWD}/in.txt"}]
    assert asked["params"]["toolCall"]["locations"] == [{"path": f"{DEMO_CWD}/out.txt"}]
    assert tool_updates(agent, session_id, demo_tool(agent, session_id, "Write "))[0]["locations"] == [{"path": f"{DEMO_CWD}/out.txt"}]
    assert written["params"]["path"] == f"{DEMO_CWD}/out.txt"
    assert policy.written == {f"{DEMO_CWD}/out.txt": "new text"}


def test_relative_paths_in_tool_call_locations_and_diffs_are_sent_absolute(launch):
    """Relative paths: an agent's relative locations and a diff's `path` go out
    absolute against cwd (`..` resolved lexically, leaving cwd when it says so); other fields
    of each item are kept."""
    agent = launch("--ephemeral", "--agent", "tests.agents:RelativePathsAgent")
    session_id = session(agent, "/work/project")
    assert agent.prompt(session_id, "go").result() == {"stopReason": "end_turn"}
    started, finished = tool_updates(agent, session_id, "edit-1")
    assert started["locations"] == [{"path": "/work/project/notes/a.txt", "line": 3}, {"path": "/work/b.txt"}]
    assert started["content"] == [{"type": "diff", "path": "/work/project/notes/a.txt", "oldText": None, "newText": "new"}]
    assert finished["locations"] == [{"path": "/work/project/c.txt"}, {"path": "/abs/d.txt"}]


_segment = st.one_of(
    st.sampled_from([".", "..", "", "a", "b c", "~"]),
    st.text(min_size=1, max_size=8).filter(lambda s: "/" not in s and "\0" not in s),
    st.binary(min_size=1, max_size=8).filter(lambda b: b"/" not in b and b"\0" not in b).map(os.fsdecode),  # non-UTF-8: surrogates
)
_relative = st.lists(_segment, max_size=6).map(lambda parts: "/".join(parts).lstrip("/"))
_cwd = st.lists(_segment.filter(lambda s: s not in (".", "..", "")), min_size=0, max_size=4).map(lambda parts: "/" + "/".join(parts))


@settings(deadline=None, max_examples=300)
@given(cwd=_cwd, relative=_relative, absolute=st.booleans())
def test_resolve_any_path_is_absolute_and_stays_under_cwd_without_dotdot(cwd, relative, absolute):
    """Relative paths: any path, non-UTF-8 bytes (surrogate-escaped) included, comes
    out absolute and normalized; a relative one without `..` stays under cwd; an absolute one
    keeps its own place."""
    path = "/" + relative if absolute else relative
    resolved = paths.resolve(cwd, path)
    assert os.path.isabs(resolved)
    assert os.path.normpath(resolved) == resolved
    if absolute:
        assert resolved == os.path.normpath(path)
    elif ".." not in relative.split("/"):
        assert os.path.commonpath([os.path.normpath(cwd), resolved]) == os.path.normpath(cwd)
    update = {"sessionUpdate": "tool_call", "locations": [{"path": path}], "content": [{"type": "diff", "path": path}]}
    before = repr(update)
    out = paths.tool_call_paths(update, cwd)
    assert out["locations"][0]["path"] == resolved == out["content"][0]["path"]
    assert repr(update) == before  # the agent's own objects are never changed


# -- the client's error reasons ---------------------------------------------------------------------

TS_SDK_ERROR = {"code": -32603, "message": "Internal error",
                "data": {"details": "ENOENT: no such file or directory, open '/work/project/in.txt'"}}


def test_a_clients_error_details_reach_the_failed_tool_call(launch):
    """Client error details: a TypeScript-SDK client answers "Internal error" with the
    real reason in `data.details`; the demo's failed tool call shows that reason."""
    agent = launch("--ephemeral", policy=ClientPolicy(handlers={"fs/read_text_file": answer_error(TS_SDK_ERROR)}))
    session_id = session(agent)
    assert agent.prompt(session_id, "/read in.txt").result() == {"stopReason": "end_turn"}
    failed = tool_updates(agent, session_id, demo_tool(agent, session_id, "Read "))[-1]
    assert failed["status"] == "failed"
    assert "ENOENT: no such file or directory" in text_of(failed), failed


def test_a_clients_error_reason_reaches_the_prompts_error_response_bounded(launch):
    """Client error details: a client error that escapes agent code answers -32603
    with the client's reason in the message, from `data.details`, `data.message` or a string
    `data`; a huge reason is cut to a bounded line."""
    answers = iter([
        TS_SDK_ERROR,
        {"code": -32002, "message": "Resource not found", "data": {"message": "not in the workspace"}},
        {"code": 1, "message": "no", "data": "the editor said no"},
        {"code": -32603, "message": "Internal error", "data": {"details": "x" * 100_000}},
    ])
    handler = lambda client, request: client.respond_error(request["id"], next(answers))  # noqa: E731
    agent = launch("--ephemeral", "--agent", "tests.agents:ReadsUncaughtAgent",
                   policy=ClientPolicy(handlers={"fs/read_text_file": handler}))
    session_id = session(agent)
    messages = [agent.prompt(session_id, "in.txt").error()["message"] for _ in range(4)]
    assert "ENOENT: no such file or directory" in messages[0]
    assert "not in the workspace" in messages[1]
    assert "the editor said no" in messages[2]
    assert "xxxx" in messages[3] and len(messages[3]) < 1000
    assert all(message.startswith("fs/read_text_file failed: ") for message in messages)


def test_client_reason_reads_details_then_message_then_a_string():
    """Client error details: where the reason is found, and that only strings count."""
    assert client_reason({"details": "d", "message": "m"}) == "d"
    assert client_reason({"details": "", "message": "m"}) == "m"
    assert client_reason({"details": {"nested": 1}, "message": "m"}) == "m"
    assert client_reason("plain") == "plain"
    assert client_reason({"uri": "/x"}) is None and client_reason(None) is None and client_reason(3) is None
    error = ClientError("fs/read_text_file", {"code": -32603, "message": "Internal error", "data": {"details": "line1\nline2"}})
    assert str(error) == "fs/read_text_file failed: Internal error (-32603): line1 line2"
    assert error.explanation == "Internal error: line1 line2"


# -- permission refusals and failures -----------------------------------------------------------------


def test_a_failed_permission_request_fails_the_tool_call_and_the_turn_goes_on(launch):
    """Permission errors: `session/request_permission` answered with an error fails
    its tool call with the client's reason; the turn ends `end_turn` with a message, and
    nothing is written."""
    error = {"code": -32603, "message": "Internal error", "data": {"details": "the permission dialog crashed"}}
    policy = ClientPolicy(handlers={"session/request_permission": answer_error(error)})
    agent = launch("--ephemeral", policy=policy)
    session_id = session(agent)
    prompt = agent.prompt(session_id, "/write out.txt text")
    assert prompt.result() == {"stopReason": "end_turn"}
    failed = final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "Write "))
    assert failed["status"] == "failed" and "the permission dialog crashed" in text_of(failed)
    assert "not written" in said(agent.updates(session_id))
    assert [r["method"] for r in agent.agent_requests] == ["session/request_permission"]
    assert agent.prompt(session_id, "still here").result() == {"stopReason": "end_turn"}


def test_a_permission_request_the_client_cancels_fails_the_tool_call_and_the_turn_goes_on(launch):
    """Permission errors: the client answers `cancelled` while the turn is not
    cancelled: the tool call fails saying so, the turn ends `end_turn`, nothing is written."""
    policy = ClientPolicy(handlers={"session/request_permission": lambda client, request: client.respond(
        request["id"], {"outcome": {"outcome": "cancelled"}})})
    agent = launch("--ephemeral", policy=policy)
    session_id = session(agent)
    prompt = agent.prompt(session_id, "/write out.txt text")
    assert prompt.result() == {"stopReason": "end_turn"}
    failed = final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "Write "))
    assert failed["status"] == "failed" and "cancelled by the client" in text_of(failed)
    assert policy.written == {}


def test_a_cancelled_turn_waiting_for_permission_answers_cancelled_with_the_tool_call_failed_S14(launch):
    """S14, permission errors: the turn is cancelled while the user has not answered:
    it answers `cancelled`, and its tool call still gets a final status before that."""
    policy = ClientPolicy(permission="hold")
    agent = launch("--ephemeral", policy=policy)
    session_id = session(agent)
    prompt = agent.prompt(session_id, "/write out.txt text")
    agent.wait_for(lambda: agent.hold, what="the permission request")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    assert final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "Write "))["status"] == "failed"
    assert policy.written == {}


def test_a_rejected_permission_fails_the_tool_call_and_says_so(launch):
    """Permission errors: the user rejects: the tool call fails "Permission denied",
    the turn ends `end_turn`."""
    agent = launch("--ephemeral", policy=ClientPolicy(permission="reject"))
    session_id = session(agent)
    prompt = agent.prompt(session_id, "/write out.txt text")
    assert prompt.result() == {"stopReason": "end_turn"}
    assert text_of(final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "Write "))) == "Permission denied"


# -- capabilities before asking --------------------------------------------------------------------


def test_write_without_the_write_capability_never_asks_permission(launch):
    """Capability checks: a client without fs.writeTextFile is never asked
    for permission to write; the tool call fails naming the capability and the turn ends."""
    policy = ClientPolicy(capabilities={"fs": {"readTextFile": True, "writeTextFile": False}})
    agent = launch("--ephemeral", policy=policy)
    session_id = session(agent)
    prompt = agent.prompt(session_id, "/write out.txt text")
    assert prompt.result() == {"stopReason": "end_turn"}
    failed = final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "Write "))
    assert failed["status"] == "failed" and "fs.writeTextFile" in text_of(failed)
    assert agent.agent_requests == []


# -- every tool call gets a final status -------------------------------------------------------------


def test_cancel_during_an_mcp_tool_call_fails_it_before_the_cancelled_response_S5(launch):
    """Tool calls left open, S5: cancelling `/mcp demo sleep` ends its tool call
    `failed` before the `cancelled` response, and nothing follows the response."""
    agent = launch("--ephemeral")
    session_id = session(agent)
    prompt = agent.prompt(session_id, '/mcp demo sleep {"seconds": 30}')
    agent.wait_for(lambda: tool_updates(agent, session_id, demo_tool(agent, session_id, "demo.sleep")), what="the /mcp tool call")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    final = final_update_then_response(agent, prompt.id, demo_tool(agent, session_id, "demo.sleep"))
    assert final["status"] == "failed" and text_of(final) == "Cancelled"


def test_an_agent_that_raises_with_a_tool_call_open_has_it_failed_before_the_error(launch):
    """Tool calls left open, S14: an exception in agent code answers -32603, and the
    open tool call is failed first, naming the failure."""
    agent = launch("--ephemeral", "--agent", "tests.agents:LeavesToolCallOpenAgent")
    session_id = session(agent)
    prompt = agent.prompt(session_id, "raise")
    assert "the agent broke mid-tool" in prompt.error()["message"]
    final = final_update_then_response(agent, prompt.id, "open-1")
    assert final["status"] == "failed" and "the agent broke mid-tool" in text_of(final)


def test_a_tool_call_left_open_at_return_is_failed_keeping_its_content(launch):
    """Tool calls left open: an agent that returns with a tool call in progress gets
    it failed; content it already gave is not replaced, and one without content says why."""
    agent = launch("--ephemeral", "--agent", "tests.agents:LeavesToolCallOpenAgent")
    session_id = session(agent)
    first = agent.prompt(session_id, "return")
    assert first.result() == {"stopReason": "end_turn"}
    final = final_update_then_response(agent, first.id, "open-1")
    assert final["status"] == "failed" and "ended before this tool call finished" in text_of(final)
    second = agent.prompt(session_id, "content")
    assert second.result() == {"stopReason": "end_turn"}
    last = tool_updates(agent, session_id, "open-2")[-1]
    assert last == {"sessionUpdate": "tool_call_update", "toolCallId": "open-2", "status": "failed"}


def stubborn_turn_at_eof(launch, *graces: str) -> tuple[Any, dict[str, Any]]:
    """Serve LeavesToolCallOpenAgent with `graces`, start its turn that ignores its cancel, close
    stdin: the prompt answers `cancelled`; returns the agent and the tool call's final update."""
    agent = launch("--ephemeral", *graces, "--agent", "tests.agents:LeavesToolCallOpenAgent")
    session_id = session(agent)
    prompt = agent.prompt(session_id, "stubborn")
    agent.wait_for(lambda: said(agent.updates(session_id)) == "not listening", what="the stubborn turn")
    agent.close_input()
    assert prompt.result() == {"stopReason": "cancelled"}
    return agent, final_update_then_response(agent, prompt.id, "open-1")


def test_a_tool_call_open_when_the_turn_is_killed_at_shutdown_is_failed_S13(launch):
    """Tool calls left open, S13: a turn that ignores its cancel (and is never interrupted:
    --cancel-grace inf) is killed at the end of the shutdown grace; its tool call is failed
    before its `cancelled` response."""
    agent, final = stubborn_turn_at_eof(launch, "--shutdown-grace", "0.5", "--cancel-grace", "inf")
    assert final["status"] == "failed" and text_of(final).startswith("Aborted")
    assert agent.wait_exit() == 0


def test_a_stubborn_turn_at_shutdown_is_interrupted_after_the_cancel_grace_not_killed_S13_S14(launch):
    """S13/S14: at EOF the turn is cancelled; it ignores its token, so at the cancel grace (0.2 s,
    before the 30 s shutdown grace) its blocking call is interrupted: the tool call it left open
    says `Cancelled`, not `Aborted`, and the agent exits 0 long before the shutdown grace."""
    agent, final = stubborn_turn_at_eof(launch, "--shutdown-grace", "30", "--cancel-grace", "0.2")
    assert final["status"] == "failed" and text_of(final) == "Cancelled"
    assert agent.wait_exit(timeout=20) == 0


def test_the_closing_status_of_a_tool_call_is_kept_in_history_and_replayed(launch, tmp_path):
    """Tool calls left open: the `failed` update the runtime sends is part of the
    turn's history, so `session/load` in a new process replays the tool call finished."""
    state = str(tmp_path / "state")
    first = launch("--state-dir", state, "--agent", "tests.agents:LeavesToolCallOpenAgent")
    session_id = session(first)
    assert first.prompt(session_id, "return").result() == {"stopReason": "end_turn"}
    live = tool_updates(first, session_id, "open-1")
    first.close_input()
    assert first.wait_exit() == 0
    second = launch("--state-dir", state, "--agent", "tests.agents:LeavesToolCallOpenAgent")
    second.initialize()
    second.call("session/load", {"sessionId": session_id, "cwd": DEMO_CWD, "mcpServers": []})
    assert tool_updates(second, session_id, "open-1") == live
    assert live[-1]["status"] == "failed"


# -- a malformed answer from the client is the client's fault (unit layer) ------------------------
@pytest.mark.parametrize("answer", [{"content": 5}, "text", [1], {"content": {"nested": []}}])
def test_read_text_file_with_a_malformed_result_fails_the_tool_call_not_the_turn(unit, answer):
    """A field the runtime reads from a client's answer, ill-typed, is the client's
    fault: the turn's helper raises ClientError (the demo reports a failed tool call and ends
    the turn) instead of a TypeError that turns the prompt into -32603."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/read /x")
    [asked] = wait_until(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's read", changed=conn.sink.changed)
    conn.respond(asked["id"], answer)
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    failed = [u for u in conn.sink.updates(session_id) if u.get("status") == "failed"]
    assert failed and "malformed result" in failed[0]["content"][0]["content"]["text"]


@pytest.mark.parametrize("answer", [{"outcome": "selected"}, [1], "allow", {"outcome": ["allow"]}])
def test_request_permission_with_a_malformed_result_grants_nothing_and_names_the_fault(unit, answer):
    """A malformed permission answer is a ClientError naming it (never an
    AttributeError inside agent code); the permission helper fails the tool call with that
    reason, the turn goes on, and nothing is written."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}})
    session_id = conn.new_session()
    prompt_id = conn.prompt(session_id, "/write /tmp/x hello")
    [asked] = wait_until(lambda: conn.sink.requests("session/request_permission"), what="the permission request",
                         changed=conn.sink.changed)
    conn.respond(asked["id"], answer)
    assert conn.result(prompt_id) == {"stopReason": "end_turn"}
    failed = [u for u in conn.sink.updates(session_id) if u.get("status") == "failed"]
    assert failed and "malformed result" in failed[0]["content"][0]["content"]["text"], failed
    assert not conn.sink.requests("fs/write_text_file")
