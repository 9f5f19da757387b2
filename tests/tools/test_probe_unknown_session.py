"""The probe's advisory row "unknown session answered -32002": ACP's ErrorCode names -32002
("Resource not found") for a session the agent does not have (DESIGN §6). -32002 passes;
-32602, what agents answered before, warns naming the newer code; any other code, or accepting
the prompt, warns too. Never a failure: the row is advisory. Against the stub agent of
tests/probe_stubs (`--unknown-session-code`), so only the code differs."""

from __future__ import annotations

import sys

import pytest

from acp_green.tools.rig.probe import PASS, WARN, ProbeConfig, run_probe
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
ROW = "unknown session answered -32002"


def unknown_session_row(*flags: str) -> tuple[str, str]:
    report = run_probe(ProbeConfig(STUB + list(flags), timeout=5), only=["unknown session"])
    [row] = [r for r in report.advisories if r.check == ROW]
    assert report.ok  # an advisory never fails the probe
    return row.verdict, row.evidence


def test_an_unknown_session_refused_with_acps_code_passes() -> None:
    verdict, evidence = unknown_session_row("--unknown-session-code", "-32002")
    assert verdict == PASS and evidence == "-32002 (unknown_session)", evidence


def test_the_older_invalid_params_code_warns_naming_the_newer_one() -> None:
    verdict, evidence = unknown_session_row("--unknown-session-code", "-32602")
    assert verdict == WARN, evidence
    assert "-32602" in evidence and "older agents" in evidence and "-32002 (Resource not found)" in evidence, evidence


@pytest.mark.parametrize("flags", [("--unknown-session-code", "-32603"), ()], ids=["another code", "accepted"])
def test_another_code_or_an_accepted_prompt_warns(flags: tuple[str, ...]) -> None:
    verdict, evidence = unknown_session_row(*flags)
    assert verdict == WARN and "expected -32002 (Resource not found)" in evidence, evidence
