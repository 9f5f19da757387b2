"""S11 at the start of a prompt's job: a prompt whose token is already set when its greenlet
first runs (a `session/cancel` handled right after its admission, in the same read) ends
`cancelled` without the agent ever being called, and leaves one usage record saying so.
On the unit layer (tests/unit_harness.py): nothing runs between two handed-over messages.
"""

from __future__ import annotations

from acp_green.agent import Agent, Turn
from tests.unit_harness import UnitConnection, unit  # noqa: F401 - `unit` is a fixture


class CountsPromptsAgent(Agent):
    """Answers every prompt at once, counting the calls."""

    name = "counts-prompts"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def prompt(self, turn: Turn) -> str:
        self.calls += 1
        return "end_turn"


def test_a_prompt_cancelled_before_its_job_first_runs_never_calls_the_agent_S11(unit):
    agent = CountsPromptsAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session()
    request_id = conn.prompt(session_id, "never seen")
    conn.notify("session/cancel", {"sessionId": session_id})  # before the job's greenlet ever ran
    assert conn.result(request_id) == {"stopReason": "cancelled"}
    assert agent.calls == 0
    assert [r.stop_reason for r in conn.store.usage(session_id)] == ["cancelled"]
    # The cancel installed a fresh token: the next prompt runs.
    assert conn.result(conn.prompt(session_id, "seen")) == {"stopReason": "end_turn"}
    assert agent.calls == 1
