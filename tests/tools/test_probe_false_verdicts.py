"""The probe's verdicts that were false on real agents, each now right, against the stub agent of
tests/probe_stubs with the flag that gives it the trait the real agent has:

- one id fault (2**53+1 answered as 2**53, as agents on node do) was counted again by the schema row;
- children that exit on their own a moment after the agent flipped the process rows between
  reruns, and those rows were MUSTs although ACP has no such rule (acp_green's own advice);
- v2 cancels were judged by v1's rule: a prompt cancelled before its insertion answered -32800,
  a turn's idle update before the prompt's answer, an idle snapshot before the turn began;
- v2's login error (a turn ended idle with stopReason "error" and -32000, claude-agent-acp
  0.101.0) was not recognised: rows failed, and rows that only saw prompts "answered" passed;
- rows with no ACP basis were advisories of ACP, or MUSTs: each row now cites what it rests on.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import click
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_green.cli import cli
from acp_green.tools.rig.settled import SETTLE_WINDOW
from acp_green.tools.rig.probe import FAIL, PASS, SKIP, WARN, ProbeConfig, ProbeReport, format_table, run_probe
from acp_green.tools.rig.probe_rules import ADVISORY, MUST, OWN, RULES
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
V2_STUB = STUB + ["--v2", "--v2-turns"]


def rows(report: ProbeReport) -> dict[str, tuple[str, str]]:
    return {r.check: (r.verdict, r.evidence) for r in [*report.results, *report.advisories]}


def flagged(report: ProbeReport) -> dict[str, str]:
    return {r.check: r.verdict for r in [*report.results, *report.advisories] if r.verdict in (FAIL, WARN)}


# -- one fault, counted once -----------------------------------------------------------------------
def test_an_id_fault_is_counted_by_the_id_rows_and_not_again_by_the_schema_row():
    """2**53+1 answered as 2**53: the id was not echoed, and the request 2**53+1 never answered.
    The schema row held before the id rows: a response's id is theirs to judge."""
    report = run_probe(ProbeConfig(STUB + ["--big-ids-as-doubles"], timeout=2), only=("ids echoed",))
    assert flagged(report) == {"ids echoed": FAIL, "one response per request": FAIL}, flagged(report)
    verdict, evidence = rows(report)["strict schema validity"]
    assert verdict == PASS, evidence
    assert "9007199254740993" in rows(report)["ids echoed"][1]


def test_a_request_answered_without_an_id_is_not_a_schema_fault_either():
    """codex-acp 0.16.0 answers a request with id -7 with a -32700 that has no id."""
    report = run_probe(ProbeConfig(STUB + ["--negative-ids-unreadable"], timeout=2), only=("ids echoed",))
    assert flagged(report).get("ids echoed") == FAIL
    assert rows(report)["strict schema validity"][0] == PASS, rows(report)["strict schema validity"]


# -- what an agent leaves running: acp_green's own advice, judged after a settle window --------------
def test_a_child_that_exits_on_its_own_after_the_agent_is_no_survivor_in_any_run():
    """codex-acp's `codex` exits about 2 s after the wrapper: within the settle window, every time."""
    for _ in range(2):
        report = run_probe(ProbeConfig(STUB + ["--child-lingers", "1.5"], timeout=5), only=("exit on EOF", "ids echoed"))
        found = rows(report)
        for name in ("exit on EOF", "no descendant survives", "process exits after stdin closes"):
            assert found[name][0] == PASS, (name, found[name])


def test_a_child_that_stays_is_a_warning_of_acp_greens_own_advice_not_a_failure():
    report = run_probe(ProbeConfig(STUB + ["--child"], timeout=5, settle_window=1.0), only=("exit on EOF",))
    rows_by_name = {r.check: r for r in report.advisories}
    for name in ("exit on EOF", "no descendant survives"):
        row = rows_by_name[name]
        assert row.verdict == WARN and row.force == OWN, row
        assert row.basis.startswith("acp_green's own advice (no ACP rule)"), row.basis
    assert report.ok and not [r for r in report.results if r.verdict == FAIL]
    assert "rule: acp_green's own advice" in format_table(report)


def test_the_settle_window_is_an_option_of_the_command_line():
    """`--settle-window` sets how long a child may take: one that exits 1.5 s after the agent is
    left running for a 0.2 s window (a warning of acp_green's own advice, exit code still 0), and
    the option's default is the probe's own."""
    command = [sys.executable, "-m", "acp_green", "probe", "--json", "--check", "exit on EOF", "--timeout", "5",
               "--settle-window", "0.2", "--", *STUB, "--child-lingers", "1.5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    verdicts = {row["check"]: row["verdict"] for row in [*report["checks"], *report["advisories"]]}
    assert verdicts["no descendant survives"] == "warn", verdicts
    option = next(p for p in cli.commands["probe"].params if p.name == "settle_window")
    assert option.default == SETTLE_WINDOW
    refused = CliRunner().invoke(cli, ["probe", "--settle-window", "-1", "--", "true"])
    assert refused.exit_code == 2 and "--settle-window" in refused.output


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=12)))
def test_any_settle_window_is_either_taken_as_a_finite_number_of_seconds_or_a_usage_error_naming_it(value):
    """Parsed as the command line parses it (nothing run): a value is a finite number >= 0, or a
    usage error naming --settle-window, never a traceback."""
    try:
        context = cli.commands["probe"].make_context("probe", ["--settle-window", value, "--", "true"])
    except click.UsageError as refused:
        assert "--settle-window" in refused.format_message(), refused.format_message()
        return
    taken = context.params["settle_window"]
    assert math.isfinite(taken) and taken >= 0, (value, taken)


