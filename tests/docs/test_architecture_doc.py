"""docs/ARCHITECTURE.md stays true: each layer of its table imports only the layers below it, every
module of the package (the tools included) is in the table, the runtime never imports the tools,
and every `module.Name.attr` it cites exists."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import acp_green
from tests.helpers import REPO

ROOT = REPO
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
PACKAGE = ROOT / "acp_green"
OUTSIDE_THE_RUNTIME = ("schema",)  # data, not modules; the tools have a layer of their own
OUTSIDE_MODULES = {"acp_green", "acp_green.demo"}


def _layers() -> list[list[str]]:
    """The modules column of the layer table, top row first, as dotted prefixes."""
    table = DOC[DOC.index("| layer | modules |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    layers = []
    for row in rows:
        cells = row.split("|")[2]
        names = re.findall(r"`([\w/.]+)`", cells)
        prefixes = []
        for name in names:
            if name.endswith("/"):
                prefixes.append("acp_green." + name.rstrip("/"))
            elif name.endswith(".py"):
                prefixes.append("acp_green." + name[:-3].replace("/", ".").removesuffix(".__init__"))
        layers.append(prefixes)
    return layers


LAYERS = _layers()


def _layer_of(module: str) -> int | None:
    """The table row (0 = top) whose longest prefix names `module`."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def _runtime_modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if len(parts) > 1 and parts[1] in OUTSIDE_THE_RUNTIME or name in OUTSIDE_MODULES:
            continue
        found[name] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                if node.module:
                    targets.add(".".join(base + [node.module]))
                else:
                    targets.update(".".join(base + [alias.name]) for alias in node.names)
            elif node.module:
                targets.add(node.module)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t.startswith("acp_green.")}


def test_every_runtime_module_is_in_the_layer_table():
    missing = [name for name in _runtime_modules() if _layer_of(name) is None]
    assert not missing, missing


def test_the_runtime_never_imports_the_tools():
    """Only the command line starts a tool; nothing else of the package reaches into tools/ (but
    the test plugin, `testing/`, a tool itself)."""
    entry = {"acp_green.cli", "acp_green.__main__"}
    reaching = [f"{module} imports {target}" for module, path in _runtime_modules().items()
                if module not in entry and not module.startswith(("acp_green.tools", "acp_green.testing"))
                for target in _imports(module, path) if target.startswith("acp_green.tools")]
    assert not reaching, reaching


def test_each_layer_imports_only_the_layers_below_it():
    """The table's promise: a module imports its own layer and those under it, never one above."""
    upward = []
    for module, path in _runtime_modules().items():
        mine = _layer_of(module)
        for target in _imports(module, path):
            theirs = _layer_of(target)
            if theirs is not None and mine is not None and theirs < mine:
                upward.append(f"{module} imports {target}")
    assert not upward, upward


def test_every_dotted_name_the_document_cites_exists():
    modules = {m.name: m for m in pkgutil.walk_packages(acp_green.__path__, "acp_green.")}
    loaded = {name: importlib.import_module(name) for name in modules if not name.startswith(("acp_green.tools.rig", "acp_green.tools.bench"))}
    classes = {name: obj for module in loaded.values() for name, obj in vars(module).items() if isinstance(obj, type)}
    instance_attributes = {"Turn.closed", "session.token", "Pool.spawn"}  # set in __init__, or gevent's

    def exists(reference: str) -> bool:
        parts = reference.replace("/", ".").split(".")
        for cut in range(len(parts), 0, -1):
            module = loaded.get("acp_green." + ".".join(parts[:cut]))
            if module is not None:
                obj = module
                try:
                    for part in parts[cut:]:
                        obj = getattr(obj, part)
                    return True
                except AttributeError:
                    pass
        obj = classes.get(parts[0])
        try:
            for part in parts[1:]:
                obj = getattr(obj, part)
            return obj is not None
        except AttributeError:
            return False

    cited = set(re.findall(r"`([A-Za-z_][\w/]*(?:\.[A-Za-z_]\w*)+)`", DOC))
    foreign = ("gevent.", "os.", "signal.", "sys.")  # the traps cite the library calls they avoid
    unknown = sorted(c for c in cited if not c.endswith(".py") and not c.startswith(foreign)
                     and c not in instance_attributes and not exists(c))
    assert not unknown, unknown
