"""Terminals end to end through `acp-green serve`: `/term` in a client terminal, the capability
check, kill on cancel and release before the prompt's response whatever ends the turn (S5).

The rig client really runs each command (rig/terminals.py). Besides the teardown checks of the
agent's messages, each test checks the rig's own answers against the schemas (`both_sides_valid`).
"""

from __future__ import annotations

from typing import Any

import gevent
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig.client import AcpClient, ClientPolicy
from acp_green.tools.rig.invariants import InvariantChecker
from acp_green.tools.rig.schema import StreamChecker
from acp_green.tools.rig.terminals import tail_at_char_boundary
from acp_green.terminals import create_params
from tests.helpers import said

CWD = "/tmp"


def both_sides_valid(agent: AcpClient) -> None:
    """Every message of both sides passes the ACP schemas (the rig's answers to terminal/* too)."""
    checkers = {"in": StreamChecker("agent"), "out": StreamChecker("client")}
    problems = []
    for record in agent.records:
        if record.message is None:
            continue
        for direction, checker in checkers.items():
            problems += checker.observe(record.message, from_sender=record.direction == direction)
    assert problems == []


def position(agent: AcpClient, predicate) -> int:
    """Where among the agent's messages the first one `predicate` accepts arrived."""
    for index, message in enumerate(agent.received()):
        if predicate(message):
            return index
    raise AssertionError("no such message")


def requests_of(agent: AcpClient, method: str) -> list[dict[str, Any]]:
    return [r for r in agent.agent_requests if r["method"] == method]


def response_to(request_id: Any):
    return lambda m: "method" not in m and m.get("id") == request_id


def is_request(method: str):
    return lambda m: m.get("method") == method and "id" in m


