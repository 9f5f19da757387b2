"""JSON-RPC batches through the real agent: refused byte for byte on an ACP v1 connection; on an
ACP v2 connection answered as one array line once every request member is answered — a waiting
member included, which stdin closing answers in its array.

The v2 test over pipes negotiates v2 as a client does (initialize with protocolVersion 2), which
needs the v2 negotiation to set the endpoint's `accept_batches`; the in-process test sets the flag
by hand on a Server over os.pipe(), so the receive loop, the writer and the EOF shutdown are the
real ones whatever negotiates it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_green.demo import DemoAgent
from acp_green.tools.rig.client import AcpClient

SERVE = ("--ephemeral",)
V1_REFUSAL = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Batch requests are not supported"}}\n'


def _request(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _lines_after(client: AcpClient, since: int) -> list[bytes]:
    return [r.raw for r in client.records[since:] if r.direction == "in"]


def _arrays(client: AcpClient) -> list[list[dict[str, Any]]]:
    return [r.message for r in client.records if r.direction == "in" and isinstance(r.message, list)]


def _answers(array: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(id, error code or None) of each answer in an array, in its order."""
    return [(a["id"], a.get("error", {}).get("code")) for a in array]


def _exchange_a_batch_and_read_to_eof(client: AcpClient, finish: Any) -> None:
    """The batch the v2 tests send, what must answer it, then EOF with a batch still waiting."""
    client.send_batch(_request(1, "session/new", {"cwd": "/tmp", "mcpServers": []}),
                      {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such-session"}},
                      _request(2, "no/such/method"), 7, [],
                      _request(3, "_acp_green/sleep", {"seconds": 0.2}))
    client.wait_for(lambda: _arrays(client), 30, "the batch's answer")
    (array,) = _arrays(client)
    assert _answers(array) == [(1, None), (2, -32601), (None, -32600), (None, -32600), (3, None)]
    assert array[4]["result"] == {"slept": 0.2} and isinstance(array[0]["result"]["sessionId"], str)
    # A batch still waiting for a member when stdin closes: answered, once, in its array.
    client.send_batch(_request(4, "_acp_green/sleep", {"seconds": 60}), _request(5, "session/list", {}))
    exit_code = finish()
    assert exit_code == 0
    arrays = _arrays(client)
    assert len(arrays) == 2 and [a["id"] for a in arrays[1]] == [4, 5]
    assert "error" not in arrays[1][1]
    answered = [m.get("id") for m in client.received() if "method" not in m]
    assert answered.count(4) == 1 and answered.count(5) == 1


def test_v1_a_batch_is_refused_byte_for_byte_and_none_of_its_members_runs(launch):
    """ACP v1 requires the refusal: one -32600, id null, the same bytes as ever."""
    agent = launch(*SERVE)
    assert agent.initialize(version=1)["protocolVersion"] == 1
    for data in (json.dumps([_request("b1", "session/new", {"cwd": "/tmp", "mcpServers": []}), _request("b2", "session/list", {})]),
                 "[]", "[[]]"):
        since = len(agent.records)
        agent.send_raw(data.encode() + b"\n")
        agent.call("session/list", {})  # a marker: control requests are answered in receive order (S2)
        assert _lines_after(agent, since)[0] == V1_REFUSAL
    assert not [m for m in agent.received() if m.get("id") in ("b1", "b2")]


def test_v2_over_pipes_a_batch_is_answered_as_one_array_and_eof_answers_a_waiting_one(launch):
    """Through `acp-green serve`: initialize asks for protocolVersion 2, which switches batches on."""
    agent = launch(*SERVE)
    negotiated = agent.initialize(version=2)["protocolVersion"]
    assert negotiated == 2, "this connection did not negotiate ACP v2, which is what accepts batches"
    _exchange_a_batch_and_read_to_eof(agent, lambda: agent.close())


@pytest.mark.breaks_invariants("valid_json_rpc", reason="accept_batches set by hand on a connection that negotiated v1, "
                                                        "so the rig sees an array answer on a v1 connection")
def test_in_process_with_the_flag_set_a_batch_is_answered_as_one_array_and_eof_answers_a_waiting_one(inprocess):
    harness = inprocess(DemoAgent())
    assert harness.client.initialize(version=1)["protocolVersion"] == 1
    assert harness.server.protocol is not None
    harness.server.protocol.endpoint.accept_batches = True  # what negotiating ACP v2 sets
    _exchange_a_batch_and_read_to_eof(harness.client, harness.finish)
