"""A hostile agent against the real `acp-green chat` CLI: it cannot take the user's files or their terminal.

The agent (tests/chat_hostile_agent.py) logs every answer chat gives it, so each test checks what
really reached the agent, not only what chat printed. Chat runs in its own directory (the
session's cwd) with the user's "home" beside it: outside.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from acp_green.tools.rig.chat_files import MAX_READ_BYTES
from tests.chat_terminal import Terminal
from tests.helpers import REPO

CHAT = [sys.executable, "-m", "acp_green", "chat"]
BOUND = 120  # generous: only decides when a broken chat stops being waited for
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- do not leak"
NOT_APPROVED = -32001


@dataclass
class Chatted:
    stdout: bytes
    stderr: bytes
    answers: list[dict]  # what the agent got, one per request, in order

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8")

    def leaked(self, text: str) -> bool:
        return text in json.dumps(self.answers)


class Place:
    """Chat's directory (`work`, the session's cwd) and a home with a private key outside it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.work = tmp_path / "work"
        self.home = tmp_path / "home"
        self.work.mkdir()
        (self.home / ".ssh").mkdir(parents=True)
        self.key = self.home / ".ssh" / "id_ed25519"
        self.key.write_text(SECRET + "\n")

    def chat(self, orders: str, *options: str, env: dict[str, str] | None = None) -> Chatted:
        log = self.tmp / "agent-log.jsonl"
        log.unlink(missing_ok=True)
        command = [*CHAT, *options, "--", sys.executable, "-m", "tests.chat_hostile_agent", str(log)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env or {})}
        done = subprocess.run(command, input=orders.encode(), capture_output=True, timeout=BOUND, cwd=self.work, env=env)
        assert done.returncode == 0, done.stderr.decode()
        answers = [json.loads(line)["answer"] for line in log.read_text().splitlines()] if log.exists() else []
        return Chatted(done.stdout, done.stderr, answers)


def error_of(answer: dict) -> dict:
    assert "error" in answer and "result" not in answer, answer
    return answer["error"]


def test_deny_refuses_reads_outside_cwd_and_the_content_never_reaches_the_agent(tmp_path):
    place = Place(tmp_path)
    done = place.chat(f"read {place.key}\nread /proc/self/environ\n", "--deny", env={"CHAT_TEST_TOKEN": "tok-3141592"})
    assert [error_of(a)["code"] for a in done.answers] == [NOT_APPROVED, NOT_APPROVED]
    assert not done.leaked("do not leak") and not done.leaked("tok-3141592")
    assert "The user did not approve reading" in error_of(done.answers[0])["message"]
    assert "--deny" in error_of(done.answers[0])["message"]
    assert f"[file] read {place.key}, outside {place.work}: rejected (--deny)" in done.out  # the line to the user
    assert "read: error -32001" in done.out


def test_a_pipe_without_yes_refuses_a_read_outside_cwd_and_says_how_to_approve(tmp_path):
    place = Place(tmp_path)
    done = place.chat(f"read {place.key}\n")
    assert error_of(done.answers[0])["code"] == NOT_APPROVED and not done.leaked("do not leak")
    assert "stdin is not a terminal" in error_of(done.answers[0])["message"]
    assert (f"chat: rejected 'read {place.key}, outside {place.work}': stdin is not a terminal, so nobody can be asked; "
            "run chat with --yes to approve the agent's requests") in done.err.splitlines()


def test_reads_inside_cwd_are_answered_and_yes_approves_reads_outside(tmp_path):
    place = Place(tmp_path)
    (place.work / "notes.txt").write_text("one\ntwo\nthree\n")
    done = place.chat(f"read {place.work}/notes.txt\nread {place.work}/notes.txt 2 1\n")  # no --yes: inside needs no question
    assert [a["result"]["content"] for a in done.answers] == ["one\ntwo\nthree\n", "two\n"]
    done = place.chat(f"read {place.work}/notes.txt\nread {place.key}\n", "--yes")
    assert [a["result"]["content"] for a in done.answers] == ["one\ntwo\nthree\n", SECRET + "\n"]
    assert f"[file] read {place.key}, outside {place.work}: approved (--yes)" in done.out


