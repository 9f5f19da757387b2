"""`acp-green bench` end to end: pick the agents, run, print the table, write JSON and chart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from ..rig.plot import PlotUnavailable
from .chart import write_chart
from .peers import AgentSpec, Lineup, default_lineup, install_peers
from .report import table, write_json
from .runner import BenchOptions, run_bench


@dataclass(frozen=True)
class BenchSettings:
    """Everything the command line decided."""

    agents: Sequence[str]
    only: Sequence[str]
    workloads: Sequence[str]
    repeat: int
    scale: float
    json_path: Path | None
    chart_path: Path | None
    install: bool
    cache_dir: Path
    peers_dir: Path
    ceiling: bool
    read_pause: float = 0.0
    protocol: int = 1


def log(message: str) -> None:
    """Progress goes to stderr; stdout carries only the final table."""
    click.echo(message, err=True)


def choose_agents(settings: BenchSettings) -> Lineup:
    """--agent NAME=COMMAND as given, else acp-green plus every peer that can run (filtered by --only)."""
    if settings.agents:
        try:
            return Lineup([AgentSpec.parse(text) for text in settings.agents])
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--agent") from None
    lineup = default_lineup(settings.peers_dir, settings.cache_dir)
    if settings.only:
        unknown = set(settings.only) - {a.name for a in lineup.agents} - set(lineup.skipped)
        if unknown:
            raise click.BadParameter(f"no default agent named {', '.join(sorted(unknown))}", param_hint="--only")
        lineup.agents = [a for a in lineup.agents if a.name in settings.only]
        lineup.skipped = {k: v for k, v in lineup.skipped.items() if k in settings.only}
    return lineup


def run(settings: BenchSettings) -> int:
    """Run the bench as the settings say; the process exit code."""
    if settings.install:
        for problem in install_peers(settings.peers_dir, settings.cache_dir, log):
            log(f"install problem: {problem}")
    lineup = choose_agents(settings)
    for name, reason in lineup.skipped.items():
        log(f"skipping {name}: {reason}")
    if not lineup.agents:
        log("no agent to run")
        return 2
    for agent in lineup.agents:
        log(f"agent {agent.name}: {' '.join(agent.command)}" + (f" ({agent.note})" if agent.note else ""))
    options = BenchOptions(lineup.agents, list(settings.workloads), settings.repeat, settings.scale,
                           ceiling_lines=400_000 if settings.ceiling else 0, read_pause=settings.read_pause, protocol=settings.protocol,
                           skipped=lineup.skipped)
    report = run_bench(options, log)
    if settings.json_path:
        write_json(report, settings.json_path)
        log(f"wrote {settings.json_path}")
    if settings.chart_path:
        try:
            write_chart(report, settings.chart_path)
            log(f"wrote {settings.chart_path}")
        except PlotUnavailable as exc:
            log(f"no chart: {exc}")
    click.echo(table(report))
    return 1 if report["failures"] else 0
