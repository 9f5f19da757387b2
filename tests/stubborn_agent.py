"""An agent for shutdown tests: `/stubborn` ignores cancellation until it is killed."""

from __future__ import annotations

import gevent

from acp_green.demo import DemoAgent


class StubbornAgent(DemoAgent):
    """The demo agent, plus a prompt that only a kill at the end of the grace can end."""

    def prompt(self, turn):
        if turn.text.strip() == "/stubborn":
            turn.say("not listening")
            while True:
                gevent.sleep(3600)  # deliberately ignores turn.token
        return super().prompt(turn)
