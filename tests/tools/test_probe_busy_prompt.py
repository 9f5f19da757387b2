"""The probe's S8 row ("second prompt on a busy session"): a second prompt refused at once passes
only with ACP's code, -32000; a refusal with any other code fails, naming the code it got.
Against the stub agent of tests/probe_stubs (`--busy-code`), so only the code differs."""

from __future__ import annotations

import sys

import pytest

from acp_green.tools.rig.probe import FAIL, PASS, ProbeConfig, run_probe
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
ROW = "second prompt on a busy session"


def busy_row(code: int) -> tuple[str, str]:
    report = run_probe(ProbeConfig(STUB + ["--busy-code", str(code)], timeout=5), only=["second prompt"])
    [row] = [r for r in report.results if r.check == ROW]
    return row.verdict, row.evidence


def test_a_busy_refusal_with_acps_code_passes():
    verdict, evidence = busy_row(-32000)
    assert verdict == PASS and evidence.startswith("-32000"), evidence


@pytest.mark.parametrize("code", [-32603, -32602])
def test_a_busy_refusal_with_another_code_fails_naming_it(code):
    verdict, evidence = busy_row(code)
    assert verdict == FAIL, evidence
    assert str(code) in evidence and "expected -32000" in evidence, evidence
