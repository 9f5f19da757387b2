"""ACP v2's new client requests at the unit layer (protocol/v2_methods.py, tool_call_tokens.py):
`auth/login` and `auth/logout` as v1's authenticate and logout; `tool_call/cancel` setting one
tool call's token while its turn goes on; `terminal/cancel` routed to `Agent.cancel_terminal`.
Under a connection that negotiated version 1 each one is -32601, like any unknown method.

`as_v2` negotiates version 2 through `initialize`; a v2 prompt is acknowledged at once and its
turn ends with an idle `state_update` (`ended`). Messages are schema-checked at teardown against
the v2 draft, the version the connection negotiated."""

from __future__ import annotations

from typing import Any

import gevent
import pytest
from gevent.event import Event
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.agent import Agent, SessionView, Turn
from acp_green.context import ConnectionSnapshot
from acp_green.demo import DEMO_TOOLS
from acp_green.errors import NotCancellable, TurnCancelled
from acp_green.mcp.tools import ToolServer
from acp_green.rpc.cancel import CancelToken
from acp_green.tool_call_tokens import ToolCallTokens
from acp_green.tools.rig.schema_v2 import v2_schema
from tests.agents import NeedsAuthAgent
from tests.helpers import said, wait_until
from tests.surface_agents import LogsOutAgent
from tests.unit_harness import UnitConnection

V2_METHODS = ("auth/login", "auth/logout", "tool_call/cancel", "terminal/cancel")


def as_v2(conn: UnitConnection, capabilities: dict[str, Any] | None = None) -> None:
    """Initialize, negotiating version 2."""
    answer = conn.call("initialize", {"protocolVersion": 2, "info": {"name": "unit", "version": "0"},
                                      "capabilities": capabilities or {}})
    assert answer["protocolVersion"] == 2


def ended(conn: UnitConnection, prompt_id: Any, timeout: float = 10.0) -> dict[str, Any]:
    """A v2 prompt's turn, ended: its acknowledgement, then the session's next idle `state_update`,
    given as v1's answer would have been (`{"stopReason": ...}`)."""
    assert "messageId" in conn.result(prompt_id, timeout)
    at = conn.sink.index_of_response(prompt_id)
    session_id = next(r.message["params"]["sessionId"] for r in conn.records
                      if r.direction == "out" and r.message.get("id") == prompt_id)

    def idle() -> dict[str, Any] | None:
        return next((m["params"]["update"] for m in conn.sink.messages[at:] if m.get("method") == "session/update"
                     and m["params"]["sessionId"] == session_id and m["params"]["update"].get("state") == "idle"), None)

    return {"stopReason": wait_until(idle, timeout, "the idle state_update", conn.sink.changed).get("stopReason")}


