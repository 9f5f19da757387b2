"""examples/llm_agent.py (a real LLM agent) through its own command line, against the
fake OpenAI-compatible endpoint of tests/fake_openai.py and a real stdio MCP server on the
official `mcp` SDK (tests/mcp_servers/llm_tools.py). No network: everything is on 127.0.0.1."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import socket
import sys
import time
from typing import Any

import pytest
from gevent import subprocess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.tools.rig.client import ClientPolicy
from tests.fake_openai import FakeOpenAI
from tests.helpers import REPO, TESTS, said
from tests.mcp_helpers import stdio_entry

LLM_AGENT = str(REPO / "examples" / "llm_agent.py")
LLM_TOOLS = str(TESTS / "mcp_servers" / "llm_tools.py")
ENV = {"OPENAI_MODEL": "fake-model", "OPENAI_API_KEY": "sk-test"}


@pytest.fixture
def endpoint():
    server = FakeOpenAI()
    yield server
    server.stop()


@pytest.fixture
def start(launch, tmp_path):
    """Launch the agent on a base URL (the fake endpoint's by default), its state under tmp_path."""
    def run(base_url: str, policy: ClientPolicy | None = None):
        command = [sys.executable, LLM_AGENT, "--base-url", base_url, "--state-dir", str(tmp_path / "state")]
        agent = launch(command=command, policy=policy, env=ENV)
        agent.initialize()
        return agent

    return run


def tool_session(agent, tmp_path) -> str:
    return agent.new_session(mcp_servers=[stdio_entry("llm", LLM_TOOLS, env={"MARK_DIR": str(tmp_path)})])


def tool_updates(agent, session_id: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def permission_requests(agent) -> list[dict[str, Any]]:
    return [r for r in agent.agent_requests if r["method"] == "session/request_permission"]


def ledger(state_dir: str) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "acp_green", "usage", "--json", "--records", "--state-dir", state_dir],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["records"]


def test_reply_streams_as_message_chunks_and_the_conversation_carries_on(start, endpoint):
    """Each token the endpoint streams is one agent_message_chunk; the request names the model
    and key from the environment, asks for a stream with usage, and a second turn sends the first."""
    agent = start(endpoint.url)
    session_id = agent.new_session()
    assert agent.prompt(session_id, "hello there").result() == {"stopReason": "end_turn"}
    chunks = [u["content"]["text"] for u in agent.updates(session_id) if u["sessionUpdate"] == "agent_message_chunk"]
    assert chunks == ["echo: ", "hello ", "there"]
    first = endpoint.exchanges[0]
    assert first.body["model"] == "fake-model" and first.body["stream"] is True
    assert first.body["stream_options"] == {"include_usage": True}
    assert first.headers["authorization"] == "Bearer sk-test"
    assert "tools" not in first.body  # no MCP server, nothing to offer
    assert agent.prompt(session_id, "again").result() == {"stopReason": "end_turn"}
    assert endpoint.exchanges[1].body["messages"] == [
        {"role": "user", "content": "hello there"}, {"role": "assistant", "content": "echo: hello there"},
        {"role": "user", "content": "again"}]


def test_read_only_tool_runs_without_asking(start, endpoint, tmp_path):
    """Permission rule: a tool annotated readOnlyHint runs as an ACP tool call without
    session/request_permission; its result goes back to the model, whose answer ends the turn."""
    agent = start(endpoint.url)
    session_id = tool_session(agent, tmp_path)
    assert agent.prompt(session_id, '/tool llm__lookup {"key": "k1"}').result() == {"stopReason": "end_turn"}
    offered = {t["function"]["name"]: t["function"] for t in endpoint.exchanges[0].body["tools"]}
    assert set(offered) == {"llm__lookup", "llm__note"}
    assert offered["llm__note"]["parameters"]["properties"]["text"]["type"] == "string"
    assert permission_requests(agent) == []
    updates = tool_updates(agent, session_id)
    assert updates[0]["kind"] == "read" and updates[0]["rawInput"] == {"key": "k1"}
    assert updates[-1]["status"] == "completed"
    assert endpoint.exchanges[1].body["messages"][-1]["content"] == "value of k1"
    assert said(agent.updates(session_id)) == "tool said: value of k1"


def test_tool_with_side_effects_asks_first_then_runs(start, endpoint, tmp_path):
    """Permission rule: a tool without readOnlyHint is asked for (once) before it runs."""
    agent = start(endpoint.url, ClientPolicy(permission="allow"))
    session_id = tool_session(agent, tmp_path)
    assert agent.prompt(session_id, '/tool llm__note {"text": "remember me"}').result() == {"stopReason": "end_turn"}
    asked = permission_requests(agent)
    assert len(asked) == 1 and asked[0]["params"]["toolCall"]["title"] == "llm.note"
    assert tool_updates(agent, session_id)[-1]["status"] == "completed"
    assert (tmp_path / "notes").read_text() == "remember me\n"
    assert said(agent.updates(session_id)) == "tool said: noted remember me"


def test_refused_permission_fails_the_tool_call_and_tells_the_model(start, endpoint, tmp_path):
    """A refusal: the tool never runs, its ACP tool call ends failed, the model hears why and the
    turn still ends normally."""
    agent = start(endpoint.url, ClientPolicy(permission="reject"))
    session_id = tool_session(agent, tmp_path)
    assert agent.prompt(session_id, '/tool llm__note {"text": "secret"}').result() == {"stopReason": "end_turn"}
    assert len(permission_requests(agent)) == 1
    assert not (tmp_path / "notes").exists()
    final = tool_updates(agent, session_id)[-1]
    assert final["status"] == "failed" and "refused" in final["content"][0]["content"]["text"]
    told = endpoint.exchanges[1].body["messages"][-1]
    assert told["role"] == "tool" and "refused permission" in told["content"]


def test_unknown_function_and_bad_arguments_are_told_to_the_model(start, endpoint, tmp_path):
    """A call of a function nobody offered, or with arguments that are not JSON, is answered to
    the model as an error; a known tool's call still ends failed, never left pending."""
    agent = start(endpoint.url)
    session_id = tool_session(agent, tmp_path)
    assert agent.prompt(session_id, "/tool nowhere__x {}").result() == {"stopReason": "end_turn"}
    assert "no tool 'nowhere__x'" in endpoint.exchanges[1].body["messages"][-1]["content"]
    assert agent.prompt(session_id, "/tool llm__lookup {not json").result() == {"stopReason": "end_turn"}
    assert "not JSON" in endpoint.exchanges[3].body["messages"][-1]["content"]
    assert tool_updates(agent, session_id)[-1]["status"] == "failed"


@pytest.mark.parametrize("prompt", ["/slow", "/think"], ids=["tokens-flowing", "model-silent"])
def test_cancel_mid_stream_closes_the_http_response(start, endpoint, prompt):
    """A cancel while the endpoint streams tokens, or while it is silent (only keep-alive comments
    come, so no token could reveal the cancel): the turn answers cancelled and the endpoint sees
    its client go — the stream is closed, not read to its end, which here is a minute away."""
    agent = start(endpoint.url)
    session_id = agent.new_session()
    pending = agent.prompt(session_id, prompt)
    agent.wait_for(lambda: said(agent.updates(session_id)), what="the first token")
    exchange = endpoint.exchanges[-1]
    cancelled_at = time.monotonic()
    agent.cancel(session_id)
    assert pending.result() == {"stopReason": "cancelled"}
    answered = time.monotonic() - cancelled_at
    assert exchange.ended_event.wait(30), "the endpoint never saw the stream end"
    seen = time.monotonic() - cancelled_at
    assert exchange.ended == "disconnected"
    print(f"{prompt}: cancel -> cancelled answer {answered * 1000:.1f} ms; endpoint saw the disconnect after {seen * 1000:.1f} ms")
    # The session goes on: the cancelled turn left the user's words, not half a reply.
    assert agent.prompt(session_id, "next").result() == {"stopReason": "end_turn"}
    assert endpoint.exchanges[-1].body["messages"] == [{"role": "user", "content": prompt}, {"role": "user", "content": "next"}]


@pytest.mark.parametrize("honour_usage", [True, False], ids=["endpoint-reports-usage", "endpoint-ignores-include-usage"])
def test_usage_reaches_the_ledger_when_the_endpoint_reports_it(launch, tmp_path, honour_usage):
    """S16 with a model: the token counts the endpoint reports (summed over a turn's requests)
    are the ledger's; an endpoint that ignores include_usage leaves them unknown, not invented."""
    endpoint = FakeOpenAI(honour_usage=honour_usage)
    try:
        state = str(tmp_path / "state")
        agent = launch(command=[sys.executable, LLM_AGENT, "--base-url", endpoint.url, "--state-dir", state], env=ENV)
        agent.initialize()
        session_id = tool_session(agent, tmp_path)
        assert agent.prompt(session_id, '/tool llm__lookup {"key": "k"}').result() == {"stopReason": "end_turn"}
        assert agent.close() == 0
    finally:
        endpoint.stop()
    [record] = ledger(state)
    assert record["stopReason"] == "end_turn" and record["outputBytes"] == len("tool said: value of k")
    if honour_usage:
        sent = [e.usage for e in endpoint.exchanges]
        assert len(sent) == 2 and all(sent)
        assert record["inputTokens"] == sum(u["prompt_tokens"] for u in sent)
        assert record["outputTokens"] == sum(u["completion_tokens"] for u in sent)
    else:
        assert [e.usage for e in endpoint.exchanges] == [None, None]
        assert record["inputTokens"] is None and record["outputTokens"] is None


@pytest.mark.parametrize("prompt, words", [
    ("/fail", "HTTP 500: the model crashed"),
    ("/malformed", "not JSON in the event stream"),
])
def test_endpoint_failure_is_told_to_the_user_and_the_turn_answers(start, endpoint, prompt, words):
    """An endpoint that fails or sends garbage: the user reads why, the turn ends normally and
    the session takes the next prompt."""
    agent = start(endpoint.url)
    session_id = agent.new_session()
    assert agent.prompt(session_id, prompt).result() == {"stopReason": "end_turn"}
    assert f"[the model endpoint failed: {words}" in said(agent.updates(session_id))
    assert agent.prompt(session_id, "still there?").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).endswith("echo: still there?")


