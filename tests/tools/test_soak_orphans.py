"""Orphans are blamed on the agent they descend from, never on a sibling the rig launched, and a
soak slot that fails shows its agent's exit status and stderr."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from gevent import subprocess as gsubprocess

from acp_green.tools.rig import scenario as s
from acp_green.tools.rig.reaper import RUN_MARK, Tracker, proc_info
from acp_green.tools.rig.soak import SoakConfig, run_soak
from tests.helpers import TESTS, process_gone, wait_until

FAULT_AGENT = [sys.executable, str(TESTS / "peer_agents" / "fault_agent.py")]
SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


def _orphan_pids(violations) -> list[int]:
    return [int(pid) for v in violations if v.invariant == "no_orphan_processes" for pid in re.findall(r"pid (\d+)", v.detail)]


def test_a_process_the_rig_launches_beside_an_agent_is_not_that_agents_orphan():
    """A sibling launched in a session of its own, a child of the rig not yet registered as a
    launch (the moment a concurrent soak slot starts its next agent), is not blamed on an agent
    that exits meanwhile."""
    agent = s.CheckedAgent(FAULT_AGENT)
    agent.initialize()
    sibling = gsubprocess.Popen(SLEEPER, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        result = agent.finish()
        assert _orphan_pids(result.violations) == [], result.violations
        assert sibling.poll() is None, "the rig killed a process that was not the agent's"
    finally:
        sibling.kill()
        sibling.wait()


def test_a_process_with_another_runs_mark_is_not_blamed():
    """The run mark is compared exactly: a process carrying another run's mark is not this run's."""
    sleeper = gsubprocess.Popen(SLEEPER, start_new_session=True, env={**os.environ, RUN_MARK: "another-run"})
    try:
        tracker = Tracker(os.getpid(), mark="this-run")
        tracker.agent_start = 0
        assert sleeper.pid not in [p.pid for p in tracker.survivors()]
        tracker.mark = "another-run"
        assert sleeper.pid in [p.pid for p in tracker.survivors()]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_pid_seen_earlier_counts_only_with_its_start_time():
    """A descendant is remembered by pid and start time: a reused pid is another process."""
    sleeper = gsubprocess.Popen(SLEEPER, start_new_session=True)
    try:
        info = proc_info(sleeper.pid)
        tracker = Tracker(1 << 22)  # no such agent: only what it remembers can be found
        tracker.agent_start = 0
        tracker.known[(info.pid, info.start + 1)] = info
        assert tracker.survivors() == []
        tracker.known[(info.pid, info.start)] = info
        assert [p.pid for p in tracker.survivors()] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow  # a soak of a few seconds against agents that leave orphans behind
def test_the_soak_catches_real_orphans_and_blames_each_on_one_agent(tmp_path):
    """Each session/new of this agent double-forks a sleeper that outlives it; two slots run at
    once. Every orphan is found, and no process is blamed on two agents."""
    summary = run_soak(SoakConfig(FAULT_AGENT + ["--orphan"], agents=2, sessions=2, duration=2,
                                  out_dir=str(tmp_path), plot=False))
    assert "no_orphan_processes" in summary["failed_invariants"], summary["failures"]
    orphan_failures = [f for f in summary["failures"] if f.get("invariant") == "no_orphan_processes"]
    pids = [int(pid) for f in orphan_failures for pid in re.findall(r"pid (\d+)", f["detail"])]
    assert len(pids) == len(set(pids)), orphan_failures
    # Each slot's main agent opened 2 sessions: 2 sleepers, found for that slot.
    assert {f["slot"] for f in orphan_failures} == {0, 1}
    assert all(len(re.findall(r"pid \d+", f["detail"])) % 2 == 0 for f in orphan_failures), orphan_failures
    wait_until(lambda: all(process_gone(pid) for pid in pids), what="the soak to kill the orphans it found")


def test_a_failed_slot_shows_its_agents_exit_status_and_stderr(tmp_path):
    crashing = [sys.executable, "-c", "import sys; sys.stderr.write('cannot start: no config file\\n'); sys.exit(3)"]
    lines: list[str] = []
    summary = run_soak(SoakConfig(crashing, agents=1, duration=1, out_dir=str(tmp_path), plot=False), lines.append)
    assert not summary["ok"]
    [failure] = [f for f in summary["failures"] if f["kind"] == "error"]
    assert failure["exit_status"] == 3 and "cannot start: no config file" in failure["stderr_tail"], failure
    printed = "\n".join(lines)
    assert "exit status 3" in printed and "stderr: cannot start: no config file" in printed, printed


@pytest.mark.slow  # a soak run beside two busy-looping processes
def test_a_soak_beside_two_cpu_hogs_passes(tmp_path):
    """Under load, slots launch side agents while others end theirs (seed 7 starts side runs at once):
    no false orphan, no failure.
    RSS growth is judged by long soaks only (see test_soak.py)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        summary = run_soak(SoakConfig(SERVE, agents=3, duration=10, seed=7, out_dir=str(tmp_path), plot=False))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert [f for f in summary["failures"] if not (f["kind"] == "growth" and f["resource"] == "rss")] == []
    assert summary["side_runs"] > 0 and summary["prompts"] > 0
