"""An agent that sets and clears its `session.state` in every way an author may
(tests/sessions/test_state_cleared_after_revival.py).

Each turn says the state as JSON before and after its command: `BEFORE -> AFTER`.
Commands (the prompt's first word):
  /set K V   session.state[K] = V (a JSON value)
  /clear     session.state.clear()
  /reset     session.state = {} (a new dict, assigned through the turn's view of the session)
  /del K     del session.state[K]
  /state     nothing
"""

from __future__ import annotations

import json

from acp_green import Agent, Turn


class StateAgent(Agent):
    name = "state-agent"

    def prompt(self, turn: Turn) -> str:
        command, _, rest = turn.text.partition(" ")
        before = json.dumps(turn.session.state, sort_keys=True)
        if command == "/set":
            key, _, value = rest.partition(" ")
            turn.session.state[key] = json.loads(value)
        elif command == "/clear":
            turn.session.state.clear()
        elif command == "/reset":
            turn.session.state = {}
        elif command == "/del":
            del turn.session.state[rest]
        turn.say(f"{before} -> {json.dumps(turn.session.state, sort_keys=True)}")
        return "end_turn"
