"""`acp-green probe`: every check passes against `acp-green serve`; the fault agent fails the
check named after what it breaks; what the probe finds in agents built on the official SDKs
(docs/PROBE.md) stays what the document says."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from acp_green.tools.rig.probe import FAIL, PASS, SKIP, WARN, ProbeConfig, run_probe
from tests.helpers import TESTS
from tests.node_peers import needs_node, require_node_package

FAULT_AGENT = [sys.executable, str(TESTS / "peer_agents" / "fault_agent.py")]
SDK_AGENT = [sys.executable, str(TESTS / "peer_agents" / "sdk_agent.py")]
NODE_DIR = str(TESTS / "node")
TS_AGENT = ["node", os.path.join(NODE_DIR, "sdk_agent.mjs")]
ACP_GREEN = [sys.executable, "-m", "acp_green"]
LONG_PROMPT = " ".join(["word"] * 400)  # the SDK agents stream one word per 50 ms: 20 s


def probe_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ACP_GREEN, "probe", *args], capture_output=True, text=True, timeout=600)


def verdicts(report) -> dict[str, str]:
    return {row.check: row.verdict for row in report.results}


def test_acp_green_serve_passes_every_check_of_the_probe():
    """Acceptance: `acp-green probe -- acp-green serve` passes every check (exit 0, --json)."""
    done = probe_cli("--json", "--", *ACP_GREEN, "serve", "--ephemeral")
    report = json.loads(done.stdout)
    failed = [row for row in report["checks"] + report["advisories"] if row["verdict"] != PASS]
    assert failed == [], failed
    assert done.returncode == 0
    assert len(report["checks"]) >= 14 and len(report["checks"]) + len(report["advisories"]) >= 28
    assert all(row["basis"] for row in report["checks"] + report["advisories"])


def test_probe_table_and_exit_code_on_failure():
    done = probe_cli("--check", "cancel during", "--", *FAULT_AGENT, "--cancel-ignored")
    assert done.returncode == 1
    header = done.stdout.splitlines()[0].split()
    assert header == ["check", "verdict", "evidence"]
    assert "cancelled prompt answers cancelled" in done.stdout and "FAIL" in done.stdout


FAULTS = [
    ("--bad-json", "many sessions", "stdout hygiene (every line JSON-RPC)"),
    ("--bad-schema", "many sessions", "strict schema validity"),
    ("--double-response", "ids echoed", "one response per request"),
    ("--answer-notifications", "notifications unanswered", "no response to a notification"),
    ("--update-after-response", "many sessions", "no update after the prompt response"),
    ("--cancel-ignored", "cancel during", "cancelled prompt answers cancelled"),
]
# What breaks acp_green's own advice, not an ACP MUST: the row warns and the probe still passes.
OWN_ADVICE_FAULTS = [
    ("--out-of-order", "streaming", "prompt updates in order"),
    ("--ignore-eof", "exit on EOF", "process exits after stdin closes"),
    ("--orphan", "exit on EOF", "no descendant survives"),
]


@pytest.mark.parametrize("flag,check,row", FAULTS, ids=[f[0] for f in FAULTS])
def test_the_probe_names_what_the_fault_agent_breaks(flag, check, row):
    cfg = ProbeConfig(FAULT_AGENT + [flag], exit_timeout=2.0)
    report = run_probe(cfg, only=[check])
    found = verdicts(report)
    assert found[row] == FAIL, report.results
    assert not report.ok


@pytest.mark.parametrize("flag,check,row", OWN_ADVICE_FAULTS, ids=[f[0] for f in OWN_ADVICE_FAULTS])
def test_the_probe_warns_of_what_breaks_acp_greens_own_advice(flag, check, row):
    report = run_probe(ProbeConfig(FAULT_AGENT + [flag], exit_timeout=2.0), only=[check])
    [found] = [r for r in report.advisories if r.check == row]
    assert found.verdict == WARN and found.basis.startswith("acp_green's own advice"), found
    assert report.ok, report.results


def test_the_fault_agent_without_flags_passes_the_probe():
    """Every row passes but those this agent gives nothing to check: it has no tool (no /read), so
    the tool prompt uses none and no file path is sent, and it has no config options (the rows say
    "not exercised" and what they need, rather than claiming the rule held)."""
    report = run_probe(ProbeConfig(FAULT_AGENT))
    assert [(r.check, r.needs) for r in report.results if r.verdict != PASS] == [
        ("file paths sent to the client are absolute", "--tool-prompt"),
        ("only what the client advertised (boolean options)", "")]
    assert {(r.check, r.needs) for r in report.advisories if r.verdict != PASS} == {
        ("a prompt that uses a tool", "--tool-prompt"), ("tool calls finish before the prompt response", "--tool-prompt"),
        ("messageId consistent within a message", "")}
    assert all(r.verdict in (PASS, SKIP) for r in report.advisories), report.advisories


# What the probe finds in small agents on the official SDKs; docs/PROBE.md explains each finding.
PYTHON_SDK_FAILS = {"-32700 for garbage"}
TS_SDK_FAILS = {
    "ids echoed",  # 2**53 + 1 comes back as 2**53: JavaScript numbers
    "one response per request",  # ... so the request 2**53 + 1 is never answered (the schema row leaves ids to these)
}
TS_SDK_WARNS = {"initialize+session/new in one write", "second prompt on a busy session"}  # acp_green's own advice (S2, S8)


@pytest.mark.slow  # a third-party peer: the whole probe against an agent on the official SDK
def test_what_the_probe_finds_in_an_agent_on_the_python_sdk():
    report = run_probe(ProbeConfig(SDK_AGENT, long_prompt=LONG_PROMPT))
    failed = {r.check for r in report.results if r.verdict == FAIL}
    assert failed == PYTHON_SDK_FAILS, report.results
    # The rest passes, but for the rows this echo agent gives nothing to check (it uses no tool).
    assert all(r.verdict == PASS or r.evidence.startswith("not exercised: ") for r in report.results if r.check not in failed), \
        report.results
    rows = {r.check: r for r in [*report.results, *report.advisories]}
    assert rows["file paths sent to the client are absolute"].evidence.startswith("not exercised: ")
    assert rows["second prompt on a busy session"].verdict == "warn"  # an advisory: ACP defines no refusal
    assert rows["second prompt on a busy session"].evidence.startswith("ran alongside: ")


@pytest.mark.slow
@needs_node
def test_what_the_probe_finds_in_an_agent_on_the_typescript_sdk():
    require_node_package("@agentclientprotocol", "sdk")  # tests never reach the network: scripts/test.sh installs it
    report = run_probe(ProbeConfig(TS_AGENT, long_prompt=LONG_PROMPT))
    failed = {r.check for r in report.results if r.verdict == FAIL}
    assert failed == TS_SDK_FAILS, report.results
    assert {r.check for r in report.advisories if r.verdict == WARN} >= TS_SDK_WARNS, report.advisories
