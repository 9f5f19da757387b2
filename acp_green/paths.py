"""File paths a turn sends to the client, made absolute against the session's working directory.

ACP requires every file path on the wire to be absolute. Resolution is lexical, like
`os.path.normpath`: the filesystem is not consulted, so it works for files that do not exist yet
and for paths the client alone can see. `..` is collapsed lexically and may leave the working
directory (`../notes.txt` names the sibling of cwd): the runtime does not confine paths; the
client decides what the agent may touch. Lexical `..` can differ from the filesystem's when a
symlinked directory precedes it; an agent that cares sends absolute paths it resolved itself.
"""

from __future__ import annotations

import os
from typing import Any

#: The updates whose `locations` and `content` name files.
TOOL_CALL_UPDATES = frozenset({"tool_call", "tool_call_update"})


def resolve(cwd: str, path: str) -> str:
    """`path` as an absolute, normalized path; a relative one is taken from `cwd` (itself absolute)."""
    return os.path.normpath(os.path.join(cwd, path))


def _with_paths(items: Any, cwd: str) -> Any:
    """A copy of a list of objects with each string `path` resolved, or `items` itself if none changes."""
    if not isinstance(items, list):
        return items
    changed = False
    result = []
    for item in items:
        path = item.get("path") if isinstance(item, dict) else None
        if isinstance(path, str):
            absolute = resolve(cwd, path)
            if absolute != path:
                item = {**item, "path": absolute}
                changed = True
        result.append(item)
    return result if changed else items


def tool_call_paths(tool_call: dict[str, Any], cwd: str) -> dict[str, Any]:
    """A tool call (or its update) with the paths of its `locations` and `content` (a diff's
    `path`) made absolute; the object itself when nothing changes. Never mutates the argument."""
    fields = {}
    for name in ("locations", "content"):
        items = tool_call.get(name)
        resolved = _with_paths(items, cwd)
        if resolved is not items:
            fields[name] = resolved
    return {**tool_call, **fields} if fields else tool_call
