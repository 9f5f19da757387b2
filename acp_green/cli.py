"""The `acp-green` command line."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from . import __version__

log = logging.getLogger(__name__)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def load_agent(spec: str) -> Any:
    """Import MODULE:ATTR and make an agent of it (a class, a factory or an instance)."""
    from .agent import Agent

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"expected MODULE:ATTR, got {spec!r}", param_hint="--agent")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="--agent") from None
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name!r} has no attribute {attr!r}", param_hint="--agent") from None
    agent = target() if isinstance(target, type) or (callable(target) and not isinstance(target, Agent)) else target
    if not isinstance(agent, Agent):
        raise click.BadParameter(f"{spec} did not give an acp_green.Agent (got {type(agent).__name__})", param_hint="--agent")
    return agent


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-green")
def cli() -> None:
    """acp_green: a gevent runtime for Agent Client Protocol agents over stdio."""


@cli.command()
@click.option("--agent", "agent_spec", metavar="MODULE:ATTR", default=None,
              help="Serve your own agent (an acp_green.Agent subclass, factory or instance). Default: the built-in demo agent.")
@click.option("--max-background", type=click.IntRange(min=1), default=32, show_default=True,
              help="Most prompt, MCP and extension requests running at once; one more is refused with -32000 connection_busy.")
@click.option("--shutdown-grace", type=click.FloatRange(min=0), default=5.0, show_default=True, metavar="SECONDS",
              help="On EOF or SIGTERM, how long cancelled work may take to finish before it is aborted.")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=1800.0, show_default=True, metavar="SECONDS",
              help="Evict sessions idle longer than this from memory (never one with a running prompt).")
@click.option("--max-line-bytes", type=click.IntRange(min=1024), default=64 << 20, show_default=True, metavar="N",
              help="Longest input line; a longer one is skipped with -32600 line_too_long.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where sessions and the usage ledger are kept (default $XDG_STATE_HOME/acp-green or ~/.local/state/acp-green).")
@click.option("--ephemeral", is_flag=True, help="Keep everything in memory; write nothing to disk.")
@click.option("--monkey-patch", is_flag=True,
              help="Apply gevent.monkey.patch_all() before anything else is imported, for agents that call blocking libraries.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="WARNING", show_default=True,
              help="Log threshold; logs go to stderr, never stdout.")
def serve(agent_spec: str | None, max_background: int, shutdown_grace: float, idle_timeout: float,
          max_line_bytes: int, state_dir: str | None, ephemeral: bool, monkey_patch: bool, log_level: str) -> None:
    """Run an ACP agent on stdin/stdout (the main job: point your editor at this)."""
    from . import logsetup
    from .server import ServeOptions, Server
    from .transport import claim_stdio

    logsetup.configure(log_level)
    if agent_spec:
        sys.path.insert(0, os.getcwd())
        agent = load_agent(agent_spec)
    else:
        from .demo import DemoAgent

        agent = DemoAgent()
    options = ServeOptions(
        max_background=max_background,
        shutdown_grace=shutdown_grace,
        idle_timeout=idle_timeout,
        max_line_bytes=max_line_bytes,
    )
    if monkey_patch:
        log.info("gevent monkey-patching is on (--monkey-patch)")
    read_fd, write_fd = claim_stdio()
    code = Server(agent, options).serve(read_fd, write_fd)
    sys.stderr.flush()
    sys.exit(code)


@cli.command()
@click.option("--agent", "agents", multiple=True, metavar="NAME=COMMAND",
              help="An agent to measure (repeatable; COMMAND split like a shell would). Default: acp-green serve plus every peer whose runtime is present.")
@click.option("--only", multiple=True, metavar="NAME",
              help="Of the default agents, run only these (acp-green, python-sdk, ts-sdk, bare-loop; repeatable).")
@click.option("--workload", "-w", "workloads", multiple=True, type=click.Choice(["W1", "W2", "W3", "W4", "W5", "W6"]),
              help="Run only these workloads (repeatable). Default: all.")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Rounds; each round runs every workload on every agent.")
@click.option("--scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Multiply chunk counts, round trips and sessions (1 = the issue's sizes).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, metavar="PATH", help="Write the full results as JSON.")
@click.option("--chart", "chart_path", type=click.Path(dir_okay=False), default=None, metavar="PATH", help="Write a PNG chart (needs matplotlib).")
@click.option("--install-peers", is_flag=True, help="Install the peers' SDKs into the cache directory first.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, metavar="DIR", help="Where peers' SDKs are installed (default: .bench-cache in the repository).")
@click.option("--peers-dir", type=click.Path(file_okay=False, exists=True), default=None, metavar="DIR", help="Where the peer agents' sources are (default: bench/peers in the repository).")
@click.option("--no-ceiling", is_flag=True, help="Skip measuring the bench client's own read rate.")
@click.option("--read-pause", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="Calibration only: sleep before each read, like a lazy client (inflates every latency).")
def bench(agents: tuple[str, ...], only: tuple[str, ...], workloads: tuple[str, ...], repeat: int, scale: float,
          json_path: str | None, chart_path: str | None, install_peers: bool, cache_dir: str | None, peers_dir: str | None,
          no_ceiling: bool, read_pause: float) -> None:
    """Benchmark ACP agents side by side (issue 6's W1-W6): medians and spread as a table, JSON and a chart."""
    from pathlib import Path

    from .bench.app import BenchSettings, run
    from .bench.peers import default_cache_dir, default_peers_dir
    from .bench.workloads import WORKLOADS

    settings = BenchSettings(
        agents=agents, only=only, workloads=workloads or tuple(WORKLOADS), repeat=repeat, scale=scale,
        json_path=Path(json_path) if json_path else None, chart_path=Path(chart_path) if chart_path else None,
        install=install_peers, cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(),
        peers_dir=Path(peers_dir) if peers_dir else default_peers_dir(), ceiling=not no_ceiling, read_pause=read_pause,
    )
    sys.exit(run(settings))