def test_every_write_is_asked_so_a_pipe_without_yes_refuses_one_inside_cwd(tmp_path):
    place = Place(tmp_path)
    inside, outside = place.work / "new.txt", place.home / ".bashrc"
    done = place.chat(f"write {inside} planted\nwrite {outside} planted\n")
    assert [error_of(a)["code"] for a in done.answers] == [NOT_APPROVED, NOT_APPROVED]
    assert not inside.exists() and not outside.exists()
    assert f"chat: rejected 'write {inside}': stdin is not a terminal" in done.err
    done = place.chat(f"write {inside} planted\n", "--deny")
    assert error_of(done.answers[0])["code"] == NOT_APPROVED and not inside.exists()
    assert f"[file] write {inside}: rejected (--deny)" in done.out
    done = place.chat(f"write {inside} planted\n", "--yes")
    assert done.answers == [{"jsonrpc": "2.0", "id": 1001, "result": {}}] and inside.read_text() == "planted"


def test_a_symlink_inside_cwd_that_leads_outside_is_outside(tmp_path):
    place = Place(tmp_path)
    (place.work / "ssh").symlink_to(place.home / ".ssh")  # a directory link
    (place.work / "key").symlink_to(place.key)  # a file link
    (place.work / "rc").symlink_to(place.home / ".profile")  # dangling: a write would create it outside
    done = place.chat(f"read {place.work}/ssh/id_ed25519\nread {place.work}/key\nwrite {place.work}/rc planted\n")
    assert [error_of(a)["code"] for a in done.answers] == [NOT_APPROVED] * 3
    assert not done.leaked("do not leak") and not (place.home / ".profile").exists()
    assert f"rejected 'read {place.work}/key (really {place.key}), outside {place.work}'" in done.err


def test_a_fifo_a_device_and_a_directory_are_refused_at_once(tmp_path):
    place = Place(tmp_path)
    fifo = place.work / "pipe"
    os.mkfifo(fifo)  # nobody ever writes to it: opening it to read without O_NONBLOCK waits forever
    started = time.monotonic()
    done = place.chat(f"read {fifo}\nread /dev/zero\nread {place.work}\nwrite {fifo} x\n", "--yes")
    assert time.monotonic() - started < BOUND / 2
    errors = [error_of(a) for a in done.answers]
    assert [e["code"] for e in errors] == [-32602] * 4
    assert [e["message"].split(" is ", 1)[1] for e in errors] == [
        "a FIFO, not a regular file; chat reads and writes regular files only",
        "a character device, not a regular file; chat reads and writes regular files only",
        "a directory, not a regular file; chat reads and writes regular files only",
        "a FIFO, not a regular file; chat reads and writes regular files only"]
    assert f"[read refused] Invalid params: {fifo} is a FIFO" in done.out


