"""`scripts/stage_timing.py` (behind `scripts/profile.sh --stages`) wraps runtime functions by
name: each must still exist, and a wrapped one must still return what the original returns."""

from __future__ import annotations

import importlib.util

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "stage_timing.py"


def _load():
    spec = importlib.util.spec_from_file_location("stage_timing", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_timed_stage_names_a_function_that_exists():
    stage_timing = _load()
    for owner, name, stage in stage_timing.STAGES:
        assert callable(getattr(owner, name, None)), stage


def test_a_timed_function_returns_as_before_and_is_counted(tmp_path):
    stage_timing = _load()

    class Owner:
        @staticmethod
        def work(value: int) -> int:
            return value * 2

    stage_timing._timed(Owner, "work", "work")
    assert Owner.work(21) == 42
    stage_timing.STAGES = ((Owner, "work", "work"),)
    report = tmp_path / "report.txt"
    stage_timing._report(str(report))
    (line,) = [row for row in report.read_text().splitlines() if row.startswith("work")]
    assert line.split()[1] == "1"  # one call


def test_serving_through_the_script_writes_the_report_at_exit(tmp_path):
    """Run as profile.sh runs it: the agent answers, and when its input ends the report counts
    the line it handled in each stage that line went through."""
    import os
    import subprocess
    import sys

    report = tmp_path / "report.txt"
    line = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parent.parent)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(report), "serve", "--ephemeral"], input=line,
                          capture_output=True, timeout=120, env=env, check=True)
    assert b'"id":0,"result"' in done.stdout
    calls = {row[:58].strip(): int(row[58:].split()[0]) for row in report.read_text().splitlines()[1:]}
    assert calls["Endpoint.handle_line (a whole line)"] == 1
    assert calls["wire.decode (UTF-8, nesting check, JSON, classify)"] == 1
    assert calls["Outbound._write_all (the writer's write)"] >= 1
