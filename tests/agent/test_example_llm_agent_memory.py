"""examples/llm_agent.py remembers: after restarts of its own command line, a loaded session's
next request carries the earlier exchange, tool calls and their results included (rebuilt from
the stored conversation), against the fake endpoint of tests/fake_openai.py."""

from __future__ import annotations

import json
import sys

from acp_green.tools.rig.client import ClientPolicy
from tests.agent.test_example_llm_agent import ENV, LLM_AGENT, LLM_TOOLS, endpoint  # noqa: F401 (a fixture)
from tests.mcp_helpers import stdio_entry


def test_a_loaded_session_remembers_across_restarts(launch, endpoint, tmp_path):  # noqa: F811
    """new; restart, load, "my name is Ada"; restart, load with the tool server, a tool call;
    restart, load, "what is my name?": the model is given every earlier exchange."""
    state = str(tmp_path / "state")
    tools = [stdio_entry("llm", LLM_TOOLS, env={"MARK_DIR": str(tmp_path)})]

    def restarted():
        agent = launch(command=[sys.executable, LLM_AGENT, "--base-url", endpoint.url, "--state-dir", state],
                       env=ENV, policy=ClientPolicy(permission="allow"))
        agent.initialize()
        return agent

    def load_and_prompt(text: str, mcp_servers: list | None = None) -> None:
        agent = restarted()
        agent.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": mcp_servers or []})
        assert agent.prompt(session_id, text).result() == {"stopReason": "end_turn"}
        assert agent.close() == 0

    first = restarted()
    session_id = first.new_session()
    assert first.close() == 0
    load_and_prompt("my name is Ada")
    load_and_prompt('/tool llm__lookup {"key": "k1"}', tools)
    load_and_prompt("what is my name?")

    received = endpoint.exchanges[-1].body["messages"]
    print("what the model received:\n" + json.dumps(received, indent=1))
    call_id = received[3]["tool_calls"][0]["id"]
    assert received == [
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "echo: my name is Ada"},
        {"role": "user", "content": '/tool llm__lookup {"key": "k1"}'},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "llm__lookup", "arguments": '{"key": "k1"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "value of k1"},
        {"role": "assistant", "content": "tool said: value of k1"},
        {"role": "user", "content": "what is my name?"},
    ]
