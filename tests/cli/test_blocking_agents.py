"""Agents with plain blocking code (tests/blocking_agents.py) through the real `acp-green serve`:
patched by default, the connection stays live around a `time.sleep(3)`; with --no-monkey-patch
the block is not silent, a WARNING names the agent's function.

S2 and S10: under the default patching, control requests (and another session's cancel) are read and answered while a prompt blocks.
"""

from __future__ import annotations

from tests.helpers import said

SLEEPING = "tests.blocking_agents:SleepingAgent"
BLOCKED = "acp_green.process.blockwatch: the event loop is blocked"


def start(launch, *args: str):
    agent = launch("--ephemeral", "--agent", SLEEPING, *args)
    agent.initialize()
    return agent


def test_a_sleeping_prompt_holds_up_no_other_session_by_default(launch):
    """While one prompt is inside time.sleep(3), a session/new is answered and a cancel of
    another session's prompt takes effect: both answers arrive before the sleeping prompt's."""
    agent = start(launch)
    waiting, sleeping = agent.new_session(), agent.new_session()
    wait = agent.prompt(waiting, "wait")
    agent.wait_for(lambda: said(agent.updates(waiting)) == "waiting", what="the waiting prompt to start")
    sleep = agent.prompt(sleeping, "sleep")
    agent.wait_for(lambda: said(agent.updates(sleeping)) == "sleeping", what="the sleeping prompt to start")
    new = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.cancel(waiting)
    assert new.result()["sessionId"]
    assert wait.result() == {"stopReason": "cancelled"}
    assert not sleep.done, "the sleeping prompt ended first: the others waited for it"
    assert sleep.result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sleeping)) == "sleepingawake"
    agent.close()
    assert BLOCKED not in agent.stderr_text()


def test_without_patching_a_block_is_reported_naming_the_agents_function(launch):
    """--no-monkey-patch: the same time.sleep(3) holds the loop; one WARNING on stderr names
    `prompt` in tests/blocking_agents.py and shows the line that sleeps."""
    agent = start(launch, "--no-monkey-patch")
    sid = agent.new_session()
    assert agent.prompt(sid, "sleep").result() == {"stopReason": "end_turn"}
    agent.close()
    stderr = agent.stderr_text()
    assert stderr.count(BLOCKED) == 1, stderr
    warning = stderr[stderr.index(BLOCKED):]
    first_line = warning.splitlines()[0]
    assert "blocked: prompt (" in first_line and "tests/blocking_agents.py:" in first_line, first_line
    assert "not monkey-patched" in first_line
    assert "time.sleep(3)" in warning  # the stack shows the blocking line


def test_cpu_work_holds_a_patched_loop_too_and_is_reported(launch):
    """Patching cannot make a busy loop yield: the WARNING (logged from the watchdog's real
    thread through the patched logging locks) names `prompt` and suggests the threadpool."""
    agent = start(launch)
    sid = agent.new_session()
    assert agent.prompt(sid, "spin").result() == {"stopReason": "end_turn"}
    agent.close()
    stderr = agent.stderr_text()
    assert stderr.count(BLOCKED) == 1, stderr
    first_line = stderr[stderr.index(BLOCKED):].splitlines()[0]
    assert "blocked: prompt (" in first_line and "threadpool" in first_line, first_line


def test_block_warning_zero_turns_the_check_off(launch):
    agent = start(launch, "--no-monkey-patch", "--block-warning", "0")
    sid = agent.new_session()
    assert agent.prompt(sid, "sleep").result() == {"stopReason": "end_turn"}
    agent.close()
    assert BLOCKED not in agent.stderr_text()