def test_an_exit_code_at_eof_fails_no_other_row():
    """An agent that exits 3 at EOF broke acp_green's advice, not the rule of the row whose run it ended."""
    report = run_probe(ProbeConfig(STUB + ["--exit-code", "3"], timeout=5), only=("ids echoed",))
    assert rows(report)["ids echoed"][0] == PASS, rows(report)["ids echoed"]
    verdict, evidence = rows(report)["process exits after stdin closes"]
    assert verdict == WARN and "code 3" in evidence and "'ids echoed'" in evidence, evidence
    assert report.ok


# -- v2 cancels by v2's rules ----------------------------------------------------------------------
def test_a_v2_prompt_cancelled_before_its_insertion_answered_minus_32800_passes_the_cancel_rows():
    """v2's session/cancel "cancels a session's foreground work and its prompts not yet inserted"."""
    report = run_probe(ProbeConfig(V2_STUB + ["--v2-hold-until-next"], timeout=5, ask=2), only=("cancel",))
    found = rows(report)
    for name in ("cancel during a long prompt", "cancel in the same write as the prompt"):
        verdict, evidence = found[name]
        assert verdict == PASS and "before its insertion" in evidence and "-32800" in evidence, (name, evidence)
    assert found["cancelled prompt answers cancelled"][0] == PASS, found["cancelled prompt answers cancelled"]
    assert not flagged(report), flagged(report)


def test_a_v2_turn_whose_idle_update_comes_before_the_prompts_answer_is_no_fault():
    """A v2 answer only acknowledges insertion; the turn's updates may come before it."""
    report = run_probe(ProbeConfig(V2_STUB + ["--v2-idle-before-ack"], timeout=5, ask=2), only=("cancel", "one write"))
    found = rows(report)
    for name in ("cancel during a long prompt", "cancel in the same write as the prompt", "initialize+session/new in one write",
                 "cancelled prompt answers cancelled"):
        assert found[name][0] == PASS, (name, found[name])
    assert not flagged(report), flagged(report)


def test_an_idle_snapshot_before_a_v2_turn_began_does_not_end_it():
    """An idle state_update before the prompt was acknowledged or ran is the state the session was in."""
    report = run_probe(ProbeConfig(V2_STUB + ["--v2-idle-snapshot"], timeout=5, ask=2), only=("cancel during",))
    found = rows(report)
    verdict, evidence = found["cancel during a long prompt"]
    assert verdict == PASS and "idle state_update" in evidence, evidence
    assert found["cancelled prompt answers cancelled"][0] == PASS
    assert not flagged(report), flagged(report)


# -- v2's login error ------------------------------------------------------------------------------
def test_a_v2_turn_that_ends_with_an_authentication_error_is_a_login():
    """claude-agent-acp 0.101.0 without a login: the prompt is acknowledged, its turn ends idle with
    stopReason "error" and error -32000 "Authentication required" (v2's ErrorStopReason)."""
    report = run_probe(ProbeConfig(V2_STUB + ["--v2-auth-at-turn"], timeout=5, ask=2))
    found = rows(report)
    verdict, evidence = found["authentication"]
    assert verdict == SKIP and "session/prompt" in evidence and "Authentication required" in evidence, evidence
    for name in ("cancel during a long prompt", "cancel in the same write as the prompt", "many sessions at once",
                 "initialize+session/new in one write", "a prompt that uses a tool", "session/resume replays from start"):
        assert found[name][0] == SKIP and "needs authentication" in found[name][1], (name, found[name])
    assert flagged(report) == {"batch answered as one array": WARN}, flagged(report)  # the stub has no batches: true
    assert report.ok


# -- each row cites what it rests on ---------------------------------------------------------------
NOT_ACP_MUSTS = {
    "exit on EOF", "process exits after stdin closes", "no descendant survives", "running prompt answered at EOF",
    "SIGHUP handled like SIGTERM", "second prompt on a busy session", "prompt updates in order", "many sessions at once",
    "initialize+session/new in one write", "a prompt that uses a tool", "tool calls finish before the prompt response",
    "control during a streaming prompt", "session/resume replays from start",
}


def test_every_row_cites_its_rule_and_only_an_acp_or_json_rpc_must_is_a_must():
    report = run_probe(ProbeConfig(STUB, timeout=5))
    every = [*report.results, *report.advisories]
    assert every and all(r.basis for r in every), [r.check for r in every if not r.basis]
    for row in every:
        rule = RULES[row.check]
        assert row.force == rule.force, row
        if row.force == MUST:
            assert "MUST" in row.basis or row.check in ("authentication", "protocol version", "session and first prompt",
                                                        "start"), row
        elif row.force == OWN:
            assert row.basis.startswith("acp_green's own advice (no ACP rule): "), row
        else:
            assert row.force == ADVISORY and "MUST" not in row.basis.replace("no MUST", ""), row
    assert {name for name, rule in RULES.items() if rule.force != MUST} >= NOT_ACP_MUSTS
    assert not [r for r in report.results if r.check in NOT_ACP_MUSTS]
    as_json = report.to_json()
    assert all(r["basis"] for r in as_json["checks"] + as_json["advisories"])
