"""tools/rig/chat_history: a loaded session's replay is one short line per message, tool call and
plan (thoughts left out, long text cut, escapes shown harmless), and `/sessions` is one line per
session with the current one marked. Pure functions of the updates: no agent, no terminal."""

from __future__ import annotations

from typing import Any

import click

from acp_green.tools.rig.chat_history import EXCERPT, MAX_LINES, History, session_lines


def text(kind: str, said: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": said}}


def shown(history: History) -> list[str]:
    return [click.unstyle(line) for line in history.lines()]


def test_messages_tools_and_plans_are_one_line_each_and_thoughts_are_left_out():
    history = History()
    for update in [
        text("user_message_chunk", "fix the "), text("user_message_chunk", "bug"),
        text("agent_thought_chunk", "hmm"),
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit a.py", "status": "in_progress"},
        {"sessionUpdate": "plan", "entries": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]},
        {"sessionUpdate": "plan", "entries": [{"content": "a", "status": "completed"}, {"content": "b", "status": "completed"}]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
        text("agent_message_chunk", "done:\n  fixed"), text("agent_message_chunk", " it"),
        text("user_message_chunk", "thanks"),
    ]:
        history.add(update)
    assert shown(history) == ["you: fix the bug", "[tool] Edit a.py: completed", "[plan] 2 of 2 steps done",
                              "agent: done: fixed it", "you: thanks"]
    assert history.turns == 2


def test_a_long_message_is_cut_to_one_line_and_escapes_are_shown_harmless():
    history = History()
    history.add(text("agent_message_chunk", "\x1b]0;title\x07" + "x" * (EXCERPT * 10)))
    [line] = shown(history)
    assert line.startswith("agent: \\x1b]0;title\\x07xxx") and line.endswith("…")
    assert len(line) == len("agent: ") + EXCERPT


def test_sessions_are_one_line_each_the_current_one_marked_and_another_directory_named():
    sessions = [{"sessionId": "s1", "cwd": "/work", "updatedAt": "2026-12-01T18:29:18.255Z", "title": "hello"},
                {"sessionId": "s2", "cwd": "/else", "updatedAt": "2026-11-30T09:00:00Z"},
                "not a session", {"cwd": "/work"}]
    assert session_lines(sessions, "s2", "/work") == ["  s1  2026-12-01 18:29  hello", "* s2  2026-11-30 09:00    (in /else)"]


def test_a_long_session_is_shown_by_its_last_lines_saying_how_many_are_not_shown():
    history = History()
    for n in range(MAX_LINES):
        history.add(text("user_message_chunk", f"question {n}"))
        history.add({"sessionUpdate": "tool_call", "toolCallId": f"t{n}", "title": f"tool {n}"})
    history.add({"sessionUpdate": "tool_call_update", "toolCallId": "t0", "status": "completed"})  # dropped long ago: a line of its own
    lines = shown(history)
    assert len(lines) == MAX_LINES + 1 and history.turns == MAX_LINES
    assert lines[0] == f"({MAX_LINES + 1} earlier lines not shown)"
    assert lines[-2:] == [f"[tool] tool {MAX_LINES - 1}: pending", "[tool] t0: completed"]


class SeenRenderer:
    """Stands in for chat_render.Renderer: records the session it shows and what reached it."""

    def __init__(self) -> None:
        self.session_id: str | None = "old"
        self.seen: list[tuple[str | None, Any]] = []

    def switch(self, session_id: str) -> None:
        self.session_id = session_id

    def __call__(self, message: dict[str, Any]) -> None:
        self.seen.append((self.session_id, message.get("params", {}).get("update", {}).get("sessionUpdate")))


def update(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": body}}


def test_opening_a_session_keeps_its_replay_apart_and_shows_its_last_other_updates_once_switched():
    from acp_green.tools.rig.chat_history import MAX_DEFERRED, SessionSwitch
    from acp_green.tools.rig.client import Pending

    pending = Pending(1, "session/load", 0.0)
    renderer, history = SeenRenderer(), History()
    switch = SessionSwitch(pending, renderer, "s2", history)  # type: ignore[arg-type]
    switch(update("s2", text("user_message_chunk", "hi")))
    switch(update("old", text("agent_message_chunk", "late words of the old session")))
    for _ in range(MAX_DEFERRED * 3):  # a flood before the answer: only the last ones are kept
        switch(update("s2", {"sessionUpdate": "available_commands_update", "availableCommands": []}))
    assert renderer.seen == [("old", "agent_message_chunk")] and shown(history) == ["you: hi"]
    pending.resolve({"jsonrpc": "2.0", "id": 1, "result": {}}, 0.0)
    switch(update("s2", text("agent_message_chunk", "after")))
    assert renderer.seen[1:] == [("s2", "available_commands_update")] * MAX_DEFERRED + [("s2", "agent_message_chunk")]
    assert switch.finish() == "s2" and len(renderer.seen) == MAX_DEFERRED + 2  # once only
