"""What an invariant check keeps of what it found: at most `max_violations` violations, so a
flood of broken lines cannot grow a soak's memory or its report; every line is still checked."""

from __future__ import annotations

from acp_green.tools.rig.client import Record
from acp_green.tools.rig.invariants import InvariantChecker


def test_violations_are_kept_up_to_the_bound_and_the_checker_goes_on():
    checker = InvariantChecker(max_violations=2)
    garbage = [Record(float(i), "in", b"not json", None) for i in range(5)]
    assert len(checker.update(garbage)) == 2
    assert [v.invariant for v in checker.violations] == ["valid_json_rpc", "valid_json_rpc"]
    assert checker.exercised["valid_json_rpc"] == 5  # every line was still checked
    assert not checker.ok


def test_violations_found_outside_the_stream_are_bounded_too():
    checker = InvariantChecker(max_violations=1)
    checker.add("exit_after_eof", "still running")
    checker.add("no_orphan_processes", "a child is left")
    assert [v.invariant for v in checker.violations] == ["exit_after_eof"]
