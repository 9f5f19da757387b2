"""`_acp_green/stats`: a small extension request that reports the runtime's own counters.

The rig's soak samples it to see whether greenlets (invisible from /proc) keep growing.
"""

from __future__ import annotations

import gc
from typing import Any

from .heap import greenlet_counts

STATS_METHOD = "_acp_green/stats"


def runtime_stats(active_requests: int, live_sessions: int, queued_bytes: int, store_failed_writes: int = 0,
                  store_health: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer to `_acp_green/stats`; `greenlets`: those not yet finished; `finishedGreenlets`:
    finished ones the collector has not freed yet, or that something keeps (heap.GreenletCount);
    `storeFailedWrites`: writes the store dropped (each logged at ERROR) since it opened;
    `store_health`: the store's own counters (`storeInMemory`, `storeWaitingWrites`,
    `storeRetries`, `storeDroppedTurns`; docs/RELIABILITY.md)."""
    greenlets = greenlet_counts()
    return {
        **(store_health or {}),
        "greenlets": greenlets.unfinished,
        "finishedGreenlets": greenlets.finished,
        "gcFrozenObjects": gc.get_freeze_count(),
        "activeRequests": active_requests,
        "liveSessions": live_sessions,
        "outboundQueuedBytes": queued_bytes,
        "storeFailedWrites": store_failed_writes,
    }
