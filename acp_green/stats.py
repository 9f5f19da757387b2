"""`_acp_green/stats`: a small extension request that reports the runtime's own counters.

The rig's soak samples it to see whether greenlets (invisible from /proc) keep growing.
"""

from __future__ import annotations

import gc
from typing import Any

from greenlet import greenlet

STATS_METHOD = "_acp_green/stats"


def greenlet_count() -> int:
    """Greenlet objects in this process (the hub and the main greenlet included)."""
    # gc tracks greenlets and there is no other registry; dead ones still referenced count
    # too, because holding them forever is the same leak.
    return sum(1 for obj in gc.get_objects() if isinstance(obj, greenlet))


def runtime_stats(active_requests: int, live_sessions: int, queued_bytes: int, store_failed_writes: int = 0) -> dict[str, Any]:
    """The answer to `_acp_green/stats`; `storeFailedWrites`: writes the store dropped (each
    logged at ERROR) since it opened."""
    return {
        "greenlets": greenlet_count(),
        "activeRequests": active_requests,
        "liveSessions": live_sessions,
        "outboundQueuedBytes": queued_bytes,
        "storeFailedWrites": store_failed_writes,
    }
