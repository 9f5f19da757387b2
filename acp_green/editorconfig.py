"""The settings an editor needs to launch this installation of acp-green: Zed's and JetBrains'.

Both editors start the agent from a directory of their own and without the shell's PATH, so the
command is this installation's absolute executable and relative paths in the arguments are made
absolute.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .agentspec import absolute_spec

EDITORS = ("zed", "jetbrains")
WHERE = {
    "zed": "Zed: paste into settings.json (zed: open settings file), merging agent_servers with any you have",
    "jetbrains": "JetBrains IDEs: paste into ~/.jetbrains/acp.json (AI Chat > Add Custom Agent opens it)",
}


def launcher() -> tuple[str, list[str]]:
    """The absolute command that runs this installation's `acp-green`, and the arguments that
    come before the subcommand (`-m acp_green` when no console script is found)."""
    invoked = sys.argv[0]
    if os.path.basename(invoked).startswith("acp-green") and os.path.isfile(invoked):
        return os.path.abspath(invoked), []
    beside = os.path.join(os.path.dirname(sys.executable), "acp-green")  # the environment's bin
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return os.path.abspath(beside), []
    return sys.executable, ["-m", "acp_green"]


def absolute_serve_args(args: list[str], cwd: str) -> list[str]:
    """`serve` arguments that mean the same from any directory: --agent, --state-dir and --trace absolute."""
    out: list[str] = []
    pending: str | None = None
    for arg in args:
        if pending is not None:
            out.append(_absolute(pending, arg, cwd))
            pending = None
        elif arg in ("--agent", "--state-dir", "--trace"):
            pending = arg
            out.append(arg)
        elif arg.startswith(("--agent=", "--state-dir=", "--trace=")):
            option, _, value = arg.partition("=")
            out.append(f"{option}={_absolute(option, value, cwd)}")
        else:
            out.append(arg)
    return out


def _absolute(option: str, value: str, cwd: str) -> str:
    if option == "--agent":
        return absolute_spec(value, cwd)
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(value)))


def editor_settings(editor: str, name: str, serve_args: list[str], record_dir: str | None = None) -> dict[str, Any]:
    """The JSON object to paste into `editor`'s settings for an agent called `name`.

    `record_dir` (absolute): the agent runs behind `acp-green record`, one new trace file per launch there.
    """
    command, leading = launcher()
    args = [*leading, "serve", *serve_args]
    if record_dir is not None:
        args = [*leading, "record", "--out-dir", record_dir, "--", command, *args]
    return command_settings(editor, name, command, args)


def command_settings(editor: str, name: str, command: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON object that makes `editor` launch `command args` (absolute) as an agent called `name`."""
    entry: dict[str, Any] = {"command": command, "args": args, "env": dict(env or {})}
    if editor == "zed":
        entry = {"type": "custom", **entry}  # Zed's agent_servers also hold registry and extension agents
    return {"agent_servers": {name: entry}}
