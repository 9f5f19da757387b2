"""Sizes that fit in a head: no class in acp_green/ is longer than 250 lines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "acp_green"
MAX_CLASS_LINES = 250
# Classes another change owns, allowed over the limit until it lands (none now: the HTTP link
# to MCP servers was rebuilt on the shared MCP core, mcp/peer.py).
OWNED_ELSEWHERE: set[str] = set()


def _classes(path: Path) -> Iterator[tuple[str, int]]:
    """(name, lines) of every class in a file, nested ones too."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_class_in_the_package_is_over_250_lines():
    over = [f"{path.relative_to(PACKAGE)}:{name} ({lines} lines)"
            for path in sorted(PACKAGE.rglob("*.py"))
            for name, lines in _classes(path)
            if lines > MAX_CLASS_LINES and f"{path.relative_to(PACKAGE)}:{name}" not in OWNED_ELSEWHERE]
    assert not over, over
