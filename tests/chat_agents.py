"""Agents for chat's tests, served with `acp-green serve --agent tests.chat_agents:NAME`.

Each does one thing the demo agent does not: ask permission with the diff it will write, send a
relative path, or die in the middle of a session.
"""

from __future__ import annotations

import os

from acp_green import Agent, Turn
from acp_green import content
from acp_green.errors import ClientError


THREE_WAYS = (
    {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "always", "name": "Allow always", "kind": "allow_always"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
)


class WritesWithDiffAgent(Agent):
    """`PATH TEXT`: reads PATH, asks permission with the change as a diff, then writes TEXT (a line) to it."""

    name = "writes-with-diff"

    def prompt(self, turn: Turn) -> str:
        path, _, text = turn.text.partition(" ")
        try:
            old = turn.read_text_file(path)
        except ClientError:
            old = None
        new = (old or "") + text + "\n"
        edit = turn.tool_call(title=f"Append to {path}", kind="edit", status="pending", locations=[content.location(path)])
        permission = turn.ask_permission(edit, THREE_WAYS, title=f"Append to {path}", kind="edit",
                                         content=[content.diff(path, new, old)])
        if not permission:
            turn.say(f"not written: {permission.reason}")
            return "end_turn"
        turn.write_text_file(path, new)
        edit.complete()
        turn.say(f"appended (answered {permission.option_id})")
        return "end_turn"


class SendsRelativePathAgent(Agent):
    """Writes and reads `notes.txt` as a relative path, skipping the runtime's resolution, and says what the client answered."""

    name = "sends-relative-path"

    def prompt(self, turn: Turn) -> str:
        for method, params in (("fs/write_text_file", {"path": "notes.txt", "content": "x"}), ("fs/read_text_file", {"path": "notes.txt"})):
            try:
                turn.request(method, {"sessionId": turn.session_id, **params})
                turn.say(f"{method}: accepted\n")
            except ClientError as exc:
                turn.say(f"{method}: {exc}\n")
        return "end_turn"


class ExitsOnPromptAgent(Agent):
    """Says a line on stderr and exits with code 3 as soon as a prompt arrives."""

    name = "exits-on-prompt"

    def prompt(self, turn: Turn) -> str:
        os.write(2, b"exits-on-prompt: going away\n")
        os._exit(3)
