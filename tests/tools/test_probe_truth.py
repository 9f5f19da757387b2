"""The probe tells the truth on agents unlike acp_green's demo (issue 27, items 1-8): a login needed
at any method, a v2 agent, a SHOULD graded as one, garbage answered without an id, session-level
updates between turns, prompts the probe itself abandoned, a location that is a bare string, and
an agent that knows none of the demo's commands. Each test runs the stub agent of
tests/probe_stubs with the flag that gives it one trait."""

from __future__ import annotations

import json
import os
import sys
import tempfile

from acp_green.tools.rig.client import Record
from acp_green.tools.rig.invariants import InvariantChecker
from acp_green.tools.rig.probe import FAIL, PASS, SKIP, WARN, ProbeConfig, ProbeReport, format_table, run_probe
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
SESSION_ROWS = {"initialize+session/new in one write", "cancel during a long prompt", "many sessions at once",
                "a prompt that uses a tool"}


def rows(report: ProbeReport) -> dict[str, tuple[str, str]]:
    return {r.check: (r.verdict, r.evidence) for r in [*report.results, *report.advisories]}


def probe(*flags: str, only: tuple[str, ...] = (), **options) -> ProbeReport:
    return run_probe(ProbeConfig(STUB + list(flags), timeout=options.pop("timeout", 5), **options), only=only)


# -- 1. a login, at any method, signalled by -32000 with the agent's authMethods ----------------
def test_a_login_refused_at_the_prompt_is_one_row_naming_the_method_and_the_agents_words():
    report = probe("--needs-auth", "--auth-at-prompt")
    found = rows(report)
    assert [r.check for r in report.results].count("authentication") == 1
    verdict, evidence = found["authentication"]
    assert verdict == SKIP, evidence
    assert "session/prompt" in evidence and "Authentication required" in evidence and "stub-login" in evidence, evidence
    for name in SESSION_ROWS:
        assert found[name] == (SKIP, "skipped: needs authentication (see the authentication row)"), (name, found[name])
    assert not [name for name, (v, _) in found.items() if v in (FAIL, WARN)], found
    assert report.ok


def test_minus_32000_from_an_agent_with_auth_methods_is_a_login_whatever_its_message_says():
    """gemini-cli: -32000 "Gemini API key is missing or not configured." on session/new."""
    message = "Gemini API key is missing or not configured."
    report = probe("--needs-auth", "--auth-message", message)
    found = rows(report)
    verdict, evidence = found["authentication"]
    assert verdict == SKIP and "session/new" in evidence and message in evidence, evidence
    assert not [name for name, (v, _) in found.items() if v in (FAIL, WARN)], found


def test_a_busy_refusal_is_not_taken_for_a_login():
    """-32000 with data.reason session_busy (acp_green's S8) is a refusal of a second prompt."""
    report = probe("--busy-code", "-32000", "--needs-auth", "--auth-at-prompt", authenticate="stub-login",
                   only=("second prompt",))
    assert rows(report)["authentication"][0] == PASS
    # The stub's busy refusal names no reason: with authMethods advertised, only the busy row's own
    # reading of the second prompt keeps it from being taken for a login.
    assert rows(report)["second prompt on a busy session"][0] == PASS, rows(report)


# -- 2. v2 agents: validated against the v2 draft schema -----------------------------------------
def test_a_v2_answer_to_version_999_is_validated_against_the_v2_draft_schema():
    found = rows(probe("--v2", only=("version",)))
    verdict, evidence = found["version negotiation"]
    assert verdict == PASS and "v999 -> 2" in evidence, evidence
    verdict, evidence = found["strict schema validity"]
    assert verdict == PASS and "v2 draft schema" in evidence, evidence


def test_a_v2_answer_that_breaks_the_v2_draft_fails_the_schema_row_quoting_it():
    report = probe("--v2-invalid", only=("version",))
    [row] = [r for r in report.results if r.check == "strict schema validity"]
    assert row.verdict == FAIL and "'info' is a required property" in row.evidence, row
    assert any('"protocolVersion":2' in line for line in row.wire), row.wire


def test_an_agent_that_speaks_only_v2_is_graded_on_what_v2_requires_and_the_v1_rows_skip_saying_why():
    report = probe("--v2-only")
    found = rows(report)
    verdict, evidence = found["version negotiation"]
    assert verdict == PASS and "-32022" in evidence and "v999 -> 2" in evidence, evidence
    assert found["protocol version"][0] == SKIP and "v2 draft" in found["protocol version"][1]
    for name in SESSION_ROWS:
        verdict, evidence = found[name]
        assert verdict == SKIP and "ACP v2 draft" in evidence, (name, evidence)
    for name in ("ids echoed", "notifications unanswered", "-32700 for garbage", "exit on EOF", "strict schema validity"):
        assert found[name][0] == PASS, (name, found[name])
    assert report.ok


