"""An agent author's mistakes at a call site each raise one clear line there, naming the call, the
field and what it takes, and nothing reaches the wire: a chunk that is not text, a stop reason ACP
does not know, a location without its path, and any call that sends or asks after the turn was
answered (from a greenlet the turn left running), which must leave the session's next turn as it
would have been. Driven through the unit layer, where every line the agent writes is recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent
import pytest
from gevent.event import Event

import acp_green
from acp_green import Mode
from acp_green.agent import STOP_REASONS, Agent, ToolCallHandle, Turn
from tests.unit_harness import UnitConnection

CWD = "/work/project"
LOCATION_SHAPES = "a path string or a ToolCallLocation {'path': str, 'line': int} (content.location(path, line))"


# -- a chunk that is not text ------------------------------------------------------------------------

class Chunks(Agent):
    """Says what the test put in `chunks` (by prompt text), keeping what each call raised."""

    name = "chunks"

    def __init__(self) -> None:
        self.calls: dict[str, Callable[[Turn], Any]] = {}
        self.raised: dict[str, BaseException] = {}

    def prompt(self, turn: Turn) -> str:
        try:
            self.calls[turn.text](turn)
        except Exception as exc:  # what the author's code would see
            self.raised[turn.text] = exc
        turn.say("after")
        return "end_turn"


@pytest.mark.parametrize("name, call, message", [
    ("say int", lambda t: t.say(123), "Turn.say: text must be a string, got 'int'"),
    ("say none", lambda t: t.say(None), "Turn.say: text must be a string, got 'NoneType'"),
    ("say bytes", lambda t: t.say(b"hi"), "Turn.say: text must be a string, got 'bytes'"),
    ("think dict", lambda t: t.think({"text": "x"}), "Turn.think: text must be a string, got 'dict'"),
])
def test_a_chunk_that_is_not_text_raises_a_type_error_naming_the_call_and_sends_nothing(unit, name, call, message):
    agent = Chunks()
    agent.calls[name] = call
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session(cwd=CWD)
    assert conn.result(conn.prompt(session_id, name)) == {"stopReason": "end_turn"}
    raised = agent.raised[name]
    assert type(raised) is TypeError and str(raised) == message, repr(raised)
    chunks = [u for u in conn.sink.updates(session_id) if u["sessionUpdate"].endswith("_chunk")]
    assert [c["content"]["text"] for c in chunks] == ["after"]  # the turn went on; nothing of the refused call
    assert conn.sink.messages[-1]["result"] == {"stopReason": "end_turn"}


def test_the_usage_counts_no_refused_chunk(unit):
    """A refused chunk is not counted in the turn's output bytes (it was never sent)."""
    agent = Chunks()
    seen: list[int] = []
    agent.calls["count"] = lambda t: (t.say("abc"), _raises(lambda: t.say(12345)), seen.append(t.usage.output_bytes))
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session(cwd=CWD)
    conn.result(conn.prompt(session_id, "count"))
    assert seen == [3]


def _raises(call: Callable[[], Any]) -> None:
    with pytest.raises(TypeError):
        call()


# -- a stop reason ACP does not know -------------------------------------------------------------------

class Returns(Agent):
    """Returns the value the test put in `returns` (by prompt text)."""

    name = "returns"

    def __init__(self) -> None:
        self.returns: dict[str, Any] = {}

    def prompt(self, turn: Turn) -> Any:
        turn.say("said before")
        return self.returns[turn.text]


VALID = "'end_turn', 'max_tokens', 'max_turn_requests', 'refusal', 'cancelled'"


@pytest.mark.parametrize("returned, shown", [("done", "'done'"), ("END_TURN", "'END_TURN'"), (42, "a value of type 'int'"),
                                             ({"stopReason": "end_turn"}, "a value of type 'dict'")])
def test_an_unknown_stop_reason_answers_one_line_naming_every_valid_one(unit, caplog, returned, shown):
    agent = Returns()
    agent.returns["go"] = returned
    conn: UnitConnection = unit(agent)
    conn.initialize()
    session_id = conn.new_session(cwd=CWD)
    error = conn.error(conn.prompt(session_id, "go"))
    message = (f"Returns.prompt returned {shown}, which is not a stop reason: return one of {VALID} "
               "(or None, meaning 'end_turn')")
    assert error == {"code": -32603, "message": message}
    assert all(f"'{reason}'" in message for reason in STOP_REASONS)  # every one of acp_green.agent.STOP_REASONS
    assert message in caplog.text  # the author sees it in the agent's log too
    agent.returns["again"] = None  # the session goes on
    assert conn.result(conn.prompt(session_id, "again")) == {"stopReason": "end_turn"}


# -- a location without its path -----------------------------------------------------------------------

