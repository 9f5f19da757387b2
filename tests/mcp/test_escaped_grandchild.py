"""An MCP server's descendant that leaves its process group (setsid) and keeps the server's
stdout open: the agent still exits within its shutdown grace and a small margin, and the
descendant does not outlive it (found by the mark in its environment, mcp/escapees.py)."""

from __future__ import annotations

import os
import shlex
import sys
import time

from acp_green.mcp.escapees import MARK_VARIABLE, kill_marked, new_mark
from tests.helpers import process_gone, wait_gone, wait_until
from tests.mcp_helpers import RECORDER

GRACE = 1.0
MARGIN = 2.0


def escaping_server(pidfile: str) -> dict:
    """The recorder, started by a shell that first leaves behind a setsid'd sleep holding its stdout."""
    escapee = f'echo $$ > {shlex.quote(pidfile)}; exec sleep 600'
    script = f"setsid sh -c {shlex.quote(escapee)} & exec {shlex.quote(sys.executable)} {shlex.quote(RECORDER)}"
    return {"name": "gc", "command": "sh", "args": ["-c", script], "env": []}


def test_a_setsid_grandchild_holding_stdout_neither_holds_the_exit_nor_survives(launch, tmp_path):
    """An MCP grandchild that called setsid and keeps stdout open: with --shutdown-grace 1 the
    agent exits at EOF within the grace and a margin (8.1 s before), and the grandchild is killed."""
    pidfile = tmp_path / "escapee.pid"
    agent = launch("--ephemeral", "--shutdown-grace", str(GRACE))
    agent.initialize()
    session_id = agent.new_session(mcp_servers=[escaping_server(str(pidfile))])
    assert agent.prompt(session_id, "/mcp gc pid").result() == {"stopReason": "end_turn"}
    server = int([u for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"][-1]
                 ["content"][0]["content"]["text"])
    escapee = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the escapee's pid"))
    assert os.getsid(escapee) != os.getsid(server), "the grandchild left the server's session"
    started = time.monotonic()
    agent.close_input()
    assert agent.wait_exit(30) == 0
    took = time.monotonic() - started
    print(f"the agent exited {took:.2f}s after EOF")
    assert took < GRACE + MARGIN, f"exit took {took:.1f}s"
    assert wait_gone(escapee, timeout=5), "the setsid grandchild outlived the agent"
    assert process_gone(server)


def test_kill_marked_finds_only_processes_carrying_the_mark():
    """The mark is matched whole: another mark that shares its prefix is left alone."""
    import subprocess

    mark = new_mark()
    env = dict(os.environ)
    marked = subprocess.Popen(["sleep", "60"], env={**env, MARK_VARIABLE: mark})
    other = subprocess.Popen(["sleep", "60"], env={**env, MARK_VARIABLE: mark + "0"})
    try:
        assert kill_marked(mark) == [marked.pid]
        marked.wait(timeout=10)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
