"""A turn's terminals and the session's cancellation token: the turn watches the token (to kill
its commands on cancel) only while it has a terminal open, so the token, which is the session's
current one and outlives every turn that is not cancelled, does not collect one callback per turn
that ran a terminal.

End to end in process (the demo agent's `/term` with a client that runs terminals, and an agent
that leaves its terminal for the runtime to release), then TurnTerminals driven directly: the
callback goes when the last open terminal is released, and cancellation still kills every
terminal open at that moment, those created after an earlier one was released too.
"""

from __future__ import annotations

from typing import Any

from acp_green import Agent, Turn
from acp_green.demo import DemoAgent
from acp_green.rpc.cancel import CancelToken
from acp_green.terminals import TurnTerminals
from acp_green.tools.rig.client import ClientPolicy

TURNS = 60


def callbacks(token: CancelToken) -> int:
    """How many callbacks wait on `token` (CancelToken keeps them in `_callbacks` until it is set)."""
    return len(token._callbacks)


class LeavesItsTerminalOpenAgent(Agent):
    """Starts `true` in a client terminal and returns without releasing it: the runtime releases
    it as the turn ends."""

    name = "leaves-its-terminal-open"

    def prompt(self, turn: Turn) -> str:
        turn.terminal("true")
        return "end_turn"


def run_turns(inprocess, agent: Agent, text: str) -> list[int]:
    """TURNS prompts of `text` in one session; the session token's callback count before the
    first and after each (the token is never replaced: no turn is cancelled)."""
    harness = inprocess(agent, policy=ClientPolicy.coding())
    client = harness.client
    client.initialize()
    session_id = client.new_session(cwd="/tmp")
    session = harness.server.sessions.live(session_id)
    token = session.token
    counts = [callbacks(token)]
    for _ in range(TURNS):
        assert client.prompt(session_id, text).result() == {"stopReason": "end_turn"}
        counts.append(callbacks(token))
    assert session.token is token
    assert len([r for r in client.agent_requests if r["method"] == "terminal/create"]) == TURNS
    return counts


def test_turns_that_create_and_release_a_terminal_leave_the_session_token_as_they_found_it(inprocess):
    """60 `/term true` turns (each creates a terminal, waits for its exit, releases it): the session's
    token holds as many callbacks after each turn as before the first. Without the removal each
    turn leaves one (60 after 60 turns)."""
    counts = run_turns(inprocess, DemoAgent(), "/term true")
    assert counts == [counts[0]] * (TURNS + 1), counts


def test_turns_that_leave_their_terminal_to_the_runtime_leave_the_session_token_as_they_found_it(inprocess):
    """The same when the agent never releases its terminal and the turn's end releases it."""
    counts = run_turns(inprocess, LeavesItsTerminalOpenAgent(), "go")
    assert counts == [counts[0]] * (TURNS + 1), counts


# -- TurnTerminals driven directly -------------------------------------------------------------------


class RecordingClient:
    """Answers each terminal/create with a new id; records what is sent without waiting."""

    def __init__(self) -> None:
        self.created = 0
        self.sent: list[tuple[str, str]] = []

    def call(self, method: str, params: Any, token: Any = None, timeout: Any = None, on_late_result: Any = None) -> Any:
        assert method == "terminal/create"
        self.created += 1
        return {"terminalId": f"term-{self.created}"}

    def send(self, method: str, params: Any) -> None:
        self.sent.append((method, params["terminalId"]))


def test_the_callback_goes_with_the_last_open_terminal_and_comes_back_with_the_next():
    token = CancelToken()
    client = RecordingClient()
    terminals = TurnTerminals("sess-1", token, client.call, client.send)
    first, second = terminals.create("a"), terminals.create("b")
    assert callbacks(token) == 1, "one callback for all the turn's terminals"
    first.release()
    assert callbacks(token) == 1, "a terminal is still open: cancellation must still kill it"
    second.release()
    assert callbacks(token) == 0, "nothing open: nothing to kill on cancel"
    for _ in range(100):  # create and release, many times in one turn
        with terminals.create("c"):
            assert callbacks(token) == 1
        assert callbacks(token) == 0
    third = terminals.create("d")
    client.sent.clear()
    token.set()
    assert client.sent == [("terminal/kill", third.terminal_id)], "the terminal created after the others were released is killed"
    terminals.close()
    assert client.sent == [("terminal/kill", third.terminal_id), ("terminal/release", third.terminal_id)]


def test_a_turn_ending_with_terminals_open_takes_its_callback_off_the_token():
    token = CancelToken()
    client = RecordingClient()
    terminals = TurnTerminals("sess-1", token, client.call, client.send)
    terminals.create("a")
    terminals.create("b")
    terminals.close()
    assert callbacks(token) == 0
    assert client.sent == [("terminal/release", "term-1"), ("terminal/release", "term-2")]
    token.set()  # a later turn of the session is cancelled: nothing of this turn is killed
    assert client.sent == [("terminal/release", "term-1"), ("terminal/release", "term-2")]
