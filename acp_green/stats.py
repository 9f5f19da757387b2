"""`_acp_green/stats`: a small extension request that reports the runtime's own counters.

The rig's soak samples it to see whether greenlets (invisible from /proc) keep growing.
"""

from __future__ import annotations

import gc
from typing import Any

from .heap import greenlet_count

STATS_METHOD = "_acp_green/stats"


def runtime_stats(active_requests: int, live_sessions: int, queued_bytes: int, store_failed_writes: int = 0) -> dict[str, Any]:
    """The answer to `_acp_green/stats`; `storeFailedWrites`: writes the store dropped (each
    logged at ERROR) since it opened."""
    return {
        "greenlets": greenlet_count(),
        "gcFrozenObjects": gc.get_freeze_count(),
        "activeRequests": active_requests,
        "liveSessions": live_sessions,
        "outboundQueuedBytes": queued_bytes,
        "storeFailedWrites": store_failed_writes,
    }
