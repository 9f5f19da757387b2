"""What a Python package says about itself, for its registry manifest: from an installed
distribution's metadata, or from the `[project]` table of a pyproject.toml.

A field the source does not give is None (or empty), never guessed; `manifest.py` says how to
supply it. A pyproject field listed in `dynamic` is unknown until the package is built.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from email.utils import getaddresses
from importlib import metadata
from pathlib import Path
from typing import Any

#: Project-URL labels that name the source repository (compared lowercased, letters only).
REPOSITORY_LABELS = ("repository", "source", "sourcecode", "code", "github", "gitlab")
HOMEPAGE_LABELS = ("homepage", "home")
#: The entry-point group a package names its agent in (`acp-green new` declares it): NAME = "module:Class".
AGENTS_GROUP = "acp_green.agents"


class MetadataError(Exception):
    """The package itself cannot be read (not installed, no pyproject.toml, bad TOML)."""


@dataclass(frozen=True, slots=True)
class PackageInfo:
    """A package's name, version and the rest a manifest takes from it; None where not given."""

    source: str  # where it was read, for messages: "the installed distribution X" or a pyproject.toml path
    name: str | None
    version: str | None
    description: str | None
    license: str | None
    authors: tuple[str, ...]
    repository: str | None
    scripts: dict[str, str] = field(default_factory=dict)  # console script name -> "module:function"
    agents: dict[str, str] = field(default_factory=dict)  # AGENTS_GROUP's entry points: name -> "module:attr"
    dynamic: tuple[str, ...] = ()  # pyproject fields only the build will know
    # manifest field -> what is wrong with what the source gives for it ("is an integer, not a string")
    wrong: dict[str, str] = field(default_factory=dict)


def from_installed(distribution: str) -> PackageInfo:
    """The metadata of the installed distribution `distribution` (what was built and would be uploaded)."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise MetadataError(f"no installed distribution named {distribution!r} (install it, e.g. `pip install -e .` "
                            "in its directory, or run where its pyproject.toml is without --package)") from None
    meta: Any = dist.metadata
    urls = [_split_label(value) for value in meta.get_all("Project-URL") or []]
    home = meta.get("Home-page")
    if home:
        urls.append(("homepage", home))
    return PackageInfo(
        source=f"the installed distribution {distribution}",
        name=meta.get("Name"),
        version=meta.get("Version"),
        description=_one_line(meta.get("Summary")),
        license=_one_line(meta.get("License-Expression")) or _short_license(meta.get("License")),
        authors=_authors(meta.get_all("Author") or [], meta.get_all("Author-email") or []),
        repository=pick_repository(urls),
        scripts={ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"},
        agents={ep.name: ep.value for ep in dist.entry_points if ep.group == AGENTS_GROUP},
    )


def from_pyproject(path: Path) -> PackageInfo:
    """The `[project]` table of the pyproject.toml at `path`."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MetadataError(f"no pyproject.toml in {path.parent} (run where your package's pyproject.toml is, "
                            "or name an installed distribution with --package)") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MetadataError(f"cannot read {path}: {exc}") from None
    project = data.get("project")
    if not isinstance(project, dict):
        raise MetadataError(f"{path} has no [project] table (its metadata is elsewhere, e.g. setup.py: install the "
                            "package and name it with --package)")
    wrong: dict[str, str] = {}
    people = _typed(project, "authors", list, "a list of tables", wrong, "authors") or []
    authors = tuple(_pyproject_person(person) for person in people if isinstance(person, dict))
    table = _typed(project, "urls", dict, "a table", wrong, "repository") or {}
    urls = [(str(label), url) for label, url in table.items() if isinstance(url, str)]
    entry_points = _typed(project, "scripts", dict, "a table", wrong, "distribution.uvx") or {}
    scripts = {name: value for name, value in entry_points.items() if isinstance(value, str)}
    groups = _typed(project, "entry-points", dict, "a table", wrong, "authMethods") or {}
    declared = groups.get(AGENTS_GROUP)
    agents = {name: value for name, value in declared.items() if isinstance(value, str)} if isinstance(declared, dict) else {}
    dynamic = _typed(project, "dynamic", list, "a list of field names", wrong, "version") or []
    description = _typed(project, "description", str, "a string", wrong, "description")
    if description and not _one_line(description):
        wrong["description"] = "holds more than one line (the registry shows one: put the rest in the README)"
    license_value = project.get("license")
    license_id = _pyproject_license(license_value)
    if license_value is not None and not license_id:
        wrong["license"] = ("is a license file or text, not an SPDX identifier" if isinstance(license_value, (str, dict))
                            else f"is {_kind(license_value)}, not a string")
    return PackageInfo(
        source=str(path),
        name=_typed(project, "name", str, "a string", wrong, "name"),
        version=_typed(project, "version", str, "a string", wrong, "version"),
        description=_one_line(description),
        license=license_id,
        authors=tuple(a for a in authors if a),
        repository=pick_repository(urls),
        scripts=scripts,
        agents=agents,
        dynamic=tuple(str(name) for name in dynamic),
        wrong=wrong,
    )


def _typed(project: dict[str, Any], key: str, kind: type, spelled: str, wrong: dict[str, str], field_name: str) -> Any:
    """project[key] when it is of `kind`, else None, with what is wrong noted under the manifest's field."""
    value = project.get(key)
    if value is None or isinstance(value, kind):
        return value
    wrong.setdefault(field_name, f"{key} is {_kind(value)}, not {spelled}" if key != field_name else f"is {_kind(value)}, not {spelled}")
    return None


def _kind(value: Any) -> str:
    """A TOML value's type in words."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array", dict: "a table"}
    return next((spelled for kind, spelled in names.items() if isinstance(value, kind)), type(value).__name__)


def pick_repository(urls: list[tuple[str, str]]) -> str | None:
    """The URL labelled as the source repository, else the home page, else None."""
    labelled = {re.sub(r"[^a-z]", "", label.lower()): url.strip() for label, url in urls}
    for labels in (REPOSITORY_LABELS, HOMEPAGE_LABELS):
        for label in labels:
            if labelled.get(label):
                return labelled[label]
    return None


def _split_label(value: str) -> tuple[str, str]:
    label, _, url = value.partition(",")
    return label.strip(), url.strip()


def _authors(names: list[str], emails: list[str]) -> tuple[str, ...]:
    """"Name <email>" for each author in Author-email, then each name in Author not already there."""
    found = [f"{name} <{address}>" if name else address
             for value in emails for name, address in getaddresses([value]) if address]
    for value in names:
        for name in value.split(","):
            if name.strip() and not any(author.startswith(name.strip()) for author in found):
                found.append(name.strip())
    return tuple(found)


def _pyproject_person(person: dict[str, Any]) -> str:
    name, email = _str(person.get("name")), _str(person.get("email"))
    if name and email:
        return f"{name} <{email}>"
    return name or email or ""


def _pyproject_license(value: Any) -> str | None:
    """An SPDX expression (`license = "MIT"`) or a short `{text = ...}`; a license file is no identifier."""
    if isinstance(value, str):
        return _one_line(value)
    if isinstance(value, dict):
        return _short_license(_str(value.get("text")))
    return None


def _short_license(value: str | None) -> str | None:
    """A License field that is an identifier (one short line), not a whole license text."""
    text = _one_line(value)
    return text if text and len(text) <= 64 and text.upper() != "UNKNOWN" else None


def _one_line(value: str | None) -> str | None:
    if not value or "\n" in value.strip():
        return None
    return value.strip() or None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