def test_endpoint_that_is_not_there_is_told_to_the_user(start):
    """Nothing listens at the base URL: the turn says so and ends."""
    with socket.socket() as probe:  # a port that was free a moment ago, and is closed now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = start(f"http://127.0.0.1:{port}/v1")
    session_id = agent.new_session()
    assert agent.prompt(session_id, "anyone?").result() == {"stopReason": "end_turn"}
    assert "[the model endpoint failed: " in said(agent.updates(session_id))


def test_the_probe_passes_every_check(endpoint):
    """`acp-green probe -- python examples/llm_agent.py --base-url <fake>` passes every check;
    the endpoint's long `/wait` response serves as the long prompt."""
    done = subprocess.run(
        [sys.executable, "-m", "acp_green", "probe", "--json", "--", sys.executable, LLM_AGENT, "--base-url", endpoint.url],
        capture_output=True, text=True, timeout=300, env={**os.environ, **ENV})
    report = json.loads(done.stdout)
    failed = [row for row in report["checks"] if row["verdict"] != "pass"]
    # The rows it gives nothing to check: it uses no tool, so it sends no file path, and it has no
    # config options. (The tool prompt is an advisory row, acp_green's own advice: not among these.)
    assert done.returncode == 0 and [row["check"] for row in failed] == [
        "file paths sent to the client are absolute", "only what the client advertised (boolean options)"], failed
    assert all(row["verdict"] == "skip" and row["evidence"].startswith("not exercised: ") for row in failed), failed
    print(f"probe: {len(report['checks'])} checks passed")


