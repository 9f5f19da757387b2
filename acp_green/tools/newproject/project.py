"""`acp-green new NAME`: a project for an agent on acp_green, ready to install, test and launch.

The files are rendered from the templates beside this module by plain replacement of `{{key}}`
(the templates hold shell, YAML and Python, where `$` and single braces mean something of their
own). Everything is rendered before anything is written, so a refusal leaves nothing behind.
The project's ci.sh is given where this acp-green was installed from (source.py), to install it
from there.
"""

from __future__ import annotations

import functools
import json
import keyword
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ...version import __version__
from .source import acp_green_source

NAME_LIMIT = 64
#: Modules the project's own would shadow or be shadowed by: acp_green, what it runs on, the test tools.
TAKEN = frozenset({"acp_green", "gevent", "greenlet", "zope", "click", "ujson", "jsonschema", "geventhttpclient",
                   "pytest", "setuptools", "pip", "tests", "conftest"})
#: Directories the build writes and the project's .gitignore ignores: a package there would be neither built nor committed.
BUILD_OUTPUT = frozenset({"build", "dist"})
KINDS = {False: "hello", True: "llm"}
DESCRIPTIONS = {"hello": "An ACP agent that says hello", "llm": "An ACP agent on an OpenAI-compatible model endpoint"}
#: The editor's env for each kind of agent: what an LLM agent reads to find its endpoint.
EDITOR_ENV = {"hello": {}, "llm": {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_MODEL": "default"}}
DEPENDENCIES = {"hello": [f"acp-green>={__version__}"], "llm": [f"acp-green>={__version__}", "geventhttpclient>=2.6,<3"]}
#: (template, where it goes): {module} is the project's package.
FILES = {
    "common": [("pyproject.toml.tmpl", "pyproject.toml"), ("README.md.tmpl", "README.md"), ("ci.sh.tmpl", "ci.sh"),
               ("ci.yml.tmpl", ".github/workflows/ci.yml"), ("gitignore.tmpl", ".gitignore"), ("icon.svg.tmpl", "icon.svg"),
               ("package_init.py.tmpl", "{module}/__init__.py"), ("package_main.py.tmpl", "{module}/__main__.py"),
               ("conftest.py.tmpl", "tests/conftest.py")],
    "hello": [("agent.py.tmpl", "{module}/agent.py"), ("entry.py.tmpl", "{module}/entry.py"),
              ("test_agent.py.tmpl", "tests/test_agent.py")],
    "llm": [("agent.py.tmpl", "{module}/agent.py"), ("entry.py.tmpl", "{module}/entry.py"),
            ("test_agent.py.tmpl", "tests/test_agent.py"), ("fake_openai.py.tmpl", "tests/fake_openai.py")],
}
EXECUTABLE = {"ci.sh"}
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
#: Given the installed command and the editor's env: each editor's (where to paste, settings).
EditorSettings = Callable[[str, dict[str, str]], list[tuple[str, dict[str, Any]]]]


class ProjectRefused(ValueError):
    """The project cannot be made as asked; the message names the problem."""


@dataclass(frozen=True)
class ProjectName:
    """The names one NAME gives: the distribution and command, the package, the agent's class."""

    name: str
    module: str
    class_name: str


def check_name(name: str) -> ProjectName:
    """The project's names, or ProjectRefused saying what is wrong with `name`.

    A name is a distribution name that is also, with `-` as `_` and lower-cased, an importable
    module name that shadows nothing the project needs: it starts with a letter, ends with a
    letter or a digit, and holds only letters, digits, `-` and `_`.
    """
    def refuse(why: str) -> ProjectRefused:
        return ProjectRefused(f"{name!r} is not a usable project name: {why}")

    if not name:
        raise refuse("it is empty")
    if len(name) > NAME_LIMIT:
        raise refuse(f"it is {len(name)} characters long (at most {NAME_LIMIT})")
    bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "-_"))), None)
    if bad is not None:
        what = "a space" if bad == " " else repr(bad)
        raise refuse(f"it contains {what} (use ASCII letters, digits, '-' and '_')")
    if not name[0].isalpha():
        raise refuse(f"it starts with {name[0]!r} (a Python module name starts with a letter)")
    if not name[-1].isalnum():
        raise refuse(f"it ends with {name[-1]!r} (a distribution name ends with a letter or a digit)")
    module = name.replace("-", "_").lower()
    if keyword.iskeyword(module):
        raise refuse(f"its module name {module!r} is a Python keyword")
    if module in sys.stdlib_module_names:
        raise refuse(f"its module name {module!r} would shadow the standard library's {module!r}")
    if module in BUILD_OUTPUT:
        raise refuse(f"its package directory {module!r} is where the build writes its output (and .gitignore ignores it)")
    if module in TAKEN:
        raise refuse(f"its module name {module!r} is taken by acp_green, what it runs on, or the test tools")
    shadowed = installed_module_of(module)
    if shadowed is not None:
        raise refuse(f"its module name {module!r} would shadow the module of the same name of {shadowed}, which acp-green "
                     "or its test tools import (the project's tests could not even be collected)")
    camel = "".join(part[:1].upper() + part[1:] for part in module.split("_"))
    class_name = camel if camel.endswith("Agent") and camel != "Agent" else camel + "Agent"
    return ProjectName(name, module, class_name)


#: The distributions whose modules a project must not shadow: what acp-green and the project's
#: test runner import, with everything they need (attrs and pluggy among them, through pytest).
SHADOW_ROOTS = ("acp-green", "pytest", "hypothesis")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a requirement string's distribution name (PEP 508)