def tool_updates(conn: UnitConnection, session_id: str) -> list[dict[str, Any]]:
    return [u for u in conn.sink.updates(session_id) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def announced_tool(conn: UnitConnection, session_id: str) -> dict[str, Any]:
    """The first tool call the running turn announced (waited for)."""
    return wait_until(lambda: next(iter(tool_updates(conn, session_id)), None), 10, "a tool call", conn.sink.changed)


def cancel_tool(conn: UnitConnection, session_id: str, tool_call_id: Any) -> Any:
    return conn.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": tool_call_id})


# -- version 1: not there ------------------------------------------------------------------------

@pytest.mark.parametrize("method", V2_METHODS)
def test_under_version_1_each_method_is_method_not_found_like_any_unknown_one(unit, method):
    conn: UnitConnection = unit()
    conn.initialize()
    session_id = conn.new_session()
    params = {"sessionId": session_id, "methodId": "x", "toolCallId": "t", "terminalId": "t"}
    error = conn.error(conn.request(method, params))
    unknown = conn.error(conn.request("no/such_method", params))
    assert error == {**unknown, "message": unknown["message"].replace("no/such_method", method)}
    assert error["code"] == -32601


def test_a_v1_tool_call_never_advertises_a_cancel(unit):
    """`cancellable` is sent as `capabilities.cancel` only to a v2 client: v1 has no tool_call/cancel."""
    conn: UnitConnection = unit()
    conn.initialize()
    session_id = conn.new_session()
    assert conn.result(conn.prompt(session_id, "/longtool 0")) == {"stopReason": "end_turn"}
    assert [u for u in tool_updates(conn, session_id) if "capabilities" in u] == []


# -- auth/login and auth/logout --------------------------------------------------------------------

class RefusingAuthAgent(NeedsAuthAgent):
    def authenticate(self, method_id: str, snapshot: ConnectionSnapshot) -> None:
        raise PermissionError("wrong token")


def test_login_authenticates_as_authenticate_does(unit):
    conn: UnitConnection = unit(NeedsAuthAgent())
    as_v2(conn)
    refused = conn.error(conn.request("session/new", {"cwd": "/tmp", "mcpServers": []}))
    assert (refused["code"], refused["data"]["reason"]) == (-32000, "auth_required")
    unknown = conn.error(conn.request("auth/login", {"methodId": "password"}))
    assert unknown["code"] == -32602 and "password" in unknown["message"]
    assert conn.call("auth/login", {"methodId": "token"}) == {}
    assert conn.context.snapshot.auth_method == "token"
    assert conn.new_session().startswith("sess_")


def test_a_login_the_agent_refuses_leaves_the_connection_unauthenticated(unit):
    conn: UnitConnection = unit(RefusingAuthAgent())
    as_v2(conn)
    assert conn.error(conn.request("auth/login", {"methodId": "token"}))["code"] == -32603
    assert not conn.context.snapshot.authenticated


def test_logout_runs_the_agent_hook_and_requires_a_new_login(unit):
    agent = LogsOutAgent()
    conn: UnitConnection = unit(agent)
    as_v2(conn)
    conn.call("auth/login", {"methodId": "token"})
    session_id = conn.new_session()
    assert conn.call("auth/logout", {}) == {}
    assert agent.logouts == 1
    refused = conn.error(conn.prompt(session_id, "hi"))
    assert refused["data"]["reason"] == "auth_required"
    conn.call("auth/login", {"methodId": "token"})
    assert ended(conn, conn.prompt(session_id, "hi")) == {"stopReason": "end_turn"}


def test_logout_of_an_agent_with_auth_methods_but_no_hook_still_logs_out(unit):
    """v2: advertising auth methods means supporting auth/logout; the runtime forgets the login."""
    conn: UnitConnection = unit(NeedsAuthAgent())
    as_v2(conn)
    conn.call("auth/login", {"methodId": "token"})
    assert conn.call("auth/logout") == {}
    assert not conn.context.snapshot.authenticated
    assert conn.error(conn.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["data"]["reason"] == "auth_required"


def test_logout_of_an_agent_with_neither_auth_methods_nor_hook_is_method_not_found(unit):
    conn: UnitConnection = unit()  # the demo
    as_v2(conn)
    assert conn.error(conn.request("auth/logout", {}))["code"] == -32601


# -- tool_call/cancel --------------------------------------------------------------------------

def test_cancelling_a_cancellable_tool_call_ends_it_and_the_turn_goes_on(unit):
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "/longtool 30")
    tool = announced_tool(conn, session_id)
    assert tool["capabilities"] == {"cancel": {}}
    assert conn.result(cancel_tool(conn, session_id, tool["toolCallId"])) == {}
    assert ended(conn, prompt) == {"stopReason": "end_turn"}
    final = tool_updates(conn, session_id)[-1]
    assert (final["status"], final["capabilities"]) == ("failed", None)
    assert final["content"][0]["content"]["text"] == "Cancelled"
    assert said(conn.sink.updates(session_id)) == "the tool call was cancelled; the turn goes on"


def test_the_answer_comes_before_the_agent_reacts(unit):
    """The response means "accepted": it is queued before the agent's confirming update."""
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "/longtool 30")
    tool = announced_tool(conn, session_id)
    request = cancel_tool(conn, session_id, tool["toolCallId"])
    answered = conn.sink.index_of_response(request)  # already there: no yield since the request
    ended(conn, prompt)
    confirm = next(i for i, m in enumerate(conn.sink.messages)
                   if m.get("method") == "session/update" and m["params"]["update"].get("status") == "failed")
    assert answered < confirm


class IgnoresTokenAgent(Agent):
    """Announces a cancellable tool call, then waits on `release` only (never on its token)."""

    name = "ignores-token"

    def __init__(self) -> None:
        self.release = Event()
        self.saw_cancelled: bool | None = None

    def prompt(self, turn: Turn) -> str:
        tool = turn.tool_call(title="stubborn", status="in_progress", cancellable=True)
        self.release.wait(30)
        self.saw_cancelled = tool.cancelled
        tool.complete()
        return "end_turn"