def test_served_by_acp_green_serve_with_the_environment_factory(launch, endpoint):
    """`acp-green serve --agent llm_agent:from_env`: the same agent, its endpoint from OPENAI_BASE_URL."""
    env = {**ENV, "OPENAI_BASE_URL": endpoint.url, "PYTHONPATH": os.path.dirname(LLM_AGENT)}
    agent = launch("--ephemeral", "--agent", "llm_agent:from_env", env=env)
    agent.initialize()
    session_id = agent.new_session()
    assert agent.prompt(session_id, "hi").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "echo: hi"


@functools.cache
def load_example() -> Any:
    """examples/llm_agent.py as a module (its dataclasses need it registered while it runs)."""
    spec = importlib.util.spec_from_file_location("llm_agent", LLM_AGENT)
    module = sys.modules["llm_agent"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sse(payloads: list[Any]) -> list[bytes]:
    return [b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads] + [b"data: [DONE]\n\n"]


TEXT_PIECES = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8)


@settings(deadline=None, max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=TEXT_PIECES, arguments=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
       cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4))
def test_stream_input_boundary_text_and_tool_arguments_are_reassembled(inprocess, pieces, arguments, cuts):
    """Endpoint input boundary: text split into any deltas (any Unicode) is said
    piece by piece and sent back whole; tool-call arguments cut anywhere are joined before they
    are parsed (here a call of an unknown function, which the model is told about by name)."""
    endpoint = FakeOpenAI()
    try:
        encoded = json.dumps(arguments)
        bounds = sorted({min(c, len(encoded)) for c in cuts} | {0, len(encoded)})
        fragments = [encoded[a:b] for a, b in zip(bounds, bounds[1:])] or [""]
        endpoint.raw_replies = [sse(
            [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
            + [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1" if i == 0 else None,
                "function": {"name": "ghost" if i == 0 else None, "arguments": f}}]}}]} for i, f in enumerate(fragments)]
        ), sse([{"choices": [{"index": 0, "delta": {"content": "ok"}}]}])]
        harness = inprocess(load_example().LlmAgent(endpoint.url))
        client = harness.client
        client.initialize()
        session_id = client.new_session()
        assert client.prompt(session_id, "go").result() == {"stopReason": "end_turn"}
        chunks = [u["content"]["text"] for u in client.updates(session_id) if u["sessionUpdate"] == "agent_message_chunk"]
        assert chunks == [*pieces, "ok"]
        assistant, told = endpoint.exchanges[1].body["messages"][-2:]
        assert assistant["content"] == "".join(pieces)
        assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == arguments
        assert told == {"role": "tool", "tool_call_id": "c1", "content": "error: there is no tool 'ghost'"}
        harness.finish()
    finally:
        endpoint.stop()


def test_cancel_while_permission_is_pending_ends_the_tool_call_failed(start, endpoint, tmp_path):
    """A cancel while the user has not answered the permission request: the tool never runs, its
    ACP tool call still gets a final status (failed) and the turn answers cancelled."""
    agent = start(endpoint.url, ClientPolicy(permission="hold"))
    session_id = tool_session(agent, tmp_path)
    pending = agent.prompt(session_id, '/tool llm__note {"text": "later"}')
    agent.wait_for(lambda: permission_requests(agent), what="the permission request")
    agent.cancel(session_id)
    assert pending.result() == {"stopReason": "cancelled"}
    final = tool_updates(agent, session_id)[-1]
    assert final["status"] == "failed"
    assert not (tmp_path / "notes").exists()
    assert len(endpoint.exchanges) == 1  # the model was not asked again
