"""Demo agents that hold shut, until a file exists, what an https MCP server's start could wait
for (tests/mcp/test_start_isolation.py); the file is named by ACP_TEST_GATE. Served with
`--agent tests.mcp.tls_start_agents:NAME`.

- `GatedTlsAgent`: the making of the process's TLS context waits for the file. While it does,
  every https server's start waits for as long as the test likes, and what the agent does
  meanwhile is what the test looks at.
- `PoolFillingAgent`: the prompt `/fill` occupies every thread of gevent's pool (where name
  lookups run) until the file exists, as a session whose servers' names never resolve would.

The waits are real sleeps of the OS (not gevent's, patched or not): on the hub, one would hold
every session.
"""

from __future__ import annotations

import os
from typing import Any

import gevent
from gevent.monkey import get_original

from acp_green import Turn
from acp_green.demo import DemoAgent
from acp_green.mcp import httpguard

_real_sleep = get_original("time", "sleep")
_make = httpguard._tls_context


def _shut() -> None:
    gate = os.environ["ACP_TEST_GATE"]
    while not os.path.exists(gate):
        _real_sleep(0.02)


def _gated(cafile: Any) -> Any:
    _shut()
    return _make(cafile)


class GatedTlsAgent(DemoAgent):
    """The demo agent, the TLS context held shut until the gate file exists."""

    def __init__(self) -> None:
        super().__init__()
        httpguard._tls_context = _gated  # type: ignore[assignment]


class PoolFillingAgent(DemoAgent):
    """The demo agent; `/fill` takes every thread of gevent's pool until the gate file exists."""

    def prompt(self, turn: Turn) -> Any:
        if turn.text.strip() == "/fill":
            pool = gevent.get_hub().threadpool
            for _ in range(pool.maxsize):
                pool.spawn(_shut)
            turn.say(f"filled {pool.maxsize} threads")
            return "end_turn"
        return super().prompt(turn)
