"""Small agents on acp_green's public API that the tests serve with `--agent tests.agents:NAME`."""

from __future__ import annotations

import logging
import subprocess
import sys

import gevent

from acp_green import Agent, AuthMethod, Turn


class SlowToCancelAgent(Agent):
    """Says hello, waits for cancellation, then takes a while to wind down (a real agent's cleanup)."""

    name = "slow-to-cancel"

    def prompt(self, turn: Turn) -> str:
        turn.say("started")
        if not turn.text.startswith("wind down for "):
            return "end_turn"
        turn.wait_cancelled()
        gevent.sleep(float(turn.text.rsplit(" ", 1)[-1]))
        return "cancelled"


class IgnoresCancelAgent(Agent):
    """Never looks at its token: only the end of the shutdown grace can stop it."""

    name = "ignores-cancel"

    def prompt(self, turn: Turn) -> str:
        turn.say("ignoring cancellation")
        while True:
            gevent.sleep(0.05)


class NoisyAgent(Agent):
    """Prints, logs and lets a child inherit stdio: none of it may reach the wire."""

    name = "noisy"

    def prompt(self, turn: Turn) -> str:
        print("stray print from agent code")
        sys.stdout.write("stray write to sys.stdout\n")
        sys.stdout.flush()
        logging.getLogger("noisy").warning("a log line")
        subprocess.run([sys.executable, "-c", "print('child writing to inherited stdout')"], check=False)
        turn.say("quiet reply")
        return "end_turn"


class NeedsAuthAgent(Agent):
    """Requires `authenticate` before `session/new`."""

    name = "needs-auth"
    auth_methods = (AuthMethod("token", "Token", "A pretend API token"),)

    def prompt(self, turn: Turn) -> str:
        turn.say("authenticated hello")
        return "end_turn"


class PatchReportAgent(Agent):
    """Answers whether gevent monkey-patching is active in its process."""

    name = "patch-report"

    def prompt(self, turn: Turn) -> str:
        from gevent import monkey

        turn.say(f"socket patched: {monkey.is_module_patched('socket')}")
        return "end_turn"


class FailingSessionStartAgent(Agent):
    """Its session hook raises: session/new must fail and leave nothing behind."""

    name = "failing-session-start"

    def session_started(self, session, snapshot) -> None:
        raise RuntimeError("session setup failed")

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


class SwallowsKillAgent(Agent):
    """A prompt whose code swallows its kill (a bare except), so only abandoning it ends the turn."""

    name = "swallows-kill"

    def prompt(self, turn: Turn) -> str:
        turn.say("stubborn")
        try:
            gevent.sleep(60)
        except BaseException:  # noqa: B036 - what this agent is for
            gevent.sleep(3)
        return "end_turn"


class FloodsAfterCancelAgent(Agent):
    """Flushes a large buffer of output after it is cancelled (ACP allows late updates)."""

    name = "floods-after-cancel"

    def prompt(self, turn: Turn) -> str:
        turn.wait_cancelled()
        for i in range(4000):
            turn.say(f"{i}:" + "x" * 1024)
        return "cancelled"
