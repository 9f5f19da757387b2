"""`acp-green manifest` on a project `acp-green new` just made, given only what the project cannot
know (repository, author, license): everything else comes from the project (its name, version,
description, command, the agent it declares and that agent's login, its icon.svg), and the entry
written passes `manifest --check` (the installed-command run is test_newproject_install.py's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_green.tools.newproject.project import DESCRIPTIONS, KINDS, check_name, make_project
from tests.helpers import REPO

# The installed command, not `python -m acp_green`: its sys.path does not hold the project's directory.
ACP_GREEN = str(Path(sys.executable).parent / "acp-green")
GIVEN = ["--repository", "https://example.com/ada/greeter", "--author", "Ada Lovelace <ada@example.com>", "--license", "MIT"]


def acp_green(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # not the project: manifest finds its modules in the current directory
    done = subprocess.run([ACP_GREEN, *args], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize("llm", [False, True])
def test_a_new_project_gets_its_manifest_from_three_options_and_passes_the_check(tmp_path, llm):
    project = tmp_path / "greeter"
    make_project("greeter", project, llm=llm, editor_settings=lambda command, env: [])
    assert (project / "icon.svg").is_file()
    done = acp_green(project, "manifest", *GIVEN)
    assert done.returncode == 0, done.stderr
    assert json.loads((project / "agent.json").read_text()) == {
        "id": "greeter", "name": "greeter", "version": "0.1.0", "description": DESCRIPTIONS[KINDS[llm]],
        "repository": "https://example.com/ada/greeter", "authors": ["Ada Lovelace <ada@example.com>"], "license": "MIT",
        "distribution": {"uvx": {"package": "greeter==0.1.0"}},
    }
    command = f"{sys.executable} -m {check_name('greeter').module} --ephemeral"  # what `uvx greeter==0.1.0` would run
    checked = acp_green(project, "manifest", "--check", "agent.json", "--command", command)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [line.split(":")[0] for line in checked.stdout.splitlines()] == [
        "PASS format", "PASS icon", "PASS start", "PASS initialize", "PASS authMethods"], checked.stdout
    assert checked.stdout.splitlines()[-1].endswith("login (agent)")