def test_an_agent_that_ignores_the_token_keeps_running_and_the_answer_still_comes_at_once(unit):
    agent = IgnoresTokenAgent()
    conn: UnitConnection = unit(agent)
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "go")
    tool = announced_tool(conn, session_id)
    assert conn.result(cancel_tool(conn, session_id, tool["toolCallId"]), timeout=1) == {}
    gevent.sleep(0.05)
    assert len(tool_updates(conn, session_id)) == 1  # still running, nothing sent since its announcement
    agent.release.set()
    assert ended(conn, prompt) == {"stopReason": "end_turn"}
    assert agent.saw_cancelled is True
    final = tool_updates(conn, session_id)[-1]
    assert (final["status"], final["capabilities"]) == ("completed", None)


def test_cancelling_the_turn_sets_the_tool_calls_token_and_the_runtime_closes_it(unit):
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "/longtool 30")
    announced_tool(conn, session_id)
    conn.notify("session/cancel", {"sessionId": session_id})
    assert ended(conn, prompt) == {"stopReason": "cancelled"}
    final = tool_updates(conn, session_id)[-1]
    assert (final["status"], final["capabilities"]) == ("failed", None)


class TwoToolsAgent(Agent):
    """One tool call finished at once, one not cancellable, one cancellable; waits until cancelled."""

    name = "two-tools"

    def prompt(self, turn: Turn) -> str:
        turn.tool_call("done", "Done", cancellable=True).complete()
        turn.tool_call("born-final", "Born final", status="completed", cancellable=True)
        turn.tool_call("plain", "Plain", status="in_progress")
        turn.tool_call("long", "Long", status="in_progress", cancellable=True).wait_cancelled()
        turn.wait_cancelled()
        return "cancelled"


@pytest.mark.parametrize("tool_call_id, why", [
    ("nope", "unknown"), ("done", "already final"), ("born-final", "announced final"), ("plain", "not announced cancellable"),
])
def test_a_tool_call_that_cannot_be_cancelled_is_refused_invalid_params(unit, tool_call_id, why):
    conn: UnitConnection = unit(TwoToolsAgent())
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "go")
    wait_until(lambda: any(u.get("toolCallId") == "long" for u in tool_updates(conn, session_id)), 10, "the long tool call",
               conn.sink.changed)
    assert [u["toolCallId"] for u in tool_updates(conn, session_id) if u.get("capabilities")] == ["done", "long"]
    error = conn.error(cancel_tool(conn, session_id, tool_call_id))
    assert (error["code"], error["data"]) == (-32602, {"reason": "not_cancellable", "toolCallId": tool_call_id}), why
    assert conn.result(cancel_tool(conn, session_id, "long")) == {}
    assert conn.result(cancel_tool(conn, session_id, "long")) == {}  # accepted again until it is final
    conn.notify("session/cancel", {"sessionId": session_id})
    assert ended(conn, prompt) == {"stopReason": "cancelled"}


def test_no_running_turn_is_invalid_params_and_an_unknown_session_resource_not_found(unit):
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    assert ended(conn, conn.prompt(session_id, "/longtool 0")) == {"stopReason": "end_turn"}
    finished = tool_updates(conn, session_id)[0]["toolCallId"]
    idle = conn.error(cancel_tool(conn, session_id, finished))
    assert (idle["code"], idle["data"]["reason"]) == (-32602, "not_cancellable")
    unknown = conn.error(cancel_tool(conn, "sess_nope", "t"))
    assert (unknown["code"], unknown["data"]) == (-32002, {"reason": "unknown_session", "sessionId": "sess_nope"})


def test_cancel_requires_the_login_of_an_agent_with_auth_methods(unit):
    conn: UnitConnection = unit(NeedsAuthAgent())
    as_v2(conn)
    error = conn.error(cancel_tool(conn, "sess_x", "t"))
    assert (error["code"], error["data"]["reason"]) == (-32000, "auth_required")


class PermissionAgent(Agent):
    """Asks permission for a cancellable tool call and says what it got."""

    name = "permission"

    def prompt(self, turn: Turn) -> str:
        tool = turn.tool_call(title="Risky", status="pending", cancellable=True)
        permission = turn.ask_permission(tool)
        turn.say(f"granted={permission.granted} reason={permission.reason}")
        return "end_turn"


def test_cancelling_a_tool_call_cancels_its_permission_request_and_the_turn_goes_on(unit):
    conn: UnitConnection = unit(PermissionAgent())
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "go")
    asked = wait_until(lambda: conn.sink.requests("session/request_permission"), 10, "the permission request", conn.sink.changed)[0]
    tool_call_id = asked["params"]["subject"]["toolCall"]["toolCallId"]
    assert conn.result(cancel_tool(conn, session_id, tool_call_id)) == {}
    assert ended(conn, prompt) == {"stopReason": "end_turn"}
    assert [m["params"] for m in conn.sink.messages if m.get("method") == "$/cancel_request"] == [{"requestId": asked["id"]}]
    assert said(conn.sink.updates(session_id)) == "granted=False reason=Cancelled"
    final = tool_updates(conn, session_id)[-1]
    assert (final["status"], final["capabilities"]) == ("failed", None)
    conn.respond(asked["id"], {"outcome": {"outcome": "cancelled"}})  # the client's late answer is dropped