def test_a_read_takes_at_most_the_documented_bytes_but_a_range_of_a_big_file_is_answered(tmp_path):
    place = Place(tmp_path)
    big = place.work / "big.log"
    line = "x" * 1023 + "\n"
    big.write_text(line * (MAX_READ_BYTES // len(line) + 1))
    done = place.chat(f"read {big}\nread {big} 3 2\n")
    assert f"at most {MAX_READ_BYTES} bytes" in error_of(done.answers[0])["message"]
    assert done.answers[1]["result"]["content"] == line * 2


def test_paths_no_file_can_have_are_refused_and_chat_goes_on(tmp_path):
    place = Place(tmp_path)
    (place.work / "notes.txt").write_text("still here\n")
    done = place.chat(f"odd-paths\nread {place.work}/notes.txt\n", "--yes")
    errors = [error_of(a) for a in done.answers[:-1]]
    assert [e["code"] for e in errors] == [-32602] * 8  # NUL, lone surrogate, a number, params a list; read and write each
    assert "a NUL character" in errors[0]["message"] and "a lone surrogate" in errors[2]["message"]
    assert done.answers[-1]["result"]["content"] == "still here\n"  # chat still answers


ESC_OR_C1 = re.compile("[\x1b\x07\x08\r\x80-\x9f]")


def test_escape_sequences_from_the_agent_never_reach_the_terminal_from_a_pipe(tmp_path):
    place = Place(tmp_path)
    done = place.chat("escapes\n", "--deny")
    assert not ESC_OR_C1.search(done.out + done.err), done.stdout  # no ESC, BEL, CR, backspace or C1 control
    shown = r"\x1b]0;pwned-title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[31m\x1b[1A\x9b31m\x9d0;c1-title\x9c\x0d\x08\x07"
    assert r"chatting with hostile\x1b]0;pwned-title\x07 (session s1)" in done.out
    for where in ("message", "thought", "[tool] title", "content", "[plan]\n  [ ] plan",
                  "[permission] ask"):
        assert where + shown in done.out, where  # visible, harmless, not dropped
    assert "permission:" in done.out and "end\n" in done.out  # normal text and newlines stay


def test_in_a_terminal_a_read_outside_cwd_is_asked_and_escapes_are_shown_not_obeyed(tmp_path):
    secret = tmp_path / "id_ed25519"
    secret.write_text(SECRET)
    log = tmp_path / "agent-log.jsonl"
    term = Terminal(CHAT + ["--", sys.executable, "-m", "tests.chat_hostile_agent", str(log)])
    term.expect(b"> ")
    term.type(f"read {secret}\n".encode())
    term.expect(f"[file] read {secret}, outside ".encode())
    term.expect(b"1 allow [y] \xc2\xb7 2 refuse [n] ? ")
    term.type(b"n\n")
    term.expect(b"read: error -32001\r\n[end_turn]\r\n> ")
    term.type(f"read {secret}\n".encode())
    term.expect(b"2 refuse [n] ? ")
    term.type(b"y\n")
    term.expect(f"read: {len(SECRET)} characters\r\n[end_turn]\r\n> ".encode())
    term.type(f"read {tmp_path}/other\n".encode())
    term.expect(f"[file] read {tmp_path}/other, outside ".encode())
    term.type(b"\x03")  # Ctrl-C while asked: the question is withdrawn, the read answered -32800
    term.expect(b"(question withdrawn)")
    term.expect(b"read: error -32800\r\n[end_turn]\r\n> ")
    term.type(b"escapes\n")
    term.expect(b"[permission] ask\\x1b]0;pwned-title")
    term.expect(b"Reject\\x1b]0;pwned-title")
    term.type(b"n\n")
    term.expect(b"[end_turn]\r\n> ")
    term.type(b"\x04")
    assert term.wait() == 0
    assert b"message\\x1b]0;pwned-title\\x07\\x1b]52;c;" in term.seen  # shown as text
    # Chat's own styles are the only escape sequences written: SGR (ESC [ digits m), nothing else.
    others = re.sub(rb"\x1b\[[0-9;]*m", b"", term.seen)
    assert b"\x1b" not in others and b"\x07" not in others and b"\xc2\x9b" not in others and b"\xc2\x9d" not in others
    assert b"message\x1b" not in term.seen and b"\\x1b[31m" in term.seen  # the agent's own SGR is shown, not applied
    answers = [json.loads(line)["answer"] for line in log.read_text().splitlines()]
    assert error_of(answers[0])["code"] == NOT_APPROVED and answers[1]["result"]["content"] == SECRET
    assert error_of(answers[2])["code"] == -32800


def test_the_screen_lets_through_only_chats_own_styles(capsys, monkeypatch):
    """The last guard: a line that skipped harmless() still cannot move the cursor, set a title or ring."""
    import click

    from acp_green.tools.rig.chat_render import Screen
    from acp_green.tools.rig.chat_text import harmless

    monkeypatch.setattr(click.utils, "should_strip_ansi", lambda stream=None, color=None: False)  # as on a terminal
    Screen(spinner=False).line(click.style("[tool]", fg="red") + " \x1b]0;t\x07\x1b[2J\x9b1A\ttab")
    assert capsys.readouterr().out == "\x1b[31m[tool]\x1b[0m \\x1b]0;t\\x07\\x1b[2J\\x9b1A\ttab\n"
    assert harmless("a\nb\tc\x1b[31md\x00\x7f\x85é…") == "a\nb\tc\\x1b[31md\\x00\\x7f\\x85é…"


def test_help_says_what_chat_lets_an_agent_do_and_the_read_limit():
    done = subprocess.run([*CHAT, "--help"], capture_output=True, text=True, timeout=BOUND)
    text = " ".join(done.stdout.split())
    assert "a read outside it (symlinks resolved) and every write are asked first" in text
    assert f"a read takes at most {MAX_READ_BYTES // 2**20} MiB" in text
    assert "every write and every read outside the current directory" in text  # --deny


def test_a_write_over_a_file_chat_cannot_show_says_so_before_it_is_approved(tmp_path):
    place = Place(tmp_path)
    binary = place.work / "data.bin"
    binary.write_bytes(b"\xff\xfe binary")
    done = place.chat(f"write {binary} text\n", "--deny")
    assert error_of(done.answers[0])["code"] == NOT_APPROVED and binary.read_bytes() == b"\xff\xfe binary"
    done = place.chat(f"write {binary} text\n", "--yes")
    assert f"    replaces the whole file, whose text is not shown: {binary} is not UTF-8 text\n    --- /dev/null" in done.out
    assert binary.read_text() == "text"
