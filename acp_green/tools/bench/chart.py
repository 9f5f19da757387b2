"""A PNG chart of a bench report (matplotlib, the `plot` extra, through rig.plot)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..rig.plot import pyplot
from .report import ROWS, Row

CHARTED = ("W1/chunks_per_s", "W2/chunks_per_s", "W2/ping_p99_ms", "W3/cancel_p99_ms",
           "W4/rtt_p50_ms", "W5/init_ms", "W6/idle_mib", "W6/per_session_kib",
           "W7/replay_updates_per_s", "W7/ping_p99_ms", "W8/acp_p50_ms", "W8/sdk_direct_p50_ms")
LOG_KINDS = ("rate", "ms")


def write_chart(report: dict[str, Any], path: Path) -> None:
    """One panel per headline metric, a bar per agent (median) with min–max whiskers; raises
    rig.plot.PlotUnavailable without matplotlib."""
    plt = pyplot()
    agents = [a["name"] for a in report.get("agents", [])]
    results = report.get("results", {})
    rows = [r for r in ROWS if f"{r.workload}/{r.metric}" in CHARTED and any(r.workload in results.get(a, {}) for a in agents)]
    cols = 4
    nrows = max(1, math.ceil(len(rows) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, row in zip(axes.flat, rows):
        _panel(ax, row, agents, results, colors)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.suptitle(f"acp-green bench — {report.get('started', '')[:10]}, commit {report.get('commit')}, "
                 f"{report.get('machine', {}).get('nproc')} CPUs, {report.get('repeat')} round(s)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _number(value: Any, default: float) -> float:
    """`value` when it is a number (a statistic may be missing or null), else `default`."""
    return value if isinstance(value, (int, float)) else default


def _panel(ax: Any, row: Row, agents: list[str], results: dict[str, Any], colors: list[str]) -> None:
    medians: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    for agent in agents:
        s = results.get(agent, {}).get(row.workload, {}).get(row.metric) or {}
        medians.append(_number(s.get("median"), 0.0))
        lows.append(max(0.0, medians[-1] - _number(s.get("min"), medians[-1])))
        highs.append(max(0.0, _number(s.get("max"), medians[-1]) - medians[-1]))
    xs = range(len(agents))
    ax.bar(xs, medians, yerr=[lows, highs], capsize=3, color=[colors[i % len(colors)] for i in xs])
    ax.set_xticks(list(xs), agents, rotation=30, ha="right", fontsize=8)
    ax.set_title(row.label, fontsize=9)
    if row.kind in LOG_KINDS and all(m > 0 for m in medians):
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
