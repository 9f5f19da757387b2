"""`scripts/stage_timing.py` (behind `scripts/profile.sh --stages`) wraps runtime functions by
name: each must still exist, and a wrapped one must still return what the original returns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "stage_timing.py"


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
