"""scripts/mutation.py's table (MODULES) covers every runtime module and the rig's verdict code,
and names only test files that exist (where the table says, or by name under tests/ while the
test files move into subject folders). Read from the script's source: cosmic-ray, which the
script imports, is installed by scripts/mutation.sh only."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO as ROOT
#: Not mutated: the benchmarks; the command's entry point (one call); the rig's machinery beyond
#: its verdicts (driving agents, rendering chat, plots), which the verdicts' own tests exercise.
NOT_MUTATED_UNDER = ("acp_green/tools/bench/", "acp_green/tools/rig/")
# The new packages' __init__ files hold a docstring only: nothing to mutate.
NOT_MUTATED = {"acp_green/__main__.py", "acp_green/rpc/__init__.py", "acp_green/process/__init__.py", "acp_green/tools/__init__.py",
               "acp_green/tools/trace/__init__.py", "acp_green/tools/publish/__init__.py",
               "acp_green/tools/newproject/__init__.py"}
RIG_VERDICTS = {"probe", "soak", "growth", "reaper", "invariants", "chat_answers", "chat_ask", "chat_files"}


def table() -> dict[str, tuple[str, str, list[str]]]:
    tree = ast.parse((ROOT / "scripts" / "mutation.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "MODULES":
            return ast.literal_eval(node.value)
    raise AssertionError("no MODULES table in scripts/mutation.py")


def covered(path: str, targets: list[str]) -> bool:
    return any(path == target or path.startswith(target.rstrip("/") + "/") for target in targets)


def test_every_runtime_module_and_each_rig_verdict_module_is_mutated():
    targets = [path for _group, path, _tests in table().values()]
    runtime = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "acp_green").rglob("*.py"))
    missing = [path for path in runtime if not path.startswith(NOT_MUTATED_UNDER) and path not in NOT_MUTATED
               and not covered(path, targets)]
    missing += [f"acp_green/tools/rig/{name}.py" for name in sorted(RIG_VERDICTS) if f"acp_green/tools/rig/{name}.py" not in targets]
    assert missing == [], f"add these to MODULES in scripts/mutation.py: {missing}"
    assert all((ROOT / path).exists() for path in targets), [p for p in targets if not (ROOT / p).exists()]


def test_every_test_file_the_table_names_exists():
    names = {p.name: p for p in (ROOT / "tests").rglob("test_*.py")}
    missing = [(module, test) for module, (_g, _p, tests) in table().items() for test in tests
               if not (ROOT / test).exists() and Path(test).name not in names]
    assert missing == [], missing
    assert all(tests for _g, _p, tests in table().values())
