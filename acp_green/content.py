"""Tool-call content and locations as ACP spells them, so agent code never writes the dicts itself.

Each helper returns a fresh JSON-ready dict (`ToolCallContent` or `ToolCallLocation` in the ACP
schema). Paths may be relative: `Turn.tool_call`/`tool_update` send them absolute against the
session's cwd (paths.py), as ACP requires. An argument of the wrong type or value raises
TypeError/ValueError naming it (update_checks.py), so a mistake never reaches the wire.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import update_checks as check


class HasTerminalId(Protocol):
    """Anything naming a client terminal (terminals.Terminal)."""

    @property
    def terminal_id(self) -> str: ...


def text(value: str) -> dict[str, Any]:
    """Plain text shown in the tool call."""
    check.want_str("text", "value", value)
    return {"type": "content", "content": {"type": "text", "text": value}}


def diff(path: str, new_text: str, old_text: str | None = None) -> dict[str, Any]:
    """A proposed or applied change of the file at `path`; `old_text` None means a new file."""
    check.want_str("diff", "path", path, empty=False)
    check.want_str("diff", "new_text", new_text)
    check.want_optional_str("diff", "old_text", old_text)
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def terminal(term: HasTerminalId | str) -> dict[str, Any]:
    """A live terminal embedded in the tool call (embed it before releasing the terminal)."""
    terminal_id = term if isinstance(term, str) else getattr(term, "terminal_id", term)
    check.want_str("terminal", "term (or its terminal_id)", terminal_id, empty=False)
    return {"type": "terminal", "terminalId": terminal_id}


def location(path: str, line: int | None = None) -> dict[str, Any]:
    """A file (and line, 1-based in editors) the tool call reads or changes, for follow-along."""
    check.want_str("location", "path", path, empty=False)
    check.line_number("location", "line", line)
    found: dict[str, Any] = {"path": path}
    if line is not None:
        found["line"] = line
    return found
