"""An agent on the official `openai` Python client (sync, streaming; tests/blocking_agents.py),
served by the default `acp-green serve` against the fake endpoint (tests/fake_openai.py): its
blocking HTTP reads are patched to yield, so it streams while the connection stays live, and a
cancel closes its HTTP response at once."""

from __future__ import annotations

import pytest

from tests.fake_openai import FakeOpenAI
from tests.helpers import said

pytest.importorskip("openai")

AGENT = "tests.blocking_agents:OpenAIStreamingAgent"


@pytest.fixture
def endpoint():
    server = FakeOpenAI()
    yield server
    server.stop()


@pytest.fixture
def agent(launch, endpoint):
    started = launch("--ephemeral", "--agent", AGENT, env={"OPENAI_BASE_URL": endpoint.url})
    started.initialize()
    return started


def test_the_sdk_streams_the_reply(agent, endpoint):
    sid = agent.new_session()
    assert agent.prompt(sid, "hello streaming world").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)) == "echo: hello streaming world"
    assert endpoint.exchanges[0].ended == "done"


def test_a_cancel_closes_the_sdks_http_response_and_other_sessions_stay_live(agent, endpoint):
    """While the SDK reads a long stream: session/new is answered, and a cancel ends the turn
    `cancelled` and the endpoint sees the client close the connection (its stream went on for
    up to 60 s), before the turn would have ended by itself."""
    sid = agent.new_session()
    turn = agent.prompt(sid, "/slow")
    agent.wait_for(lambda: said(agent.updates(sid)).count("tick") >= 3, what="the stream to flow")
    assert agent.new_session()  # answered while the SDK is inside its blocking read
    agent.cancel(sid)
    assert turn.result(timeout=10) == {"stopReason": "cancelled"}
    exchange = endpoint.exchanges[0]
    assert exchange.ended_event.wait(timeout=10)
    assert exchange.ended == "disconnected"


def test_a_cancel_closes_a_stream_that_sends_nothing_while_other_sessions_stay_live(agent, endpoint):
    """`/think`: after one chunk the endpoint sends only keep-alive comments, so the SDK sits in
    its socket read with no chunk to hand back. session/new is still answered, and the cancel
    closes the response under the read: the endpoint sees the client go away."""
    sid = agent.new_session()
    turn = agent.prompt(sid, "/think")
    agent.wait_for(lambda: said(agent.updates(sid)) == "thinking", what="the first chunk")
    assert agent.new_session()
    agent.cancel(sid)
    assert turn.result(timeout=10) == {"stopReason": "cancelled"}
    exchange = endpoint.exchanges[0]
    assert exchange.ended_event.wait(timeout=10)
    assert exchange.ended == "disconnected"
