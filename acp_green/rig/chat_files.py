"""Chat's answers to `fs/read_text_file` and `fs/write_text_file`: real files on this machine, absolute paths only.

ACP requires absolute paths; a relative one is refused (-32602) rather than guessed against some
directory the agent did not name. A write replaces the file's text (creating the file, not its
directory) and reports the previous text, so the person can be shown what changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND


class FileRequestRefused(Exception):
    """A file request chat answers with a JSON-RPC error; carries that error's code."""

    def __init__(self, code: int, message: str, path: Any) -> None:
        super().__init__(message)
        self.code = code
        self.path = path

    def to_error(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "data": {"path": self.path}}


@dataclass(frozen=True, slots=True)
class Written:
    """What a write did: the path, the text it had before (None: it did not exist) and the new text."""

    path: str
    old_text: str | None
    new_text: str


def absolute_path(params: dict[str, Any]) -> str:
    """The request's `path`, which must be an absolute path string."""
    path = params.get("path")
    if not isinstance(path, str) or not path:
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: 'path' must be a non-empty string", path)
    if not os.path.isabs(path):
        raise FileRequestRefused(INVALID_PARAMS, f"Invalid params: the path {path!r} is relative; ACP file paths must be absolute", path)
    return path


def read_text(params: dict[str, Any]) -> str:
    """The text of the file `params` names, cut to `line` (1-based) and `limit` lines when given."""
    path = absolute_path(params)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise FileRequestRefused(RESOURCE_NOT_FOUND, f"Resource not found: {path}", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot read {path}: {_reason(exc)}", path) from None
    line, limit = params.get("line"), params.get("limit")
    if line is None and limit is None:
        return text
    for name, value in (("line", line), ("limit", limit)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "line" else 0)):
            raise FileRequestRefused(INVALID_PARAMS, f"Invalid params: {name!r} must be a {'positive' if name == 'line' else 'non-negative'} integer", path)
    lines = text.splitlines(keepends=True)
    start = (line or 1) - 1
    return "".join(lines[start:] if limit is None else lines[start:start + limit])


def write_text(params: dict[str, Any]) -> Written:
    """Replace the text of the file `params` names with `params.content`."""
    path = absolute_path(params)
    content = params.get("content")
    if not isinstance(content, str):
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: 'content' must be a string", path)
    try:
        with open(path, encoding="utf-8") as handle:
            old_text: str | None = handle.read()
    except FileNotFoundError:
        old_text = None
    except (OSError, UnicodeDecodeError):
        old_text = None  # not readable as text: the write still decides
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
    except OSError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot write {path}: {_reason(exc)}", path) from None
    return Written(path, old_text, content)


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
