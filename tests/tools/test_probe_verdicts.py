"""The probe tells the truth on agents unlike acp_green's demo: one that needs a login, one whose
long prompt never runs, one without /stream, one that ignores EOF with a child running, one
that queues a second prompt; advisory rows warn without failing; the agent's state stays out of
the user's state directory."""

from __future__ import annotations

import os
import sys

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_green.cli import cli
from acp_green.tools.rig import probe as probe_module
from acp_green.tools.rig.client import Record
from acp_green.tools.rig.invariants import InvariantChecker, Violation
from acp_green.tools.rig.probe import FAIL, PASS, SKIP, WARN, ProbeConfig, ProbeReport, distinct, run_probe
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]
SESSIONLESS = {"version negotiation", "ids echoed", "notifications unanswered", "-32700 for garbage", "exit on EOF"}


def rows(report: ProbeReport) -> dict[str, tuple[str, str]]:
    return {r.check: (r.verdict, r.evidence) for r in [*report.results, *report.advisories]}


def test_an_agent_that_needs_a_login_gets_one_row_saying_so_and_the_sessionless_checks():
    """P1: -32000 "Authentication required" on session/new is not ten failures."""
    report = run_probe(ProbeConfig(STUB + ["--needs-auth"], timeout=5))
    found = rows(report)
    verdict, evidence = found["authentication"]
    assert verdict == SKIP and "needs authentication" in evidence and "stub-login" in evidence, evidence
    assert [r.check for r in report.results].count("authentication") == 1
    assert all(found[name][0] == PASS for name in SESSIONLESS), found
    skipped = [name for name, (v, e) in found.items() if e.startswith("skipped: needs authentication")]
    assert {"cancel during a long prompt", "many sessions at once", "a prompt that uses a tool"} <= set(skipped)
    assert all(v != FAIL for v, _ in found.values()), found
    assert report.ok


def test_authenticate_logs_in_and_the_session_checks_run():
    report = run_probe(ProbeConfig(STUB + ["--needs-auth"], timeout=5, authenticate="stub-login"),
                       only=["many sessions", "tool", "one write"])
    found = rows(report)
    assert found["authentication"][0] == PASS
    assert found["many sessions at once"][0] == PASS and found["a prompt that uses a tool"][0] == PASS, found
    assert found["initialize+session/new in one write"][0] == PASS, found


def test_rows_with_nothing_to_check_say_not_exercised():
    """P2/P5: prompts that end at once and a /stream answered with no chunks: the order and cancel
    invariants were never exercised, and the rows say so instead of "held"."""
    report = run_probe(ProbeConfig(STUB, timeout=5))
    found = rows(report)
    for row in ("prompt updates in order", "cancelled prompt answers cancelled"):
        verdict, evidence = found[row]
        assert verdict == SKIP and evidence.startswith("not exercised: "), (row, found[row])
    assert found["cancel during a long prompt"][0] == SKIP
    assert found["cancel in the same write as the prompt"][0] == SKIP, found["cancel in the same write as the prompt"]
    assert report.ok, [r for r in report.results if r.verdict == FAIL]


def test_a_stream_answered_without_chunks_breaks_no_order_but_missing_indexed_chunks_do():
    """P5: the order invariant applies only once indexed chunks arrived."""
    def run(chunks: list[str]) -> list[Violation]:
        checker = InvariantChecker()
        prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "/stream 5"}]}}
        records = [Record(0, "out", b"", prompt)]
        records += [Record(0, "in", b"", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}) for text in chunks]
        records.append(Record(0, "in", b"", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}))
        return [v for v in checker.update(records) if v.invariant == "prompt_updates_in_order"]

    assert run([]) == []
    assert run(["0: a", "1: b"]) != []
    assert run(["0: a", "1: b", "2: c", "3: d", "4: e"]) == []


