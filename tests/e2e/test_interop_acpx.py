"""Interop with a real client: acpx, a headless ACP command-line client on npm (pinned in
tests/node/package-lock.json), drives `acp-green serve` through `acpx --agent CMD exec PROMPT`.

Each run goes through tests/peers/tee_agent.py, so every message both ways is checked afterwards:
both sides' against the stable and the unstable ACP schema, the rig's invariants over the whole
conversation, and every tool call finished (completed or failed) before its prompt's response.
acpx refuses relative paths (ACP: every file path is absolute), so a `/read` or `/write` of a
relative path works only when the runtime resolves it against the session's cwd.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from gevent import subprocess

from tests.helpers import (
    group_members,
    invariant_problems,
    stream_schema_problems,
    unfinished_tool_calls,
    wait_until,
    wire_log_records,
)
from tests.node_peers import needs_node
from tests.helpers import TESTS

pytestmark = [
    pytest.mark.slow,  # a third-party client on node; each acpx run starts node and an agent (~2 s)
    needs_node,
]

ACPX = TESTS / "node" / "node_modules" / ".bin" / "acpx"
TEE = TESTS / "peers" / "tee_agent.py"
EXIT_INTERRUPTED = 130  # acpx's exit status when a signal interrupted it before the turn ended


class AcpxRun:
    """One `acpx exec` against a tee'd `acp-green serve` in a fresh cwd and HOME."""

    def __init__(self, root: Path, name: str) -> None:
        self.cwd = root / name / "work"
        self.home = root / name / "home"
        self.log = root / name / "wire.log"
        self.cwd.mkdir(parents=True)
        self.home.mkdir()

    def command(self, prompt: str, output_format: str) -> list[str]:
        agent = [sys.executable, str(TEE), str(self.log), "--", sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
        return [str(ACPX), "--agent", shlex.join(agent), "--cwd", str(self.cwd), "--approve-all",
                "--format", output_format, "--timeout", "60", "exec", prompt]

    def popen(self, prompt: str, output_format: str = "quiet") -> subprocess.Popen:
        env = {**os.environ, "HOME": str(self.home)}  # acpx keeps its state under ~/.acpx
        return subprocess.Popen(self.command(prompt, output_format), cwd=self.cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)

    def run(self, prompt: str) -> tuple[int, str, str]:
        """Run to the end; (exit status, what acpx printed, its stderr). `--format quiet` prints the answer text."""
        process = self.popen(prompt)
        out, err = process.communicate(timeout=90)
        self.reap(process.pid)
        return process.returncode, out.decode(), err.decode()

    def reap(self, pgid: int) -> None:
        """acpx and the agents it started are all gone once it exited."""
        wait_until(lambda: not group_members(pgid), 30, f"acpx's process group {pgid} to end")

    def wire(self) -> list[dict[str, Any]]:
        """Every message both ways, after checking them all."""
        records = wire_log_records(self.log)
        problems = stream_schema_problems(records) + invariant_problems(records) + unfinished_tool_calls(records)
        assert problems == [], problems
        assert stream_schema_problems(records, sender="client") == []  # acpx's own messages, for the record
        return [r.message for r in records]


def sent_by_agent(wire: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in wire if m.get("method") == method]


def tool_updates(wire: list[dict[str, Any]], tool_call_id: str) -> list[dict[str, Any]]:
    updates = [m["params"]["update"] for m in sent_by_agent(wire, "session/update")]
    return [u for u in updates if u.get("toolCallId") == tool_call_id]


def prompt_results(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = {m["id"] for m in wire if m.get("method") == "session/prompt"}
    return [m.get("result") for m in wire if "method" not in m and m.get("id") in ids and "result" in m]


@pytest.fixture
def acpx(tmp_path: Path):
    if not ACPX.exists():
        pytest.fail("acpx is not installed in tests/node: run scripts/setup-node.sh (.ci/run does)")
    return lambda name: AcpxRun(tmp_path, name)


def test_acpx_plain_prompt(acpx):
    """A plain prompt is echoed; acpx prints the answer and exits 0."""
    run = acpx("plain")
    status, out, err = run.run("hello from acpx")
    assert (status, out.strip()) == (0, "hello from acpx"), err
    wire = run.wire()
    assert wire[0]["method"] == "initialize" and wire[0]["params"]["clientInfo"]["name"] == "acpx"
    assert prompt_results(wire) == [{"stopReason": "end_turn"}]


def test_acpx_reads_a_relative_path_from_the_session_cwd(acpx):
    """Relative paths. `/read in.txt` reads <cwd>/in.txt: the runtime sends acpx the
    absolute path (acpx refuses a relative one) and the tool call shows the file's text."""
    run = acpx("read")
    (run.cwd / "in.txt").write_text("text in the session cwd\n")
    status, out, err = run.run("/read in.txt")
    assert (status, out.strip()) == (0, "in.txt: 24 characters"), err
    wire = run.wire()
    absolute = str(run.cwd / "in.txt")
    assert [m["params"]["path"] for m in sent_by_agent(wire, "fs/read_text_file")] == [absolute]
    updates = tool_updates(wire, "read-1")
    assert updates[0]["locations"] == [{"path": absolute}]
    assert updates[-1]["status"] == "completed"
    assert updates[-1]["content"][0]["content"]["text"] == "text in the session cwd\n"


def test_acpx_approved_write_creates_the_file(acpx):
    """An approved `/write out.txt ...` (acpx --approve-all) writes <cwd>/out.txt for real."""
    run = acpx("write")
    status, out, err = run.run("/write out.txt written through acpx")
    assert (status, out.strip()) == (0, "wrote 20 characters to out.txt"), err
    assert (run.cwd / "out.txt").read_text() == "written through acpx"
    wire = run.wire()
    assert len(sent_by_agent(wire, "session/request_permission")) == 1
    assert [m["params"]["path"] for m in sent_by_agent(wire, "fs/write_text_file")] == [str(run.cwd / "out.txt")]
    assert tool_updates(wire, "write-1")[-1]["status"] == "completed"


def test_acpx_mcp_demo_echo(acpx):
    """`/mcp demo echo` calls the agent's own MCP tool server; acpx prints the tool's answer."""
    run = acpx("mcp")
    status, out, err = run.run('/mcp demo echo {"text": "echoed by the demo MCP server"}')
    assert (status, out.strip()) == (0, "echoed by the demo MCP server"), err
    wire = run.wire()
    assert tool_updates(wire, "mcp-1")[-1]["status"] == "completed"
    assert prompt_results(wire) == [{"stopReason": "end_turn"}]


def test_acpx_cancel_ends_the_turn_cancelled_with_its_tool_call_finished(acpx):
    """S14 / unfinished tool calls. Ctrl-C (SIGINT) on acpx during a 30 s MCP tool call
    sends session/cancel; the prompt answers `cancelled` and tool call mcp-1 has a final status
    before that response (checked by `wire()`)."""
    run = acpx("cancel")
    process = run.popen('/mcp demo sleep {"seconds": 30}', output_format="json")
    assert process.stdout is not None
    for line in process.stdout:  # acpx prints each ACP message as it goes
        message = json.loads(line)
        if message.get("method") == "session/update" and message["params"]["update"].get("toolCallId") == "mcp-1":
            break
    else:
        pytest.fail(f"acpx ended before the tool call started: {process.stderr.read().decode()}")
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=60)
    run.reap(process.pid)
    assert process.returncode in (0, EXIT_INTERRUPTED)
    wire = run.wire()
    assert len(sent_by_agent(wire, "session/cancel")) == 1
    assert prompt_results(wire) == [{"stopReason": "cancelled"}]
    assert tool_updates(wire, "mcp-1")[-1]["status"] in ("completed", "failed")