def tool_updates(agent: AcpClient, session_id: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(session_id) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def start(agent: AcpClient) -> str:
    agent.initialize()
    return agent.new_session(cwd=CWD)


# -- /term ----------------------------------------------------------------------------------------


def test_term_runs_in_a_client_terminal_embedded_in_its_tool_call_and_reports_the_exit_code(launch):
    """Terminals: `/term sh -c "echo hi; exit 3"` creates a terminal (command, args,
    session, outputByteLimit), embeds it in an `execute` tool call, waits for the exit, reports
    exit code 3 with the tool call failed, and releases the terminal before the response (S5)."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding())
    session_id = start(agent)
    prompt = agent.prompt(session_id, '/term sh -c "echo hi; exit 3"')
    assert prompt.result() == {"stopReason": "end_turn"}
    (create,) = requests_of(agent, "terminal/create")
    assert create["params"]["command"] == "sh" and create["params"]["args"] == ["-c", "echo hi; exit 3"]
    assert create["params"]["sessionId"] == session_id and create["params"]["outputByteLimit"] == 64 << 10
    (hosted,) = agent.terminal_host.terminals.values()
    assert hosted.released and bytes(hosted.output) == b"hi\n"
    updates = tool_updates(agent, session_id)
    assert updates[0]["kind"] == "execute"
    embedded = {"type": "terminal", "terminalId": hosted.terminal_id}
    assert updates[1]["content"] == [embedded] and updates[1]["status"] == "in_progress"
    assert updates[-1]["status"] == "failed" and updates[-1]["content"][0] == embedded
    assert updates[-1]["rawOutput"] == {"exitCode": 3, "signal": None}
    assert said(agent.updates(session_id)) == "sh: exit code 3"
    (release,) = requests_of(agent, "terminal/release")
    assert release["params"] == {"sessionId": session_id, "terminalId": hosted.terminal_id}
    assert position(agent, lambda m: m.get("id") == release["id"] and "method" in m) < position(agent, response_to(prompt.id))
    both_sides_valid(agent)


def test_term_success_completes_the_tool_call(launch):
    """Terminals: a command that exits 0 completes its tool call; the terminal is
    embedded before it is released (ACP: "added before calling terminal/release")."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding())
    session_id = start(agent)
    assert agent.prompt(session_id, "/term true").result() == {"stopReason": "end_turn"}
    assert tool_updates(agent, session_id)[-1]["status"] == "completed"
    assert said(agent.updates(session_id)) == "true: exit code 0"
    embedded = position(agent, lambda m: m.get("method") == "session/update" and "content" in m["params"]["update"])
    assert embedded < position(agent, is_request("terminal/release"))
    both_sides_valid(agent)


def test_term_without_the_terminal_capability_fails_its_tool_call_and_sends_no_terminal_request(launch):
    """Capability check: a client that did not advertise `terminal` gets no
    terminal/* request (ACP: MUST NOT); the tool call fails saying why; the turn ends normally."""
    agent = launch("--ephemeral")  # the rig's default capabilities: fs only
    session_id = start(agent)
    assert agent.prompt(session_id, "/term true").result() == {"stopReason": "end_turn"}
    assert [r for r in agent.agent_requests if r["method"].startswith("terminal/")] == []
    final = tool_updates(agent, session_id)[-1]
    assert final["status"] == "failed"
    assert "did not advertise terminals" in final["content"][0]["content"]["text"]
    both_sides_valid(agent)


def test_turn_terminal_and_elicit_raise_capability_missing_when_not_advertised(launch):
    """Capability check: `turn.terminal` and `turn.elicit` raise CapabilityMissing
    naming the missing capability, and nothing is sent to the client."""
    agent = launch("--ephemeral", "--agent", "tests.coding_agents:TerminalCapabilityAgent")
    session_id = start(agent)
    assert agent.prompt(session_id, "go").result() == {"stopReason": "end_turn"}
    text = said(agent.updates(session_id))
    assert "CapabilityMissing: the client did not advertise the terminal capability (clientCapabilities.terminal);" in text
    assert "CapabilityMissing: the client did not advertise form elicitation (clientCapabilities.elicitation.form);" in text
    assert agent.agent_requests == []


def test_elicitation_needs_the_form_mode_not_just_an_elicitation_object(launch):
    """Capability check: `elicitation: {}` advertises no mode (ACP), so no form is
    asked; `terminal: "yes"` is not `true`."""
    policy = ClientPolicy(capabilities={"terminal": "yes", "elicitation": {}})
    agent = launch("--ephemeral", "--agent", "tests.coding_agents:TerminalCapabilityAgent", policy=policy)
    session_id = start(agent)
    assert agent.prompt(session_id, "go").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(session_id)).count("CapabilityMissing") == 2
    assert agent.agent_requests == []


# -- cancellation ---------------------------------------------------------------------------------


