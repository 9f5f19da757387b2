"""The rig's client (the probe's, the soak's and chat's) against an agent that writes lines no
agent should: each is recorded and the reading goes on, so what follows is still seen."""

from __future__ import annotations

import os
import signal
import sys
import textwrap

from acp_green.tools.rig.client import AgentProcess, ClientPolicy
from acp_green.tools.rig.invariants import InvariantChecker

# Answers the first request after two hostile lines: JSON nested deeper than any parser goes,
# and a `$/cancel_request` and a `session/update` whose params are a list, not an object.
HOSTILE_AGENT = textwrap.dedent("""
    import json, os, sys
    request = json.loads(sys.stdin.buffer.readline())
    deep = "[" * 200000 + "]" * 200000
    lines = [deep,
             json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": [1]}),
             json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": ["s"]}),
             json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})]
    os.write(1, ("\\n".join(lines) + "\\n").encode())
    sys.stdin.buffer.read()
""")


def test_lines_too_deep_or_with_list_params_do_not_end_the_reading():
    """A line nested 200,000 deep is recorded as unreadable (not JSON to us) and a notification
    with list params is recorded and ignored: the response written after both still arrives,
    and the invariant checker reads the same records without raising."""
    agent = AgentProcess([sys.executable, "-c", HOSTILE_AGENT], ClientPolicy())
    try:
        pending = agent.request("session/prompt", {"sessionId": "s", "prompt": []})
        assert pending.result(timeout=20) == {"stopReason": "end_turn"}
        incoming = [r for r in agent.records if r.direction == "in"]
        assert incoming[0].message is None and len(incoming[0].raw) > 400000
        assert [r.message.get("method") for r in incoming[1:3]] == ["$/cancel_request", "session/update"]
        InvariantChecker().finish(agent.records, complete=False)
    finally:
        agent.close()


def test_chat_ignores_a_session_update_or_cancel_whose_params_are_no_object():
    """chat's renderer and its question handler take what the rig's client hands them: params
    or an update that are a list or a string are ignored, not a crash of the reading greenlet."""
    from acp_green.tools.rig.chat_render import Renderer, Screen
    from tests.tools.test_chat_ask_eof import asker_typing

    renderer = Renderer("s", Screen(spinner=False), lambda _terminal_id: None)
    for params in (["s"], "s", {"sessionId": "s", "update": ["agent_message_chunk"]}, {"sessionId": "s", "update": "x"}):
        renderer({"jsonrpc": "2.0", "method": "session/update", "params": params})
    asker, client = asker_typing([])
    for params in ([7], "7", None):
        asker._cancel_request(client, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": params})  # type: ignore[arg-type]
    assert client.answers == []


# Writes one line that never ends, as fast as it can, and never reads its input.
ENDLESS_LINE_AGENT = "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n"


def test_an_endless_line_is_cut_and_does_not_starve_a_wait(monkeypatch):
    """A line without end is read in pieces of the bound, each recorded cut short as a line that is
    not JSON (the memory stays small), and the reader yields: a 1 s wait on the agent ends in time."""
    import time

    import gevent

    from acp_green.tools.rig import client_wire  # the client's reader reads the bound from there

    monkeypatch.setattr(client_wire, "MAX_LINE_BYTES", 1 << 20, raising=False)
    agent = AgentProcess([sys.executable, "-c", ENDLESS_LINE_AGENT], ClientPolicy())
    try:
        started = time.monotonic()
        with gevent.Timeout(1, False):
            agent.eof.wait()
        assert time.monotonic() - started < 3, "the reader never let the hub run the timer"
        pieces = [r for r in agent.records if r.direction == "in"]
        assert pieces and all(r.message is None and len(r.raw) <= 64 << 10 for r in pieces)
    finally:
        os.killpg(agent.pid, signal.SIGKILL)  # it never reads its EOF
        agent.close()