def test_the_probes_own_kill_flips_no_pass_and_a_live_agents_child_is_no_orphan():
    """P3/P4: the agent ignores EOF and has a child running. Its exit rows warn (acp_green's own
    advice); a check that passed stays passed (the probe's SIGKILL is not the agent's exit code);
    its child, alive with it, is not reported as an orphan."""
    report = run_probe(ProbeConfig(STUB + ["--ignore-eof", "--child"], timeout=5, exit_timeout=2),
                       only=["ids echoed", "exit on EOF"])
    found = rows(report)
    assert found["ids echoed"][0] == PASS, found["ids echoed"]
    assert found["exit on EOF"][0] == WARN
    assert found["process exits after stdin closes"][0] == WARN
    assert report.ok
    verdict, evidence = found["no descendant survives"]
    assert verdict == SKIP and "not exercised" in evidence, found["no descendant survives"]


def test_a_queued_second_prompt_is_reported_as_queued():
    """P6: the wire shows the second prompt waiting for the first; the evidence says so. ACP implies
    one turn at a time but defines no refusal: an advisory, a warning."""
    report = run_probe(ProbeConfig(STUB + ["--wait-queues"], timeout=2), only=["second prompt"])
    verdict, evidence = rows(report)["second prompt on a busy session"]
    assert verdict == WARN and evidence.startswith("queued: "), evidence
    assert "ended when the second arrived" not in evidence


def test_the_table_prints_each_violation_once(monkeypatch):
    """P7: the same violation seen in many runs is printed once, with its count."""
    violation = Violation("exit_after_eof", "the agent was still running 8s after its stdin closed (eof)")
    report = ProbeReport(["agent"], violations=[violation] * 5)
    assert distinct(report.violations) == [(violation, 5)]
    monkeypatch.setattr(probe_module, "run_probe", lambda cfg, progress, only: report)
    result = CliRunner().invoke(cli, ["probe", "--", "agent"])
    assert result.output.count("the agent was still running 8s") == 1, result.output
    assert "(seen 5 times)" in result.output


def test_a_relative_path_sent_to_the_client_fails_the_probe():
    """ACP: file paths are absolute (a MUST): FAIL, exit 1."""
    report = run_probe(ProbeConfig(STUB + ["--relative-paths"], timeout=5), only=["tool"])
    verdict, evidence = rows(report)["file paths sent to the client are absolute"]
    assert verdict == FAIL and "relative path" in evidence, evidence
    assert not report.ok


def test_advisories_warn_apart_and_never_fail_the_probe():
    """A tool call left in_progress at the prompt's response and a SIGHUP that kills an agent SIGTERM
    ends cleanly are warnings: shown apart, in --json apart, and the probe still passes."""
    report = run_probe(ProbeConfig(STUB + ["--open-tool-calls", "--graceful-sigterm"], timeout=5), only=["tool", "SIGHUP"])
    found = rows(report)
    assert found["tool calls finish before the prompt response"][0] == WARN
    verdict, evidence = found["SIGHUP handled like SIGTERM"]
    assert verdict == WARN and "SIGTERM: exit 0" in evidence and "SIGHUP: died of the signal" in evidence, evidence
    assert report.ok
    as_json = report.to_json()
    assert {r["check"] for r in as_json["advisories"]} >= {"tool calls finish before the prompt response", "SIGHUP handled like SIGTERM"}
    assert not any(r["verdict"] == WARN for r in as_json["checks"])
    text = probe_module.format_table(report)
    main_part, _, advisory_part = text.partition("advisory (")
    assert "WARN" not in main_part and "WARN" in advisory_part


def test_a_prompt_left_unanswered_at_eof_is_a_warning_not_a_failure():
    report = run_probe(ProbeConfig(STUB + ["--wait-queues"], timeout=5), only=["at EOF"])
    found = rows(report)
    assert found["running prompt answered at EOF"][0] == WARN, found["running prompt answered at EOF"]
    assert found["one response per request"][0] == PASS  # judged once, as the advisory
    assert report.ok


