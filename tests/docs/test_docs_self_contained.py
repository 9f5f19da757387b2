"""The documentation stands alone: every relative link in README.md and docs/ leads to a file of
this repository (and its `#anchor` to a heading there), no text a user reads (the docs, every --help, the package's docstrings) points at
material outside it, and docs/RULES.md names tests that really prove each rule."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from acp_green.cli import cli
from tests.helpers import REPO

ROOT = REPO
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
#: Names of notes that live outside the repository, and ways of citing them; none may reach a reader.
#: The notes' file names are in capitals; "design" or "seed" in prose is fine.
OUTSIDE = re.compile(
    r"\.\./shared|shared/spec|\bDESIGN\b|GEVENT-NOTES|\bSEED\b|ACP-DIGEST|(?i:\bthe seed's\b)|§"
    r"|(?i:\bissues?\b)|(?<![\w&/`#])#\d+\b|(?i:\breview rounds?\b)"
)


def _relative_links(doc: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(doc):
    assert _relative_links(ROOT / "README.md"), "the link pattern finds the README's links"
    broken = []
    for target in _relative_links(doc):
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def _anchor(heading: str) -> str:
    """The anchor a heading gets: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(heading) for heading in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_anchor_names_a_heading(doc):
    """A link `page.md#anchor` (or `#anchor`) leads to a heading of that page: moving a section
    between README.md and docs/ leaves no link pointing at the place it left."""
    assert _anchor("### Blocking code is fine".lstrip("# ")) == "blocking-code-is-fine"
    assert _anchor("A coding agent's loop: `examples/coding_agent.py`") == "a-coding-agents-loop-examplescoding_agentpy"
    broken = []
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        page, anchor = target.split("#", 1)
        path = (doc.parent / page).resolve() if page else doc
        if path.suffix == ".md" and path.exists() and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def _help_texts() -> dict[str, str]:
    """The --help of `acp-green` and of every command and subcommand."""
    texts: dict[str, str] = {}

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=" ".join(path), parent=parent)
        texts[" ".join(path)] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, [*path, name], ctx)

    walk(cli, ["acp-green"], None)
    return texts


def _docstrings() -> dict[str, str]:
    found = {}
    for path in sorted((ROOT / "acp_green").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in [tree, *ast.walk(tree)]:
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    found[f"{path.relative_to(ROOT)}:{getattr(node, 'name', 'module')}"] = doc
    return found


def test_no_text_a_reader_sees_points_outside_the_repository():
    texts = {str(doc.relative_to(ROOT)): doc.read_text(encoding="utf-8") for doc in DOCS}
    texts.update({f"{name} --help": text for name, text in _help_texts().items()})
    texts.update(_docstrings())
    assert len([name for name in texts if name.endswith("--help")]) >= 10, "every command's help is read"
    found = {name: sorted(set(m.group() for m in OUTSIDE.finditer(text))) for name, text in texts.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_outside_names_pattern_catches_each_way_of_citing_them():
    for cited in ("see ../shared/spec/DESIGN.md", "DESIGN §2", "GEVENT-NOTES A8", "the seed's rule S2",
                  "issue 6", "from #9", "after the review round"):
        assert OUTSIDE.search(cited), cited
    for fine in ("the client issued it", "seed of the random mix", "round trips", "[S1](#s1)", "&#39;"):
        assert not OUTSIDE.search(fine), fine


RULES = (ROOT / "docs" / "RULES.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("rule", [f"S{n}" for n in range(1, 17)])
def test_rules_doc_names_tests_that_prove_each_rule(rule):
    [row] = [line for line in RULES.splitlines() if line.startswith(f"| {rule} |")]
    proofs = re.findall(r"\(\.\./(tests/[\w/]+\.py)\)", row)
    assert proofs, f"{rule} names no test"
    for proof in proofs:
        assert re.search(rf"\b{rule}\b", (ROOT / proof).read_text(encoding="utf-8")), f"{proof} never mentions {rule}"
