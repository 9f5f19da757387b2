"""The ACP registry's manifest format: our schema of it plus the rules the registry's build adds.

Every problem names the field it is about, as a dotted path (`distribution.uvx.package`), so a
reader knows what to change; a manifest passes only when there is none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SCHEMA_PATH = Path(__file__).with_name("agent.schema.json")

DISTRIBUTION_KINDS = ("uvx", "npx", "binary")
PLATFORMS = ("darwin-aarch64", "darwin-x86_64", "linux-aarch64", "linux-x86_64", "windows-aarch64", "windows-x86_64")
#: A binary distribution needs a build for each of these operating systems (one architecture is enough).
OPERATING_SYSTEMS = ("darwin", "linux", "windows")
#: Installer formats the registry refuses as a binary's archive (an archive, or the executable itself, is wanted).
INSTALLER_SUFFIXES = (".dmg", ".pkg", ".deb", ".rpm", ".msi", ".appimage")
#: Fields that hold a URL when present.
URL_FIELDS = ("repository", "website", "license_url")
#: The kinds of authentication method the registry lists an agent with; others (env_var, ...) do not count.
ACCEPTED_AUTH_KINDS = ("agent", "terminal")

ID_PATTERN = re.compile(r"[a-z][a-z0-9-]*")
#: What a field's pattern asks, said in words ({} is the value).
PATTERN_RULES = {
    "id": "{!r}: lowercase letters, digits and hyphens, starting with a letter",
    "version": "{!r} is not a semantic version MAJOR.MINOR.PATCH of numbers (e.g. 1.0.0)",
    "preview.version": "{!r} is not MAJOR.MINOR.PATCH, or MAJOR.MINOR.PATCH-preview.N (e.g. 1.1.0-preview.1)",
}
#: A PyPI pin in a uvx package (`name==1.2.3`, `name@1.2.3`); its version must be the entry's.
_PYPI_PIN = re.compile(r"[=@]+([\d.]+)")


@dataclass(frozen=True, slots=True)
class Problem:
    """One way a manifest breaks the format: the field (a dotted path, "" for the whole) and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field or 'manifest'}: {self.message}"


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """Our schema of a registry entry (acp_green/tools/publish/README.md says what it follows)."""
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def validate(manifest: Any) -> list[Problem]:
    """Every problem of `manifest` (decoded JSON); [] when the registry's build would accept it.

    The schema comes first; the build's own rules run only on what passes it, as the build does.
    """
    problems = schema_problems(manifest)
    if problems:
        return problems
    return rule_problems(manifest)


def schema_problems(manifest: Any) -> list[Problem]:
    """What the JSON Schema refuses, one problem per field, in field order."""
    from jsonschema import Draft7Validator

    found = {problem for error in Draft7Validator(schema()).iter_errors(manifest) for problem in _problems_of(error)}
    return sorted(found, key=lambda p: (p.field, p.message))


def _problems_of(error: Any) -> list[Problem]:
    path = ".".join(str(part) for part in error.absolute_path)
    keyword = error.validator
    if keyword == "required":  # one error per missing field, which its message names
        missing = re.match(r"'([^']*)' is a required property", error.message)
        return [Problem(_join(path, missing.group(1)) if missing else path, "required" if missing else error.message)]
    if keyword == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        return [Problem(_join(path, str(extra)), f"not a field of the format (allowed: {', '.join(allowed)})")
                for extra in error.instance if extra not in allowed]
    if "propertyNames" in error.schema_path:  # the key itself fails: only binary's platforms are constrained so
        return [Problem(_join(path, str(error.instance)), f"unknown platform (one of {', '.join(PLATFORMS)})")]
    if keyword == "type":
        return [Problem(path, f"must be {_article(error.validator_value)}, not {_json_type(error.instance)}")]
    if keyword == "minLength":
        return [Problem(path, "must not be empty")]
    if keyword == "minProperties":
        what = "a distribution (uvx, npx or binary)" if path == "distribution" else "an entry"
        return [Problem(path, f"must hold at least {what}")]
    if keyword == "pattern":
        rule = PATTERN_RULES.get(path)  # a pattern's own braces ({64}) must not be read as placeholders
        return [Problem(path, rule.format(error.instance) if rule else f"{error.instance!r} does not match {error.validator_value}")]
    return [Problem(path, error.message)]


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _article(json_type: Any) -> str:
    name = str(json_type)
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def rule_problems(manifest: dict[str, Any]) -> list[Problem]:
    """The build's rules beyond the schema, for a manifest the schema accepts (its id pattern is the build's id rule)."""
    problems: list[Problem] = []
    version = manifest["version"]
    if not is_semver(version):
        problems.append(Problem("version", PATTERN_RULES["version"].format(version)))
    for field in URL_FIELDS:
        if field in manifest and not is_url(manifest[field]):
            problems.append(Problem(field, f"{manifest[field]!r} is not an absolute URL"))
    distribution = manifest["distribution"]
    problems += _binary_problems(distribution.get("binary"))
    problems += _pin_problems(version, distribution)
    preview = manifest.get("preview")
    if preview is not None:  # its pins are its own version's, which may be a prerelease
        problems += [Problem(f"preview.{p.field}", p.message) for p in _pin_problems(preview["version"], preview["distribution"])]
    return problems


