"""Tool-call content and locations as ACP spells them, so agent code never writes the dicts itself.

Each helper returns a fresh JSON-ready dict (`ToolCallContent` or `ToolCallLocation` in the ACP
schema). Paths may be relative: `Turn.tool_call`/`tool_update` send them absolute against the
session's cwd (paths.py), as ACP requires.
"""

from __future__ import annotations

from typing import Any, Protocol


class HasTerminalId(Protocol):
    """Anything naming a client terminal (terminals.Terminal)."""

    @property
    def terminal_id(self) -> str: ...


def text(value: str) -> dict[str, Any]:
    """Plain text shown in the tool call."""
    return {"type": "content", "content": {"type": "text", "text": value}}


def diff(path: str, new_text: str, old_text: str | None = None) -> dict[str, Any]:
    """A proposed or applied change of the file at `path`; `old_text` None means a new file."""
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def terminal(term: HasTerminalId | str) -> dict[str, Any]:
    """A live terminal embedded in the tool call (embed it before releasing the terminal)."""
    terminal_id = term if isinstance(term, str) else term.terminal_id
    return {"type": "terminal", "terminalId": terminal_id}


def location(path: str, line: int | None = None) -> dict[str, Any]:
    """A file (and line, 1-based in editors) the tool call reads or changes, for follow-along."""
    found: dict[str, Any] = {"path": path}
    if line is not None:
        found["line"] = line
    return found