# -- 3. a SHOULD is an advisory ---------------------------------------------------------------------
def test_an_unknown_method_answered_with_null_is_an_advisory_and_ids_still_pass():
    """The Python SDK's examples answer an unknown `_` method `result: null`; ACP: it *should* be -32601."""
    report = probe("--null-unknown", only=("ids echoed",))
    found = rows(report)
    assert found["ids echoed"][0] == PASS, found["ids echoed"]
    verdict, evidence = found["unknown method answered -32601"]
    assert verdict == WARN and "result null" in evidence, evidence
    assert report.ok


# -- 4. -32700 needs an id member that is null ----------------------------------------------------
def test_garbage_answered_without_an_id_member_fails_quoting_the_garbage_and_the_answer():
    report = probe("--garbage-no-id", only=("-32700",))
    [row] = [r for r in report.results if r.check == "-32700 for garbage"]
    assert row.verdict == FAIL and "no `id` member" in row.evidence, row
    assert len(row.wire) == 2 and "client->agent" in row.wire[0] and '"code":-32700' in row.wire[1], row.wire


# -- 5. session-level updates between turns are allowed; turn updates after the response are not ---
def test_session_level_updates_after_a_prompt_response_break_nothing():
    found = rows(probe("--session-updates-after", only=("many sessions",)))
    verdict, evidence = found["no update after the prompt response"]
    assert verdict == PASS, evidence


def test_a_turn_update_after_the_prompt_response_still_breaks_the_rule():
    def after(update: dict, acp: bool = True) -> list[str]:
        checker = InvariantChecker(session_updates_between_turns=acp)
        prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        checker.update([
            Record(0, "out", b"", prompt),
            Record(0, "in", b"", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
            Record(0, "in", b"", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}),
        ])
        return [v.detail for v in checker.violations if v.invariant == "no_update_after_response"]

    assert after({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}})
    assert after({"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"})
    assert after({"sessionUpdate": "config_option_update", "configOptions": []}) == []
    assert after({"sessionUpdate": "session_info_update", "title": "x"}) == []
    # acp_green's own S5 (the default, for its tests and soaks) is stricter: nothing follows.
    assert after({"sessionUpdate": "session_info_update", "title": "x"}, acp=False)


# -- 6. a prompt the probe abandoned is not owed an answer -----------------------------------------
def test_a_prompt_the_probe_abandoned_by_closing_stdin_is_not_counted_but_what_it_waited_for_is():
    """The control check waits in vain for session/new (the stub queues it behind /wait), fails, and
    closes stdin with /wait still running: the agent then exits without answering either. The
    session/new it waited for is a broken rule; the prompt it abandoned is not."""
    report = probe("--wait-queues", only=("streaming",), timeout=2)
    found = rows(report)
    assert found["control during a streaming prompt"][0] == WARN  # ACP says "at any time", with no MUST
    broken = [v.detail for v in report.violations if v.invariant == "one_response_per_request"]
    assert any(d.startswith("session/new") and "no response within 2s" in d for d in broken), broken
    assert not any("session/prompt" in d for d in broken), broken


# -- 7. a location that is no object is no path ----------------------------------------------------
def test_a_location_given_as_a_bare_string_fails_the_path_row():
    found = rows(probe("--string-locations", only=("tool",)))
    verdict, evidence = found["file paths sent to the client are absolute"]
    assert verdict == FAIL and "locations[0]" in evidence and "not an object" in evidence, evidence


# -- 8. nothing built around the demo ---------------------------------------------------------------
def test_the_offered_file_lives_in_a_per_run_directory_named_in_the_report_and_fills_tool_prompts():
    reports = [probe(only=("tool",), tool_prompt="/read {file}") for _ in range(2)]
    files = [r.offered_file for r in reports]
    assert files[0] != files[1]
    for report, path in zip(reports, files):
        assert os.path.dirname(path).startswith(os.path.join(tempfile.gettempdir(), "acp-green-probe-"))
        assert not os.path.exists(path)  # removed after the run
        assert path in format_table(report) and report.to_json()["offered_file"] == path
        verdict, evidence = rows(report)["a prompt that uses a tool"]
        assert verdict == PASS and "fs/read_text_file" in evidence, evidence


def test_a_prompt_that_used_no_tool_is_not_exercised_and_the_table_says_once_what_would_help():
    report = probe("--unknown-session-code", "-32002")  # no /wait, /stream: the demo's defaults exercise nothing
    found = rows(probe(only=("tool",), tool_prompt="hello"))
    verdict, evidence = found["a prompt that uses a tool"]
    assert verdict == SKIP and "without using a tool" in evidence, evidence
    skipped = [r for r in [*report.results, *report.advisories] if r.needs == "--long-prompt"]
    assert {r.check for r in skipped} >= {"cancel during a long prompt", "second prompt on a busy session"}
    assert all(r.verdict == SKIP for r in skipped)
    text = format_table(report)
    assert text.count("pass --long-prompt TEXT") == 1, text
    assert report.ok and not [name for name, (v, _) in rows(report).items() if v in (FAIL, WARN)]


