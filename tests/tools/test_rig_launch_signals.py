"""Agents the rig launches start with default signal dispositions, whatever the rig ignores or blocks."""

from __future__ import annotations

import signal
import sys
import threading

import pytest

from acp_green.tools.rig.client import AgentProcess

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _mask(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise AssertionError(f"no {field}")


def _has(mask: int, signum: int) -> bool:
    return bool(mask >> (signum - 1) & 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status")
def test_a_launch_under_nohup_gives_the_agent_default_dispositions_and_an_empty_mask() -> None:
    """17c: run as under `nohup` (SIGHUP ignored) with SIGINT ignored and SIGUSR2 blocked, the
    rig still launches an agent that neither ignores nor blocks them."""
    assert threading.current_thread() is threading.main_thread()
    saved_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    saved_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    saved_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    try:
        agent = AgentProcess(SLEEPER)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, saved_mask)
        signal.signal(signal.SIGINT, saved_int)
        signal.signal(signal.SIGHUP, saved_hup)
    try:
        ignored, blocked = _mask(agent.pid, "SigIgn"), _mask(agent.pid, "SigBlk")
        assert not _has(ignored, signal.SIGHUP) and not _has(ignored, signal.SIGINT), hex(ignored)
        assert blocked == 0, hex(blocked)
    finally:
        agent.proc.kill()
        agent.proc.wait()
        agent.stop()
