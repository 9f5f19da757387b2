"""The project's ci.sh finds an installable acp-green by itself: the checkout or wheel the acp-green
that made the project was installed from (recorded in ci.sh), the package index once that is
gone, or $ACP_GREEN; its first line, ACP_GREEN=..., says which and why. Run here with a stand-in
.venv/bin/python that records what it is asked (the real install is test_newproject_install.py's,
slow tier), so no network is reached."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from acp_green.tools.newproject import source
from acp_green.tools.newproject.project import make_project
from tests.helpers import REPO

# Records each call (its arguments) and succeeds, as pip and pytest would.
STAND_IN = """#!/bin/sh
printf '%s\\n' "$*" >> "$(dirname "$0")/../calls"
"""


def project_made_with(tmp_path: Path, made_with: str | None) -> Path:
    project = tmp_path / "ci-bot"
    make_project("ci-bot", project, llm=False, editor_settings=lambda command, env: [], acp_green_from=made_with)
    python = project / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN, encoding="utf-8")
    python.chmod(0o755)
    return project


def run_ci(project: Path, **env: str) -> tuple[list[str], list[str]]:
    """ci.sh's output lines and the calls it made of .venv/bin/python."""
    full = {key: value for key, value in os.environ.items() if key not in ("ACP_GREEN", "PYTHON")}
    done = subprocess.run([str(project / "ci.sh"), "-k", "x"], cwd=project.parent, env={**full, **env},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (project / ".venv" / "calls").read_text().splitlines()
    return done.stdout.splitlines(), calls


PIP = "-m pip install --quiet --disable-pip-version-check"


def test_acp_green_comes_from_where_the_one_that_made_the_project_was_installed_from(tmp_path):
    checkout = tmp_path / "acp green checkout"  # a space: the recorded path is quoted for the shell
    checkout.mkdir()
    lines, calls = run_ci(project_made_with(tmp_path, str(checkout)))
    assert lines[0] == (f"ACP_GREEN={checkout} (where the acp-green that made this project was installed from; "
                        "ACP_GREEN=/path/to/acp_green ./ci.sh installs another, ACP_GREEN=index the package index's)")
    assert calls == [f"{PIP} {checkout}", f"{PIP} -e .[test]", "-m pytest -q -k x"]


def test_once_that_is_gone_the_package_index_is_used_and_said(tmp_path):
    gone = tmp_path / "moved-away"
    lines, calls = run_ci(project_made_with(tmp_path, str(gone)))
    assert lines[0].startswith(f"ACP_GREEN=index ({gone}, where the acp-green that made this project was installed from, is gone;")
    assert calls == [f"{PIP} -e .[test]", "-m pytest -q -k x"]


def test_acp_green_from_an_index_stays_with_the_index(tmp_path):
    lines, calls = run_ci(project_made_with(tmp_path, None))
    assert lines[0].startswith("ACP_GREEN=index (the acp-green that made this project came from a package index;")
    assert calls == [f"{PIP} -e .[test]", "-m pytest -q -k x"]


def test_acp_green_in_the_environment_wins(tmp_path):
    project = project_made_with(tmp_path, str(REPO))
    lines, calls = run_ci(project, ACP_GREEN="/wheels/acp_green-9.9.9-py3-none-any.whl")
    assert lines[0].startswith("ACP_GREEN=/wheels/acp_green-9.9.9-py3-none-any.whl (from $ACP_GREEN;")
    assert calls[0] == f"{PIP} /wheels/acp_green-9.9.9-py3-none-any.whl"
    (project / ".venv" / "calls").unlink()
    lines, calls = run_ci(project, ACP_GREEN="index")
    assert lines[0].startswith("ACP_GREEN=index (from $ACP_GREEN;") and calls[0] == f"{PIP} -e .[test]"


def test_the_recorded_source_is_the_checkout_this_acp_green_runs_from():
    """This checkout is the source tree of the acp_green these tests import (an editable install, or PYTHONPATH)."""
    assert source.acp_green_source() == str(REPO)


def test_an_installed_copy_records_the_wheel_or_directory_pip_installed_it_from(tmp_path, monkeypatch):
    """Installed (not a checkout), the source is direct_url.json's file URL while it exists; an index install has none."""
    site = tmp_path / "site-packages"
    package = site / "acp_green"
    package.mkdir(parents=True)
    wheel = tmp_path / "acp_green-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")

    class Dist:
        def __init__(self, record: object) -> None:
            self.record = record

        def locate_file(self, name: str) -> Path:
            return site / name

        def read_text(self, name: str) -> str | None:
            return json.dumps(self.record) if name == "direct_url.json" and self.record is not None else None

    def installed(record: object) -> str | None:
        monkeypatch.setattr(source.metadata, "distribution", lambda name: Dist(record))
        return source._installed_from(package.resolve())

    assert source._checkout(package) is None
    assert installed({"url": wheel.as_uri(), "archive_info": {}}) == str(wheel)
    assert installed({"url": (tmp_path / "gone.whl").as_uri(), "archive_info": {}}) is None
    assert installed({"url": "https://example.com/acp_green-0.1.0.whl", "archive_info": {}}) is None
    assert installed(None) is None


@pytest.mark.parametrize("made_with", [None, "/opt/acp green"])
def test_the_recorded_source_is_one_shell_word(tmp_path, made_with):
    made_with_line = next(line for line in (project_made_with(tmp_path, made_with) / "ci.sh").read_text().splitlines()
                          if line.startswith("MADE_WITH="))
    assert made_with_line == ("MADE_WITH=''" if made_with is None else "MADE_WITH='/opt/acp green'")
