"""docs/BENCHMARKS.md from one results file: every measured figure in the text comes from it.

usage: python -m acp_green.tools.bench.doc RESULTS.json [OUT.md]   (default: stdout)

Each figure is quoted through `Figures`, which formats a value read from the report (or a
ratio of two such values) and remembers where it came from, so a test can check that the
document quotes nothing else. The only other numbers are the targets (`TARGETS`), the workload
names and the sizes the report itself records.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .report import fmt, table

ACP = "acp-green"
BARE = "bare-loop"
PY_SDK = "python-sdk"
RECORDED = "recorded"  # peers.RECORDED; not imported, so the page renders without the bench's machinery


@dataclass(frozen=True)
class Target:
    """One target: a metric of acp-green against a bound, absolute or as a ratio to the bare loop."""

    label: str
    workload: str
    metric: str
    kind: str
    bound: float
    ratio_to_bare: bool = False
    at_least: bool = False  # a rate: the figure must reach the bound


TARGETS = (
    Target("W5 start-up ≤ 3× the bare loop", "W5", "init_ms", "ms", 3, ratio_to_bare=True),
    Target("W1 ≥ 0.4× the bare loop", "W1", "chunks_per_s", "rate", 0.4, ratio_to_bare=True, at_least=True),
    Target("W2 rate ≥ 0.3× the bare loop", "W2", "chunks_per_s", "rate", 0.3, ratio_to_bare=True, at_least=True),
    Target("W2 ping p99 ≤ 5 ms", "W2", "ping_p99_ms", "ms", 5),
    Target("W3 cancel p99 ≤ 3 ms", "W3", "cancel_p99_ms", "ms", 3),
    Target("W4 p50 ≤ 1.3× the bare loop", "W4", "rtt_p50_ms", "ms", 1.3, ratio_to_bare=True),
    Target("W6 idle RSS ≤ the bare loop + 12 MiB", "W6", "idle_mib", "mib", 12),
    Target("W6 ≤ 2 KiB per session", "W6", "per_session_kib", "kib", 2),
    Target("W7 set_mode p99 during a replay ≤ 5 ms", "W7", "ping_p99_ms", "ms", 5),
)


class Figures:
    """Quotes figures of one report; `quoted` lists each as (text, source) for checking."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.quoted: list[tuple[str, str]] = []

    def median(self, agent: str, workload: str, metric: str) -> float | None:
        summary = self.report.get("results", {}).get(agent, {}).get(workload, {}).get(metric) or {}
        value = summary.get("median")
        return value if isinstance(value, (int, float)) else None

    def value(self, agent: str, workload: str, metric: str, kind: str) -> str:
        """The median of one metric, formatted as in the table ("-" when not measured)."""
        text = fmt(self.median(agent, workload, metric), kind)
        self.quoted.append((text, f"results.{agent}.{workload}.{metric}.median"))
        return text

    def ratio(self, agent: str, other: str, workload: str, metric: str) -> str:
        """agent's median over other's, as "N.NN×" ("-" when either is missing)."""
        a, b = self.median(agent, workload, metric), self.median(other, workload, metric)
        text = f"{a / b:.2f}×" if a is not None and b else "-"
        self.quoted.append((text, f"ratio results.{agent}.{workload}.{metric} / results.{other}.{workload}.{metric}"))
        return text

    def difference(self, agent: str, other: str, workload: str, metric: str, kind: str) -> str:
        a, b = self.median(agent, workload, metric), self.median(other, workload, metric)
        text = fmt(a - b if a is not None and b is not None else None, kind)
        self.quoted.append((text, f"difference results.{agent}.{workload}.{metric} - results.{other}.{workload}.{metric}"))
        return text

    def verdict(self, target: Target) -> tuple[str, str]:
        """(measured, "met" / "missed" / "not measured") for a target."""
        if target.ratio_to_bare:
            shown = self.ratio(ACP, BARE, target.workload, target.metric)
            a, b = self.median(ACP, target.workload, target.metric), self.median(BARE, target.workload, target.metric)
            measured = a / b if a is not None and b else None
        elif target.workload == "W6" and target.metric == "idle_mib":
            shown = "+" + self.difference(ACP, BARE, "W6", "idle_mib", "mib") + " MiB"
            a, b = self.median(ACP, "W6", "idle_mib"), self.median(BARE, "W6", "idle_mib")
            measured = a - b if a is not None and b is not None else None
        else:
            shown = self.value(ACP, target.workload, target.metric, target.kind)
            measured = self.median(ACP, target.workload, target.metric)
        if measured is None:
            return shown, "not measured"
        ok = measured >= target.bound if target.at_least else measured <= target.bound
        return shown, "met" if ok else "missed"