@pytest.mark.parametrize("name, call, message", [
    ("tool_call", lambda t: t.tool_call("t1", "Read", locations=[{"file": "a.txt"}]),
     f"tool_call: locations[0] has no 'path' (its keys: 'file'): it must be {LOCATION_SHAPES}"),
    ("tool_update", lambda t: t.tool_update("t1", locations=["a.txt", {"file": "b.txt", "line": 3}]),
     f"tool_update: locations[1] has no 'path' (its keys: 'file', 'line'): it must be {LOCATION_SHAPES}"),
    ("handle", lambda t: t.tool_call("t2", "Read").update(locations=[{}]),
     f"tool_update: locations[0] has no 'path' (it is empty): it must be {LOCATION_SHAPES}"),
    ("send", lambda t: t.send({"sessionUpdate": "tool_call", "toolCallId": "t3", "title": "R", "locations": [("a.txt", 3)]}),
     f"send: locations[0] must be {LOCATION_SHAPES}, got 'tuple'"),
    ("ask", lambda t: t.ask_permission("t1", title="Write", locations=[{"filename": "a.txt"}]),
     f"ask_permission: locations[0] has no 'path' (its keys: 'filename'): it must be {LOCATION_SHAPES}"),
])
def test_a_location_without_its_path_names_the_field_and_the_shapes_a_location_takes(unit, name, call, message):
    agent = Chunks()
    agent.calls[name] = call
    conn: UnitConnection = unit(agent)
    conn.initialize(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}})
    session_id = conn.new_session(cwd=CWD)
    conn.result(conn.prompt(session_id, name))
    raised = agent.raised[name]
    assert type(raised) is TypeError and str(raised) == message, repr(raised)
    assert "\n" not in message
    sent = [u for u in conn.sink.updates(session_id) if u.get("locations")]
    assert sent == [] and conn.sink.requests("session/request_permission") == []


# -- a call after the turn was answered -----------------------------------------------------------------

class LeavesWorkRunning(Agent):
    """Its prompt "first" leaves a greenlet running that makes the test's late call once told to
    (`go`), after the prompt's response; every other prompt announces the tool call "t1",
    completes it, and notes its mode and its session's mode."""

    name = "leaves-work-running"
    modes = (Mode("ask", "Ask"), Mode("code", "Code"))

    def __init__(self, late: Callable[[Turn, ToolCallHandle], Any]) -> None:
        self.late = late
        self.go = Event()
        self.done = Event()
        self.raised: list[BaseException] = []
        self.modes_seen: list[str | None] = []

    def prompt(self, turn: Turn) -> str:
        if turn.text == "first":
            handle = turn.tool_call("kept", "Kept for later", status="in_progress")
            handle.complete()
            gevent.spawn(self._late, turn, handle)
            return "end_turn"
        self.modes_seen.append(turn.session.mode_id)
        turn.tool_call("t1", "Next").complete()
        turn.say("next turn")
        return "end_turn"

    def _late(self, turn: Turn, handle: ToolCallHandle) -> None:
        self.go.wait()
        try:
            self.late(turn, handle)
        except BaseException as exc:  # ok: kept for the test to read
            self.raised.append(exc)
        finally:
            self.done.set()


LATE_CALLS: list[tuple[str, Callable[[Turn, ToolCallHandle], Any]]] = [
    ("say", lambda t, h: t.say("too late")),
    ("think", lambda t, h: t.think("too late")),
    ("tool_call", lambda t, h: t.tool_call("t1", "Late")),
    ("tool_update", lambda t, h: h.update(status="failed")),
    ("plan", lambda t, h: t.plan([{"content": "x", "priority": "low", "status": "pending"}])),
    ("send", lambda t, h: t.send({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "late"}})),
    ("notice", lambda t, h: t.notice("late")),
    ("compaction", lambda t, h: t.compaction()),
    ("set_mode", lambda t, h: t.set_mode("code")),
    ("read_text_file", lambda t, h: t.read_text_file("a.txt")),
    ("write_text_file", lambda t, h: t.write_text_file("a.txt", "late")),
    ("ask_permission", lambda t, h: t.ask_permission(h)),
    ("request", lambda t, h: t.request("_custom/thing", {})),
    ("elicit", lambda t, h: t.elicit("Name?", {"type": "object", "properties": {}})),
    ("terminal", lambda t, h: t.terminal("echo", ["late"])),
    ("set_config", lambda t, h: t.set_config("verbose", True)),
]


@pytest.mark.parametrize("call, late", LATE_CALLS, ids=[c[0] for c in LATE_CALLS])
def test_a_call_after_the_turn_ended_raises_turn_ended_there_sends_nothing_and_the_next_turn_is_unaffected(unit, call, late):
    agent = LeavesWorkRunning(late)
    conn: UnitConnection = unit(agent)
    conn.initialize(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}, "session": {"notices": {}}})
    session_id = conn.new_session(cwd=CWD)
    assert conn.result(conn.prompt(session_id, "first")) == {"stopReason": "end_turn"}
    answered = len(conn.sink.messages)
    agent.go.set()
    assert agent.done.wait(10)
    assert conn.sink.messages[answered:] == []  # nothing after the response (S5), not even a request
    # The next turn is what it would have been: its own "t1" is new to the session, the mode unchanged.
    assert conn.result(conn.prompt(session_id, "second")) == {"stopReason": "end_turn"}
    assert [u["sessionUpdate"] for u in conn.sink.updates(session_id)[-3:]] == ["tool_call", "tool_call_update", "agent_message_chunk"]
    assert agent.modes_seen == ["ask"]
    # And the late call itself was told, in one line naming it.
    [raised] = agent.raised
    assert type(raised) is acp_green.TurnEnded and isinstance(raised, RuntimeError), repr(raised)
    assert str(raised) == (f"Turn.{call}: this turn has ended (its prompt was answered); nothing more can be sent or asked "
                           "in it. Finish the work before Agent.prompt returns, or do it in a later turn")