def test_every_failing_row_quotes_the_wire_in_the_table_and_in_json():
    report = probe("--garbage-no-id", "--string-locations", only=("-32700", "tool"))
    failed = [r for r in report.results if r.verdict == FAIL]
    assert {r.check for r in failed} >= {"-32700 for garbage", "file paths sent to the client are absolute"}
    as_json = {r["check"]: r for r in report.to_json()["checks"]}
    text = format_table(report)
    for row in failed:
        assert row.wire, row
        assert as_json[row.check]["wire"] == row.wire
        assert all(f"wire: {line[:60]}" in text for line in row.wire), text
    json.dumps(report.to_json())


NEWCOMER_AGENT = '''
from acp_green import Agent, Mode, Turn


class NotesAgent(Agent):
    """Written from README.md alone: echoes the prompt word by word; reads a file the prompt names."""

    name = "notes"
    modes = (Mode("chatty", "Chatty"), Mode("quiet", "Quiet"))

    def prompt(self, turn: Turn) -> str:
        paths = [word for word in turn.text.split() if word.startswith("/")]
        if paths and turn.can_read_files:
            call = turn.tool_call(title=f"Read {paths[0]}", kind="read", status="in_progress", locations=[paths[0]])
            text = turn.read_text_file(paths[0])
            call.complete()
            turn.say(f"{paths[0]} says: {text}")
            return "end_turn"
        for word in turn.text.split():
            if turn.cancelled:
                return "cancelled"
            turn.say(word + " ")
            if not turn.sleep(0.05):
                return "cancelled"
        return "end_turn"
'''


def test_a_newcomers_agent_written_from_the_readme_gets_no_false_row(tmp_path):
    """With the probe's defaults (the demo's prompts), such an agent reads `/wait` and `/read` as paths
    and fails those prompts: nothing is exercised there, nothing is broken, and the rows say so."""
    (tmp_path / "notes_agent.py").write_text(NEWCOMER_AGENT)
    command = [sys.executable, "-m", "acp_green", "serve", "--ephemeral", "--agent", f"{tmp_path / 'notes_agent.py'}:NotesAgent"]
    report = run_probe(ProbeConfig(command))
    found = rows(report)
    assert not [(name, e) for name, (v, e) in found.items() if v in (FAIL, WARN)], found
    assert found["a prompt that uses a tool"][0] == SKIP and "with an error" in found["a prompt that uses a tool"][1]
    assert {name for name, (v, _) in found.items() if v == SKIP} <= {
        "a prompt that uses a tool", "cancel during a long prompt", "control during a streaming prompt",
        "second prompt on a busy session", "running prompt answered at EOF", "prompt updates in order",
        "only what the client advertised (boolean options)"}, found  # it has no config options


def test_a_request_that_was_never_answered_quotes_what_the_agent_wrote_instead():
    """codex-acp 0.16.0 answers a request with id -7 with a -32700 that has no id: the wire shows both."""
    report = probe("--negative-ids-unreadable", only=("ids echoed",), timeout=2)
    [row] = [r for r in report.results if r.check == "ids echoed"]
    assert row.verdict == FAIL and "-7" in row.evidence, row
    assert '"id":-7' in row.wire[0] and '"code":-32700' in row.wire[1], row.wire


def test_an_agent_whose_sessions_fail_to_open_gets_one_row_saying_so_not_a_failure_in_every_row():
    """claude-code-acp without a working Claude Code answers session/new -32603: one row, quoting it."""
    report = probe("--broken-backend")
    found = rows(report)
    verdict, evidence = found["session and first prompt"]
    assert verdict == SKIP and "session/new answered" in evidence and "Query closed" in evidence, evidence
    assert [r.check for r in report.results].count("session and first prompt") == 1
    for name in SESSION_ROWS:
        assert found[name][0] == SKIP and "no session could be opened" in found[name][1], (name, found[name])
    for name in ("ids echoed", "notifications unanswered", "-32700 for garbage", "exit on EOF"):
        assert found[name][0] == PASS, (name, found[name])
    assert not [name for name, (v, _) in found.items() if v in (FAIL, WARN)], found


def test_a_broken_rule_no_message_proves_says_what_the_process_did_and_in_which_run():
    report = probe("--ignore-eof", only=("exit on EOF",), exit_timeout=2)
    [row] = [r for r in report.advisories if r.check == "process exits after stdin closes"]
    assert row.verdict == WARN, row  # acp_green's own advice: ACP's shutdown is the client's
    assert row.wire and "still running" in row.wire[0] and "in the run of " in row.wire[0], row.wire


def test_help_shows_how_to_give_the_prompts_another_agent_needs():
    from click.testing import CliRunner

    from acp_green.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["probe", "--help"]).output.split())
    assert "--long-prompt 'Write a 3000-word essay on rivers.'" in text, text
    assert "prompt 'Read {file} and quote its first line.'" in text and "{file} is replaced by its path" in text, text
    assert "Examples:" in text and "acp-green probe --long-prompt" in text, text
