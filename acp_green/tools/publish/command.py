"""The `acp-green manifest` command's two jobs once its options are parsed: write a manifest, or check one.

The agent is loaded by the command line (it owns `--agent`); this module gets a function that
returns the agent's authMethods as its initialize would send them. Without `--agent`, the agent
is the one the package declares (metadata.AGENTS_GROUP), as a project made by `acp-green new` does.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .check import CheckOptions, check_manifest, json_report, text_report
from .icon import ICON_NAME
from .manifest import Distributions, ManifestError, ManifestRequest, Overrides, build_manifest, declared_agent, dumps
from .metadata import MetadataError, from_installed, from_pyproject

#: The exit code of a manifest that cannot be written (a usage error: something to supply).
NOT_WRITTEN = 2


class UsageError(click.ClickException):
    """A bad option value, said in one line ("Error: ...") with exit code 2."""

    exit_code = NOT_WRITTEN


def split_command(value: str | None, option: str) -> tuple[str, ...] | None:
    """An option's command line, split as a shell would split it (no shell runs it)."""
    if value is None:
        return None
    try:
        return tuple(shlex.split(value))
    except ValueError as exc:
        raise UsageError(f"{option}: cannot split {value!r}: {exc}") from None


#: The writing options at their defaults: `--check` takes none of them.
WRITING_DEFAULTS: dict[str, Any] = {"agent_spec": None, "package": None, "out": "agent.json", "kinds": (), "entry_id": None,
                                    "name": None, "version": None, "description": None, "repository": None,
                                    "license_id": None, "authors": (), "args": None, "npx_package": None, "binaries": (),
                                    "binary_cmd": None}


def refuse_mixed(checking: bool, options: dict[str, Any], check_options_given: bool) -> None:
    """Options of the other job are an error, not silently dropped."""
    if checking and any(options.get(name) != default for name, default in WRITING_DEFAULTS.items()):
        raise UsageError("--check takes only --command, --timeout, --keep-home and --json; the other options write a manifest")
    if not checking and check_options_given:
        raise UsageError("--command, --keep-home and --json go with --check FILE")


def check(path: str, as_json: bool, command: str | None, timeout: float, keep_home: bool) -> int:
    """Check the manifest at `path`, print one line per check (or JSON); 0 when every check passes."""
    report = check_manifest(path, CheckOptions(split_command(command, "--command"), timeout, keep_home))
    if as_json:
        from ...store.report import json_text

        click.echo(json_text(json_report(report)))
    else:
        for line in text_report(report):
            click.echo(line)
    return 0 if report.ok else 1


def write(options: dict[str, Any], auth_methods: Callable[[str], list[dict[str, Any]]]) -> int:
    """Build the manifest the options describe and write it; 2 (nothing written) naming each field that is missing."""
    project = Path.cwd()
    try:
        info = from_installed(options["package"]) if options["package"] else from_pyproject(project / "pyproject.toml")
    except MetadataError as exc:
        raise UsageError(str(exc)) from None
    spec = options["agent_spec"] or declared_agent(info)
    if spec and str(project) not in sys.path:
        sys.path.insert(0, str(project))  # the package's own modules load as `serve --agent` loads them, installed or not
    icon = project / ICON_NAME
    request = ManifestRequest(
        info, spec, auth_methods(spec) if spec else None,
        Overrides(options["entry_id"], options["name"], options["version"], options["description"],
                  options["repository"], options["license_id"], tuple(options["authors"])),
        Distributions(tuple(dict.fromkeys(options["kinds"])) or ("uvx",), split_command(options["args"], "--args"),
                      options["npx_package"], _platforms(options["binaries"]), options["binary_cmd"]),
        icon=icon,
    )
    try:
        text = dumps(build_manifest(request))
    except ManifestError as exc:
        for problem in exc.problems:
            click.echo(f"Error: {problem}", err=True)
        click.echo("Nothing written.", err=True)
        return NOT_WRITTEN
    out = options["out"]
    if out == "-":
        click.echo(text, nl=False)
        return 0
    beside = Path(out).absolute().parent / ICON_NAME  # the registry's directory for the entry holds both
    copied = beside.resolve() != icon.resolve()
    try:
        Path(out).write_text(text, encoding="utf-8")
        if copied:
            shutil.copyfile(icon, beside)
    except OSError as exc:
        raise UsageError(f"--out: cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    icon_said = f", and copied {icon} beside it" if copied else f", {ICON_NAME} beside it"
    click.echo(f"wrote {out} (from {info.source}){icon_said}; check it with: acp-green manifest --check {out}", err=True)
    return 0


def _platforms(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    found = []
    for value in values:
        platform, sep, url = value.partition("=")
        if not sep or not platform.strip():
            raise UsageError(f"--binary: expected PLATFORM=URL, got {value!r}")
        found.append((platform.strip(), url.strip()))
    return tuple(found)
