"""`acp-green manifest`: the ACP registry entry (`agent.json`) of a package that serves an agent.

The entry is built from the package's metadata (metadata.py) and the agent's `auth_methods`,
then validated against the registry's format (format.py), and the icon the registry requires
beside it against its rules (icon.py), before anything is written. Whatever is missing is
reported as one problem per field, saying where to set it or which option gives it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .format import ACCEPTED_AUTH_KINDS, ID_PATTERN, Problem, auth_problem, validate
from .icon import icon_file_problems
from .metadata import AGENTS_GROUP, PackageInfo

#: Console scripts that are acp-green's own command line: the manifest passes `serve --agent SPEC`.
ACP_GREEN_ENTRY_POINTS = ("acp_green.__main__:main", "acp_green.cli:cli")


class ManifestError(Exception):
    """The manifest cannot be written; each problem names a field and how to supply it."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass(frozen=True, slots=True)
class Overrides:
    """Fields given on the command line; each wins over the package's metadata."""

    id: str | None = None
    name: str | None = None
    version: str | None = None
    description: str | None = None
    repository: str | None = None
    license: str | None = None
    authors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Distributions:
    """Which ways to install the agent go in the entry, and what only the command line can say of them."""

    kinds: tuple[str, ...] = ("uvx",)
    args: tuple[str, ...] | None = None  # the agent's arguments; None: derived from the console script (uvx) or none
    npx_package: str | None = None
    binary: tuple[tuple[str, str], ...] = ()  # (platform, archive URL)
    binary_cmd: str | None = None


@dataclass(frozen=True, slots=True)
class ManifestRequest:
    """Everything a manifest is built from."""

    package: PackageInfo
    agent_spec: str | None  # --agent, as given; None when not given
    auth_methods: list[dict[str, Any]] | None  # the agent's authMethods as initialize would send them
    overrides: Overrides = field(default_factory=Overrides)
    distributions: Distributions = field(default_factory=Distributions)
    icon: Path | None = None  # the icon.svg to go beside agent.json; None: not checked


def build_manifest(request: ManifestRequest) -> dict[str, Any]:
    """The entry, valid for the registry's format; ManifestError naming every field that is missing or wrong."""
    problems: list[Problem] = []
    fields = _fields(request, problems)
    distribution = _distribution(request, fields.get("version"), problems)
    _check_auth(request, problems)
    if request.icon is not None:
        problems += icon_file_problems(request.icon)
    if problems:
        raise ManifestError(problems)
    manifest = {**fields, "distribution": distribution}
    invalid = validate(manifest)
    if invalid:
        raise ManifestError(invalid)
    return manifest


def declared_agent(package: PackageInfo) -> str | None:
    """The agent the package declares in its AGENTS_GROUP entry points: the one named after the
    package, else the only one; None when it declares none (or several, none of its name)."""
    named = [spec for name, spec in package.agents.items() if package.name and _normalized(name) == _normalized(package.name)]
    if named:
        return named[0]
    return next(iter(package.agents.values())) if len(package.agents) == 1 else None


def dumps(manifest: dict[str, Any]) -> str:
    """The file's text, laid out as the registry's own files are."""
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"


#: How each field is supplied, after "<field>: not in <source>; ".
HOW = {
    "name": "set name under [project], or give --name NAME",
    "version": "set version under [project], or give --version X.Y.Z",
    "description": "set description under [project] (the Summary of its metadata), or give --description TEXT",
    "license": 'set license = "MIT" (an SPDX identifier) under [project], or give --license SPDX-ID',
    "authors": "set authors = [{name = \"...\", email = \"...\"}] under [project], or give --author 'Name <email>' (repeatable)",
    "repository": 'set Repository = "https://..." under [project.urls], or give --repository URL',
}


def _fields(request: ManifestRequest, problems: list[Problem]) -> dict[str, Any]:
    package, given = request.package, request.overrides
    values: dict[str, Any] = {
        "name": given.name or package.name,
        "version": given.version or package.version,
        "description": given.description or package.description,
        "repository": given.repository or package.repository,
        "authors": list(given.authors or package.authors),
        "license": given.license or package.license,
    }
    for name, value in values.items():
        if not value and name in package.wrong and not getattr(given, name, None):
            problems.append(Problem(name, f"{package.wrong[name]} (in {package.source}); {HOW[name]}"))
        elif not value:
            dynamic = " (it is dynamic there: install the package and pass --package NAME)" if name in package.dynamic else ""
            problems.append(Problem(name, f"not in {package.source}{dynamic}; {HOW[name]}"))
    entry_id = given.id or _id_of(package.name)
    if not entry_id:
        problems.append(Problem("id", "cannot be made from the package's name: give --id ID (lowercase letters, digits "
                                      "and hyphens, starting with a letter)"))
    return {"id": entry_id, **{name: value for name, value in values.items() if value}}


