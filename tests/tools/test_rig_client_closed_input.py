"""The rig's client against an agent that closed its input while still writing: what the agent
writes after that is read to the end, though the answers to its own requests are lost."""

from __future__ import annotations

import sys
import textwrap

from acp_green.tools.rig.client import AgentProcess, ClientPolicy

# Reads one request, closes its input, then writes a request of its own and the response to the
# first request in one write: the shape of an agent's shutdown (`terminal/release`, then the
# prompt's `cancelled`), where the client's answer to the first hits a broken pipe.
CLOSING_AGENT = textwrap.dedent("""
    import json, os, sys, time
    line = sys.stdin.buffer.readline()
    request = json.loads(line)
    os.close(0)
    time.sleep(0.2)  # the client's pipe has no reader by now
    out = (json.dumps({"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file",
                       "params": {"sessionId": "s", "path": "/tmp/x"}}) + "\\n"
           + json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "cancelled"}}) + "\\n")
    os.write(1, out.encode())
    time.sleep(0.5)
""")


def test_a_response_after_a_request_the_client_cannot_answer_is_still_read():
    """S13 as the rig sees it: an agent shutting down closes its input, then writes a request and
    the prompt's response together. Answering the request fails (broken pipe); the client must
    keep reading and deliver the response, counting the answer it lost."""
    agent = AgentProcess([sys.executable, "-c", CLOSING_AGENT], ClientPolicy(files={"/tmp/x": "x"}))
    try:
        pending = agent.request("session/prompt", {"sessionId": "s", "prompt": []})
        assert pending.result(timeout=20) == {"stopReason": "cancelled"}
        assert agent.lost_answers == 1
    finally:
        agent.close()