class McpToolAgent(Agent):
    """A cancellable tool call whose work is a slow MCP call bound to the tool call's token."""

    name = "mcp-tool"

    def provided_mcp_servers(self) -> list[ToolServer]:
        return [DEMO_TOOLS]

    def prompt(self, turn: Turn) -> str:
        tool = turn.tool_call(title="Slow MCP call", status="in_progress", cancellable=True)
        try:
            turn.mcp("demo", token=tool.token).call_tool("sleep", {"seconds": 30})
        except TurnCancelled:
            turn.check_cancelled()  # the turn's own cancel ends the turn
            tool.fail("Cancelled")
            turn.say("the MCP call was cancelled")
            return "end_turn"
        tool.complete()
        return "end_turn"


def test_an_mcp_call_bound_to_a_tool_calls_token_stops_when_that_tool_call_is_cancelled(unit):
    conn: UnitConnection = unit(McpToolAgent())
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "go")
    tool = announced_tool(conn, session_id)
    gevent.sleep(0.05)  # the MCP call is under way
    assert conn.result(cancel_tool(conn, session_id, tool["toolCallId"])) == {}
    assert ended(conn, prompt, timeout=5) == {"stopReason": "end_turn"}
    assert said(conn.sink.updates(session_id)) == "the MCP call was cancelled"


# -- the tokens themselves -------------------------------------------------------------------------

def test_a_tool_calls_token_is_set_alone_or_with_the_turns():
    turn_token = CancelToken()
    tokens = ToolCallTokens(turn_token)
    tokens.announced("a", True)
    tokens.announced("b", False)
    tokens.announced("done", True)
    a, b, done = tokens.token("a"), tokens.token("b"), tokens.token("done")
    assert tokens.token("a") is a
    tokens.finished("done")
    for refused in ("b", "done", "never"):
        with pytest.raises(NotCancellable):
            tokens.cancel(refused)
    tokens.cancel("a")
    assert (a.is_set(), b.is_set(), done.is_set()) == (True, False, False)
    turn_token.set()
    assert b.is_set() and done.is_set()  # every wait of a cancelled turn is released, a finished tool call's too
    assert tokens.token("late").is_set()
    assert len(turn_token._callbacks) == 0


def test_a_wait_on_a_finished_tool_calls_token_is_released_by_the_turns_cancel(unit):
    """A permission asked for a tool call already completed still ends with the turn's cancel."""
    conn: UnitConnection = unit(AsksAfterFinishingAgent())
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "go")
    wait_until(lambda: conn.sink.requests("session/request_permission"), 10, "the permission request", conn.sink.changed)
    conn.notify("session/cancel", {"sessionId": session_id})
    assert ended(conn, prompt, timeout=5) == {"stopReason": "cancelled"}


class AsksAfterFinishingAgent(Agent):
    name = "asks-after-finishing"

    def prompt(self, turn: Turn) -> str:
        tool = turn.tool_call(title="Done", status="in_progress", cancellable=True)
        tool.sleep(0)
        tool.complete()
        turn.ask_permission(tool)
        return "end_turn"


class LeavesOpenAgent(Agent):
    """Uses the token of one tool call it finishes and of one it leaves open (the runtime closes it)."""

    name = "leaves-open"

    def prompt(self, turn: Turn) -> str:
        finished = turn.tool_call(title="finished", status="in_progress", cancellable=True)
        finished.sleep(0)
        finished.complete()
        turn.tool_call(title="left open", status="in_progress", cancellable=True).sleep(0)
        return "end_turn"


def test_no_callback_stays_on_the_session_token_after_a_turn(unit):
    """A session's token outlives its turns: each tool call's link to it is removed, whether the
    tool call ended in the turn or the turn ended first."""
    conn: UnitConnection = unit(LeavesOpenAgent())
    as_v2(conn)
    session_id = conn.new_session()
    for _ in range(3):
        assert ended(conn, conn.prompt(session_id, "go")) == {"stopReason": "end_turn"}
    assert conn.sessions.live(session_id).token._callbacks == []
    assert [u["status"] for u in tool_updates(conn, session_id) if u.get("capabilities", "") is None] == ["completed", "failed"] * 3


