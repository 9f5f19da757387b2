"""The bench client's own ceiling: how fast it reads and scans a synthetic stream."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from .conn import AgentConn, AgentFailed


@dataclass(frozen=True)
class Ceiling:
    """Chunks/s the client can read and scan (hot path), and check afterwards (order pass)."""

    sessions: int
    write_bytes: int  # 0: the writer hands the pipe as much as it takes
    lines: int
    read_chunks_per_s: float
    check_chunks_per_s: float
    valid: bool


def measure_ceiling(lines: int = 400_000, sessions: int = 1, write_bytes: int = 0, size: int = 64) -> Ceiling:
    """Read LINES pre-built chunk lines from a process that only writes, timing first byte to EOF."""
    command = [sys.executable, "-m", "acp_green.tools.bench.blaster", str(lines), str(sessions), str(size), str(write_bytes)]
    with AgentConn(command, keep_limit=1 << 30) as conn:
        conn.write(b"go\n")
        first = 0.0
        while conn.read_once():
            if not first:
                first = time.perf_counter()
        elapsed = time.perf_counter() - first
        if conn.scanner.chunks != lines:
            raise AgentFailed(f"ceiling: read {conn.scanner.chunks} of {lines} chunks")
        started = time.perf_counter()
        check = conn.scanner.validate()
        checked = time.perf_counter() - started
        valid = check.in_order() and sum(s.chunks for s in check.streams.values()) == lines
    return Ceiling(sessions, write_bytes, lines, lines / elapsed, lines / checked, valid)
