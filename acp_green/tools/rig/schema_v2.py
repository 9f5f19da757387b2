"""Which vendored ACP schema a connection is validated against, by the protocol version it negotiated.

Version 1 is the v1 schema pair (`acp_green/schema/`); version 2 is the v2 draft pair vendored
from `@agentclientprotocol/sdk` 2.4.0 (`acp_green/schema/v2/`, see its SOURCE.md). Any other
version has no schema here: its messages cannot be validated, and the caller says so.
"""

from __future__ import annotations

import functools
from typing import Any

from .schema import AcpSchema, default_schema

__all__ = ["V2_FOLDER", "schema_for_version", "v2_schema"]

V2_FOLDER = "schema/v2"


@functools.lru_cache(maxsize=1)
def v2_schema() -> AcpSchema:
    """The shared v2 draft AcpSchema (loaded on first use)."""
    return AcpSchema(V2_FOLDER)


def schema_for_version(version: Any) -> AcpSchema | None:
    """The schema for a negotiated protocolVersion: v1, the v2 draft, or None (no schema for it)."""
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    if version == 1:
        return default_schema()
    if version == 2:
        return v2_schema()
    return None
