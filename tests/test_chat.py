"""`acp-green chat` in a real terminal (a pty): the reply streams, Ctrl-C cancels the turn
without killing the agent (it runs in its own session), slash commands reach the agent,
Ctrl-D quits cleanly."""

from __future__ import annotations

import os
import pty
import re
import select
import sys
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

    def expect(self, pattern: bytes, within: float = BOUND, fail: bool = True) -> bool:
        deadline = time.monotonic() + within
        while pattern not in ANSI.sub(b"", self.seen):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                if not fail:
                    return False
                pytest.fail(f"no {pattern!r} on the terminal; it shows:\n{self.seen.decode(errors='replace')}")
            try:
                self.seen += os.read(self.fd, 65536)
            except OSError:
                pytest.fail(f"the terminal closed before {pattern!r}:\n{self.seen.decode(errors='replace')}")
        return True

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def test_chat_streams_cancels_with_ctrl_c_and_quits_with_ctrl_d(tmp_path):
    term = Terminal([sys.executable, "-m", "acp_green", "chat"])
    term.expect(b"Ctrl-C cancels a turn")
    term.expect(b"agent commands: /stream")
    term.expect(b"> ")
    term.type(b"/stream 3 8\n")  # a slash command goes to the agent as it is
    term.expect("… 0:......1:......2:......\r\n[end_turn]\r\n> ".encode())  # type only at the prompt
    term.type(b"/wait\n")
    term.expect("/wait\r\n… ".encode())  # the turn has started: the prompt is with the agent
    term.type(b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group, i.e. to chat only
    term.expect(b"[cancelled]\r\n> ")
    term.type(b"still alive?\n")  # the agent did not get the SIGINT: it answers the next turn
    term.expect("… still alive?\r\n[end_turn]".encode())
    term.type(b"\x04")  # Ctrl-D
    assert term.wait() == 0
