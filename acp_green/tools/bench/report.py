"""The human-readable table of a bench report: median [min–max] per metric per agent."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One line of the table: which metric, how to label and format it."""

    workload: str
    metric: str
    label: str
    kind: str  # "rate", "ms", "us", "share", "mib", "kib", "count"


ROWS = (
    Row("W1", "chunks_per_s", "W1 stream, chunks/s", "rate"),
    Row("W1", "agent_cpu_us_per_chunk", "W1 agent CPU per chunk, µs", "us"),
    Row("W1", "agent_cpu_share", "W1 agent CPU, cores", "share"),
    Row("W1", "client_cpu_share", "W1 bench client CPU, cores", "share"),
    Row("W2", "chunks_per_s", "W2 fan-out, chunks/s", "rate"),
    Row("W2", "ping_p50_ms", "W2 ping p50, ms", "ms"),
    Row("W2", "ping_p99_ms", "W2 ping p99, ms", "ms"),
    Row("W2", "pings_answered_while_streaming", "W2 pings answered while streaming", "count"),
    Row("W2", "pings_sent", "W2 pings sent", "count"),
    Row("W2", "ping_behind_kib_p50", "W2 output ahead of a ping's answer p50, KiB", "kib"),
    Row("W2", "agent_cpu_us_per_chunk", "W2 agent CPU per chunk, µs", "us"),
    Row("W2", "agent_cpu_share", "W2 agent CPU, cores", "share"),
    Row("W2", "client_cpu_share", "W2 bench client CPU, cores", "share"),
    Row("W3", "cancel_p50_ms", "W3 cancel p50, ms", "ms"),
    Row("W3", "cancel_p99_ms", "W3 cancel p99, ms", "ms"),
    Row("W3", "cancel_behind_kib_p50", "W3 output ahead of a cancel's answer p50, KiB", "kib"),
    Row("W3", "streams_running", "W3 streams still running at last cancel", "count"),
    Row("W4", "rtt_p50_ms", "W4 set_mode p50, ms", "ms"),
    Row("W4", "rtt_p99_ms", "W4 set_mode p99, ms", "ms"),
    Row("W5", "init_ms", "W5 start to initialize, ms", "ms"),
    Row("W6", "idle_mib", "W6 RSS idle, MiB", "mib"),
    Row("W6", "after_mib", "W6 RSS after sessions, MiB", "mib"),
    Row("W6", "per_session_kib", "W6 per session, KiB", "kib"),
    Row("W7", "replay_updates_per_s", "W7 replay, updates/s", "rate"),
    Row("W7", "ping_p50_ms", "W7 set_mode during replay p50, ms", "ms"),
    Row("W7", "ping_p99_ms", "W7 set_mode during replay p99, ms", "ms"),
    Row("W7", "pings_answered_during_replay", "W7 pings answered during replay", "count"),
    Row("W7", "opening_ping_max_ms", "W7 set_mode before the first update (store opening), max ms", "ms"),
    Row("W8", "acp_p50_ms", "W8 tools/call over ACP (mcp/message) p50, ms", "ms"),
    Row("W8", "acp_p99_ms", "W8 tools/call over ACP (mcp/message) p99, ms", "ms"),
    Row("W8", "stdio_p50_ms", "W8 prompt with a stdio tool call p50, ms", "ms"),
    Row("W8", "stdio_p99_ms", "W8 prompt with a stdio tool call p99, ms", "ms"),
    Row("W8", "http_p50_ms", "W8 prompt with an HTTP tool call p50, ms", "ms"),
    Row("W8", "http_p99_ms", "W8 prompt with an HTTP tool call p99, ms", "ms"),
    Row("W8", "no_tool_p50_ms", "W8 prompt without a tool call p50, ms", "ms"),
    Row("W8", "no_tool_p99_ms", "W8 prompt without a tool call p99, ms", "ms"),
    Row("W8", "sdk_direct_p50_ms", "W8 tools/call from the MCP SDK client, direct p50, ms", "ms"),
    Row("W8", "sdk_direct_p99_ms", "W8 tools/call from the MCP SDK client, direct p99, ms", "ms"),
)
VALIDITY = (("W1", "valid"), ("W2", "valid"))


def fmt(value: float | None, kind: str) -> str:
    """A number in the unit's usual precision; "-" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "rate":
        return f"{value / 1000:.1f}k" if value < 1e6 else f"{value / 1e6:.2f}M"
    if kind == "ms":
        return f"{value:.3g}" if value < 100 else f"{value:,.0f}"
    if kind in ("mib", "kib", "us"):
        return f"{value:.1f}"
    if kind == "share":
        return f"{value:.2f}"
    return f"{value:.0f}"


def cell(summary: dict[str, Any] | None, kind: str) -> str:
    """median [min–max], or just the median when all runs agree or there was one run."""
    if not summary:
        return "-"
    median = fmt(summary.get("median"), kind)
    low, high = fmt(summary.get("min"), kind), fmt(summary.get("max"), kind)
    runs = summary.get("runs") or []
    if len(runs) < 2 or low == high:
        return median
    return f"{median} [{low}–{high}]"


def table(report: dict[str, Any]) -> str:
    """The results as a fixed-width text table (agents as columns)."""
    agents = [a["name"] for a in report.get("agents", [])]
    results = report.get("results", {})
    header = ["metric", *agents]
    lines = [header]
    for row in ROWS:
        if not any(row.workload in results.get(a, {}) for a in agents):
            continue
        lines.append([row.label, *(cell(results.get(a, {}).get(row.workload, {}).get(row.metric), row.kind) for a in agents)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(text.ljust(widths[i]) if i == 0 else text.rjust(widths[i]) for i, text in enumerate(line)) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    notes = []
    for agent in agents:
        for workload, metric in VALIDITY:
            runs = (results.get(agent, {}).get(workload, {}).get(metric) or {}).get("runs") or []
            if runs and not all(runs):
                notes.append(f"{agent} {workload}: chunks missing or out of order in {runs.count(0.0)} of {len(runs)} runs")
        three = results.get(agent, {}).get("W3", {}).get("all_streams_running")
        if three and three.get("runs") and not all(three["runs"]):
            notes.append(f"{agent} W3: some streams had finished before the last cancel was answered")
    for ceiling in report.get("client_ceiling", []):
        writes = f"{ceiling['write_bytes']}-byte writes" if ceiling.get("write_bytes") else "big writes"
        notes.append(f"client ceiling ({ceiling['sessions']} session(s), {writes}): reads and scans {ceiling['read_chunks_per_s']:,.0f} chunks/s; "
                     f"order check afterwards {ceiling['check_chunks_per_s']:,.0f} chunks/s")
    for name, reason in report.get("skipped", {}).items():
        notes.append(f"skipped {name}: {reason}")
    for what, reason in report.get("not_run", {}).items():
        notes.append(f"not run: {what}: {reason}")
    for failure in report.get("failures", []):
        notes.append(f"failed: round {failure['round']} {failure['workload']} {failure['agent']}: {failure['error']}")
    footer = (f"{report.get('repeat')} round(s), scale {report.get('scale')}; commit {report.get('commit')}; "
              f"{report.get('machine', {}).get('nproc')} CPUs ({report.get('machine', {}).get('cpu_model')}); "
              f"load {report.get('load_before')} -> {report.get('load_after')}")
    return "\n".join(out + [""] + notes + [footer])


def write_json(report: dict[str, Any], path: Path) -> None:
    """The full report, indented, ending in a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