def test_cancel_during_term_kills_and_releases_the_terminal_before_the_cancelled_response(launch):
    """Terminals, S5: `session/cancel` while `/term sleep 30` waits sends
    `terminal/kill` and `terminal/release` for it, and `$/cancel_request` for the pending
    wait_for_exit, all before the prompt's `cancelled` response; the command is dead."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding())
    session_id = start(agent)
    prompt = agent.prompt(session_id, "/term sleep 30")
    agent.wait_for(lambda: requests_of(agent, "terminal/wait_for_exit"), what="the wait for the command")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    (hosted,) = agent.terminal_host.terminals.values()
    answered = position(agent, response_to(prompt.id))
    (wait,) = requests_of(agent, "terminal/wait_for_exit")
    cancel_wait = position(agent, lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == wait["id"])
    assert position(agent, is_request("terminal/kill")) < answered
    assert position(agent, is_request("terminal/release")) < answered
    assert cancel_wait < answered
    assert hosted.killed and hosted.released
    hosted.proc.wait(timeout=30)
    assert hosted.exit_status == {"exitCode": None, "signal": "SIGKILL"}
    assert tool_updates(agent, session_id)[-1]["status"] == "failed"
    both_sides_valid(agent)


def late_creating_client() -> ClientPolicy:
    """A client that answers `terminal/create` only 200 ms after the agent's `$/cancel_request`
    for it, and then really creates the terminal (an editor slow to open one)."""
    held: dict[Any, dict[str, Any]] = {}

    def hold_create(client: AcpClient, request: dict[str, Any]) -> None:
        held[request["id"]] = request

    def answer_late(client: AcpClient, notification: dict[str, Any]) -> None:
        request = held.pop(notification["params"]["requestId"], None)
        if request is not None:
            gevent.spawn_later(0.2, client.terminal_host.handle, request, client.respond, client.respond_error)

    return ClientPolicy.coding(handlers={"terminal/create": hold_create},
                               notification_handlers={"$/cancel_request": answer_late})


def test_a_terminal_created_after_its_turn_was_cancelled_is_killed_and_released(launch):
    """Terminals, no leak: a `terminal/create` the client answers 200 ms after the agent's
    `$/cancel_request` for it (the turn was cancelled meanwhile and answered `cancelled`) made
    a terminal nobody will use; the agent kills and releases it at once, so its command does not
    run on in the editor. The only requests allowed after the prompt's response (S5 in the rig)."""
    agent = launch("--ephemeral", policy=late_creating_client())
    session_id = start(agent)
    prompt = agent.prompt(session_id, "/term sleep 30")
    agent.wait_for(lambda: requests_of(agent, "terminal/create"), what="the terminal/create")
    agent.cancel(session_id)
    assert prompt.result() == {"stopReason": "cancelled"}
    (create,) = requests_of(agent, "terminal/create")
    assert position(agent, lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == create["id"]) \
        < position(agent, response_to(prompt.id))
    agent.wait_for(lambda: agent.terminal_host.terminals, what="the late terminal")
    (hosted,) = agent.terminal_host.terminals.values()
    agent.wait_for(lambda: hosted.released, what="the late terminal's release")
    for method in ("terminal/kill", "terminal/release"):
        (cleanup,) = requests_of(agent, method)
        assert cleanup["params"] == {"sessionId": session_id, "terminalId": hosted.terminal_id}, cleanup
    hosted.proc.wait(timeout=30)
    assert hosted.killed and hosted.exit_status == {"exitCode": None, "signal": "SIGKILL"}
    assert agent.prompt(session_id, "still here").result() == {"stopReason": "end_turn"}
    assert agent.close() == 0
    assert "ignoring a response" not in agent.stderr_text()
    both_sides_valid(agent)


def test_a_terminal_left_open_is_released_before_the_response_whatever_ends_the_turn(launch):
    """Terminals, S5: an agent that never releases its terminal (no `with`) gets it
    released by the runtime before the response, whether the turn returns, raises or is cancelled."""
    agent = launch("--ephemeral", "--agent", "tests.coding_agents:LeavesTerminalOpenAgent", policy=ClientPolicy.coding())
    session_id = start(agent)
    outcomes = {}
    for how in ("return", "raise", "wait"):
        prompt = agent.prompt(session_id, how)
        if how == "wait":
            agent.wait_for(lambda: len(agent.terminal_host.terminals) == 3, what="the third terminal")
            agent.wait_for(lambda: "created term-3" in said(agent.updates(session_id)), what="its id said")
            agent.cancel(session_id)
        outcomes[how] = prompt.response()
        released = {r["params"]["terminalId"]: i for i, r in enumerate(agent.received()) if r.get("method") == "terminal/release"}
        newest = f"term-{len(agent.terminal_host.terminals)}"
        assert newest in released, f"{how}: the terminal was not released"
        assert released[newest] < position(agent, response_to(prompt.id)), f"{how}: released after the response"
    assert outcomes["return"]["result"] == {"stopReason": "end_turn"}
    assert outcomes["raise"]["error"]["code"] == -32603
    assert outcomes["wait"]["result"] == {"stopReason": "cancelled"}
    assert all(t.released for t in agent.terminal_host.terminals.values())
    kills = [r["params"]["terminalId"] for r in requests_of(agent, "terminal/kill")]
    assert kills == ["term-3"]  # only the cancelled turn's command is killed; release ends the others
    both_sides_valid(agent)


