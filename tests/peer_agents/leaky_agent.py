"""An acp_green agent that leaks: the demo agent, but every prompt keeps 256 KiB forever.

    acp-green serve --agent leaky_agent:LeakyAgent   (with tests/agents on PYTHONPATH)
"""

from __future__ import annotations

import os

from acp_green.agent import Turn
from acp_green.demo import DemoAgent

LEAK_BYTES = 256 * 1024
_kept: list[bytes] = []


class LeakyAgent(DemoAgent):
    """DemoAgent that never frees a buffer it allocates per prompt."""

    name = "leaky-agent"

    def prompt(self, turn: Turn) -> str | None:
        _kept.append(os.urandom(LEAK_BYTES))  # random bytes: pages really touched, nothing shared
        return super().prompt(turn)
