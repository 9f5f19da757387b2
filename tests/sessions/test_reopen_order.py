"""Where the session-level updates (`available_commands_update`, `session_info_update`) go
around the response, over the real CLI.

`session/load` and `session/resume`: before the response (after the replay, for a load). The
client named the session, so it routes them, and a response ends its request's stream as a
prompt's does (S5): a strict conformance check counts any update after the load response as
late. `session/new`: after the response, never before it (S5: a client drops updates for an id
it has not been given).

"Nothing after" is shown with a sentinel: a request sent once the response is read is answered
after everything queued before it (one FIFO, DESIGN §5), so any update for the session between
the two answers would have been queued after the response.
"""

from __future__ import annotations

from typing import Any

SESSION_LEVEL = ["available_commands_update", "session_info_update"]


def _kinds_between(agent: Any, session_id: str, start: int, first_id: Any, second_id: Any | None) -> tuple[list[str], list[str]]:
    """The updates for `session_id` from message `start` on: (before the answer to `first_id`,
    between it and the answer to `second_id`)."""
    before: list[str] = []
    between: list[str] = []
    bucket = before
    for message in agent.received()[start:]:
        if "method" not in message and message.get("id") == first_id:
            bucket = between
        elif "method" not in message and second_id is not None and message.get("id") == second_id:
            break
        elif message.get("method") == "session/update" and message["params"]["sessionId"] == session_id:
            bucket.append(message["params"]["update"]["sessionUpdate"])
    return before, between


def _answer_then_sentinel(agent: Any, method: str, params: dict[str, Any]) -> tuple[Any, Any, int]:
    """Send `method`, read its answer, then send a sentinel and read its answer: (request id, sentinel id, mark)."""
    mark = len(agent.received())
    pending = agent.request(method, params)
    pending.result()
    sentinel = agent.request("session/list", {})
    sentinel.result()
    return pending.id, sentinel.id, mark


def test_load_and_resume_send_the_session_level_updates_before_the_response_S5(launch, tmp_path) -> None:
    """S5, S2 amended: after a restart, session/load replays the history, then sends the commands
    and the title, then answers; nothing for the session follows the response. session/resume
    sends the commands and the title before its answer, and nothing after it."""
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    first.initialize()
    sid = first.new_session("/tmp")
    assert first.prompt(sid, "Fix the parser").result() == {"stopReason": "end_turn"}
    assert first.close() == 0

    second = launch("--state-dir", state)
    second.initialize()
    load_id, sentinel_id, mark = _answer_then_sentinel(second, "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    before, after = _kinds_between(second, sid, mark, load_id, sentinel_id)
    assert before[0] == "user_message_chunk" and "agent_message_chunk" in before, before  # the replay first
    assert before[-2:] == SESSION_LEVEL, before  # then the session-level updates, last before the response
    assert after == [], after

    resume_id, sentinel_id, mark = _answer_then_sentinel(second, "session/resume", {"sessionId": sid, "cwd": "/tmp"})
    before, after = _kinds_between(second, sid, mark, resume_id, sentinel_id)
    assert before == SESSION_LEVEL, before  # no replay (ACP: a resume MUST NOT replay), only the session's state
    assert after == [], after


def test_new_sends_its_commands_after_the_response_never_before_S5(launch) -> None:
    """S5: nothing is sent for a session before its session/new response; its commands follow it."""
    agent = launch("--ephemeral")
    agent.initialize()
    mark = len(agent.received())
    pending = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    sid = pending.result()["sessionId"]
    agent.request("session/list", {}).result()
    before, after = _kinds_between(agent, sid, mark, pending.id, None)
    assert before == [] and after[:1] == ["available_commands_update"], (before, after)
