"""`acp-green chat`'s keys on a pseudo-terminal: Ctrl-C cancels a turn and a second one (or one at
the prompt, or while chat waits for the agent) quits at once with one line; Ctrl-D quits at the
prompt and, during a turn, cancels it and then quits; an agent that does not answer gets a status
line saying what chat waits for and how to quit; the agent is stopped when chat ends, even one that
ignores the end of its input."""

from __future__ import annotations

import os
import sys

from tests.chat_terminal import Terminal

CHAT = [sys.executable, "-m", "acp_green", "chat"]
STUCK_TURNS = ["--", sys.executable, "-m", "tests.chat_raw_agent", "--never-ends-a-turn"]
NO_NOISE = (b"Traceback", b"KeyboardInterrupt", b"Aborted")


def started(*args: str) -> Terminal:
    term = Terminal(CHAT + list(args))
    term.expect(b"Ctrl-C cancels a turn")
    term.expect(b"> ")
    return term


def ended_quietly(term: Terminal, code: int) -> None:
    assert term.wait() == code
    assert not [noise for noise in NO_NOISE if noise in term.seen], term.seen.decode(errors="replace")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_at_the_prompt_quits_at_once_with_one_line(tmp_path):
    term = started("--state-dir", str(tmp_path))
    term.type(b"\x03")
    term.expect(b"chat: quit (Ctrl-C)\r\n")
    ended_quietly(term, 130)
    assert term.shown.count(b"chat:") == 1


def test_an_agent_that_never_answers_gets_a_status_line_and_ctrl_c_quits_and_stops_it(tmp_path):
    pid_file = tmp_path / "pid"
    term = Terminal(CHAT + ["--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 1000"])  # ignores its input's end too
    term.expect(b"chat: waiting for the agent to answer initialize; Ctrl-C quits\r\n")
    term.type(b"\x03")
    term.expect(b"chat: quit (Ctrl-C) before the agent answered initialize\r\n")
    ended_quietly(term, 130)
    assert gone(int(pid_file.read_text())), "chat left its agent running"


def test_a_second_ctrl_c_quits_when_the_agent_does_not_end_the_cancelled_turn():
    term = started(*STUCK_TURNS)
    term.type(b"go\n")
    term.expect("go\r\n… ".encode())
    term.type(b"\x03")
    term.expect(b"^C cancelling the turn (Ctrl-C again quits)\r\n")
    term.expect(b"chat: the agent has not ended the cancelled turn yet; Ctrl-C quits without waiting\r\n")
    term.type(b"\x03")
    term.expect(b"chat: quit (Ctrl-C) without waiting for the turn to end\r\n")
    ended_quietly(term, 130)


def test_a_silent_turn_gets_a_status_line():
    term = started(*STUCK_TURNS)
    term.type(b"go\n")
    term.expect(b"chat: nothing from the agent for 10 s; Ctrl-C cancels the turn, a second Ctrl-C quits\r\n")
    term.type(b"\x03")
    term.expect(b"^C cancelling the turn")
    term.type(b"\x03")
    ended_quietly(term, 130)


def test_ctrl_d_during_a_turn_cancels_it_then_quits(tmp_path):
    term = started("--state-dir", str(tmp_path))
    term.type(b"/wait\n")
    term.expect("/wait\r\n… ".encode())
    term.type(b"\x04")  # nobody reads a line during the turn but chat: it is seen at once
    term.expect(b"^D cancelling the turn, then quitting (Ctrl-C quits at once)\r\n")
    term.expect(b"[cancelled]\r\n")
    ended_quietly(term, 0)


def test_ctrl_d_at_a_question_refuses_it_cancels_the_turn_and_quits(tmp_path):
    target = tmp_path / "never.txt"
    term = started("--state-dir", str(tmp_path / "state"))
    term.type(f"/write {target} x\n".encode())
    term.expect(b"Reject [n] ? ")
    term.type(b"\x04")  # the question is refused or withdrawn (whichever comes first), the turn cancelled
    ended_quietly(term, 0)
    assert not target.exists()


def test_only_the_offered_permission_options_are_accepted(tmp_path):
    target = tmp_path / "c.txt"
    term = started("--state-dir", str(tmp_path / "state"))
    term.type(f"/write {target} hi\n".encode())
    term.expect(b"1 Allow [y] \xc2\xb7 2 Reject [n] ? ")  # the demo offers allow once and reject once, nothing else
    term.type(b"a\n")  # allow always: not offered, so not an answer
    term.expect(b"please answer with one of the choices")
    term.type(b"3\n")  # nor a third option
    term.expect(b"? 3\r\n  please answer with one of the choices")
    term.type(b"n\n")
    term.expect(b"not written: Permission denied")
    term.expect(b"[end_turn]\r\n> ")
    assert not target.exists()
    term.type(b"\x04")
    ended_quietly(term, 0)