def test_message_ids_consistent_within_a_message():
    def advisories(updates: list[dict]) -> list[str]:
        checker = InvariantChecker()
        prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        records = [Record(0, "out", b"", prompt)] + [Record(0, "in", b"", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, **u}}})
            for u in updates]
        checker.update(records)
        return [v.detail for v in checker.advisories]

    assert advisories([{"messageId": "a"}, {"messageId": "a"}, {"messageId": "b"}]) == []
    assert "resumed" in advisories([{"messageId": "a"}, {"messageId": "b"}, {"messageId": "a"}])[0]
    # A resumed message stays resumed for each of its chunks: the latest message is still b's.
    resumed = "message 'a' resumed after another message had started"
    assert advisories([{"messageId": i} for i in "abaa"]) == [resumed, resumed]
    assert advisories([{"messageId": i} for i in "abab"]) == [resumed]
    assert "without messageId" in advisories([{"messageId": "a"}, {}])[0]


def _message_id_advisories(ids: list[str]) -> list[str]:
    checker = InvariantChecker()
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
    checker.update([Record(0, "out", b"", prompt)] + [Record(0, "in", b"", {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"},
                                     "messageId": message_id}}}) for message_id in ids])
    return [v.detail for v in checker.advisories]


@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 4)), max_size=8))
def test_messages_whose_chunks_stay_together_are_never_advised_and_any_resumed_one_is(runs):
    """Each message's chunks in one run: no advisory. Then one chunk of an earlier message after
    another has started: advised as resumed, naming it."""
    seen: set[str] = set()
    ids = []
    for message_id, length in runs:
        if message_id in seen or (ids and ids[-1] == message_id):
            continue
        seen.add(message_id)
        ids += [message_id] * length
    assert _message_id_advisories(ids) == []
    if len(seen) >= 2:
        first = ids[0]
        advised = _message_id_advisories([*ids, first])
        assert advised == [f"message {first!r} resumed after another message had started"], advised


def test_a_flood_of_distinct_message_ids_is_checked_in_linear_time():
    """Each new messageId is looked up among the prompt's earlier ones: in a set, not a list, so
    a chunk flood whose every chunk starts a message does not take quadratic time (40,000 chunks
    took 20 s, now 7.6 s, most of it schema validation). Counted, not timed: the comparisons the
    lookups make, which a list makes once per earlier id."""
    compared = [0]

    class CountedId(str):
        def __eq__(self, other: object) -> bool:
            compared[0] += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    checker = InvariantChecker()
    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
    chunks = 2000
    records = [Record(0, "out", b"", prompt)] + [Record(0, "in", b"", {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"},
                                     "messageId": CountedId(f"m{i}")}}}) for i in range(chunks)]
    checker.update(records)
    assert checker.advisories == []
    assert compared[0] < 10 * chunks, compared[0]  # a list: about chunks**2 / 2, two million


def test_the_agent_runs_with_a_fresh_state_home_unless_keep_env(tmp_path):
    """A probe of `acp-green serve` (not --ephemeral) stores nothing in the user's state directory."""
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    serve = [sys.executable, "-m", "acp_green", "serve"]
    report = run_probe(ProbeConfig(serve, env=env), only=["many sessions"])
    assert rows(report)["many sessions at once"][0] == PASS
    assert not state.exists() or os.listdir(state) == []
    report = run_probe(ProbeConfig(serve, env=env, keep_env=True), only=["many sessions"])
    assert os.listdir(state / "acp-green"), "with --keep-env the agent keeps its state where it always does"


def test_probe_help_names_the_new_options_and_the_isolation():
    result = CliRunner().invoke(cli, ["probe", "--help"])
    text = " ".join(result.output.split())
    for option in ("--authenticate", "--keep-env", "--tool-prompt"):
        assert option in text
    assert "fresh temporary XDG_STATE_HOME" in text


def test_jsonschema_is_a_requirement_of_the_package_itself():
    """`pip install .` (the README's install) brings what the probe, chat and soak import."""
    from importlib.metadata import requires

    assert any(r.startswith("jsonschema") and "extra" not in r for r in requires("acp-green") or []), requires("acp-green")
