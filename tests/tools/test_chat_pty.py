"""`acp-green chat` on a pseudo-terminal, as a person uses it: the reply streams, Ctrl-C cancels the
turn without killing the agent (it runs in its own session), slash commands reach the agent,
Ctrl-D quits cleanly; and the next line typed answers a permission, a command to run or a form,
and what was approved really happens on this machine."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.chat_terminal import Terminal

CHAT = [sys.executable, "-m", "acp_green", "chat"]


def test_chat_streams_cancels_with_ctrl_c_and_quits_with_ctrl_d(tmp_path):
    term = Terminal(CHAT)
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


def test_ctrl_c_at_the_prompt_quits_and_leaves_no_session_stored(tmp_path):
    state = tmp_path / "state"
    term = Terminal(CHAT + ["--state-dir", str(state)])
    term.expect(b"Ctrl-C cancels a turn")
    term.expect(b"> ")
    term.type(b"\x03")  # Ctrl-C at the prompt: chat quits at once
    assert term.wait() == 130
    listed = subprocess.run([sys.executable, "-m", "acp_green", "sessions", "list", "--json", "--state-dir", str(state)],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout + listed.stderr


def chat_with(*agent: str) -> Terminal:
    term = Terminal(CHAT + (["--", sys.executable, "-m", "acp_green", "serve", "--ephemeral", *agent] if agent else []))
    term.expect(b"Ctrl-C cancels a turn")
    term.expect(b"> ")
    return term


def quit_chat(term: Terminal) -> None:
    term.type(b"\x04")  # Ctrl-D at the prompt
    assert term.wait() == 0


def test_write_happens_on_disk_after_the_person_allows_it(tmp_path):
    target = tmp_path / "c.txt"
    term = chat_with()
    term.type(f"/write {target} hello there\n".encode())
    term.expect(f"[permission] Write {target}\r\n".encode())  # the tool call's title
    term.expect(f"file: {target}\r\n".encode())
    term.expect(b"1 Allow [y] \xc2\xb7 2 Reject [n] ? ")
    assert not target.exists()  # nothing happens before the answer
    term.type(b"maybe\n")  # unclear: asked again, nothing decided
    term.expect(b"please answer with one of the choices")
    term.type(b"y\n")
    term.expect(f"[file] write {target}, outside ".encode())  # chat itself asks before any write, showing the diff
    term.expect(f"+++ {target}\r\n    @@ -0,0 +1 @@\r\n    +hello there\r\n".encode())
    term.expect(b"1 allow [y] \xc2\xb7 2 refuse [n] ? ")
    assert not target.exists()
    term.type(b"y\n")
    term.expect(f"wrote 11 characters to {target}\r\n[end_turn]\r\n> ".encode())
    assert target.read_text() == "hello there"
    term.type(f"/read {target}\n".encode())  # read back from the disk through the agent
    term.expect(f"[file] read {target}, outside ".encode())  # outside chat's directory: asked too
    term.type(b"y\n")
    term.expect(f"{target}: 11 characters".encode())
    quit_chat(term)


def test_the_permission_shows_the_diff_and_a_rejection_leaves_the_file_alone(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("first\n")
    term = chat_with("--agent", "tests.chat_agents:WritesWithDiffAgent")
    term.type(f"{target} second\n".encode())
    term.expect(f"[file] read {target}, outside ".encode())  # the agent reads it first: outside chat's directory
    term.type(b"y\n")
    term.expect(f"[permission] Append to {target}\r\n".encode())
    term.expect(f"--- {target}\r\n    +++ {target}\r\n    @@ -1 +1,2 @@\r\n     first\r\n    +second\r\n".encode())  # before any answer
    term.expect(b"1 Allow once [y] \xc2\xb7 2 Allow always [a] \xc2\xb7 3 Reject [n] ? ")
    term.type(b"n\n")
    term.expect(b"not written: Permission denied")
    term.expect(b"[end_turn]\r\n> ")
    assert target.read_text() == "first\n"
    term.type(f"{target} second\n".encode())
    term.expect(b"2 refuse [n] ? ")
    term.type(b"y\n")
    term.expect(b"3 Reject [n] ? ")
    term.type(b"a\n")  # allow always
    term.expect(f"[file] write {target}, outside ".encode())
    term.expect(b"2 refuse [n] ? ")
    term.type(b"y\n")
    term.expect(b"appended (answered always)")
    assert target.read_text() == "first\nsecond\n"
    quit_chat(term)


def test_a_command_runs_locally_only_after_the_person_allows_it(tmp_path):
    marker = tmp_path / "ran"
    term = chat_with()
    term.type(f"/term touch {marker}\n".encode())
    term.expect(f"[run] touch {marker}\r\n".encode())
    term.expect(b"1 run it [y] \xc2\xb7 2 do not run it [n] ? ")
    term.type(b"n\n")
    term.expect(b"not run: The user did not approve running the command")
    assert not marker.exists()
    term.type(b"/term echo hello from the terminal\n")
    term.expect(b"do not run it [n] ? ")
    term.type(b"y\n")
    term.expect(b"[terminal term-1]\r\n    hello from the terminal\r\n")
    term.expect(b"echo: exit code 0")
    quit_chat(term)


def test_a_form_is_shown_and_filled_from_the_typed_lines():
    term = Terminal(CHAT + ["--yes"])  # --yes approves; a form still needs the person's answers
    term.expect(b"> ")
    term.type(b"/ask What is your name?\n")
    term.expect(b"[form] What is your name?\r\n")
    term.expect(b"1 fill it in [f] \xc2\xb7 2 decline [d] \xc2\xb7 3 cancel [c] ? ")
    term.type(b"f\n")
    term.expect(b"Answer ? ")
    term.type(b"Ada\n")
    term.expect(b"you answered: Ada\r\n[end_turn]")
    term.type(b"/ask again?\n")
    term.expect(b"cancel [c] ? ")
    term.type(b"d\n")
    term.expect(b"no answer (decline)")
    quit_chat(term)


def test_thoughts_are_dimmed_and_a_spinner_runs_until_ctrl_c_withdraws_the_question():
    term = chat_with()
    term.type(b"/think\n")
    term.expect(b"\x1b[2m\x1b[3mthinking: \x1b[0m\x1b[2m\x1b[3mConsidering the request. \x1b[0m", raw=True)  # dim, italic
    term.expect(b"\r\nthinking: Considering the request. Weighing the options. Deciding.\r\ndone thinking\r\n[end_turn]\r\n> ")
    term.type(b"/wait\n")
    term.expect(b"|\x08", raw=True)  # the spinner: nothing was shown for this turn yet
    term.type(b"\x03")
    term.expect(b"[cancelled]\r\n> ")
    term.type(b"/write /tmp/never-written-by-chat-tests x\n")
    term.expect(b"Reject [n] ? ")
    term.type(b"\x03")  # Ctrl-C while asked: the question is withdrawn, the turn cancelled
    term.expect(b"(question withdrawn)")
    term.expect(b"[cancelled]\r\n> ")
    term.type(b"still here\n")  # the line typed next is a prompt again
    term.expect("… still here\r\n[end_turn]".encode())
    quit_chat(term)


def test_ctrl_c_answers_an_open_permission_cancelled_even_when_the_agent_does_not_withdraw_it():
    """ACP: when the turn is cancelled the client MUST answer a pending permission "cancelled"."""
    term = Terminal(CHAT + ["--", sys.executable, "-m", "tests.chat_raw_agent"])
    term.expect(b"> ")
    term.type(b"go\n")
    term.expect(b"[permission] Do the thing\r\n")
    term.expect(b"Reject [n] ? ")
    term.type(b"\x03")
    term.expect(b"(question withdrawn)")
    term.expect(b'outcome: {"outcome": {"outcome": "cancelled"}}\r\n[end_turn]\r\n> ')
    term.type(b"go\n")  # the next question is asked and answered as usual
    term.expect(b"Reject [n] ? ")
    term.type(b"y\n")
    term.expect(b'outcome: {"outcome": {"optionId": "ok", "outcome": "selected"}}')
    quit_chat(term)
