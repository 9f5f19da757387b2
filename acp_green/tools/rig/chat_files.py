"""Chat's answers to `fs/read_text_file` and `fs/write_text_file`: real regular files on this machine, absolute paths only.

ACP requires absolute paths; a relative one is refused (-32602) rather than guessed against some
directory the agent did not name. Only regular files are read or written: a FIFO, a device, a
socket or a directory is refused without blocking (checked before opening, then again with fstat
on the descriptor opened O_NONBLOCK). A read takes at most MAX_READ_BYTES from the file, stopping
as soon as the requested `line`/`limit` lines are had, so an endless or huge file cannot exhaust
memory. A write replaces the file's text (creating the file, not its directory) and reports the
previous text, so the person can be shown what changed. Whether a request may happen at all
(inside or outside the session's directory, asked or not) is decided by the caller (chat.py).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from ...errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND

#: Most bytes one read takes from a file (the lines skipped to reach `line` count too).
MAX_READ_BYTES = 8 * 1024 * 1024


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
    """What a write does: the path, the text it had before (None: it did not exist) and the new text."""

    path: str
    old_text: str | None
    new_text: str
    real_path: str = field(default="", compare=False)  # `path` with every symlink resolved: what is written
    unshown: str | None = field(default=None, compare=False)  # why the text a file had could not be read, when it exists


def absolute_path(params: dict[str, Any]) -> str:
    """The request's `path`, which must be an absolute path string."""
    path = params.get("path")
    if not isinstance(path, str) or not path:
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: 'path' must be a non-empty string", path)
    if not os.path.isabs(path):
        raise FileRequestRefused(INVALID_PARAMS, f"Invalid params: the path {path!r} is relative; ACP file paths must be absolute", path)
    if "\x00" in path:
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: the path contains a NUL character", path)
    try:
        os.fsencode(path)  # a lone surrogate outside the surrogateescape range names no file
    except UnicodeEncodeError:
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: the path is not a file name (a lone surrogate)", path) from None
    return path


def real_path(path: str) -> str:
    """`path` with every symlink resolved (as far as it exists): where a read or write really lands."""
    return os.path.realpath(path)


def is_inside(path: str, directory: str) -> bool:
    """Whether `path` (symlinks resolved) is `directory` or lies under it (symlinks resolved too)."""
    real, root = real_path(path), real_path(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def read_text(params: dict[str, Any]) -> str:
    """The text of the regular file `params` names, cut to `line` (1-based) and `limit` lines when given."""
    path = absolute_path(params)
    line, limit = params.get("line"), params.get("limit")
    for name, value in (("line", line), ("limit", limit)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "line" else 0)):
            raise FileRequestRefused(INVALID_PARAMS, f"Invalid params: {name!r} must be a {'positive' if name == 'line' else 'non-negative'} integer", path)
    data = _read_lines(path, real_path(path), line or 1, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot read {path}: {exc}", path) from None


def plan_write(params: dict[str, Any]) -> Written:
    """What writing `params.content` to the file `params` names would change; nothing is written yet."""
    path = absolute_path(params)
    content = params.get("content")
    if not isinstance(content, str):
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: 'content' must be a string", path)
    real = real_path(path)
    _refuse_special(path, real, must_exist=False)
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise FileRequestRefused(INVALID_PARAMS, "Invalid params: 'content' is not valid Unicode (a lone surrogate)", path) from None
    old_text: str | None = None
    unshown: str | None = None
    try:
        old_text = _read_lines(path, real, 1, None).decode("utf-8")
    except FileRequestRefused as exc:  # missing, or not readable: the write still decides
        unshown = None if exc.code == RESOURCE_NOT_FOUND else str(exc)
    except UnicodeDecodeError:
        unshown = f"{path} is not UTF-8 text"
    return Written(path, old_text, content, real, unshown)


def apply_write(written: Written) -> None:
    """Replace the text of the regular file `written` names (created if missing, never through a last symlink)."""
    path, real = written.path, written.real_path or real_path(written.path)
    _refuse_special(path, real, must_exist=False)
    try:
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot write {path}: {_reason(exc)}", path) from None
    try:
        _refuse_unless_regular(path, os.fstat(fd).st_mode)
        os.ftruncate(fd, 0)
        data = written.new_text.encode("utf-8")  # plan_write checked it encodes
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot write {path}: {_reason(exc)}", path) from None
    finally:
        os.close(fd)


def write_text(params: dict[str, Any]) -> Written:
    """Replace the text of the file `params` names with `params.content` (plan_write, then apply_write)."""
    written = plan_write(params)
    apply_write(written)
    return written


def _read_lines(path: str, real: str, start: int, count: int | None) -> bytes:
    """Lines `start`.. (`count` of them, or to the end) of the regular file at `real`, reading at most MAX_READ_BYTES.

    Lines end at b"\n". `path` is the name the agent gave, for the messages.
    """
    _refuse_special(path, real, must_exist=True)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileRequestRefused(RESOURCE_NOT_FOUND, f"Resource not found: {path}", path) from None
    except OSError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot read {path}: {_reason(exc)}", path) from None
    with os.fdopen(fd, "rb") as handle:  # closes fd, also when refused
        _refuse_unless_regular(path, os.fstat(fd).st_mode)
        taken: list[bytes] = []
        used = number = 0
        while count is None or number < start - 1 + count:
            try:
                line = handle.readline(MAX_READ_BYTES + 1 - used)
            except OSError as exc:
                raise FileRequestRefused(INTERNAL_ERROR, f"cannot read {path}: {_reason(exc)}", path) from None
            if not line:
                break
            used += len(line)
            if used > MAX_READ_BYTES:
                raise FileRequestRefused(INTERNAL_ERROR, f"cannot read {path}: chat reads at most {MAX_READ_BYTES} bytes "
                                         "of a file per request; ask for fewer lines with 'line' and 'limit'", path)
            number += 1
            if number >= start:
                taken.append(line)
        return b"".join(taken)


def _refuse_special(path: str, real: str, must_exist: bool) -> None:
    """Refuse, before anything is opened, a path that is there but is not a regular file."""
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        if must_exist:
            raise FileRequestRefused(RESOURCE_NOT_FOUND, f"Resource not found: {path}", path) from None
        return
    except OSError as exc:
        raise FileRequestRefused(INTERNAL_ERROR, f"cannot open {path}: {_reason(exc)}", path) from None
    _refuse_unless_regular(path, mode)


def _refuse_unless_regular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise FileRequestRefused(INVALID_PARAMS, f"Invalid params: {path} is {_kind(mode)}, not a regular file; "
                                 "chat reads and writes regular files only", path)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