def test_sigterm_during_a_terminal_releases_it_before_the_cancelled_response(launch):
    """S13 with S5: shutting down cancels the running turn; its terminal is killed and released
    before the prompt's `cancelled` response, though the client can no longer answer."""
    agent = launch("--ephemeral", policy=ClientPolicy.coding())
    session_id = start(agent)
    prompt = agent.prompt(session_id, "/term sleep 30")
    agent.wait_for(lambda: requests_of(agent, "terminal/wait_for_exit"), what="the wait for the command")
    agent.signal()
    assert prompt.result() == {"stopReason": "cancelled"}
    answered = position(agent, response_to(prompt.id))
    assert position(agent, is_request("terminal/kill")) < answered
    assert position(agent, is_request("terminal/release")) < answered
    assert agent.wait_exit() == 0


# -- the rig and the invariant ---------------------------------------------------------------------


def test_the_rig_flags_a_request_for_a_session_after_its_prompts_response():
    """S5 in the rig: a terminal/release for a session after its prompt's response is
    `no_update_after_response` (so every test's teardown checks it)."""
    from acp_green.tools.rig.client import Record

    def rec(direction: str, message: dict[str, Any]) -> Record:
        return Record(0.0, direction, b"", message)

    records = [
        rec("out", {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}),
        rec("in", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
        rec("in", {"jsonrpc": "2.0", "id": 0, "method": "terminal/release", "params": {"sessionId": "s", "terminalId": "t"}}),
    ]
    checker = InvariantChecker()
    violations = checker.finish(records, complete=False)
    assert [v.invariant for v in violations] == ["no_update_after_response"]
    assert InvariantChecker().finish(records[:2], complete=False) == []


@settings(deadline=None, max_examples=200)
@given(text=st.text(max_size=40), limit=st.integers(min_value=0, max_value=120))
def test_rig_terminal_output_is_cut_from_the_beginning_at_a_character_boundary(text: str, limit: int):
    """Terminals (rig): the kept output is a suffix of the whole, at most `limit`
    bytes, starts on a character boundary, and says whether anything was cut."""
    data = text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace").encode("utf-8")
    kept, cut = tail_at_char_boundary(data, limit)
    encoded = kept.encode("utf-8")
    assert data.endswith(encoded)
    assert len(encoded) <= max(limit, 0) or not cut
    assert cut == (len(data) > limit)
    if cut:
        assert len(encoded) > limit - 4  # never more than one character short


@settings(deadline=None, max_examples=200)
@given(args=st.one_of(st.text(max_size=5), st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3)),
       limit=st.one_of(st.none(), st.booleans(), st.integers(min_value=-5, max_value=1 << 70)))
def test_terminal_create_params_refuse_what_the_schema_refuses(args: Any, limit: Any):
    """Terminals: what `create_params` accepts is a valid CreateTerminalRequest;
    one string as args, non-string args, a negative, boolean or too large limit is refused."""
    from acp_green.tools.rig.schema import default_schema

    try:
        params = create_params("s", "cmd", args, output_byte_limit=limit, env={"A": "1"}, cwd="/tmp")
    except (TypeError, ValueError):
        assert (isinstance(args, str) or not all(isinstance(a, str) for a in args)
                or isinstance(limit, bool) or (isinstance(limit, int) and not 0 <= limit < 1 << 64))
        return
    problems = default_schema().problems({"jsonrpc": "2.0", "id": 0, "method": "terminal/create", "params": params})
    assert problems == []
    assert params.get("args", []) == list(args)


def test_rig_host_reaps_its_commands_at_close():
    """The rig's terminals never outlive it: `close` kills a command still running."""
    from acp_green.tools.rig.terminals import TerminalHost

    answers: list[Any] = []
    host = TerminalHost()
    host.handle({"id": 1, "method": "terminal/create", "params": {"sessionId": "s", "command": "sleep", "args": ["30"]}},
                lambda i, r: answers.append(r), lambda i, e: answers.append(e))
    (terminal,) = host.terminals.values()
    host.close()
    assert terminal.killed and terminal.proc.poll() == -9
