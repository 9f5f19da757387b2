"""Every workload the bench runs, by name, and which of them apply to acp_green alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .acp_only import w7_replay, w8_mcp
from .workloads import Metrics, Sizes, w1_stream, w2_fanout, w3_cancel, w4_round_trips, w5_startup, w6_memory

WORKLOADS: dict[str, Callable[[Sequence[str], Sizes], Metrics]] = {
    "W1": w1_stream,
    "W2": w2_fanout,
    "W3": w3_cancel,
    "W4": w4_round_trips,
    "W5": w5_startup,
    "W6": w6_memory,
    "W7": w7_replay,
    "W8": w8_mcp,
}

#: Big-history replay and MCP round trips: features the peers do not have.
ACP_GREEN_ONLY = frozenset({"W7", "W8"})

#: The workloads run through `acp-green record` (the agent named peers.RECORDED): one stream's
#: throughput and sequential round trips, beside the same agent run directly.
RECORDED_WORKLOADS = frozenset({"W1", "W4"})
