"""Rules proved on the unit layer: the endpoint, the ACP protocol and the session registry driven
directly (tests/unit_harness.py), with no transport, so each message is handled exactly when the
test hands it over. Each test names the rule it proves and goes red under a one-line break of it.
"""

from __future__ import annotations

from typing import Any

import gevent
import pytest

from acp_green import sessions as sessions_module
from acp_green.demo import DemoAgent
from acp_green.sessions import SessionRegistry
from acp_green.store import MemoryStore
from tests.agents import RaisesAfterCancelAgent, SnapshotReporterAgent
from tests.helpers import FakeClock, wait_until
from tests.unit_harness import UnitConnection, same_id, unit  # noqa: F401 - `unit` is a fixture


# -- S3 ---------------------------------------------------------------------------------------
def test_S3_snapshot_is_taken_at_admission_not_when_the_greenlet_first_runs(unit):
    """S3: a prompt and an extension request admitted before a re-initialize, and first run after
    it, still see the context as it was at their admission."""
    agent = SnapshotReporterAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize({"name": "first", "version": "1"})
    session_id = conn.new_session()
    # Back to back, as the receive loop handles one buffered write: neither greenlet has run yet.
    prompt = conn.prompt(session_id, "x")
    extension = conn.request("_test/snapshot", {})
    conn.initialize({"name": "second", "version": "2"})
    assert conn.result(prompt) == {"stopReason": "end_turn"}
    assert conn.result(extension) == {"name": "first"}
    assert agent.prompt_saw == ["first"]
    assert conn.context.snapshot.client_info["name"] == "second"


# -- S5 ---------------------------------------------------------------------------------------
def test_S5_available_commands_update_follows_the_session_new_response(unit):
    """S5: nothing is sent for a session before its session/new response; the demo's
    available_commands_update comes right after it."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    request_id = conn.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id = conn.result(request_id)["sessionId"]
    sink = conn.sink
    about_session = [i for i, m in enumerate(sink.messages)
                     if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id]
    assert about_session, "the demo advertises its commands"
    assert min(about_session) > sink.index_of_response(request_id)
    assert [u["sessionUpdate"] for u in sink.updates(session_id)] == ["available_commands_update"]


# -- S14 --------------------------------------------------------------------------------------
def test_S14_exception_after_cancel_answers_cancelled_not_internal_error(unit):
    """S14 outcome precedence: once the token is set the prompt answers `cancelled`, whatever
    happened after (here: an exception); its usage record says cancelled, and the session goes on."""
    agent = RaisesAfterCancelAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session()
    request_id = conn.prompt(session_id, "go")
    assert agent.started.wait(10)
    conn.notify("session/cancel", {"sessionId": session_id})
    assert conn.result(request_id) == {"stopReason": "cancelled"}
    assert [r.stop_reason for r in conn.store.usage(session_id)] == ["cancelled"]
    assert not conn.sessions.get(session_id).busy


def test_S14_reservation_and_slot_are_released_before_the_response_is_queued(unit):
    """S14: a prompt written the instant the previous prompt's response is queued (a client that
    reads and answers with zero delay) is admitted: neither the session reservation (S8) nor the
    single background slot (S9) may still be held when the response goes out."""
    conn: UnitConnection = unit(DemoAgent(), max_background=1)
    conn.initialize()
    session_id = conn.new_session()
    first = conn.prompt(session_id, "first")
    follow_ups: list[Any] = []

    def on_line(message: dict[str, Any]) -> None:
        if "method" not in message and same_id(message.get("id"), first) and not follow_ups:
            follow_ups.append(conn.prompt(session_id, "second", request_id="second"))

    conn.sink.listeners.append(on_line)
    assert conn.result(first) == {"stopReason": "end_turn"}
    assert follow_ups == ["second"]
    assert conn.result("second") == {"stopReason": "end_turn"}


# -- S15 --------------------------------------------------------------------------------------
def test_S15_releasing_a_session_refreshes_its_last_active_time(monkeypatch):
    """S15: idle time counts from the end of the last prompt, not from its start: a session whose
    long prompt just finished is not evicted at once."""
    clock = FakeClock()
    monkeypatch.setattr(sessions_module, "time", clock)
    registry = SessionRegistry(MemoryStore(), idle_timeout=60)
    session = registry.create("/tmp", [], [])
    owner = object()
    session.reserve(owner)
    clock.now += 100  # a 100 s prompt
    assert registry.evict_idle() == []  # busy: never evicted
    session.release(owner)
    clock.now += 30
    assert registry.evict_idle() == [], "evicted 30 s after its prompt ended (timeout 60 s)"
    clock.now += 31
    assert registry.evict_idle() == [session.session_id]


# -- S4 / errors: -32600 ----------------------------------------------------------------------
@pytest.mark.parametrize("request_id", [7, "seven", 0, -3])
def test_invalid_request_echoes_a_readable_id_S4(unit, request_id):
    """Errors, S4: an invalid request whose id was readable is answered -32600 with that id,
    exactly (type kept); only an unreadable id is answered with id null."""
    import json

    conn: UnitConnection = unit(DemoAgent())
    line = json.dumps({"jsonrpc": "1.0", "id": request_id, "method": "session/new", "params": {}}).encode()
    conn.endpoint.handle_line(line)
    [reply] = conn.sink.messages
    assert reply["error"]["code"] == -32600
    assert same_id(reply["id"], request_id), reply
    conn.sink.messages.clear()
    conn.records.clear()  # the checker would take the "1.0" line for no request at all


@pytest.mark.breaks_invariants("no_update_after_response",
                                reason="the test itself sends a client request naming a session whose prompt was answered")
def test_request_ids_1_and_string_1_are_different_requests_S4(unit):
    """S4: ids 41 and "41" in flight at once are two requests (not a duplicate), each answered with
    its own id; a client answer with id "0" does not resolve the agent's own request 0."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    first, second = conn.new_session(), conn.new_session()
    conn.prompt(first, "/wait", request_id=41)
    conn.prompt(second, "/wait", request_id="41")
    assert not [m for m in conn.sink.responses() if m.get("id") in (41, "41")], "refused as a duplicate id"
    conn.notify("session/cancel", {"sessionId": first})
    conn.notify("session/cancel", {"sessionId": second})
    assert conn.result(41) == {"stopReason": "cancelled"}
    assert conn.result("41") == {"stopReason": "cancelled"}
    # The agent's own request ids are another space, with the same rule.
    waiter = gevent.spawn(conn.endpoint.client.call, "fs/read_text_file", {"sessionId": first, "path": "/x"}, timeout=10)
    [asked] = wait_until(lambda: conn.sink.requests("fs/read_text_file"), what="the agent's request", changed=conn.sink.changed)
    assert asked["id"] == 0
    conn.respond("0", {"content": "wrong"})
    gevent.sleep(0)
    assert not waiter.ready(), "an answer to id \"0\" resolved the request with id 0"
    conn.respond(0, {"content": "right"})
    assert waiter.get(timeout=10) == {"content": "right"}
