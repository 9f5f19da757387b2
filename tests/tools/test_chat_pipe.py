"""`acp-green chat` driven from a pipe: what it does with nobody to ask, what it shows, and how it
fails when the agent is missing or dies (one line on stderr, exit 1, never a traceback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers import REPO

CHAT = [sys.executable, "-m", "acp_green", "chat"]
BOUND = 120  # generous: only decides when a broken chat stops being waited for
ESCAPE = re.compile(r"\x1b\[")
ROOT = REPO


def chat(lines: str, *options: str, agent: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [*CHAT, *options] + (["--", sys.executable, "-m", "acp_green", "serve", "--ephemeral", *agent] if agent else [])
    return subprocess.run(command, input=lines, capture_output=True, text=True, timeout=BOUND)


def test_yes_from_a_pipe_writes_and_reads_a_real_file(tmp_path):
    target = tmp_path / "c.txt"
    done = chat(f"/write {target} hi\n/read {target}\n", "--yes")
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "hi"
    assert f"[permission] Write {target}: approved (--yes)" in done.stdout
    assert f"wrote 2 characters to {target}" in done.stdout
    assert f"{target}: 2 characters" in done.stdout  # read back from the disk, not from memory
    assert f"[wrote] {target}\n    --- /dev/null\n    +++ {target}\n    @@ -0,0 +1 @@\n    +hi\n" in done.stdout


def test_without_a_terminal_or_yes_the_write_is_rejected_with_one_line_saying_how_to_approve(tmp_path):
    target = tmp_path / "c.txt"
    done = chat(f"/write {target} hi\n")
    assert done.returncode == 0, done.stderr
    assert not target.exists()
    assert "not written: Permission denied" in done.stdout
    hints = [line for line in done.stderr.splitlines() if "--yes" in line]
    assert hints == [f"chat: rejected 'Write {target}': stdin is not a terminal, so nobody can be asked; "
                     "run chat with --yes to approve the agent's requests"]
    assert "approved" not in done.stdout and "automatically" not in done.stdout


def test_deny_says_it_rejected_never_that_it_answered_automatically(tmp_path):
    target = tmp_path / "c.txt"
    done = chat(f"/write {target} hi\n/term touch {tmp_path / 'ran'}\n", "--deny")
    assert done.returncode == 0, done.stderr
    assert f"[permission] Write {target}: rejected (--deny)" in done.stdout
    assert f"[run] touch {tmp_path / 'ran'}: rejected (--deny)" in done.stdout
    assert "automatically" not in done.stdout + done.stderr
    assert not target.exists() and not (tmp_path / "ran").exists()


def test_yes_and_deny_together_are_a_usage_error():
    done = subprocess.run([*CHAT, "--yes", "--deny"], input="", capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 2
    assert "--yes and --deny cannot be given together" in done.stderr


def test_a_relative_path_is_refused_with_a_clear_error_to_the_agent(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the agent's module, while chat runs in an empty directory
    done = subprocess.run([*CHAT, "--yes", "--", sys.executable, "-m", "acp_green", "serve", "--ephemeral",
                           "--agent", "tests.chat_agents:SendsRelativePathAgent"],
                          input="go\n", capture_output=True, text=True, timeout=BOUND, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []  # not resolved against any directory
    relative = "the path 'notes.txt' is relative; ACP file paths must be absolute"
    assert f"fs/write_text_file failed: Invalid params: {relative} (-32602)" in done.stdout
    assert f"fs/read_text_file failed: Invalid params: {relative} (-32602)" in done.stdout
    assert f"[write refused] Invalid params: {relative}" in done.stdout


def test_diffs_plans_failed_tool_calls_and_terminals_render_without_escapes_in_a_pipe(tmp_path):
    existing = tmp_path / "a.txt"
    existing.write_text("one\n")
    missing = tmp_path / "missing.txt"
    done = chat(f"/diff {existing}\n/plan\n/read {missing}\n/fail\n/think\n/term echo hi there\n", "--yes")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"    --- {existing}\n    +++ {existing}\n    @@ -1 +1,2 @@\n     one\n    +edited by the acp_green demo\n" in out
    assert "[plan]\n  [x] Read the question\n  [ ] Think about it\n  [ ] Answer\n" in out  # a checklist
    assert "[plan]\n  [x] Read the question\n  [x] Think about it\n  [x] Answer\n" in out
    # A failed tool call shows why it failed.
    assert f"[tool] Read {missing} (read): failed\n    Cannot read {missing}: fs/read_text_file failed: Resource not found: {missing} (-32002)" in out
    assert "[error -32603: RuntimeError: demo failure requested by /fail]" in out
    # Thoughts are a line of their own, after a prefix; the reply starts on the next line.
    assert "\nthinking: Considering the request. Weighing the options. Deciding.\ndone thinking\n[end_turn]" in out
    assert "[terminal term-1]\n    hi there\n    exit code 0\n" in out
    assert not ESCAPE.search(out + done.stderr)  # no styles or spinner into pipes


def test_a_form_is_declined_when_nobody_can_fill_it():
    done = chat("/ask name?\n", "--yes")
    assert "no answer (decline)" in done.stdout
    assert "chat: declined the agent's form 'name?': forms are filled only when stdin is a terminal" in done.stderr


def test_a_missing_agent_is_one_line_and_exit_1():
    done = subprocess.run([*CHAT, "--", "/nonexistent/agent"], input="hi\n", capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["chat: cannot start '/nonexistent/agent': No such file or directory"]
    assert done.stdout == ""


def test_an_agent_that_exits_before_a_session_is_one_line_and_exit_1():
    done = subprocess.run([*CHAT, "--", sys.executable, "-c", "import sys; sys.stderr.write('no luck\\n'); sys.exit(4)"],
                          input="hi\n", capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["chat: the agent did not start a session: it exited with code 4 (its stderr ends: no luck)"]


def test_an_agent_that_exits_mid_session_is_one_line_and_exit_1():
    done = chat("hello\nnever sent\n", agent=("--agent", "tests.chat_agents:ExitsOnPromptAgent"))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["chat: the agent exited with code 3 (its stderr ends: exits-on-prompt: going away)"]


def test_help_says_how_questions_are_answered():
    done = subprocess.run([*CHAT, "--help"], capture_output=True, text=True, timeout=BOUND)
    assert "the next line typed is the answer" in done.stdout
    assert "--yes" in done.stdout and "--deny" in done.stdout
    assert "reject when it is not" in " ".join(done.stdout.split())
