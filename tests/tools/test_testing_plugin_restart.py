"""acp_green.testing used directly by this suite (tests/conftest.py enables the plugin): a turn's
`plan` is its last plan; `AgentClient.close()` stops the agent then and there, and `restart()`
starts it again as `acp_connect` started it — the same agent, options, environment and state —
so a test can check what survives a restart. Every run is checked when the test ends, each named."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from acp_green import Agent, ServeOptions, Turn
from acp_green.demo import DemoAgent
from acp_green.testing.serving import Connections
from tests.helpers import REPO, TESTS, process_gone
from tests.remote_serve import remote_server  # noqa: F401 (a fixture)
from tests.state_agents import StateAgent

FAULT_AGENT = [sys.executable, str(TESTS / "peer_agents" / "fault_agent.py")]
STATE_AGENT = [sys.executable, "-m", "acp_green", "serve", "--agent", f"{TESTS / 'state_agents.py'}:StateAgent"]


# -- TurnResult.plan -----------------------------------------------------------------------------------

class Replans(Agent):
    """Sends a plan, says something, then sends the whole plan again, changed; "/clear" then sends an empty plan."""

    name = "replans"

    def prompt(self, turn: Turn) -> str:
        turn.plan([{"content": "look", "priority": "high", "status": "in_progress"}])
        turn.say("looked")
        turn.plan([{"content": "look", "priority": "high", "status": "completed"},
                   {"content": "answer", "priority": "low", "status": "in_progress"}])
        if turn.text == "/clear":
            turn.plan([])
        return "end_turn"


def test_a_turns_plan_is_its_last_plan_update(acp_connect):
    client = acp_connect(Replans)
    session_id = client.new_session()
    turn = client.prompt(session_id, "go")
    assert len(turn.updates_of("plan")) == 2
    assert turn.plan == [{"content": "look", "priority": "high", "status": "completed"},
                         {"content": "answer", "priority": "low", "status": "in_progress"}]
    assert turn.plan == turn.updates_of("plan")[-1]["entries"]
    assert client.prompt(session_id, "/clear").plan == []  # an empty plan replaces the others: no entries left


def test_a_turn_without_a_plan_has_none(acp_connect):
    client = acp_connect(DemoAgent)
    assert client.prompt(client.new_session(), "hello").plan is None


# -- restart -------------------------------------------------------------------------------------------

def test_restart_of_a_command_line_runs_it_again_with_the_state_it_stored(acp_connect):
    """Without --ephemeral the agent stores sessions in its state home: the same one after a
    restart, so the session loads with its history and its state; the first process is gone."""
    client = acp_connect(STATE_AGENT)
    session_id = client.new_session()
    assert client.prompt(session_id, '/set k 1').text == '{} -> {"k": 1}'
    first = client.rpc
    assert client.restart()["protocolVersion"] == 1
    assert client.rpc is not first and first.exited and process_gone(first.pid)
    replayed = client.load_session(session_id)
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"] == ["/set k 1"]
    assert client.prompt(session_id, "/state").text == '{"k": 1} -> {"k": 1}'


def test_restart_in_process_serves_the_same_options_and_a_fresh_agent(acp_connect, tmp_path):
    """In process, a class is made afresh (as a process would be) with the same ServeOptions: a
    state directory given there keeps the session across the restart."""
    client = acp_connect(StateAgent, serve_options=ServeOptions(state_dir=str(tmp_path / "state")))
    session_id = client.new_session()
    client.prompt(session_id, '/set k "v"')
    client.restart()
    client.load_session(session_id)
    assert client.prompt(session_id, "/state").text == '{"k": "v"} -> {"k": "v"}'


class Counts(Agent):
    """Says how many prompts this instance has answered, and how many instances were made."""

    name = "counts"
    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.answered = 0

    def prompt(self, turn: Turn) -> str:
        self.answered += 1
        turn.say(f"{self.answered} of {type(self).made}")
        return "end_turn"


def test_restart_makes_a_class_afresh_and_serves_an_instance_again(acp_connect):
    """The default in-process options keep sessions in memory: a restart starts with none (as an
    --ephemeral process would), and the agent's class is made again; an instance is served as it is."""
    Counts.made = 0
    client = acp_connect(Counts)
    assert client.prompt(client.new_session(), "a").text == "1 of 1"
    client.restart()
    assert client.prompt(client.new_session(), "b").text == "1 of 2"
    instance = Counts()
    served = acp_connect(instance)
    served.prompt(served.new_session(), "c")
    served.restart()
    assert served.prompt(served.new_session(), "d").text == "2 of 3" and instance.answered == 2


def test_close_stops_the_agent_now_and_sending_afterwards_says_how_to_start_it_again(acp_connect):
    client = acp_connect(STATE_AGENT)
    client.new_session()
    first = client.rpc
    client.close()
    assert client.closed and first.exited and process_gone(first.pid)
    with pytest.raises(RuntimeError, match=r"^AgentClient: cannot send session/new: the agent was stopped by close\(\); "
                                           r"restart\(\) starts it again$"):
        client.new_session()
    client.close()  # once stopped, closing again does nothing
    client.restart()
    assert not client.closed and client.prompt(client.new_session(), "/state").stop_reason == "end_turn"


def test_restart_of_an_agent_at_a_url_connects_to_it_again(acp_connect, remote_server):
    """The agent at a URL is not this test's to restart: the client connects again, and the
    session, which outlives its connection, loads there with its state."""
    server = remote_server("--agent", f"{TESTS / 'state_agents.py'}:StateAgent")
    client = acp_connect(server.ws_url)
    session_id = client.new_session()
    client.prompt(session_id, "/set k 2")
    client.restart()
    client.load_session(session_id)
    assert client.prompt(session_id, "/state").text == '{"k": 2} -> {"k": 2}'


def test_the_terminals_of_every_run_stay_listed(acp_connect):
    client = acp_connect(DemoAgent)
    client.prompt(client.new_session(), "/term echo one")
    client.restart()
    client.prompt(client.new_session(), "/term echo two")
    assert [t.argv for t in client.terminals] == [["echo", "one"], ["echo", "two"]]


def test_what_each_run_broke_is_reported_at_the_end_naming_the_run(tmp_path_factory):
    """A run that broke a rule before a restart still fails the test, named as that run; a clean
    later run is not blamed."""
    connections = Connections(lambda: tmp_path_factory.mktemp("acp"))
    client = connections.connect([*FAULT_AGENT, "--update-after-response"])
    assert client.prompt(client.new_session(), "hello").text == "hello"
    client.restart()
    client.new_session()
    failure: Any = connections.stop_and_check()
    assert failure is not None
    assert "fault_agent.py --update-after-response (run 1 of 2) broke 1 ACP rule(s)" in failure
    assert "no_update_after_response (S5" in failure and "run 2 of 2" not in failure
    assert connections.stop_and_check() is None  # reported once


def test_the_guides_restart_example_passes(acp_connect, tmp_path):
    """docs/TESTING.md's example of a restart, run as written."""
    guide = (REPO / "docs" / "TESTING.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", guide, flags=re.S) if b.startswith("# test_counter_agent.py"))
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/TESTING.md", "exec"), namespace)
    namespace["test_the_count_survives_a_restart"](acp_connect, tmp_path)