def is_semver(version: str) -> bool:
    """MAJOR.MINOR.PATCH of numbers, as the registry reads it (anything after a third dot is free)."""
    parts = version.split(".")
    return len(parts) >= 3 and all(part.isdigit() for part in parts[:3])


def is_url(value: str) -> bool:
    """An absolute http(s) URL with a host."""
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _binary_problems(binary: dict[str, Any] | None) -> list[Problem]:
    if binary is None:
        return []
    problems = []
    present = {platform.split("-")[0] for platform in binary}
    missing = [name for name in OPERATING_SYSTEMS if name not in present]
    if missing:
        problems.append(Problem("distribution.binary", f"needs a build for every operating system: none for {', '.join(missing)}"))
    for platform, target in binary.items():
        archive = target["archive"]
        if "/latest/" in archive:
            problems.append(Problem(f"distribution.binary.{platform}.archive", "names /latest/: give the release's own version"))
        elif not is_url(archive):
            problems.append(Problem(f"distribution.binary.{platform}.archive", f"{archive!r} is not an absolute URL"))
        elif urlsplit(archive).path.lower().endswith(INSTALLER_SUFFIXES):
            problems.append(Problem(f"distribution.binary.{platform}.archive", "is an installer, which the registry refuses: "
                                    "give a .zip, .tar.gz, .tgz, .tar.bz2 or .tbz2 archive, or the executable itself"))
    return problems


def _pin_problems(version: str, distribution: dict[str, Any]) -> list[Problem]:
    problems = []
    for platform, target in (distribution.get("binary") or {}).items():
        found = re.search(r"/(?:download|releases)/v?([\d.]+)/", target["archive"])
        if found and _three_parts(found.group(1)) != version and "/latest/" not in target["archive"]:
            problems.append(Problem(f"distribution.binary.{platform}.archive",
                                    f"is the release {_three_parts(found.group(1))}, not the entry's version {version}"))
    if "npx" in distribution:
        package = distribution["npx"]["package"]
        pinned = npm_version(package)
        if "@latest" in package.lower():
            problems.append(Problem("distribution.npx.package", f"{package!r} names @latest: pin the entry's version ({version})"))
        elif pinned is not None and pinned != version:
            problems.append(Problem("distribution.npx.package", f"pins {pinned}, not the entry's version {version}"))
    if "uvx" in distribution:
        package = distribution["uvx"]["package"]
        found = _PYPI_PIN.search(package)
        pinned = found.group(1) if found else None
        if found and "-preview." in version:  # a preview pins the whole of its version
            pinned = package[found.start(1):]
        if "@latest" in package.lower():
            problems.append(Problem("distribution.uvx.package", f"{package!r} names @latest: pin the entry's version ({version})"))
        elif pinned is not None and pinned != version:
            problems.append(Problem("distribution.uvx.package", f"pins {pinned}, not the entry's version {version}"))
    return problems


def _three_parts(version: str) -> str:
    parts = version.split(".")
    return ".".join((parts + ["0", "0"])[:3])


def npm_version(package: str) -> str | None:
    """The version an npm spec pins (`@scope/name@1.2.3`, `name@1.2.3`), or None."""
    name_end = package.find("@", 1) if package.startswith("@") else package.find("@")
    return package[name_end + 1:] if name_end > 0 else None


def pypi_name(package: str) -> str:
    """The project name of a uvx package spec (`name==1.2.3`, `name@1.2.3`, `name[extra]`)."""
    return re.split(r"[\[<>=!~@;\s]", package, maxsplit=1)[0]


def auth_kind(method: Any) -> str:
    """The kind of one `authMethods` entry as the registry reads it: its `type`, else a
    `terminal-auth` or `agent-auth` key in its `_meta`, else `agent` (the protocol's default)."""
    if not isinstance(method, dict):
        return f"not an object ({type(method).__name__})"
    kind = method.get("type")
    if kind:
        return str(kind)
    meta = method.get("_meta")
    if isinstance(meta, dict):
        if "terminal-auth" in meta:
            return "terminal"
        if "agent-auth" in meta:
            return "agent"
    return "agent"


def auth_problem(methods: Any) -> str | None:
    """Why these `authMethods` would not get an agent listed (none of an accepted kind), or None."""
    if not isinstance(methods, list) or not methods:
        return (f"none advertised: the registry lists only agents offering a login of type "
                f"{' or '.join(ACCEPTED_AUTH_KINDS)}")
    if not any(auth_kind(m) in ACCEPTED_AUTH_KINDS for m in methods):
        kinds = ", ".join(f"{m.get('id') if isinstance(m, dict) else '?'} ({auth_kind(m)})" for m in methods)
        return f"no method of type {' or '.join(ACCEPTED_AUTH_KINDS)}: found {kinds}"
    return None
