"""acp_green.testing used directly by this suite (tests/conftest.py enables the plugin): what a
turn reads is its own session's, whatever another session's turn sends meanwhile."""

from __future__ import annotations

import json

from acp_green.demo import DemoAgent


def test_a_turn_reads_only_its_own_sessions_updates(acp_connect):
    client = acp_connect(DemoAgent)
    waiting, talking = client.new_session(), client.new_session()
    running = client.start_prompt(waiting, "/wait")
    other = client.prompt(talking, "a line only the other session hears")
    assert "a line only the other session hears" in other.text
    assert "a line only the other session hears" not in json.dumps(running.updates)
    running.cancel()
    turn = running.wait()
    assert turn.stop_reason == "cancelled"
    assert "a line only the other session hears" not in json.dumps(turn.updates) + turn.text
