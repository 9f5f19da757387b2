"""`acp-green serve` ends with exit status 0 when stdin closes right after start-up, under CPU load.

Closing stdin right after `session/new` makes the shutdown overlap the start-up heap freeze
(heap.py). The freeze once kept `gc.get_objects()`'s list (a reference to every object) across
yields, and now and then an object it held was freed meanwhile: dropping the list freed it a
second time and the process died with SIGSEGV (-11), about once in 100 such runs beside two
CPU hogs. This test repeats that run; it catches such a rare crash only sometimes (the
in-process proof is test_heap.py's test_the_freeze_never_lets_another_greenlet_run...).
"""

from __future__ import annotations

import subprocess

import pytest

RUNS = 40


@pytest.mark.slow
def test_many_shutdowns_right_after_start_up_beside_cpu_hogs_all_exit_0(launch, tmp_path):
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        for run in range(RUNS):
            state = tmp_path / f"state{run}"
            agent = launch("--state-dir", str(state), env={"PYTHONFAULTHANDLER": "1"})
            agent.initialize()
            agent.new_session()
            status = agent.close()
            assert status == 0, (run, status, bytes(agent.stderr)[-4000:])
            assert b"Fatal Python error" not in bytes(agent.stderr), (run, bytes(agent.stderr)[-4000:])
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