# -- terminal/cancel ---------------------------------------------------------------------------------

class OwnTerminalAgent(Agent):
    """Runs terminals of its own (pretend): `cancel_terminal` accepts "t-1" and refuses the rest."""

    name = "own-terminal"

    def __init__(self) -> None:
        self.cancelled: list[tuple[str, str]] = []

    def cancel_terminal(self, session: SessionView, terminal_id: str, snapshot: ConnectionSnapshot) -> None:
        if terminal_id != "t-1":
            raise NotCancellable("terminalId", terminal_id, "it has exited")
        self.cancelled.append((session.session_id, terminal_id))

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


def test_every_terminal_is_unknown_to_an_agent_without_terminals_of_its_own(unit):
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    error = conn.error(conn.request("terminal/cancel", {"sessionId": session_id, "terminalId": "term-1"}))
    assert (error["code"], error["data"]) == (-32602, {"reason": "not_cancellable", "terminalId": "term-1"})
    assert "runs no terminal of its own" in error["message"]
    unknown = conn.error(conn.request("terminal/cancel", {"sessionId": "sess_nope", "terminalId": "term-1"}))
    assert unknown["code"] == -32002


def test_terminal_cancel_goes_to_the_agents_hook(unit):
    agent = OwnTerminalAgent()
    conn: UnitConnection = unit(agent)
    as_v2(conn)
    session_id = conn.new_session()
    assert conn.call("terminal/cancel", {"sessionId": session_id, "terminalId": "t-1"}) == {}
    assert agent.cancelled == [(session_id, "t-1")]
    assert conn.error(conn.request("terminal/cancel", {"sessionId": session_id, "terminalId": "t-2"}))["code"] == -32602


# -- the params boundary ---------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=8)
_params = st.one_of(
    _json,
    st.fixed_dictionaries({}, optional={"sessionId": _json, "toolCallId": _json, "terminalId": _json, "methodId": _json,
                                        "_meta": _json}),
)


@settings(deadline=None, max_examples=200)
@given(st.sampled_from(V2_METHODS), _params)
def test_any_params_get_a_client_error_or_success_never_an_internal_error(method, params):
    """Whatever the params, each method answers a client error (or {}), and the connection goes on."""
    conn = UnitConnection(LogsOutAgent())
    try:
        as_v2(conn)
        conn.call("auth/login", {"methodId": "token"})
        response = conn.sink.response(conn.request(method, params))
        if "error" in response:
            assert response["error"]["code"] in (-32602, -32002, -32601), response
        else:
            assert response["result"] == {}
        assert conn.call("auth/login", {"methodId": "token"}) == {}
    finally:
        conn.close()


def test_what_these_methods_answer_and_advertise_is_valid_under_the_v2_schema(unit):
    """The answers (results and errors) against the vendored v2 draft, and each `capabilities`
    value the tool calls carried against its ToolCallCapabilities (or null)."""
    schema = v2_schema()
    agent = LogsOutAgent()
    conn: UnitConnection = unit(agent)
    as_v2(conn)
    asked = [conn.request("auth/login", {"methodId": "token"}), conn.request("auth/login", {"methodId": "nope"})]
    session_id = conn.new_session()
    asked += [conn.request("terminal/cancel", {"sessionId": session_id, "terminalId": "t"}),
              cancel_tool(conn, "sess_nope", "t"), cancel_tool(conn, session_id, "t")]
    asked.append(conn.request("auth/logout", {}))
    problems = [p for request_id in asked
                for p in schema.problems(conn.sink.response(request_id), request_method=_method_of(conn, request_id))]
    assert problems == []


def test_the_capabilities_a_tool_call_carries_are_v2_tool_call_capabilities(unit):
    conn: UnitConnection = unit()
    as_v2(conn)
    session_id = conn.new_session()
    prompt = conn.prompt(session_id, "/longtool 30")
    tool = announced_tool(conn, session_id)
    conn.result(cancel_tool(conn, session_id, tool["toolCallId"]))
    ended(conn, prompt)
    carried = [u["capabilities"] for u in tool_updates(conn, session_id) if "capabilities" in u]
    assert carried == [{"cancel": {}}, None]
    validator = v2_schema().validator("stable", "ToolCallCapabilities")
    assert validator.is_valid(carried[0])


def _method_of(conn: UnitConnection, request_id: Any) -> str:
    return next(r.message["method"] for r in conn.records if r.direction == "out" and r.message.get("id") == request_id)
