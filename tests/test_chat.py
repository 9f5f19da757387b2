"""`acp-green chat` in a real terminal (a pty): the reply streams, Ctrl-C cancels the turn
without killing the agent (it runs in its own session), slash commands reach the agent,
Ctrl-D quits cleanly."""

from __future__ import annotations

import sys

from tests.chat_terminal import Terminal


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
