"""`acp-green new` from nothing (slow tier): a project made in a temporary directory, installed by
its own ci.sh into a fresh virtual environment with no network, passes its own tests (which use
acp_green.testing), `acp-green probe` passes on its console script, and `acp-green manifest`
writes its registry entry from three options, which `manifest --check` passes. Both kinds: the
hello agent and the LLM agent (against tests/fake_openai.py).

The project is made by a copy of this checkout (on PYTHONPATH), so its ci.sh records that copy
and installs acp-green from it with no ACP_GREEN given. Offline installs: pip's index is turned
off (PIP_NO_INDEX) and it finds the rest in a directory of wheels (PIP_FIND_LINKS) that holds no
acp_green: its dependencies, pytest and setuptools (which the isolated builds install), each
packed back into a wheel from the files this environment installed. This environment is what
scripts/venv.sh installed from nothing (CI: .ci/run), so the test needs nothing but itself.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path

import pytest
from gevent import subprocess

from tests.fake_openai import FakeOpenAI
from tests.helpers import REPO
# The installed-distribution-to-wheel packer of the fresh-install test (its slow tier), shared.
from tests.tools.test_scripts import _needed, _pack_with_dependencies

pytestmark = pytest.mark.slow  # a fresh virtual environment, an install into it and a probe run: a minute or more

COPY_IGNORES = (".venv", ".git", "node_modules", "__pycache__", "*.egg-info", "build", ".pytest_cache",
                "bench-results", "soak-results", ".bench-cache", ".mutation", ".hypothesis")
LONG_PROMPT = " ".join(["word"] * 2000)  # the hello agent says one word each 50 ms: over a minute, until cancelled


def _requires(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(metadata).decode()).get_all("Requires-Dist") or []


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this checkout: the acp-green that makes the projects, and that their ci.sh installs."""
    copy = tmp_path_factory.mktemp("newproject") / "checkout"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*COPY_IGNORES))
    return copy


@pytest.fixture(scope="module")
def wheels(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of everything a project's install needs but acp_green (its wheel is built aside, for its requirements)."""
    aside, into = tmp_path_factory.mktemp("acp-green-wheel"), tmp_path_factory.mktemp("wheels")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                            "--wheel-dir", str(aside), str(checkout)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    [acp_green_wheel] = aside.glob("acp_green-*.whl")
    return _pack_with_dependencies(["setuptools", "pytest", *_needed(_requires(acp_green_wheel))], into)


def offline_env(wheels: Path) -> dict[str, str]:
    """This environment without its virtualenv or PYTHONPATH (the project's venv must stand alone), pip offline."""
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": os.devnull,
           "PIP_NO_CACHE_DIR": "1", "PYTHON": sys.executable}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("kind", ["hello", "llm"])
def test_a_new_project_installs_offline_and_passes_its_tests_and_the_probe(checkout, wheels, tmp_path, kind):
    name = f"{kind}-bot"
    project = tmp_path / name
    started = time.monotonic()
    made = subprocess.run([sys.executable, "-m", "acp_green", "new", name, "--dir", str(project), *(["--llm"] if kind == "llm" else [])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(checkout)})
    assert made.returncode == 0, made.stderr
    assert f"cd {project}" in made.stdout
    # ci.sh builds acp-green in the checkout it names: the copy, never this one
    assert f"MADE_WITH={checkout}\n" in (project / "ci.sh").read_text()
    env = offline_env(wheels)
    tested = subprocess.run([str(project / "ci.sh"), "-p", "no:cacheprovider", "--durations=5"], cwd=tmp_path, capture_output=True, text=True,
                            env=env, timeout=900)
    seconds = time.monotonic() - started
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.startswith(f"ACP_GREEN={checkout} (where the acp-green that made this project was installed from;"), tested.stdout
    counted = re.search(r"(\d+) passed", tested.stdout)
    assert counted and "failed" not in tested.stdout and "skipped" not in tested.stdout, tested.stdout
    print(f"{kind}: acp-green new -> {counted.group(0)} in {seconds:.1f} s\n{tested.stdout}")

    script = project / ".venv" / "bin" / name
    command = [str(project / ".venv" / "bin" / "acp-green"), "probe", "--", str(script)]
    command[2:2] = ["--authenticate", "login"]  # its login, as an editor would
    if kind == "hello":
        command[2:2] = ["--long-prompt", LONG_PROMPT]
        probed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    else:
        endpoint = FakeOpenAI()  # its /wait streams until the client goes away: the probe's default long prompt
        try:
            probed = subprocess.run([*command, "--base-url", endpoint.url], capture_output=True, text=True, env=env, timeout=600)
        finally:
            endpoint.stop()
    assert probed.returncode == 0, probed.stdout + probed.stderr
    print(probed.stdout)
    # Its registry entry, from the three things the project cannot know, passes the registry's checks
    # with the installed command standing in for uvx.
    manifest = [str(project / ".venv" / "bin" / "acp-green"), "manifest"]
    wrote = subprocess.run([*manifest, "--repository", f"https://example.com/ada/{name}", "--author", "Ada <ada@example.com>",
                            "--license", "MIT"], cwd=project, capture_output=True, text=True, env=env, timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    checked = subprocess.run([*manifest, "--check", "agent.json"], cwd=project, capture_output=True, text=True, env=env, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"started (this environment's console script {name} in place of `uvx {name}==0.1.0`" in checked.stdout
    # The installed acp-green makes projects too: its templates are in the wheel (package data).
    again = subprocess.run([str(project / ".venv" / "bin" / "acp-green"), "new", "another", "--dir", str(tmp_path / "another")],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and (tmp_path / "another" / "another" / "agent.py").is_file(), again.stderr
