"""Monkey-patching is decided from the parsed command line: `serve` patches unless given
--no-monkey-patch (--monkey-patch, the default, is still accepted), and no other command patches,
not even one that carries those words as arguments."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Runs the real console entry; at exit it writes whether socket ended up patched in this process.
ENTRY_REPORTING_PATCH = """
import atexit, sys
from gevent import monkey
report = sys.argv[1]
def tell():
    with open(report, "w") as handle:
        handle.write(str(monkey.is_module_patched("socket")))
atexit.register(tell)
sys.argv = ["acp-green", *sys.argv[2:]]
from acp_green.__main__ import main
main()
"""
PATCHED_SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral", "--monkey-patch"]


def run_entry(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, bool]:
    report = tmp_path / "patched"
    done = subprocess.run([sys.executable, "-c", ENTRY_REPORTING_PATCH, str(report), *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return done, report.read_text() == "True"


def test_serve_with_the_flag_patches_its_process(tmp_path):
    done, patched = run_entry(tmp_path, "serve", "--ephemeral", "--monkey-patch")
    assert done.returncode == 0, done.stderr
    assert patched


def test_serve_patches_its_process_by_default(tmp_path):
    done, patched = run_entry(tmp_path, "serve", "--ephemeral")
    assert done.returncode == 0, done.stderr
    assert patched


def test_serve_with_no_monkey_patch_does_not_patch(tmp_path):
    done, patched = run_entry(tmp_path, "serve", "--ephemeral", "--no-monkey-patch")
    assert done.returncode == 0, done.stderr
    assert not patched


def test_another_command_does_not_patch(tmp_path):
    done, patched = run_entry(tmp_path, "usage", "--state-dir", str(tmp_path / "none"), "--json")
    assert not patched, done.stderr


def test_probing_a_patched_serve_does_not_patch_the_probe(tmp_path):
    """`acp-green probe -- … serve --monkey-patch`: the words belong to the probed command; the
    probe runs unpatched while the agent it probes is patched and passes the check."""
    done, patched = run_entry(tmp_path, "probe", "--json", "--check", "version negotiation", "--", *PATCHED_SERVE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["verdict"] for r in json.loads(done.stdout)["checks"] if r["check"] == "version negotiation"] == ["pass"]
    assert not patched


def test_the_opt_out_as_the_value_of_another_option_is_no_opt_out(tmp_path):
    """`serve --agent --no-monkey-patch`: click reads "--no-monkey-patch" as the agent spec
    (refused), so serve patched as by default before it loaded the agent."""
    done, patched = run_entry(tmp_path, "serve", "--agent", "--no-monkey-patch")
    assert done.returncode == 2 and "expected MODULE:ATTR" in done.stderr
    assert patched


@pytest.mark.parametrize("module", ["acp_green.cli", "acp_green.__main__"])
def test_the_command_line_imports_nothing_patching_must_precede(module):
    """What is loaded before `serve` can patch: click (whose threading import is inert: one
    thread, no lock made) and nothing that opens sockets, selects, spawns, logs or is gevent."""
    code = (f"import sys, json, {module}; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('gevent', 'socket', 'ssl', 'select', 'selectors', 'subprocess', 'logging', 'queue', 'asyncio', 'concurrent'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert json.loads(out.stdout) == []
