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


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for machines).")
@click.option("--long-prompt", default="/wait", show_default=True, metavar="TEXT",
              help="A prompt that runs until cancelled (for agents without acp-green's /wait).")
@click.option("--stream-prompt", default="/stream 20000 256", show_default=True, metavar="TEXT",
              help="A prompt that streams many updates.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="How long any single answer may take before its check fails.")
@click.option("--sessions", type=click.IntRange(min=1), default=16, show_default=True,
              help="Sessions opened at once by the many-sessions check.")
@click.option("--check", "only", multiple=True, metavar="NAME",
              help="Run only the checks whose names contain NAME (repeatable).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def probe(as_json: bool, long_prompt: str, stream_prompt: str, timeout: float, sessions: int,
          only: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Check any stdio ACP agent from outside: acp-green probe -- COMMAND [ARGS...]"""
    from .rig.probe import ProbeConfig, main

    cfg = ProbeConfig(list(command), long_prompt=long_prompt, stream_prompt=stream_prompt,
                      timeout=timeout, sessions=sessions)
    sys.exit(main(cfg, as_json, only))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--deny", is_flag=True, help="Refuse the agent's permission requests (default: allow).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def chat(deny: bool, command: tuple[str, ...]) -> None:
    """Talk to an agent in the terminal: acp-green chat [-- COMMAND [ARGS...]] (default: the demo agent)."""
    from .rig.chat import main

    sys.exit(main(command, allow=not deny))