def _id_of(name: str | None) -> str | None:
    """The package's name as a registry id (lowercase, `_` and `.` as `-`), or None if it cannot be one."""
    if not name:
        return None
    candidate = re.sub(r"[-_.\s]+", "-", name.lower()).strip("-")
    return candidate if ID_PATTERN.fullmatch(candidate) else None


def _distribution(request: ManifestRequest, version: str | None, problems: list[Problem]) -> dict[str, Any]:
    wanted = request.distributions
    distribution: dict[str, Any] = {}
    if "uvx" in wanted.kinds:
        distribution["uvx"] = _uvx(request, version, problems)
    if "npx" in wanted.kinds:
        if not wanted.npx_package:
            problems.append(Problem("distribution.npx.package", "give --npx-package NAME@VERSION (the npm package that runs the agent)"))
        distribution["npx"] = _with_args({"package": wanted.npx_package or ""}, wanted.args)
    if "binary" in wanted.kinds:
        if not wanted.binary:
            problems.append(Problem("distribution.binary", "give --binary PLATFORM=ARCHIVE_URL for each platform "
                                                           "(darwin, linux and windows at least)"))
        if not wanted.binary_cmd:
            problems.append(Problem("distribution.binary.cmd", "give --binary-cmd ./EXECUTABLE (what to run in the unpacked archive)"))
        distribution["binary"] = {platform: _with_args({"archive": url, "cmd": wanted.binary_cmd or ""}, wanted.args)
                                  for platform, url in wanted.binary}
    return distribution


def _uvx(request: ManifestRequest, version: str | None, problems: list[Problem]) -> dict[str, Any]:
    """uvx runs the console script named after the package: the package is pinned to the version,
    spelled as that script (pip reads `my_agent` and `my-agent` as one project). A package whose
    only console script has another name gets it as `cmd` (`uvx --from PACKAGE CMD`)."""
    package = request.package
    name = package.name or ""
    script = next((s for s in package.scripts if _normalized(s) == _normalized(name)), None) if name else None
    command = next(iter(package.scripts)) if script is None and len(package.scripts) == 1 else None
    if name and script is None and command is None and "distribution.uvx" in package.wrong:
        problems.append(Problem("distribution.uvx", f"{package.wrong['distribution.uvx']} (in {package.source}): add {name} = "
                                                    "\"your_module:main\" under [project.scripts]"))
    elif name and script is None and command is None:
        others = f" (it has {', '.join(sorted(package.scripts))}: which one would be the agent?)" if package.scripts else ""
        problems.append(Problem("distribution.uvx", f"uvx runs the command named after the package, and {name} has no "
                                                    f"console script {name!r}{others}: add {name} = \"your_module:main\" "
                                                    "under [project.scripts] (or acp_green.__main__:main, to serve --agent)"))
    runs = script or command
    args = request.distributions.args
    if args is None and runs is not None and package.scripts[runs].replace(" ", "") in ACP_GREEN_ENTRY_POINTS:
        args = _serve_args(request.agent_spec, runs, problems)
    spelled = script or name
    entry = {"package": f"{spelled}=={version}" if version else spelled, **({"cmd": command} if command else {})}
    return _with_args(entry, args)


def _serve_args(spec: str | None, script: str, problems: list[Problem]) -> tuple[str, ...]:
    if not spec:
        return ()  # the missing --agent is reported once, as authMethods
    source = spec.rpartition(":")[0]
    if source.endswith(".py") or "/" in source:
        problems.append(Problem("distribution.uvx.args", f"{script} is acp-green's command line, run wherever uvx installs it: "
                                                         f"--agent must be MODULE:ATTR of a module the package installs, not the file {source}"))
    return ("serve", "--agent", spec)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _with_args(entry: dict[str, Any], args: tuple[str, ...] | None) -> dict[str, Any]:
    return {**entry, "args": list(args)} if args else entry


def _check_auth(request: ManifestRequest, problems: list[Problem]) -> None:
    kinds = " or ".join(ACCEPTED_AUTH_KINDS)
    if request.auth_methods is None:
        declare = (f"{request.package.wrong['authMethods']} (in {request.package.source})" if "authMethods" in request.package.wrong
                   else f"or declare it under [project.entry-points.\"{AGENTS_GROUP}\"] as NAME = \"module:Class\"")
        problems.append(Problem("authMethods", f"give --agent MODULE:ATTR, the agent the package serves ({declare}): the "
                                               f"registry lists only agents whose initialize offers a login of type {kinds}, "
                                               "which its Agent.auth_methods say"))
        return
    problem = auth_problem(request.auth_methods)
    if problem:
        problems.append(Problem("authMethods", f"{request.agent_spec}: {problem}; set auth_methods = (AuthMethod(...),) "
                                               "on the Agent class (docs/PUBLISHING.md)"))
