"""The reaper never blames a process the rig launched itself (an agent in `reaper.LAUNCHED`) on
another agent, whatever evidence of descent points at it.

In a real run no evidence does: the rig starts each agent in a session of its own, as its own
child, with its own run mark. So the rule is tested where descent does hold: the tracked
"agent" is this test process and the other launched agent is its child.
"""

from __future__ import annotations

import os
import sys

from gevent import subprocess as gsubprocess

from acp_green.tools.rig import reaper
from acp_green.tools.rig.reaper import Tracker

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_a_launched_agent_is_never_another_agents_survivor_even_when_it_descends_from_it():
    child = gsubprocess.Popen(SLEEPER, stdin=gsubprocess.DEVNULL)
    me = os.getpid()
    was_launched = me in reaper.LAUNCHED
    try:
        tracker = Tracker(me)  # registers `me` as launched too, as the rig's launcher does
        tracker.snapshot()
        assert child.pid in [p.pid for p in tracker.survivors()], "the child descends from the tracked agent"
        reaper.LAUNCHED.add(child.pid)  # the rig launched it: another agent, not an orphan
        assert child.pid not in [p.pid for p in tracker.survivors()]
    finally:
        reaper.LAUNCHED.discard(child.pid)
        if not was_launched:
            reaper.LAUNCHED.discard(me)
        child.kill()
        child.wait()
