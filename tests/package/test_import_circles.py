"""Imports that go one way: no module of acp_green imports itself back through others."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "acp_green"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at import: the top level, inside `if` (TYPE_CHECKING too) and `try`, not in functions."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield from _module_level(statement.body)
            yield from _module_level(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                yield from _module_level(block)
            for handler in statement.handlers:
                yield from _module_level(handler.body)
        else:
            yield statement


def _imports(module: str, path: Path, modules: dict[str, Path], statements: list[ast.stmt]) -> set[str]:
    """The package's modules `statements` import, relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for statement in statements:
        if isinstance(statement, ast.Import):
            targets.update(alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            if statement.level:
                base = package.split(".")[: len(package.split(".")) - (statement.level - 1)]
                source = ".".join(base + ([statement.module] if statement.module else []))
            else:
                source = statement.module or ""
            for alias in statement.names:  # `from . import wire` imports the module acp_green.rpc.wire
                targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
    return {target for target in targets if target in modules and target != module}


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports when it is imported (lazy imports in functions left out).

    The implicit import of a module's parent package is left out too: every module would
    otherwise depend on acp_green/__init__.py, which imports the public API.
    """
    modules = _modules()
    return {name: _imports(name, path, modules, list(_module_level(ast.parse(path.read_text()).body)))
            for name, path in modules.items()}


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path that ends where it starts, or None (a depth-first search)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            circle = visit(target)
            if circle is not None:
                return circle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        circle = visit(start)
        if circle is not None:
            return circle
    return None


def test_the_package_has_no_import_circle():
    """Imports go one way: no module imports, through any chain of module-level imports
    (TYPE_CHECKING ones included), a module that imports it back."""
    assert _a_circle(_import_graph()) is None, " -> ".join(_a_circle(_import_graph()) or [])


def test_agent_never_imports_settings():
    """settings.py builds on the agent API (Agent, BooleanOption, ConfigOption); agent.py does not
    import settings.py at all, not even lazily in a function: a turn is handed a `TurnSettings`."""
    modules = _modules()
    graph = _import_graph()
    assert "acp_green.agent" in graph["acp_green.settings"]
    path = modules["acp_green.agent"]
    everywhere = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert "acp_green.settings" not in _imports("acp_green.agent", path, modules, everywhere)


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a circle of three, beside a module outside it, is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _a_circle(graph) == ["a", "b", "c", "a"]
    assert _a_circle({"a": {"b"}, "b": set()}) is None
