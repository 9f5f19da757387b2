"""The rig client's table of requests awaiting an answer: an answer resolves only the request
whose id it carries, as JSON-RPC compares ids (1 is not 1.0, true or "1"), and only once."""

from __future__ import annotations

from acp_green.tools.rig.client_wire import PendingRequests


def test_the_first_answer_resolves_a_request_and_a_second_does_not_replace_it():
    table = PendingRequests()
    table.sent({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}, at=1.0)
    table.answered({"jsonrpc": "2.0", "id": 1, "result": {"first": True}}, at=2.0)
    table.answered({"jsonrpc": "2.0", "id": 1, "result": {"second": True}}, at=3.0)
    pending = table.pending[next(iter(table.pending))]
    assert pending.response(timeout=1) == {"jsonrpc": "2.0", "id": 1, "result": {"first": True}}
    assert pending.answered_at == 2.0


def test_an_answer_with_an_id_that_only_looks_equal_resolves_nothing():
    table = PendingRequests()
    table.sent({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}, at=1.0)
    for lookalike in (1.0, True, "1"):
        table.answered({"jsonrpc": "2.0", "id": lookalike, "result": {}}, at=2.0)
    assert not any(p.done for p in table.pending.values())
    table.answered({"jsonrpc": "2.0", "id": 1, "result": {}}, at=3.0)
    assert all(p.done for p in table.pending.values())
