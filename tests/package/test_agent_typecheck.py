"""An agent author's `mypy --strict` works on the installed package: run from a directory outside
the checkout, with no MYPYPATH or PYTHONPATH and no config of this checkout, it finds acp_green
through the install (setup.py makes the editable one a .pth path, which mypy follows, not an
import hook, which it cannot run) and gevent through typeshed's stubs (types-gevent, in the test
extras). The examples and a project made by `acp-green new` pass it there too.

The mypy that runs is the one setup.py's test extras pin, and so are the stubs (checked first).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())
REINSTALL = "scripts/venv.sh test,rig installs the test extras"

AGENT = '''
from __future__ import annotations

import gevent

from acp_green import Agent, Turn


def count_to(n: int) -> int:
    return sum(range(n + 1))


class CountingAgent(Agent):
    """Counts in a greenlet and in the hub's thread pool; the calls an agent makes of gevent."""

    name = "counting"

    def prompt(self, turn: Turn) -> str:
        greenlet = gevent.spawn(count_to, 10)
        gevent.sleep(0.01)
        in_greenlet: int = greenlet.get()
        pool = gevent.get_hub().threadpool
        in_thread: int = pool.apply(count_to, (100,))
        spawned = pool.spawn(count_to, 1000).get()  # AsyncResult.get: int | None to the stubs
        turn.say(f"{in_greenlet} {in_thread} {spawned if spawned is not None else 'none'}")
        return "end_turn"
'''

# Each line a mistake mypy must name: gevent and acp_green are really typed there, not Any.
MISTAKES = '''
import gevent

from acp_green import Agent, Turn


class Careless(Agent):
    def prompt(self, turn: Turn) -> str:
        gevent.sleep("soon")
        gevent.spawn(len, 3)
        turn.say(1)
        return "end_turn"
'''

def pinned(name: str) -> str:
    """The version setup.py's test extras pin for `name` (`name==VERSION`)."""
    found = re.search(rf'"{re.escape(name)}==([^"]+)"', (ROOT / "setup.py").read_text())
    assert found, f"setup.py pins no {name} (\"{name}==VERSION\" in TEST_REQUIRES)"
    return found.group(1)


@pytest.fixture(scope="module")
def mypy_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home for mypy's runs: its cache (shared by this module's runs) and an empty user config
    directory, so a ~/.mypy.ini or ~/.config/mypy/config of whoever runs the suite plays no part."""
    return tmp_path_factory.mktemp("mypy-home")


def mypy_strict(home: Path, cwd: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict TARGETS` as an author runs it in `cwd` (outside the checkout): acp_green and
    gevent only as this environment installed them."""
    assert ROOT not in (cwd, *cwd.parents), cwd
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
    for name in ("MYPYPATH", "PYTHONPATH", "MYPY_CACHE_DIR"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(home / "cache"), *targets],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def report(done: subprocess.CompletedProcess[str], where: Path) -> str:
    return (f"mypy {importlib.metadata.version('mypy')} --strict, run in {where} (if acp_green or gevent is not found: "
            f"{REINSTALL}):\n{done.stdout}{done.stderr}")


@pytest.mark.parametrize("name", ["mypy", "types-gevent"])
def test_the_type_checker_and_the_stubs_are_the_pinned_ones(name):
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        installed = "not installed"
    assert installed == pinned(name), f"{name}: {installed} here, setup.py pins {pinned(name)}; {REINSTALL}"


def test_an_agent_outside_the_checkout_passes_strict(mypy_home, tmp_path):
    (tmp_path / "counting_agent.py").write_text(AGENT)
    done = mypy_strict(mypy_home, tmp_path, "counting_agent.py")
    assert done.returncode == 0 and "Success: no issues found in 1 source file" in done.stdout, report(done, tmp_path)


def test_there_acp_green_and_gevent_are_typed_not_any(mypy_home, tmp_path):
    (tmp_path / "careless_agent.py").write_text(MISTAKES)
    done = mypy_strict(mypy_home, tmp_path, "careless_agent.py")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    for line_number, says in ((9, 'Argument 1 to "sleep" has incompatible type "str"'),
                              (10, 'No overload variant matches argument types "Callable[[Sized], int]", "int"'),
                              (11, 'Argument 1 to "say" of "Turn" has incompatible type "int"')):
        assert any(e.startswith(f"careless_agent.py:{line_number}: error:") and says in e for e in errors), (
            line_number, report(done, tmp_path))
    assert len(errors) == 3, report(done, tmp_path)


def test_the_examples_pass_strict_outside_the_checkout(mypy_home, tmp_path):
    examples = sorted(str(path) for path in (ROOT / "examples").glob("*.py"))
    assert examples
    done = mypy_strict(mypy_home, tmp_path, *examples)
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, report(done, tmp_path)


@pytest.mark.parametrize("kind", ["hello", "llm"])
def test_a_new_project_passes_strict(mypy_home, tmp_path, kind):
    """`acp-green new`, then `mypy --strict PACKAGE tests` in the project, not installed (mypy
    finds its package in its directory, acp_green and gevent as installed here)."""
    name = f"{kind}-bot"
    project = tmp_path / name
    made = subprocess.run([sys.executable, "-m", "acp_green", "new", name, "--dir", str(project), *(["--llm"] if kind == "llm" else [])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    package = name.replace("-", "_")
    assert (project / package).is_dir() and (project / "tests").is_dir()
    done = mypy_strict(mypy_home, project, package, "tests")
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, report(done, project)
