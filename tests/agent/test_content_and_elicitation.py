"""Tool-call content helpers, `/diff` and form elicitation (`/ask`) end to end through
`acp-green serve`, every message of both sides checked against the schemas."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import content
from acp_green.agent import text_content
from acp_green.elicitation import form_params
from acp_green.tools.rig.client import ClientPolicy
from acp_green.tools.rig.schema import default_schema
from tests.helpers import said
from tests.agent.test_terminals import both_sides_valid, position, requests_of, response_to, start, tool_updates

CWD = "/tmp"


def valid_as(type_name: str, value: Any) -> list[str]:
    """Problems of `value` as the stable schema's `type_name`."""
    return [e.message for e in default_schema().validator("stable", type_name).iter_errors(value)]


# -- content helpers -------------------------------------------------------------------------------


@settings(deadline=None, max_examples=150)
@given(text=st.text(max_size=30), path=st.text(min_size=1, max_size=20), old=st.one_of(st.none(), st.text(max_size=20)),
       line=st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 32 - 1)))
def test_content_helpers_make_what_the_schema_calls_tool_call_content(text: str, path: str, old: str | None, line: int | None):
    """Tool-call content: text, diff (oldText null for a new file), terminal and
    location helpers give valid ToolCallContent / ToolCallLocation objects."""
    assert valid_as("ToolCallContent", content.text(text)) == []
    assert valid_as("ToolCallContent", content.diff("/" + path, text, old)) == []
    assert valid_as("ToolCallContent", content.terminal("term-" + path)) == []
    assert valid_as("ToolCallLocation", content.location("/" + path, line)) == []
    assert content.diff("/" + path, text, old) == {"type": "diff", "path": "/" + path, "oldText": old, "newText": text}


def test_one_text_helper_serves_the_turn_and_the_content_module():
    """Tool-call content: `agent.text_content` is `content.text`, not a second copy."""
    assert text_content is content.text


# -- /diff ----------------------------------------------------------------------------------------


def test_diff_proposes_a_change_with_old_and_new_text_at_an_absolute_path(launch):
    """Diffs: `/diff notes.txt` reads the file through the client and proposes a diff
    whose path is absolute against cwd, with oldText the file and newText one line longer."""
    policy = ClientPolicy.coding(files={f"{CWD}/notes.txt": "first\n"})
    agent = launch("--ephemeral", policy=policy)
    session_id = start(agent)
    assert agent.prompt(session_id, "/diff notes.txt").result() == {"stopReason": "end_turn"}
    first, final = tool_updates(agent, session_id)
    assert first["kind"] == "edit" and first["locations"] == [{"path": f"{CWD}/notes.txt"}]
    assert final["status"] == "completed"
    assert final["content"] == [{"type": "diff", "path": f"{CWD}/notes.txt", "oldText": "first\n",
                                 "newText": "first\nedited by the acp_green demo\n"}]
    assert policy.written == {}  # proposed only
    both_sides_valid(agent)


def test_diff_of_a_file_the_client_cannot_read_is_a_new_file(launch):
    """Diffs: without fs.readTextFile the diff's oldText is null (a new file)."""
    agent = launch("--ephemeral", policy=ClientPolicy(capabilities={}))
    session_id = start(agent)
    assert agent.prompt(session_id, "/diff /tmp/new.txt").result() == {"stopReason": "end_turn"}
    assert tool_updates(agent, session_id)[-1]["content"][0]["oldText"] is None
    assert agent.agent_requests == []
    assert said(agent.updates(session_id)) == "proposed a new file for /tmp/new.txt"


# -- /ask -----------------------------------------------------------------------------------------


def test_ask_sends_a_form_scoped_to_the_session_and_repeats_the_answer(launch):
    """Elicitation: `/ask` sends `elicitation/create` in form mode with the session,
    the question and a flat object schema; an accepted answer is repeated."""
    policy = ClientPolicy.coding(elicitations=[{"action": "accept", "content": {"answer": "blue"}}])
    agent = launch("--ephemeral", policy=policy)
    session_id = start(agent)
    assert agent.prompt(session_id, "/ask favourite colour?").result() == {"stopReason": "end_turn"}
    (asked,) = requests_of(agent, "elicitation/create")
    assert asked["params"]["mode"] == "form" and asked["params"]["sessionId"] == session_id
    assert asked["params"]["message"] == "favourite colour?"
    assert asked["params"]["requestedSchema"]["type"] == "object"
    assert "answer" in asked["params"]["requestedSchema"]["properties"]
    assert said(agent.updates(session_id)) == "you answered: blue"
    both_sides_valid(agent)


def test_ask_declined_says_so(launch):
    """Elicitation: a declined form is reported, the turn ends normally."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding(elicitations=[{"action": "decline"}]))
    session_id = start(agent)
    assert agent.prompt(session_id, "/ask why?").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)) == "no answer (decline)"
    both_sides_valid(agent)


def test_ask_without_form_elicitation_asks_nothing(launch):
    """Capability check: without `elicitation.form` no form is sent (ACP: MUST NOT
    request a mode the client did not advertise)."""
    agent = launch("--ephemeral", policy=ClientPolicy(capabilities={"elicitation": {"url": {}}}))
    session_id = start(agent)
    assert agent.prompt(session_id, "/ask why?").result() == {"stopReason": "end_turn"}
    assert agent.agent_requests == []
    assert said(agent.updates(session_id)) == "cannot ask: the client did not advertise form elicitation"


def test_cancelling_a_turn_sends_cancel_request_for_its_pending_form(launch):
    """Elicitation: `session/cancel` while a form is pending sends `$/cancel_request`
    for the form's id before the `cancelled` response; the client's late -32800 is absorbed."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding(elicitations=["hold"]))
    session_id = start(agent)
    prompt = agent.prompt(session_id, "/ask still there?")
    agent.wait_for(lambda: requests_of(agent, "elicitation/create"), what="the form")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    (asked,) = requests_of(agent, "elicitation/create")
    cancelled = position(agent, lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked["id"])
    assert cancelled < position(agent, response_to(prompt.id))
    agent.wait_for(lambda: not agent.held_elicitations, what="the rig to answer -32800")
    assert agent.prompt(session_id, "still fine").result() == {"stopReason": "end_turn"}
    both_sides_valid(agent)


@settings(deadline=None, max_examples=100)
@given(message=st.text(max_size=20), tool_call_id=st.one_of(st.none(), st.text(min_size=1, max_size=8)),
       names=st.lists(st.text(min_size=1, max_size=6), max_size=3))
def test_form_params_are_a_valid_form_elicitation(message: str, tool_call_id: str | None, names: list[str]):
    """Elicitation: `form_params` is a valid CreateElicitationRequest in form mode,
    scoped to the session and, when given, the tool call."""
    schema = {"properties": {n: {"type": "string"} for n in names}, "required": names[:1]}
    params = form_params("sess", message, schema, tool_call_id)
    assert default_schema().problems({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": params}) == []
    assert params.get("toolCallId") == tool_call_id and params["sessionId"] == "sess"
