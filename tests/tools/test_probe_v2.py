"""`acp-green probe --protocol 2`: an agent's v2 (draft) sessions and turns are graded. A turn ends
with its idle state_update and its prompt is answered {messageId} first; an agent that answers 1
gets one row saying it does not serve v2; each v2 fault of the stub agent fails its own row."""

from __future__ import annotations

import json
import subprocess
import sys

from acp_green.tools.rig.probe import FAIL, PASS, SKIP, WARN, ProbeConfig, ProbeReport, run_probe
from tests.helpers import TESTS

ACP_GREEN = [sys.executable, "-m", "acp_green"]
STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py"), "--v2", "--v2-turns"]


def probe_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ACP_GREEN, "probe", *args], capture_output=True, text=True, timeout=600)


def rows(report: ProbeReport) -> dict[str, tuple[str, str]]:
    return {r.check: (r.verdict, r.evidence) for r in [*report.results, *report.advisories]}


def probe_stub(*flags: str, only: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    return rows(run_probe(ProbeConfig(STUB + list(flags), timeout=5, ask=2), only=only))


def test_acp_green_serve_passes_every_row_under_v2():
    done = probe_cli("--json", "--protocol", "2", "--", *ACP_GREEN, "serve", "--ephemeral")
    report = json.loads(done.stdout)
    found = {row["check"]: (row["verdict"], row["evidence"]) for row in report["checks"] + report["advisories"]}
    assert not [name for name, (verdict, _) in found.items() if verdict in (FAIL, WARN)], found
    assert done.returncode == 0
    assert not [name for name, (verdict, _) in found.items() if verdict == SKIP], found
    assert found["tool calls finish before the prompt response"][1].startswith("held in all")  # v2: a first tool_call_update
    assert "v2 draft schema" in found["strict schema validity"][1]
    assert found["batch answered as one array"] == (PASS, "answered as one array of 2")
    assert found["session/resume replays from start"][0] == PASS
    assert "(idle state_update)" in found["running prompt answered at EOF"][1]


def test_an_agent_pinned_to_v1_gets_one_row_saying_it_does_not_serve_v2_and_exit_0():
    done = probe_cli("--json", "--protocol", "2", "--", *ACP_GREEN, "serve", "--ephemeral", "--max-protocol-version", "1")
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert [(r["check"], r["verdict"]) for r in report["checks"] + report["advisories"]] == [("protocol version", SKIP)]
    assert report["checks"][0]["evidence"].startswith("the agent does not serve v2: it answered 1 "), report["checks"][0]


def test_a_healthy_v2_stub_passes_the_turn_rows():
    found = probe_stub(only=("one write", "cancel during", "running prompt answered at EOF", "resume"))
    for name in ("initialize+session/new in one write", "cancel during a long prompt", "running prompt answered at EOF",
                 "session/resume replays from start"):
        assert found[name][0] == PASS, (name, found[name])


def test_a_prompt_answered_with_a_stop_reason_instead_of_a_message_id_fails_the_schema_row_once():
    """v2's PromptResponse requires messageId: the schema row owns that fault and quotes the answer;
    the row that only waited for the turn reads the turn from it and does not count it again."""
    report = run_probe(ProbeConfig(STUB + ["--v2-stop-answer"], timeout=5, ask=2), only=("one write",))
    [schema] = [r for r in report.results if r.check == "strict schema validity"]
    assert schema.verdict == FAIL and "messageId" in schema.evidence, schema
    assert any('"stopReason":"end_turn"' in line for line in schema.wire), schema.wire
    assert [r.check for r in [*report.results, *report.advisories] if r.verdict in (FAIL, WARN)] == ["strict schema validity"]


def test_a_cancelled_turn_that_ends_idle_with_end_turn_fails_the_cancel_row():
    found = probe_stub("--v2-cancel-end-turn", only=("cancel during",))
    verdict, evidence = found["cancel during a long prompt"]
    assert verdict == FAIL and '"stopReason":"end_turn"' in evidence, evidence


def test_a_turn_left_without_its_idle_update_at_eof_warns_in_the_eof_row():
    """Advisory, as in v1: ACP owes nothing once stdin closed; acp_green (S13) ends every turn first."""
    found = probe_stub("--v2-no-idle-at-eof", only=("running prompt answered at EOF",))
    verdict, evidence = found["running prompt answered at EOF"]
    assert verdict == WARN and "no idle state_update" in evidence and "acknowledged: True" in evidence, evidence


def test_a_batch_the_agent_ignores_warns_naming_the_known_refusers():
    found = probe_stub(only=("batch",))
    verdict, evidence = found["batch answered as one array"]
    assert verdict == WARN and "JSON-RPC batches are not supported" in evidence, evidence


def test_a_batch_refused_as_a_whole_warns_in_the_batch_row_only():
    """codex-acp 2.6.0: -32600 with id null; that answer is the advisory's finding, not a MUST broken."""
    found = probe_stub("--refuse-batches", only=("batch",))
    verdict, evidence = found["batch answered as one array"]
    assert verdict == WARN and evidence.startswith("the batch was refused:"), evidence
    assert found["no response to a notification"][0] != FAIL, found["no response to a notification"]


def test_the_login_row_under_v2_names_the_methods_from_v2s_methodId():
    found = probe_stub("--needs-auth", only=("ids",))
    verdict, evidence = found["authentication"]
    assert verdict == SKIP and "authMethods: stub-login" in evidence and "its own command" in evidence, evidence


def test_a_replayed_user_message_under_a_new_message_id_warns_in_the_resume_row():
    """The v2 schema says a replayed message "keeps this identifier", with no MUST: an advisory."""
    found = probe_stub("--v2-replay-new-ids", only=("resume",))
    verdict, evidence = found["session/resume replays from start"]
    assert verdict == WARN and "the one its prompt was answered with" in evidence, evidence


def test_authenticate_is_refused_with_protocol_2_saying_why():
    done = probe_cli("--protocol", "2", "--authenticate", "api-key", "--", *STUB)
    assert done.returncode == 2 and "v2 does not have" in done.stderr, done.stderr


def test_a_turn_acknowledged_but_never_ended_fails_saying_no_idle_update_came():
    """The stub's /wait ignores a cancel under --v2-cancel-ignored: acknowledged, never idle."""
    found = rows(run_probe(ProbeConfig(STUB + ["--v2-cancel-ignored"], timeout=2, ask=2), only=("cancel during",)))
    verdict, evidence = found["cancel during a long prompt"]
    assert verdict == FAIL and "acknowledged, but its turn got no idle state_update" in evidence, evidence
