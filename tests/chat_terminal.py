"""A command run on a pseudo-terminal, as a person would run it: chat's tests type into it and read what it shows."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time

import pytest

# Styles, and the spinner's frames on stderr (a character then a backspace; a blank erases it).
ANSI = re.compile(rb"\x1b\[[0-9;]*m|[|/\\ -]\x08")
BOUND = 60.0  # generous: only decides when a broken chat stops being waited for


class Terminal:
    """The parent side of a pty running one command."""

    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child: becomes the session leader with the pty as its terminal
            os.execv(argv[0], argv)
        self.seen = b""

    @property
    def shown(self) -> bytes:
        """What the terminal shows so far, without styles or spinner frames."""
        return ANSI.sub(b"", self.seen)

    def expect(self, pattern: bytes, within: float = BOUND, raw: bool = False) -> None:
        """Wait until `pattern` is shown (`raw`: in the bytes as written, styles included)."""
        deadline = time.monotonic() + within
        while pattern not in (self.seen if raw else self.shown):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                pytest.fail(f"no {pattern!r} on the terminal; it shows:\n{self.seen.decode(errors='replace')}")
            try:
                self.seen += os.read(self.fd, 65536)
            except OSError:
                pytest.fail(f"the terminal closed before {pattern!r}:\n{self.seen.decode(errors='replace')}")

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, within: float = BOUND) -> int:
        """The command's exit code, after reading what it still shows (killed, and the test failed, if it runs on past `within`)."""
        deadline = time.monotonic() + within
        while True:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                pytest.fail(f"the command did not end; the terminal shows:\n{self.seen.decode(errors='replace')}")
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)
