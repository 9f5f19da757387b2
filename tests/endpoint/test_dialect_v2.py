"""ACP v2 (draft) as a dialect: the shapes of what we send (built once, in v2's shape), and the
endpoint's acknowledgement of a job at admission (its id free again, its slot still taken, its end reported)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_green.protocol import dialect_v2
from acp_green.protocol.dialect import V2
from acp_green.protocol.connection import negotiated
from acp_green.rpc import wire
from tests.helpers import wait_until


def line(update: dict[str, Any]) -> bytes | None:
    return V2.line("s", update)


def translated(update: dict[str, Any]) -> Any:
    data = line(update)
    stored = V2.stored(update["sessionUpdate"], wire.encode_json(update))  # a replay builds the same
    assert (data is None and stored is None) or json.loads(stored or b"") == json.loads(data or b"")["params"]["update"]
    return None if data is None else json.loads(data)["params"]["update"]


@pytest.mark.parametrize(("requested", "highest", "answer"), [(0, 2, 1), (1, 2, 1), (2, 2, 2), (9, 2, 2), (9, 1, 1), (2, 1, 1)])
def test_negotiation_answers_the_highest_version_at_or_below_the_request(requested: int, highest: int, answer: int) -> None:
    assert negotiated(requested, highest) == answer


def test_a_chunk_with_its_message_id_passes_byte_for_byte() -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}, "messageId": "t.1"}
    data = wire.encode_json(update)
    assert V2.encoded(update, data) is data and V2.stored("agent_message_chunk", data) is data


def test_a_stored_chunk_without_a_message_id_gets_one() -> None:
    assert translated({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "x"}})["messageId"] == "legacy"


def test_a_tool_call_is_a_tool_call_update_with_v2_locations() -> None:
    update = translated({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read", "status": "pending",
                         "locations": [{"path": "/a", "line": 0}, {"path": "/b", "line": 3}]})
    assert update == {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Read", "status": "pending",
                      "locations": [{"path": "/a"}, {"path": "/b", "line": 3}]}


def test_a_diff_is_structured_changes_and_a_git_patch() -> None:
    [item] = dialect_v2.tool_call({"toolCallId": "c", "content": [
        {"type": "diff", "path": "/f.txt", "oldText": "one\n", "newText": "one\ntwo"}]})["content"]
    assert item["changes"] == [{"operation": "modify", "path": "/f.txt", "fileType": "text"}]
    patch = item["patch"]["text"]
    assert patch.startswith("diff --git /f.txt /f.txt\n--- /f.txt\n+++ /f.txt\n")
    assert "+two\n\\ No newline at end of file\n" in patch and " one\n" in patch
    added = dialect_v2.tool_content({"type": "diff", "path": "/n", "oldText": None, "newText": "x\n"})
    assert added["changes"][0]["operation"] == "add"
    assert added["patch"]["text"] == "diff --git /n /n\nnew file mode 100644\n--- /dev/null\n+++ /n\n@@ -0,0 +1 @@\n+x\n"


def test_a_plan_is_a_plan_update_and_a_mode_change_is_dropped() -> None:
    entries = [{"content": "a", "priority": "high", "status": "pending"}]
    assert translated({"sessionUpdate": "plan", "entries": entries}) == {
        "sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "plan", "entries": entries}}
    assert line({"sessionUpdate": "current_mode_update", "currentModeId": "x"}) is None


def test_commands_and_config_options_take_v2_names() -> None:
    commands = translated({"sessionUpdate": "available_commands_update",
                           "availableCommands": [{"name": "go", "description": "d", "input": {"hint": "H"}}]})
    assert commands["availableCommands"] == [{"type": "command", "name": "go", "description": "d", "input": {"type": "text", "hint": "H"}}]
    options = translated({"sessionUpdate": "config_option_update", "configOptions": [{"id": "m", "name": "M", "type": "boolean",
                                                                                     "currentValue": True}]})
    assert options["configOptions"] == [{"configId": "m", "name": "M", "type": "boolean", "currentValue": True}]


def test_a_permission_request_names_a_title_and_its_subject() -> None:
    params = V2.request("session/request_permission", {"sessionId": "s", "options": [],
                                                        "toolCall": {"toolCallId": "c", "title": "Write /x"}})
    assert params == {"sessionId": "s", "options": [], "title": "Write /x",
                      "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "title": "Write /x"}}}


def test_a_shape_that_cannot_be_built_is_logged_and_never_sent_as_v1(caplog: pytest.LogCaptureFixture) -> None:
    """Not v1 to a v2 client: the update is dropped and the request refused, each logged at ERROR naming its kind."""
    from acp_green.errors import ClientError

    assert V2.update({"sessionUpdate": "tool_call", "toolCallId": "c", "content": Unreadable()}) is None
    assert line(Unreadable.fields(sessionUpdate="plan")) is None
    with pytest.raises(ClientError):
        V2.request("session/request_permission", Unreadable.fields())
    assert [(r.levelname, r.getMessage().split()[1]) for r in caplog.records] == [
        ("ERROR", "tool_call"), ("ERROR", "plan"), ("ERROR", "session/request_permission")]
    assert V2.request("elicitation/create", {"x": 1}) == {"x": 1}


class Unreadable(list[Any]):
    """A value the shape functions fail on (as agent code might hand them)."""

    def __iter__(self) -> Any:
        raise RuntimeError("unreadable")

    @staticmethod
    def fields(**known: Any) -> Any:
        class Fields(dict[str, Any]):
            def items(self) -> Any:
                raise RuntimeError("unreadable")

            def get(self, key: str, default: Any = None) -> Any:
                if key in ("sessionUpdate",):
                    return dict.get(self, key, default)
                raise RuntimeError("unreadable")

        return Fields(known)


def test_the_initialize_answer_has_info_and_capabilities() -> None:
    result = dialect_v2.initialize_result({
        "protocolVersion": 1, "agentInfo": {"name": "a", "version": "1"}, "authMethods": [{"id": "k", "name": "Key"}],
        "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True, "audio": False},
                              "mcpCapabilities": {"http": True, "sse": False}, "sessionCapabilities": {"delete": {}, "list": {}}}})
    assert result == {"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                      "authMethods": [{"type": "agent", "methodId": "k", "name": "Key"}],
                      "capabilities": {"session": {"prompt": {"image": {}}, "mcp": {"stdio": {}, "http": {}}, "delete": {}}}}


# -- the endpoint under v2, in process -------------------------------------------------------------
def v2(conn: Any) -> str:
    assert conn.call("initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}})["protocolVersion"] == 2
    return conn.call("session/new", {"cwd": "/tmp"})["sessionId"]


def idle(conn: Any, session_id: str) -> list[dict[str, Any]]:
    return [u for u in conn.sink.updates(session_id) if u.get("sessionUpdate") == "state_update" and u.get("state") == "idle"]


def test_an_acknowledged_prompt_frees_its_id_but_keeps_its_slot(unit: Any) -> None:
    """S4, S9 under v2: the acknowledged id is free again; the turn keeps its slot until idle."""
    conn = unit(max_background=1)
    session_id = v2(conn)
    other = conn.call("session/new", {"cwd": "/tmp"})["sessionId"]
    assert "messageId" in conn.result(conn.request("session/prompt", conn.prompt_params(session_id, "/wait"), 50))
    # The id is answered, so it may be used again at once (S4)...
    conn.request("session/list", {}, 50)
    answers = [m for m in conn.sink.responses() if m.get("id") == 50]
    assert len(answers) == 2 and "sessions" in answers[1]["result"], answers
    # ...and $/cancel_request for it names nothing in flight: the turn runs on.
    conn.notify("$/cancel_request", {"requestId": 50})
    # The turn still holds the connection's one slot (S9).
    assert conn.error(conn.request("session/prompt", conn.prompt_params(other, "hi")))["data"]["reason"] == "connection_busy"
    assert idle(conn, session_id) == []
    conn.notify("session/cancel", {"sessionId": session_id})
    wait_until(lambda: idle(conn, session_id), what="the idle state_update")
    assert idle(conn, session_id) == [{"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}]
    conn.result(conn.request("session/prompt", conn.prompt_params(other, "hi")))


def test_shutdown_reports_every_acknowledged_turn_idle(unit: Any) -> None:
    """S13 under v2: shutdown cancels an acknowledged turn, which still reports idle `cancelled`."""
    conn = unit()
    session_id = v2(conn)
    conn.result(conn.request("session/prompt", conn.prompt_params(session_id, "/wait")))
    conn.close()
    assert idle(conn, session_id) == [{"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}]


@pytest.mark.parametrize(("version", "batches"), [(1, False), (2, True)])
def test_negotiating_v2_switches_batches_on(unit: Any, version: int, batches: bool) -> None:
    """The batches' switch (the endpoint's `accept_batches`) follows the negotiated version."""
    conn = unit()
    conn.call("initialize", {"protocolVersion": version, "info": {"name": "t", "version": "0"}})
    assert getattr(conn.endpoint, "accept_batches") is batches


@pytest.mark.parametrize(("first", "then"), [(2, 1), (1, 2)])
def test_the_version_does_not_change_under_running_work_S3(unit: Any, first: int, then: int) -> None:
    """S3: a turn keeps the version it was admitted under. The translation is the connection's, so
    an initialize that would switch versions while a request runs is refused (-32602 protocolVersion),
    and the running turn still ends in its own version's shape; once nothing runs, the switch is made."""
    conn = unit()
    conn.call("initialize", {"protocolVersion": first, "info": {"name": "t", "version": "0"}, "clientCapabilities": {}})
    session_id = conn.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]
    prompt = conn.request("session/prompt", conn.prompt_params(session_id, "/wait"))
    refused = conn.error(conn.request("initialize", {"protocolVersion": then, "clientCapabilities": {}, "capabilities": {}}))
    assert refused["code"] == -32602 and refused["data"] == {"field": "protocolVersion"}, refused
    assert conn.call("initialize", {"protocolVersion": first, "clientCapabilities": {}, "capabilities": {}})["protocolVersion"] == first
    conn.notify("session/cancel", {"sessionId": session_id})
    if first == 2:
        wait_until(lambda: idle(conn, session_id), what="the idle state_update")
    else:
        assert conn.result(prompt) == {"stopReason": "cancelled"}
    wait_until(lambda: conn.endpoint.active == 0, what="the turn to end")
    assert conn.call("initialize", {"protocolVersion": then, "clientCapabilities": {}, "capabilities": {}})["protocolVersion"] == then


def test_a_v2_snapshot_shows_notices_unasked_and_never_has_client_files_or_terminals() -> None:
    """v2: notices need no client capability, and v1's `fs` and `terminal` named by a v2 client mean nothing."""
    from acp_green.context import ConnectionContext

    context = ConnectionContext()
    context.initialized(2, {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}, None)
    snapshot = context.snapshot
    assert snapshot.can_show_notices() and snapshot.accepts_update("notice")
    assert not (snapshot.can_read_files() or snapshot.can_write_files() or snapshot.has_terminal())
