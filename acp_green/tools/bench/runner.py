"""Runs the workloads over the agents, interleaved run by run, and gathers the results."""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import machine
from .ceiling import measure_ceiling
from .conn import AgentFailed
from .peers import RECORDED, REPO_ROOT, AgentSpec
from .stats import summarize
from .acp_only import Skipped
from .catalog import ACP_GREEN_ONLY, RECORDED_WORKLOADS, WORKLOADS
from .workloads import Sizes

Log = Callable[[str], None]


@dataclass
class BenchOptions:
    """What to run: agents, workloads, repeats, scale, and whether to measure the client ceiling."""

    agents: Sequence[AgentSpec]
    workloads: Sequence[str] = tuple(WORKLOADS)
    repeat: int = 3
    scale: float = 1.0
    ceiling_lines: int = 400_000
    read_pause: float = 0.0
    protocol: int = 1
    skipped: dict[str, str] = field(default_factory=dict)


def run_bench(options: BenchOptions, log: Log) -> dict[str, Any]:
    """Every workload on every agent, `repeat` rounds; returns the JSON-ready report."""
    sizes = dataclasses.replace(Sizes().scaled(options.scale), read_pause=options.read_pause, protocol=options.protocol)
    report: dict[str, Any] = {
        "format": 1,
        "started": _now(),
        "commit": machine.git_commit(REPO_ROOT),
        "machine": machine.describe_machine(),
        "load_before": machine.load_average(),
        "repeat": options.repeat,
        "scale": options.scale,
        "sizes": dataclasses.asdict(sizes),
        "agents": [{"name": a.name, "command": list(a.command), "note": a.note} for a in options.agents],
        "skipped": dict(options.skipped),
        "client_ceiling": [],
        "not_run": {},  # "agent workload" -> why it did not run (applies to acp-green only, a missing SDK)
        "rounds": [],
        "failures": [],
    }
    if options.ceiling_lines:
        lines = max(1000, round(options.ceiling_lines * min(1.0, options.scale * 10)))
        # Big writes show the scan's limit; 8 KiB writes (a buffered Python stdout) add a wake-up
        # of the client per write, as the fastest peer causes.
        for sessions, write_bytes in ((1, 0), (32, 0), (1, 8192)):
            ceiling = measure_ceiling(lines, sessions, write_bytes)
            log(f"client ceiling, {sessions} session(s), writes of {write_bytes or 'any'} bytes: "
                f"read+scan {ceiling.read_chunks_per_s:,.0f} chunks/s")
            report["client_ceiling"].append(dataclasses.asdict(ceiling))
    runs: dict[str, dict[str, dict[str, list[float]]]] = {a.name: {} for a in options.agents}
    agents = list(options.agents)
    for round_no in range(options.repeat):
        report["rounds"].append({"round": round_no + 1, "load": machine.load_average(), "at": _now()})
        for workload in options.workloads:
            # Rotate who goes first each round, so drift and warm caches favour no one.
            shift = round_no % len(agents) if agents else 0
            for agent in agents[shift:] + agents[:shift]:
                if workload in ACP_GREEN_ONLY and not agent.is_acp_green:
                    report["not_run"][f"{agent.name} {workload}"] = "applies to acp-green only"
                    continue
                if agent.name == RECORDED and workload not in RECORDED_WORKLOADS:
                    report["not_run"][f"{agent.name} {workload}"] = "recording is measured on " + ", ".join(sorted(RECORDED_WORKLOADS))
                    continue
                started = time.perf_counter()
                try:
                    metrics = WORKLOADS[workload](agent.command, sizes)
                except Skipped as exc:
                    if f"{agent.name} {workload}" not in report["not_run"]:
                        log(f"{workload} {agent.name}: skipped: {exc}")
                    report["not_run"][f"{agent.name} {workload}"] = str(exc)
                    continue
                except (AgentFailed, OSError) as exc:
                    log(f"round {round_no + 1} {workload} {agent.name}: FAILED: {exc}")
                    report["failures"].append({"round": round_no + 1, "workload": workload, "agent": agent.name, "error": str(exc)})
                    continue
                log(f"round {round_no + 1} {workload} {agent.name}: {_brief(metrics)} ({time.perf_counter() - started:.1f}s)")
                per_metric = runs[agent.name].setdefault(workload, {})
                for name, value in metrics.items():
                    per_metric.setdefault(name, []).append(value)
    report["results"] = {
        agent: {w: {m: summarize(values).as_dict() for m, values in metrics.items()} for w, metrics in by_workload.items()}
        for agent, by_workload in runs.items()
    }
    report["load_after"] = machine.load_average()
    report["finished"] = _now()
    return _finite(report)


def _brief(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:,.3g}" for k, v in metrics.items())


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _finite(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
