"""Files that carry conversations out of the store are private, and no command writes or reads
them through a symbolic link (item 5).

- `acp-green sessions export -o FILE` and `acp-green trace html` create their file 0600 (they
  were 0644 under the usual umask 022), and make an existing file of ours 0600 as they rewrite it;
- neither writes through a symbolic link (a link planted where the file goes would send the
  conversation wherever it points): refused, saying so, the link's target untouched;
- `trace show` and `trace check` refuse a trace path that is a symbolic link (the reader opens
  with O_NOFOLLOW) and read the file it points to when named directly. (`trace html` reads its
  trace with its own loader, html.py's `load_events`, which this does not cover.)
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trace_samples import three_sessions

ACP_GREEN = [sys.executable, "-m", "acp_green"]


def run(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it, under the usual umask (022: new files 0644 unless made private)."""
    return subprocess.run([*ACP_GREEN, *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.umask(0o022))


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory holding one session with a turn, written by a real agent."""
    from acp_green.tools.rig.client import AgentProcess

    state = tmp_path_factory.mktemp("private-outputs") / "state"
    agent = AgentProcess([*ACP_GREEN, "serve", "--state-dir", str(state)])
    try:
        agent.initialize()
        session_id = agent.new_session()
        assert agent.prompt(session_id, "a secret conversation").result(timeout=60) == {"stopReason": "end_turn"}
        agent.close_input()
        assert agent.wait_exit() == 0
    finally:
        agent.close()
    return state


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    builder, _expected = three_sessions()
    return builder.write(tmp_path / "three.jsonl")


def test_an_export_file_is_created_0600(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.json"
    done = run("sessions", "export", "--state-dir", str(state_dir), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert mode(out) == 0o600
    assert "a secret conversation" in out.read_text()


def test_an_existing_export_file_is_rewritten_and_made_0600(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.json"
    out.write_text("x" * 100_000)
    out.chmod(0o644)
    assert run("sessions", "export", "--state-dir", str(state_dir), "-o", str(out)).returncode == 0
    assert mode(out) == 0o600
    assert json.loads(out.read_text())["sessions"]


def test_an_export_to_stdout_still_works(state_dir: Path) -> None:
    done = run("sessions", "export", "--state-dir", str(state_dir))
    assert done.returncode == 0 and json.loads(done.stdout)["sessions"]


def test_an_export_is_never_written_through_a_symbolic_link(state_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    link = tmp_path / "export.json"
    link.symlink_to(target)
    done = run("sessions", "export", "--state-dir", str(state_dir), "-o", str(link))
    assert done.returncode != 0 and "symbolic link" in done.stderr, done.stderr
    assert target.read_text() == "untouched" and link.is_symlink()


def test_a_trace_page_is_created_0600(trace: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    done = run("trace", "html", str(trace), "-o", str(page))
    assert done.returncode == 0, done.stderr
    assert mode(page) == 0o600 and page.read_text().startswith("<!DOCTYPE html>")
    page.chmod(0o644)
    assert run("trace", "html", str(trace), "-o", str(page)).returncode == 0
    assert mode(page) == 0o600


def test_a_trace_page_is_never_written_through_a_symbolic_link(trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    link = tmp_path / "page.html"
    link.symlink_to(target)
    done = run("trace", "html", str(trace), "-o", str(link))
    assert done.returncode != 0 and "symbolic link" in done.stderr, done.stderr
    assert target.read_text() == "untouched"


@pytest.mark.parametrize("command", ["show", "check"])
def test_a_trace_named_through_a_symbolic_link_is_refused_and_the_file_itself_read(trace: Path, tmp_path: Path, command: str) -> None:
    link = tmp_path / "latest.jsonl"
    link.symlink_to(trace)
    refused = run("trace", command, str(link))
    assert refused.returncode != 0 and "symbolic link" in refused.stderr, refused.stderr
    read = run("trace", command, str(trace))
    assert "symbolic link" not in read.stderr and "cannot read" not in read.stderr, read.stderr


def test_trace_html_refuses_a_trace_or_a_page_named_through_a_symbolic_link_in_one_line(tmp_path):
    """Neither the trace read nor the page written goes through a symbolic link; each refusal is
    one line naming the file (exit 1), not a traceback."""
    import subprocess
    import sys

    trace = tmp_path / "real.jsonl"
    trace.write_text('{"ts": 0, "kind": "start", "argv": ["x"], "pid": 1}\n', encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(trace)
    done = subprocess.run([sys.executable, "-m", "acp_green", "trace", "html", str(link), "-o", str(tmp_path / "p.html")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "symbolic link" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "p.html").exists()
    elsewhere = tmp_path / "elsewhere.html"
    page = tmp_path / "page.html"
    page.symlink_to(elsewhere)
    done = subprocess.run([sys.executable, "-m", "acp_green", "trace", "html", str(trace), "-o", str(page)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "symbolic link" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not elsewhere.exists()


def test_a_wire_trace_is_never_written_through_a_symbolic_link(tmp_path):
    """`serve --trace FILE` / `record`: a link planted at FILE is not followed; the trace fails
    (said once) and the target is untouched."""
    from acp_green.tracing import TraceWriter

    target = tmp_path / "victim"
    target.write_text("keep me", encoding="utf-8")
    link = tmp_path / "trace.jsonl"
    link.symlink_to(target)
    writer = TraceWriter(str(link), "test")
    assert writer.failed
    assert target.read_text(encoding="utf-8") == "keep me"
