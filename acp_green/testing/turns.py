"""One prompt turn as a test reads it: what the agent said, thought, planned and did, and how it ended.

Built from the agent's messages between a `session/prompt` request and its response; a tool
call's later `tool_call_update`s replace the fields they carry (ACP: each field given replaces).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCallView", "TurnResult", "read_turn"]


@dataclass(frozen=True)
class ToolCallView:
    """A tool call as it stood when its turn ended (its `tool_call` and every update merged)."""

    id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None


@dataclass(frozen=True)
class TurnResult:
    """One finished turn. `stop_reason` is "" when the prompt was answered with an error (`error`)."""

    stop_reason: str
    text: str
    thoughts: str
    tool_calls: list[ToolCallView]
    updates: list[dict[str, Any]]
    plan: list[dict[str, Any]] | None
    permission_requests: list[dict[str, Any]]
    error: dict[str, Any] | None
    #: Lines the agent sent during the turn that the client no longer kept when it was read (it
    #: keeps the last 32 MiB's worth): the turn is then read from the lines kept, its first ones missing.
    dropped: int = 0

    def updates_of(self, kind: str) -> list[dict[str, Any]]:
        """The turn's updates whose `sessionUpdate` is `kind`, in order."""
        return [u for u in self.updates if u.get("sessionUpdate") == kind]

    def tool_call(self, title_or_id: str) -> ToolCallView:
        """The tool call with this id, else the first with this title; KeyError naming those seen."""
        for call in self.tool_calls:
            if call.id == title_or_id:
                return call
        for call in self.tool_calls:
            if call.title == title_or_id:
                return call
        raise KeyError(f"no tool call {title_or_id!r} in this turn; its tool calls: {[(c.id, c.title) for c in self.tool_calls]}")


_FIELDS = {"title": "title", "kind": "kind", "status": "status", "content": "content", "locations": "locations",
           "rawInput": "raw_input", "rawOutput": "raw_output"}


def read_turn(session_id: str, messages: Iterable[dict[str, Any]], response: dict[str, Any], dropped: int = 0) -> TurnResult:
    """The turn of `session_id` made of the agent's `messages` after the prompt (up to, not
    including, its `response`) and that response; `dropped` lines of it were no longer kept."""
    updates: list[dict[str, Any]] = []
    permission_requests: list[dict[str, Any]] = []
    for message in messages:
        params = message.get("params")
        if not isinstance(params, dict) or params.get("sessionId") != session_id:
            continue
        if message.get("method") == "session/update" and isinstance(params.get("update"), dict):
            updates.append(params["update"])
        elif message.get("method") == "session/request_permission" and "id" in message:
            permission_requests.append(params)
    result = response.get("result")
    error = response.get("error")
    stop = result.get("stopReason") if isinstance(result, dict) else None
    plans = [u.get("entries") for u in updates if u.get("sessionUpdate") == "plan"]
    return TurnResult(
        stop_reason=stop if isinstance(stop, str) else "",
        text=_joined(updates, "agent_message_chunk"),
        thoughts=_joined(updates, "agent_thought_chunk"),
        tool_calls=_tool_calls(updates),
        updates=updates,
        plan=list(plans[-1] or []) if plans else None,  # each plan update replaces the whole plan
        permission_requests=permission_requests,
        error=error if isinstance(error, dict) else None,
        dropped=dropped,
    )


def _joined(updates: list[dict[str, Any]], kind: str) -> str:
    """The text blocks of every `kind` chunk, joined (images and other blocks carry no text)."""
    texts = []
    for update in updates:
        content = update.get("content")
        if update.get("sessionUpdate") == kind and isinstance(content, dict) and content.get("type") == "text":
            texts.append(str(content.get("text", "")))
    return "".join(texts)


def _tool_calls(updates: list[dict[str, Any]]) -> list[ToolCallView]:
    """Each tool call once, in the order first seen, with its fields as the last update left them."""
    fields: dict[str, dict[str, Any]] = {}
    for update in updates:
        if update.get("sessionUpdate") not in ("tool_call", "tool_call_update") or not isinstance(update.get("toolCallId"), str):
            continue
        seen = fields.setdefault(update["toolCallId"], {})
        for wire, name in _FIELDS.items():
            if update.get(wire) is not None:
                seen[name] = update[wire]
    return [ToolCallView(id=tool_call_id, **values) for tool_call_id, values in fields.items()]
