"""The probe's S8 row ("second prompt on a busy session", acp_green's own advice: ACP implies one turn
at a time but defines no refusal): a second prompt refused at once passes only with -32000; a refusal
with any other code warns, naming the code it got and quoting the refusal from the wire.
Against the stub agent of tests/probe_stubs (`--busy-code`), so only the code differs."""

from __future__ import annotations

import sys

import pytest

from acp_green.tools.rig.probe import PASS, WARN, ProbeConfig, run_probe
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
ROW = "second prompt on a busy session"


def busy_row(code: int) -> tuple[str, str, list[str]]:
    report = run_probe(ProbeConfig(STUB + ["--busy-code", str(code)], timeout=5), only=["second prompt"])
    [row] = [r for r in report.advisories if r.check == ROW]
    assert report.ok and row.force == "own" and row.basis.startswith("acp_green's own advice"), row
    return row.verdict, row.evidence, row.wire


def test_a_busy_refusal_with_acps_code_passes():
    verdict, evidence, _ = busy_row(-32000)
    assert verdict == PASS and evidence.startswith("-32000"), evidence


@pytest.mark.parametrize("code", [-32603, -32602])
def test_a_busy_refusal_with_another_code_warns_naming_it_and_quoting_the_wire(code):
    verdict, evidence, wire = busy_row(code)
    assert verdict == WARN, evidence
    assert str(code) in evidence and "expected -32000" in evidence, evidence
    # The wire proves it: the second prompt as sent, and the refusal as the agent wrote it.
    assert any("client->agent" in line and '"text":"second"' in line for line in wire), wire
    assert any("agent->client" in line and f'"code":{code}' in line for line in wire), wire
