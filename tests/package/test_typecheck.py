"""The package type-checks: mypy (the version setup.py pins) run with pyproject.toml's settings
reports no error in acp_green."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

# The checkout: the directory holding pyproject.toml (found upward, wherever this file sits in tests/).
ROOT = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())


def _mypy_version() -> str:
    try:
        return importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: pip install -e '.[test]')"


def test_mypy_finds_no_error_in_the_package() -> None:
    """Every module of acp_green is checked (`files` in pyproject.toml) and none has an error."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, (
        f"mypy {_mypy_version()} (setup.py pins the one to use) reports, run from {ROOT}:\n{done.stdout}{done.stderr}"
    )