@functools.cache
def _needed_modules() -> dict[str, str]:
    """Top-level module -> its distribution, for the installed requirement closure of SHADOW_ROOTS."""
    from importlib import metadata

    seen: set[str] = set()
    pending = list(SHADOW_ROOTS)
    modules: dict[str, str] = {}
    while pending:
        name = pending.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for module in _top_level_modules(dist):
            modules.setdefault(module.lower(), dist.metadata["Name"])
        # Every requirement, extras' too (markers are not evaluated): a name refused in one
        # environment that another would not need is the safe mistake.
        for requirement in dist.requires or ():
            named = _REQUIREMENT_NAME.match(requirement)
            if named is not None:
                pending.append(named.group(0))
    return modules


def _top_level_modules(dist: Any) -> set[str]:
    """The importable top-level names a distribution installs (its top_level.txt, else its files)."""
    listed = dist.read_text("top_level.txt")
    if listed:
        return {line.strip() for line in listed.splitlines() if line.strip()}
    names = set()
    for file in dist.files or ():
        first = str(file).split("/", 1)[0]
        if first.endswith(".py"):
            names.add(first[:-3])
        elif "/" in str(file) and not first.endswith((".dist-info", ".data")) and not first.startswith(("..", "__")):
            names.add(first)
    return names


def installed_module_of(module: str) -> str | None:
    """The distribution (of acp-green's or the test tools' installed closure) whose top-level
    module `module` is, or None."""
    return _needed_modules().get(module.lower())


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with each `{{key}}` replaced; a key `values` lacks is a ValueError (a template's bug)."""
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ValueError(f"the template names {{{{{match.group(1)}}}}}, which has no value")
        return values[match.group(1)]

    return PLACEHOLDER.sub(value, template)


def editor_blocks(settings: list[tuple[str, dict[str, Any]]]) -> str:
    """Each editor's settings as a README paragraph: where to paste, then the JSON."""
    return "\n\n".join(f"{where}:\n\n```json\n{json.dumps(value, indent=2)}\n```" for where, value in settings)


#: Stands for "find where this acp-green was installed from" (source.acp_green_source).
FIND_SOURCE = "find"


def render_project(project: ProjectName, target: Path, *, llm: bool, editor_settings: EditorSettings,
                   acp_green_from: str | None = FIND_SOURCE) -> dict[str, str]:
    """Every file of the project, by its path relative to the project's directory. `acp_green_from`:
    the checkout or wheel the project's ci.sh installs acp-green from (None: the package index)."""
    kind = KINDS[llm]
    made_with = acp_green_source() if acp_green_from == FIND_SOURCE else acp_green_from
    templates = resources.files(__name__.rpartition(".")[0]).joinpath("templates")
    script = str(target.absolute() / ".venv" / "bin" / project.name)
    values = {
        "name": project.name, "module": project.module, "class_name": project.class_name,
        "description": DESCRIPTIONS[kind],
        "dependencies": ", ".join(json.dumps(d) for d in DEPENDENCIES[kind]),
        "venv_script": script,
        "acp_green_source": shlex.quote(made_with or ""),
        "editor_settings": editor_blocks(editor_settings(script, dict(EDITOR_ENV[kind]))),
    }
    values["about"] = render(templates.joinpath(kind, "README.md.tmpl").read_text(encoding="utf-8"), values).strip()
    files = {}
    for folder in ("common", kind):
        for template, path in FILES[folder]:
            text = templates.joinpath(folder, template).read_text(encoding="utf-8")
            files[path.format(module=project.module)] = render(text, values)
    return files


def write_project(target: Path, files: Mapping[str, str]) -> None:
    """Write the files under `target`, which must not exist or be an empty directory."""
    if target.exists() and not target.is_dir():
        raise ProjectRefused(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()):
        raise ProjectRefused(f"{target} exists and is not empty (give a new or empty directory with --dir)")
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if relative in EXECUTABLE:
            path.chmod(0o755)


def make_project(name: str, target: Path, *, llm: bool, editor_settings: EditorSettings,
                 acp_green_from: str | None = FIND_SOURCE) -> ProjectName:
    """Check the name and the directory, then write the project there; its names."""
    project = check_name(name)
    files = render_project(project, target, llm=llm, editor_settings=editor_settings, acp_green_from=acp_green_from)
    try:
        write_project(target, files)
    except OSError as exc:
        raise ProjectRefused(f"cannot write the project in {target}: {exc.strerror or exc}") from None
    return project


def next_steps(project: ProjectName, target: Path, *, llm: bool) -> str:
    """What to do now, for the terminal."""
    steps = [(f"cd {target}", ""), ("./ci.sh", "makes .venv, installs acp-green, the project and pytest, runs its tests")]
    if llm:
        steps.append(("export OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=...", "your model server (README.md)"))
    steps += [(f".venv/bin/{project.name}", "the agent command an editor launches (README.md has the settings)"),
              (f".venv/bin/acp-green chat --authenticate login -- .venv/bin/{project.name}", "talk to it in this terminal")]
    width = max(len(command) for command, _ in steps)
    kind = "an agent on an OpenAI-compatible endpoint" if llm else "the hello agent"
    return "\n".join([f"Made {project.name} ({kind}) in {target}.", "Next:",
                      *(f"  {command.ljust(width)}  # {why}".rstrip(" #") for command, why in steps)])
