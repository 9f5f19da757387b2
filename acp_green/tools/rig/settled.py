"""An agent's processes judged after a settle window, so a verdict on them holds across reruns.

Real agents are a wrapper and the processes it starts (codex-acp runs `codex`, node agents a
native helper): when the wrapper exits at EOF, its children notice their pipes closed and exit
on their own, 0.1 to 2.2 s later on a busy machine. Looked for the moment the wrapper is gone,
they are "survivors" in one run and gone in the next. `SettledAgent` looks again until none is
left or `settle` seconds passed: what is still there then outlived the agent, and is reported.
What an agent leaves behind is acp_green's own advice, not ACP's: the probe shows it as such.
"""

from __future__ import annotations

import time

import gevent

from .reaper import ProcInfo
from .run import CheckedAgent

__all__ = ["SETTLE_WINDOW", "SettledAgent"]

#: How long the processes an agent started may take to exit after it did (the 2.2 s seen, with room).
SETTLE_WINDOW = 5.0
POLL = 0.1


class SettledAgent(CheckedAgent):
    """A `CheckedAgent` whose survivors are those still alive `settle` seconds after the agent
    exited (or at once, when none is left); an agent the rig had to kill is not waited for (its
    processes are cleaned up, never blamed)."""

    settle = SETTLE_WINDOW

    def survivors(self) -> list[ProcInfo]:
        left = self.process.survivors()
        if any(v.invariant == "exit_after_eof" for v in self.checker.violations):
            return left  # killed by the rig: its processes are not judged, only cleaned up
        deadline = time.monotonic() + self.settle
        while left and time.monotonic() < deadline:
            gevent.sleep(POLL)
            left = self.process.survivors()
        return left
