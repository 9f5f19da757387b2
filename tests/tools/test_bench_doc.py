"""The benchmarks page generator quotes only figures of the results file it read."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from acp_green.tools.bench import doc
from acp_green.tools.bench.report import ROWS, fmt, table
from acp_green.tools.bench.workloads import Sizes

AGENTS = ("acp-green", "python-sdk", "ts-sdk", "bare-loop", "recorded")
NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def synthetic_report(seed: int) -> dict[str, Any]:
    """A report shaped like `acp-green bench --json`, every median a distinctive random value."""
    rng = random.Random(seed)
    results: dict[str, Any] = {}
    for agent in AGENTS:
        for row in ROWS:
            if row.workload in ("W7", "W8") and agent != "acp-green":
                continue
            if agent == "recorded" and row.workload not in ("W1", "W4"):
                continue
            value = rng.uniform(1, 900) * (1000 if row.kind == "rate" else 1)
            runs = [value * rng.uniform(0.8, 1.2) for _ in range(2)] + [value]
            results.setdefault(agent, {}).setdefault(row.workload, {})[row.metric] = {
                "median": value, "min": min(runs), "max": max(runs), "spread": 0.1, "runs": runs}
    return {
        "format": 1, "started": "2031-07-04T05:06:07+00:00", "finished": "2031-07-04T06:06:07+00:00",
        "commit": "abcdef012345", "repeat": 3, "scale": 1.0, "sizes": dataclasses.asdict(Sizes()),
        "machine": {"nproc": 2, "cpu_model": "Test CPU", "kernel": "6.1.0", "python": "3.11.7", "gevent": "25.5.1"},
        "load_before": [0.11, 0.22, 0.33], "load_after": [0.44, 0.55, 0.66],
        "agents": [{"name": a, "command": [a], "note": ""} for a in AGENTS],
        "skipped": {}, "not_run": {}, "client_ceiling": [], "rounds": [], "failures": [], "results": results,
    }


def figures_of(report: dict[str, Any]) -> set[str]:
    """Every way the page may print a figure of `report`, computed here independently."""
    texts: list[str] = []
    medians = {(a, row.workload, row.metric): (report["results"].get(a, {}).get(row.workload, {}).get(row.metric) or {}).get("median")
               for a in AGENTS for row in ROWS}
    for row in ROWS:
        for a in AGENTS:
            value = medians[(a, row.workload, row.metric)]
            texts.append(fmt(value, row.kind))
            for b in AGENTS:
                other = medians[(b, row.workload, row.metric)]
                if value is not None and other:
                    texts.append(f"{value / other:.2f}×")
                    texts.append(fmt(value - other, row.kind))
    texts += [str(v) for v in report["sizes"].values()]
    texts += [str(t.bound) for t in doc.TARGETS] + [f"{t.bound:g}" for t in doc.TARGETS]
    texts += [report["started"], report["commit"], str(report["repeat"]), str(report["scale"]),
              str(report["load_before"]), str(report["load_after"]), *map(str, report["machine"].values())]
    return {token for text in texts for token in NUMBER.findall(text)}


def prose_of(page: str) -> str:
    """The page without code (blocks and spans) and without names that contain digits."""
    page = re.sub(r"```.*?```", " ", page, flags=re.S)
    page = re.sub(r"`[^`]*`", " ", page)
    return re.sub(r"\b(W[1-8]|p50|p99)\b", " ", page)


def test_every_figure_of_the_page_comes_from_the_results_file_it_read():
    """Rendered from a report of random figures, the page's prose and targets table quote no
    number that is not a figure of that report (a median, a ratio or difference of two, a size,
    a target), and its results block is the bench's table of the same report."""
    for seed in (1, 2, 3):
        report = synthetic_report(seed)
        page = doc.render(report)
        stray = sorted(set(NUMBER.findall(prose_of(page))) - figures_of(report))
        assert stray == [], f"numbers not taken from the report: {stray}"
        assert "```\n" + table(report) + "\n```" in page
        acp = report["results"]["acp-green"]
        assert fmt(acp["W7"]["replay_updates_per_s"]["median"], "rate") in page  # the prose does quote figures
        assert f'{acp["W5"]["init_ms"]["median"] / report["results"]["bare-loop"]["W5"]["init_ms"]["median"]:.2f}×' in page
        recorded = report["results"]["recorded"]
        assert "## What recording costs" in page
        assert f'{recorded["W1"]["chunks_per_s"]["median"] / acp["W1"]["chunks_per_s"]["median"]:.2f}×' in page
        assert f'p50 {fmt(recorded["W4"]["rtt_p50_ms"]["median"], "ms")} ms' in page


def test_a_page_for_a_run_without_peers_says_not_measured_instead_of_inventing_figures():
    """Only acp-green ran: the ratios to the bare loop are '-' and their targets 'not measured'."""
    report = synthetic_report(4)
    report["agents"] = [a for a in report["agents"] if a["name"] == "acp-green"]
    report["results"] = {"acp-green": report["results"]["acp-green"]}
    page = doc.render(report)
    assert "| W5 start-up ≤ 3× the bare loop | - | not measured |" in page
    assert set(NUMBER.findall(prose_of(page))) <= figures_of(report)
