"""Test agents for terminals and elicitation, on the public API only; served with
`--agent tests.coding_agents:NAME`. Each name says how it leaves a terminal behind."""

from __future__ import annotations

from acp_green import Agent, CapabilityMissing, Turn


class LeavesTerminalOpenAgent(Agent):
    """`return`, `raise` or `wait`: creates a terminal running `sleep 30` without a `with` block,
    says its id, then returns, raises, or waits until cancelled (the runtime must release it)."""

    name = "leaves-terminal-open"

    def prompt(self, turn: Turn) -> str:
        term = turn.terminal("sleep", ["30"])
        turn.say(f"created {term.terminal_id}")
        if turn.text == "raise":
            raise RuntimeError("agent failure with a terminal open")
        if turn.text == "wait":
            turn.wait_cancelled()
            return "cancelled"
        return "end_turn"


class TerminalCapabilityAgent(Agent):
    """Tries `turn.terminal(...)` and `turn.elicit(...)` and says what each raised."""

    name = "terminal-capability"

    def prompt(self, turn: Turn) -> str:
        for attempt in (lambda: turn.terminal("true"), lambda: turn.elicit("name?", {"properties": {}})):
            try:
                attempt()
                turn.say("allowed;")
            except CapabilityMissing as exc:
                turn.say(f"CapabilityMissing: {exc};")
        return "end_turn"
