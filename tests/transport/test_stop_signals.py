"""Every catchable signal that would end the process takes the orderly stop of SIGTERM.

S13: every terminating signal runs the orderly stop: the running prompt answered, MCP children reaped.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

from acp_green.server import LEFT_ALONE, stop_signals
from tests.helpers import wait_gone, wait_until

# An MCP server that never answers, ignores EOF, SIGTERM and SIGHUP: only a kill ends it.
STUBBORN = """
import os, signal, sys, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(1)
"""


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGALRM, signal.SIGXCPU, signal.SIGSYS, signal.SIGRTMIN + 3],
                         ids=["USR1", "ALRM", "XCPU", "SYS", "RTMIN+3"])
def test_a_terminating_signal_answers_the_running_prompt_and_reaps_a_stubborn_mcp_child(launch: Any, tmp_path: Any,
                                                                                      signum: int) -> None:
    """Item 15: the signal's default would have killed the agent silently; now the running
    prompt answers `cancelled`, the MCP child that ignores EOF and SIGTERM is reaped, exit 0."""
    agent = launch("--ephemeral", "--shutdown-grace", "2")
    agent.initialize()
    pid_file = tmp_path / "stubborn.pid"
    server = {"name": "stubborn", "command": sys.executable, "args": ["-c", STUBBORN, str(pid_file)], "env": []}
    sid = agent.new_session(mcp_servers=[server])
    wait_until(pid_file.exists, 30, "the stubborn MCP server to start")
    child = int(pid_file.read_text())
    try:
        waiting = agent.prompt(sid, "/wait")
        agent.call("session/list", {})  # answered in receive order: the prompt was admitted before it
        agent.signal(signum)
        assert waiting.result(timeout=60) == {"stopReason": "cancelled"}
        assert agent.wait_exit(timeout=60) == 0
        assert wait_gone(child, 60), f"the stubborn MCP server {child} outlived the agent"
    finally:
        try:
            os.kill(child, signal.SIGKILL)  # a red run must not leave it behind
        except ProcessLookupError:
            pass


def test_the_stop_set_holds_every_terminating_catchable_signal_and_only_those() -> None:
    """The listed ones of item 15 stop; SIGQUIT keeps its stack dump; faults, SIGPIPE and
    SIGXFSZ are left as they are (docs/RELIABILITY.md says why)."""
    stops = set(stop_signals())
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
                 "SIGPWR", "SIGIO", "SIGSYS", "SIGTRAP", "SIGSTKFLT"):
        assert getattr(signal, name) in stops, name
    assert set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1)) <= stops
    assert not stops & LEFT_ALONE
    for harmless in (signal.SIGCHLD, signal.SIGWINCH, signal.SIGCONT, signal.SIGURG, signal.SIGTSTP):
        assert harmless not in stops
