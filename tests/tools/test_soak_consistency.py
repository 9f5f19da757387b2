"""The soak holds an agent to the rules the probe holds it to, no stricter: a title after a turn is
ACP's to allow (acp_green's own S5 is not asked of other agents); `/wait` is held to answering
`cancelled` only on an agent where it runs until cancelled; a second prompt on a busy session may be
held (ACP defines no refusal) and is not waited on for ever; nothing is owed for what still runs
when stdin closes. Against the stub agent of tests/probe_stubs, which knows no demo command."""

from __future__ import annotations

import random
import sys

from acp_green.tools.rig import soak as soak_module
from acp_green.tools.rig.soak import SoakConfig, run_soak
from tests.helpers import TESTS

STUB = [sys.executable, str(TESTS / "probe_stubs" / "stub_agent.py")]


def soak(tmp_path, *flags: str) -> dict:
    # Seed 7 starts with a side run ended by EOF (action 2) and a busy prompt (action 4).
    return run_soak(SoakConfig(STUB + list(flags), agents=1, duration=3, seed=7, out_dir=str(tmp_path), plot=False))


def test_a_title_update_after_a_turn_breaks_nothing(tmp_path):
    """claude-agent-acp sends session_info_update (a title) after a prompt's response: ACP allows it."""
    summary = soak(tmp_path, "--session-updates-after")
    assert summary["failures"] == [], summary["failures"]
    assert summary["prompts"] > 0


def test_an_agent_without_the_demos_wait_is_not_held_to_its_grammar(tmp_path):
    """`/wait` is a command of acp-green's demo: this agent answers it as any prompt, end_turn after
    0.2 s, a cancel sent meanwhile or not (its turn ended before it read the cancel): nothing broken."""
    summary = soak(tmp_path, "--answer-after", "0.2")
    assert summary["failures"] == [], summary["failures"]
    actions = summary["per_agent"][0]["actions"]
    assert actions.get("cancel_wait", 0) > 0 and actions.get("cancel_same_write", 0) > 0, actions


def test_a_second_prompt_held_behind_a_running_one_breaks_nothing(tmp_path):
    """This agent's `/wait` runs until cancelled and holds what comes meanwhile, a second prompt too:
    ACP defines no refusal, and the soak does not wait on the held prompt for ever."""
    summary = soak(tmp_path, "--wait-queues")
    assert summary["failures"] == [], summary["failures"]
    assert summary["per_agent"][0]["actions"].get("busy", 0) > 0, summary["per_agent"]


class FirstChoice(random.Random):
    """The side run's mix, made certain: every prompt is its first choice, the long prompt."""

    def choice(self, seq):  # type: ignore[override]
        return seq[0]


def test_prompts_left_running_when_stdin_closes_are_owed_nothing(tmp_path):
    """A side run ended by EOF while `/wait` runs on each session: this agent exits 0 without
    answering them, which ACP allows (the probe's advisory, acp_green's S13, is not a soak failure)."""
    slot = soak_module.Slot(0, FirstChoice(1))
    soak_module._side_run(slot, "eof_mid_turn", SoakConfig(STUB + ["--wait-queues"], out_dir=str(tmp_path)))
    assert slot.side_runs == 1 and slot.violations == [], slot.violations
