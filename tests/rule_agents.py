"""Test agents for the rule tests, served with `--agent tests.rule_agents:NAME`."""

from __future__ import annotations

import os

import gevent

from acp_green import Agent, Turn


class WindsDownUntilReleasedAgent(Agent):
    """`wind down until PATH`: says "started", waits for cancellation, says "winding down", then
    keeps winding down until PATH exists (the test decides when shutdown may go on)."""

    name = "winds-down-until-released"

    def prompt(self, turn: Turn) -> str:
        turn.say("started")
        path = turn.text.rsplit(" ", 1)[-1]
        turn.wait_cancelled()
        turn.say("winding down")
        while not os.path.exists(path):
            gevent.sleep(0.02)
        return "cancelled"
