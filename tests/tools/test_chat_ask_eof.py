"""What chat answers when the person's input ends (EOF, Ctrl-D) at one of the agent's questions:
never yes. A permission gets the offered reject option (or `cancelled` when none is offered), a
command is not run, a form is cancelled. The asker is driven directly (chat_ask.Asker) with
scripted typed lines and a client that records the answers: no agent process, no terminal."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest

from acp_green.tools.rig.chat_ask import NOT_APPROVED, Approval, Asker, LineSource
from acp_green.tools.rig.chat_render import Screen

OPTIONS = [
    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "always", "name": "Allow always", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


class RecordingClient:
    """The client side of the asker: records each answer; runs no command."""

    def __init__(self) -> None:
        self.policy = SimpleNamespace(handlers={}, notification_handlers={})
        self.answers: list[tuple[Any, str, Any]] = []
        self.commands_run: list[dict[str, Any]] = []
        self.terminal_host = SimpleNamespace(handle=lambda request, respond, respond_error: self.commands_run.append(request))

    def respond(self, request_id: Any, result: Any) -> None:
        self.answers.append((request_id, "result", result))

    def respond_error(self, request_id: Any, error: Any) -> None:
        self.answers.append((request_id, "error", error))


def asker_typing(lines: Iterable[str]) -> tuple[Asker, RecordingClient]:
    """An asker in a terminal (Approval.ASK) whose person types `lines` (each ending in a newline,
    as readline returns them), then ends the input (readline's '')."""
    typed = iter(lines)
    client = RecordingClient()
    asker = Asker(client, Screen(spinner=False), LineSource(lambda: next(typed, "")), Approval.ASK, interactive=True)  # type: ignore[arg-type]
    return asker, client


def permission_request(options: list[dict[str, Any]] = OPTIONS) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"toolCallId": "t1", "title": "Write notes.txt"}, "options": options}}


def permission_outcome(typed: list[str], options: list[dict[str, Any]] = OPTIONS) -> dict[str, Any]:
    asker, client = asker_typing(typed)
    asker.permission(permission_request(options))
    [(request_id, kind, body)] = client.answers
    assert request_id == 7 and kind == "result", client.answers
    return body["outcome"]


@pytest.mark.parametrize("typed", [[], ["maybe\n"], ["\n", "3 4\n"]], ids=["eof", "unclear-then-eof", "blank-unclear-then-eof"])
def test_end_of_input_at_a_permission_question_rejects(typed):
    assert permission_outcome(typed) == {"outcome": "selected", "optionId": "reject"}


def test_end_of_input_with_no_reject_option_offered_cancels_and_never_allows():
    assert permission_outcome([], OPTIONS[:2]) == {"outcome": "cancelled"}


@pytest.mark.parametrize(("typed", "chosen"), [(["y\n"], "allow"), (["always\n"], "always"), (["n\n"], "reject"), (["huh\n", "2\n"], "always")])
def test_a_typed_answer_picks_its_option(typed, chosen):
    """The contrast: what the person types is read, so EOF's refusal is a decision, not a default."""
    assert permission_outcome(typed) == {"outcome": "selected", "optionId": chosen}


def test_end_of_input_at_a_command_question_runs_nothing():
    asker, client = asker_typing([])
    asker.run_command({"jsonrpc": "2.0", "id": 8, "method": "terminal/create",
                       "params": {"sessionId": "s", "command": "rm", "args": ["-rf", "build"]}})
    assert client.commands_run == []
    [(request_id, kind, error)] = client.answers
    assert (request_id, kind, error["code"]) == (8, "error", NOT_APPROVED)


def test_end_of_input_at_a_form_cancels_it():
    asker, client = asker_typing(["f\n"])  # chose to fill it in, then the input ended at the first field
    asker.form({"jsonrpc": "2.0", "id": 9, "method": "elicitation/create",
                "params": {"sessionId": "s", "mode": "form", "message": "Your name?",
                           "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                               "required": ["name"]}}})
    assert client.answers == [(9, "result", {"action": "cancel"})]