def render(report: dict[str, Any]) -> str:
    """The whole document for `report`."""
    f = Figures(report)
    sizes = report.get("sizes", {})
    agents = [a["name"] for a in report.get("agents", [])]
    out: list[str] = []
    add = out.append
    add("# Benchmarks\n")
    add("`acp-green bench` runs eight workloads (W1–W8, below) against acp_green and against peer agents built on "
        "the official ACP SDKs, side by side, and reports medians and spread as a table, as JSON and as a PNG "
        "chart. Benchmarks are not tests: the suite only checks that the bench's output is well formed, never a "
        "timing. This page is generated from one results file (`docs/benchmarks/latest.json`) by "
        "`python -m acp_green.tools.bench.doc`: every figure below comes from that file.\n")
    add("## Running it\n")
    add("```sh\n"
        "scripts/bench.sh                 # installs what it needs, runs every workload, writes bench-results/<stamp>.{json,png,txt}\n"
        "scripts/bench.sh --doc           # the same, then regenerates this page and docs/benchmarks/latest.*\n"
        "scripts/profile.sh -w W4         # cProfile of acp-green serve under any workload, top functions printed\n"
        "acp-green bench --only acp-green -w W5 --repeat 5   # one workload, one agent\n"
        "```\n")
    add("Agents run with Python's bytecode cache, as users run them (the bench drops PYTHONDONTWRITEBYTECODE "
        "from their environment). Without `--agent`, the bench runs `acp-green serve --ephemeral` plus every peer "
        "whose runtime is present, and says why it skipped any other. W7 and W8 exercise what only acp_green "
        "offers (a stored history, MCP bridges) and run on acp-green alone. `recorded` is the same `acp-green serve` "
        "behind `acp-green record` (the proxy that writes a trace, [TRACES.md](TRACES.md)), run on W1 and W4 only: "
        "what recording costs.\n")
    add("## The workloads\n")
    add("| | what is sent | what is reported |\n|---|---|---|")
    add(f"| W1 | one session; `/stream {sizes.get('w1_chunks')} {sizes.get('chunk_size')}` | chunks/s, prompt written → response read |")
    add(f"| W2 | {sizes.get('w2_prompts')} sessions streaming `/stream {sizes.get('w2_chunks')} {sizes.get('chunk_size')}` at once; "
        f"`session/set_mode` on another session every {sizes.get('w2_ping_interval')} s | total chunks/s; ping round trip p50/p99 |")
    add(f"| W3 | `/wait` on {sizes.get('w3_waiters')} sessions, `/stream {sizes.get('w3_chunks')} {sizes.get('chunk_size')}` on "
        f"{sizes.get('w3_streams')} others; the waiting ones cancelled one by one | cancel → `cancelled` answer p50/p99 |")
    add(f"| W4 | {sizes.get('w4_round_trips')} sequential `session/set_mode` | round trip p50/p99 |")
    add(f"| W5 | spawn, write `initialize` at once; {sizes.get('w5_starts')} measured starts after one unmeasured | "
        "ms from spawning to reading the answer (median of the starts) |")
    add(f"| W6 | `initialize`, then {sizes.get('w6_sessions')} `session/new` | RSS idle and after, per session |")
    add(f"| W7 | a stored `/stream {sizes.get('w7_chunks')} {sizes.get('chunk_size')}` session loaded by a fresh process, "
        f"`session/set_mode` on another session every {sizes.get('w2_ping_interval')} s meanwhile | replay updates/s; ping p50/p99 "
        "while updates are replayed; the slowest ping before the first update |")
    add(f"| W8 | {sizes.get('w8_calls')} `tools/call` of one `echo` tool on an MCP server built on the official `mcp` SDK: "
        "over ACP (`mcp/message`), from a turn over stdio and over HTTP, and directly from the SDK's client | p50/p99 of each |\n")
    add("## Results\n")
    add("```\n" + table(report) + "\n```\n")
    f.quoted.extend((token, "table") for token in _table_tokens(report))
    add("## Against the targets\n")
    add("Throughput and start-up are compared with the bare loop of the same run (absolute rates vary from "
        "machine to machine); latencies are absolute, because a person perceives them so.\n")
    add("| target | measured (acp-green) | |\n|---|---|---|")
    for target in TARGETS:
        shown, verdict = f.verdict(target)
        add(f"| {target.label} | {shown} | {verdict} |")
    add("")
    if PY_SDK in agents:
        add("## Beside the official Python SDK\n")
        add(f"- W1: acp-green streams {f.ratio(ACP, PY_SDK, 'W1', 'chunks_per_s')} the Python SDK's rate; "
            f"W2: {f.ratio(ACP, PY_SDK, 'W2', 'chunks_per_s')}.")
        add(f"- W2 ping p99: acp-green {f.value(ACP, 'W2', 'ping_p99_ms', 'ms')} ms, the Python SDK "
            f"{f.value(PY_SDK, 'W2', 'ping_p99_ms', 'ms')} ms; W3 cancel p99: {f.value(ACP, 'W3', 'cancel_p99_ms', 'ms')} ms "
            f"and {f.value(PY_SDK, 'W3', 'cancel_p99_ms', 'ms')} ms.")
        add(f"- W5 start-up: acp-green {f.value(ACP, 'W5', 'init_ms', 'ms')} ms, the Python SDK {f.value(PY_SDK, 'W5', 'init_ms', 'ms')} ms.\n")
    if RECORDED in agents:
        add("## What recording costs\n")
        add(f"- W1 through `acp-green record`: {f.value(RECORDED, 'W1', 'chunks_per_s', 'rate')} chunks/s, against "
            f"{f.value(ACP, 'W1', 'chunks_per_s', 'rate')} directly ({f.ratio(RECORDED, ACP, 'W1', 'chunks_per_s')}); the "
            f"recorder and the agent together spent {f.value(RECORDED, 'W1', 'agent_cpu_us_per_chunk', 'us')} µs of CPU per chunk, "
            f"the agent alone {f.value(ACP, 'W1', 'agent_cpu_us_per_chunk', 'us')} µs.")
        add(f"- W4 round trip through the recorder: p50 {f.value(RECORDED, 'W4', 'rtt_p50_ms', 'ms')} ms and p99 "
            f"{f.value(RECORDED, 'W4', 'rtt_p99_ms', 'ms')} ms, against {f.value(ACP, 'W4', 'rtt_p50_ms', 'ms')} ms and "
            f"{f.value(ACP, 'W4', 'rtt_p99_ms', 'ms')} ms directly.\n")
    add("## acp_green only: replay and MCP\n")
    add(f"- W7: a fresh process replays the stored session at {f.value(ACP, 'W7', 'replay_updates_per_s', 'rate')} updates/s; "
        f"meanwhile `session/set_mode` on another session answers in {f.value(ACP, 'W7', 'ping_p50_ms', 'ms')} ms at the median and "
        f"{f.value(ACP, 'W7', 'ping_p99_ms', 'ms')} ms at p99: the replay is a background job, the receive loop keeps reading. "
        "Before the first update, the load's admission (in the receive loop, so that a request after it sees the session) "
        "waits for the fresh process's store to finish opening in the background; the slowest ping sent in that window "
        f"took {f.value(ACP, 'W7', 'opening_ping_max_ms', 'ms')} ms.")
    add(f"- W8: `tools/call` through the ACP bridge takes {f.value(ACP, 'W8', 'acp_p50_ms', 'ms')} ms at the median "
        f"(p99 {f.value(ACP, 'W8', 'acp_p99_ms', 'ms')} ms); the official SDK client calling the same server directly over stdio "
        f"takes {f.value(ACP, 'W8', 'sdk_direct_p50_ms', 'ms')} ms (p99 {f.value(ACP, 'W8', 'sdk_direct_p99_ms', 'ms')} ms). "
        f"A whole prompt whose turn calls the tool takes {f.value(ACP, 'W8', 'stdio_p50_ms', 'ms')} ms over stdio and "
        f"{f.value(ACP, 'W8', 'http_p50_ms', 'ms')} ms over HTTP, against {f.value(ACP, 'W8', 'no_tool_p50_ms', 'ms')} ms "
        "for a prompt with no tool call.\n")
    add("## Reproducing a profile\n")
    add("`scripts/profile.sh -w WORKLOAD` (W1–W8, repeatable) runs the bench's workload against "
        "`python -m cProfile -m acp_green serve` and prints the top functions by own time. Start-up is best "
        "profiled without a clock: `python -X importtime -m acp_green serve` lists every import, and "
        "`valgrind --tool=callgrind` counts instructions, which the machine's load does not change. "
        "`scripts/profile.sh --stages -w W4` times the stages one request goes through (decoding, dispatch, "
        "the handler, the answer, the writer's write). What bounds each target the run misses, and what "
        "was tried, is in [PERFORMANCE.md](PERFORMANCE.md).\n")
    add("## The run\n")
    machine = report.get("machine", {})
    add(f"Commit `{report.get('commit')}`, started {report.get('started')}, {report.get('repeat')} round(s) at scale "
        f"{report.get('scale')}; {machine.get('nproc')} CPUs ({machine.get('cpu_model')}), Linux {machine.get('kernel')}, "
        f"Python {machine.get('python')}, gevent {machine.get('gevent')}; load average {report.get('load_before')} before, "
        f"{report.get('load_after')} after.")
    return "\n".join(out) + "\n"


def _table_tokens(report: dict[str, Any]) -> list[str]:
    """The text of the table: its figures come from the report through report.table."""
    return table(report).split()


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    report = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    text = render(report)
    if len(argv) == 2:
        Path(argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
