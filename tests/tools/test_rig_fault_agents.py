"""The rig against real processes: a faulty agent breaks each invariant on demand and the rig
names the invariant it broke; the same agent without flags, and `acp-green serve`, break none."""

from __future__ import annotations

import re
import sys

import pytest

from acp_green.tools.rig import scenario as s
from acp_green.tools.rig.reaper import all_processes
from tests.helpers import TESTS, process_gone, wait_until

FAULT_AGENT = [sys.executable, str(TESTS / "peer_agents" / "fault_agent.py")]
SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]

# One scenario that gives every fault a chance to show.
STEPS = [
    s.initialize(),
    s.open_sessions(1),
    s.prompt("/stream 5 16", name="stream", wait=True),
    s.set_mode("code"),
    s.prompt("/wait", name="wait", must_cancel=True),
    s.cancel(after=s.updates_seen(0)),
    s.await_response("wait"),
    s.prompt("hello", wait=True),
    s.close_stdin(),
]

FAULTS = {
    "--bad-json": "valid_json_rpc",
    "--bad-schema": "schema",
    "--double-response": "one_response_per_request",
    "--answer-notifications": "no_response_to_notification",
    "--out-of-order": "prompt_updates_in_order",
    "--update-after-response": "no_update_after_response",
    "--cancel-ignored": "cancelled_answers_cancelled",
    "--orphan": "no_orphan_processes",
}


def run(command, steps=STEPS, **kwargs):
    return s.run_scenario(command, steps, **kwargs)


def test_the_fault_agent_without_flags_breaks_nothing():
    result = run(FAULT_AGENT)
    assert result.violations == []
    assert result.exit_code == 0


def test_acp_green_serve_breaks_nothing_in_the_same_scenario():
    result = run(SERVE)
    assert [str(v) for v in result.violations] == []
    assert result.exit_code == 0
    assert result.cancelled_prompts == 1


@pytest.mark.parametrize("flag", sorted(FAULTS))
def test_each_fault_is_named_by_its_invariant(flag):
    result = run(FAULT_AGENT + [flag])
    broken = {v.invariant for v in result.violations}
    assert FAULTS[flag] in broken, [str(v) for v in result.violations]
    named = next(v for v in result.violations if v.invariant == FAULTS[flag])
    if flag != "--orphan":
        assert named.messages, "a broken invariant quotes the messages that broke it"


def test_an_unanswered_request_is_named():
    steps = [s.initialize(), s.open_sessions(1), s.prompt("hello", wait=True), s.close_stdin()]
    agent_steps = steps[:2] + [lambda ctx: ctx.agent.request("session/set_mode", {"sessionId": ctx.session(0), "modeId": "code"})] + steps[2:]
    result = run(FAULT_AGENT + ["--drop-response"], agent_steps)
    assert "one_response_per_request" in {v.invariant for v in result.violations}


def test_an_agent_that_ignores_eof_is_named_and_still_cleaned_up():
    agent = s.CheckedAgent(FAULT_AGENT + ["--ignore-eof"])
    agent.exit_timeout = 3  # it never exits by itself; the bound only decides when we stop waiting
    agent.initialize()
    result = agent.finish()
    assert [v.invariant for v in result.violations] == ["exit_after_eof"]
    assert not any(p.pid == agent.pid for p in all_processes())


def test_an_orphan_in_a_session_of_its_own_is_found_through_the_subreaper():
    """The double-forked sleeper left the agent's session and tree at once; only the subreaper sees it."""
    result = run(FAULT_AGENT + ["--orphan"], [s.initialize(), s.open_sessions(1), s.close_stdin()])
    orphans = [v for v in result.violations if v.invariant == "no_orphan_processes"]
    assert orphans, result.violations
    # Only the pids this run reported: another xdist worker may be probing the same fault agent.
    pids = [int(pid) for v in orphans for pid in re.findall(r"pid (\d+)", v.detail)]
    assert pids, orphans
    wait_until(lambda: all(process_gone(pid) for pid in pids), what="the rig to kill what it found")


def test_runtime_stats_extension_reports_greenlets():
    agent = s.CheckedAgent(SERVE)
    agent.initialize()
    stats = agent.call("_acp_green/stats", {})
    result = agent.finish()
    assert stats["greenlets"] >= 2 and stats["activeRequests"] == 1
    assert result.violations == []
