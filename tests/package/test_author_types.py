"""Agent authors get types: `acp_green` ships `py.typed`, every public name is visible to a type
checker while the runtime import stays lazy, `examples/` pass `mypy --strict`, and mistakes in
agent code (`turn.say(123)`, a misspelt name, method or keyword, a kind ACP has not) are reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import acp_green

ROOT = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())

MISTAKES = '''
from acp_green import Agent, Turn
from acp_green import NoSuchName


class Careless(Agent):
    def prompt(self, turn: Turn) -> str:
        turn.say(123)
        turn.no_such_method()
        turn.tool_call(title="Read", kind="reading")
        turn.tool_update("t1", rawOutput={})
        return "end_turn"
'''


def mypy_strict(*targets: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on `targets`, `acp_green` resolved to this checkout (not an installed copy);
    errors inside acp_green itself are test_typecheck.py's business, so imports are followed silently."""
    env = {**os.environ, "MYPYPATH": str(ROOT), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--config-file", str(ROOT / "pyproject.toml"),
         "--no-incremental", "--cache-dir", os.devnull, *targets],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )


def test_the_package_is_marked_typed_and_ships_the_marker():
    assert (ROOT / "acp_green" / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "setup.py").read_text()


def test_the_examples_pass_mypy_strict():
    done = mypy_strict(str(ROOT / "examples"), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mistakes_in_agent_code_are_reported(tmp_path):
    scratch = tmp_path / "careless_agent.py"
    scratch.write_text(MISTAKES)
    done = mypy_strict(str(scratch), cwd=tmp_path)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 1, done.stdout + done.stderr
    for line_number, says in ((3, '"NoSuchName"'), (8, 'Argument 1 to "say"'), (9, '"Turn" has no attribute "no_such_method"'),
                              (10, '"tool_call"'), (11, 'Unexpected keyword argument "rawOutput"')):
        assert any(f"careless_agent.py:{line_number}: error:" in e and says in e for e in errors), (line_number, done.stdout)


def test_every_exported_name_is_visible_to_type_checkers():
    """Each name in `acp_green.__all__` is imported under `if TYPE_CHECKING:` in __init__.py, so it
    is its real type to mypy, never Any from the lazy module `__getattr__`."""
    source = (ROOT / "acp_green" / "__init__.py").read_text()
    checked = source[source.index("if TYPE_CHECKING:"):source.index("_EXPORTS = {")]
    missing = [name for name in acp_green.__all__ if name != "__version__" and f"{name} as {name}," not in checked]
    assert missing == []
    for name in acp_green.__all__:
        getattr(acp_green, name)  # and each still loads at run time
