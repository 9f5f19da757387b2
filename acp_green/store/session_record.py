"""What the store keeps of a session: its durable metadata, which survives eviction and restarts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SessionRecord:
    """What survives eviction and restarts: the session's durable metadata."""

    session_id: str
    cwd: str
    additional_directories: list[str] = field(default_factory=list)
    title: str | None = None
    mode_id: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    updated_at: float = field(default_factory=time.time)
    archived: bool = False  # session/archive: left out of session/list unless it asks for archived ones
    forked_from: str | None = None  # session/fork: the session this one was forked from
