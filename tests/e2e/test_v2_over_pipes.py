"""ACP v2 (the draft) through the real CLI over real pipes: one agent serves v1 and v2.

Every message the agent writes is validated at teardown against the schema of the version the
connection negotiated (tests/helpers.stream_schema_problems; v2: acp_green/schema/v2/), and the
invariants read a v2 prompt's idle `state_update` where v1 answered the prompt.
"""

from __future__ import annotations

from typing import Any

from acp_green.tools.rig.client import AgentProcess, ClientPolicy

V2 = 2


def v2_session(agent: AgentProcess, **new: Any) -> str:
    assert agent.initialize(version=V2)["protocolVersion"] == V2
    return agent.call("session/new", {"cwd": "/tmp", **new})["sessionId"]


def kinds(agent: AgentProcess, session_id: str) -> list[str]:
    return [u["sessionUpdate"] for u in agent.updates(session_id)]


# -- 1. negotiation ------------------------------------------------------------------------------
def test_a_client_asking_for_2_gets_the_v2_initialize_result(launch):
    agent = launch("--ephemeral")
    result = agent.initialize(version=V2)
    assert result["protocolVersion"] == V2
    assert result["info"]["name"] and result["info"]["version"]
    session = result["capabilities"]["session"]
    assert session["mcp"] == {"stdio": {}, "http": {}} and "delete" in session and "auth" not in result["capabilities"]
    assert "agentCapabilities" not in result and "agentInfo" not in result
    assert result["authMethods"] == []


def test_a_client_asking_for_a_later_version_gets_2(launch):
    agent = launch("--ephemeral")
    assert agent.initialize(version=7)["protocolVersion"] == V2


def test_a_client_asking_for_1_gets_v1_as_before(launch):
    agent = launch("--ephemeral")
    result = agent.initialize()
    assert result["protocolVersion"] == 1 and "agentCapabilities" in result and "agentInfo" in result


def test_max_protocol_version_1_pins_v1_for_a_v2_client(launch):
    agent = launch("--ephemeral", "--max-protocol-version", "1")
    result = agent.call("initialize", agent.initialize_params(version=V2))
    assert result["protocolVersion"] == 1 and "agentCapabilities" in result
    session_id = agent.new_session()
    assert agent.prompt(session_id, "hello").result() == {"stopReason": "end_turn"}


# -- 2. session methods --------------------------------------------------------------------------
def test_session_methods_answer_in_v2_shapes(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)  # mcpServers may be left out under v2
    listed = agent.call("session/list", {})["sessions"]
    assert [s["sessionId"] for s in listed] == [session_id] and "archived" not in listed[0]
    assert agent.call("session/close", {"sessionId": session_id}) == {}
    assert agent.call("session/delete", {"sessionId": session_id}) == {}
    assert agent.call("session/list", {})["sessions"] == []


def test_config_options_carry_a_config_id_and_the_modes_are_one_of_them(launch):
    """v2 has no session modes: the demo's modes are its first config option, `mode`."""
    agent = launch("--ephemeral")
    assert agent.initialize(version=V2)["protocolVersion"] == V2
    new = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert "modes" not in new
    mode, model = new["configOptions"]
    assert mode["configId"] == "mode" and mode["category"] == "mode" and mode["currentValue"] == "ask"
    assert model["configId"] == "model" and "id" not in model
    answer = agent.call("session/set_config_option", {"sessionId": new["sessionId"], "configId": "model",
                                                      "type": "id", "value": "echo-careful"})
    assert {o["configId"]: o["currentValue"] for o in answer["configOptions"]} == {"mode": "ask", "model": "echo-careful"}
    answer = agent.call("session/set_config_option", {"sessionId": new["sessionId"], "configId": "mode", "value": "code"})
    assert {o["configId"]: o["currentValue"] for o in answer["configOptions"]} == {"mode": "code", "model": "echo-careful"}


def test_session_load_and_set_mode_are_unknown_under_v2(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    error = agent.request("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}).error()
    assert error["code"] == -32601, error
    assert agent.request("session/set_mode", {"sessionId": session_id, "modeId": "x"}).error()["code"] == -32601


# -- 3. the prompt lifecycle ---------------------------------------------------------------------
def test_a_prompt_is_acknowledged_and_ends_with_an_idle_state_update(launch):
    """S5, S16 under v2: running, the echo, the turn's updates and its usage, then idle, last."""
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    ack = agent.prompt(session_id, "hello").result()
    assert set(ack) == {"messageId"}
    idle = agent.wait_idle(session_id)
    assert idle == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    updates = agent.updates(session_id)
    running = updates.index({"sessionUpdate": "state_update", "state": "running"})
    [echo] = [u for u in updates if u["sessionUpdate"] == "user_message"]
    assert echo == {"sessionUpdate": "user_message", "messageId": ack["messageId"],
                    "content": [{"type": "text", "text": "hello"}]}
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert chunks and all(isinstance(c["messageId"], str) for c in chunks)
    assert running < updates.index(echo) < updates.index(chunks[0]) < updates.index(idle)
    assert "usage_update" in kinds(agent, session_id)[:updates.index(idle)]


def test_the_acknowledgement_comes_while_the_turn_runs_and_a_cancel_ends_it_cancelled(launch):
    """S8, S12 under v2: busy from the acknowledgement to the idle state_update; a cancel ends the
    turn `cancelled` and the next prompt runs."""
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    ack = agent.prompt(session_id, "/wait").result()
    assert "messageId" in ack and agent.idle_states(session_id) == []
    # Busy between the acknowledgement and the idle state_update: one prompt per session (S8).
    busy = agent.prompt(session_id, "busy?").error()
    assert busy["data"]["reason"] == "session_busy" and busy["message"].endswith("wait for its idle state_update"), busy
    agent.cancel(session_id)
    assert agent.wait_idle(session_id)["stopReason"] == "cancelled"
    agent.prompt(session_id, "/sleep 0.01").result()
    assert agent.wait_idle(session_id, 2)["stopReason"] == "end_turn"


def test_a_refused_prompt_is_an_error_response(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    assert agent.request("session/prompt", {"sessionId": session_id, "prompt": "x"}).error()["code"] == -32602
    assert agent.request("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}).error()["code"] == -32002
    assert agent.idle_states(session_id) == []


def test_a_failing_turn_is_acknowledged_then_idle_with_the_error(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    assert "messageId" in agent.prompt(session_id, "/fail").result()
    idle = agent.wait_idle(session_id)
    assert idle["stopReason"] == "error" and idle["error"]["code"] == -32603, idle


def test_every_admitted_turn_gets_its_idle_state_update_before_exit(launch):
    """S13, S14 under v2: EOF cancels the turn, which reports idle `cancelled` before the exit."""
    agent = launch("--ephemeral", "--shutdown-grace", "10")
    session_id = v2_session(agent)
    agent.prompt(session_id, "/wait").result()
    agent.close_input()
    assert agent.wait_exit() == 0
    assert agent.wait_idle(session_id)["stopReason"] == "cancelled"


# -- 4. updates ----------------------------------------------------------------------------------
def test_updates_are_translated_to_v2_kinds(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    agent.prompt(session_id, "/plan").result()
    agent.wait_idle(session_id)
    agent.prompt(session_id, "/diff /tmp/new.txt").result()
    agent.wait_idle(session_id, 2)
    seen = kinds(agent, session_id)
    assert "plan_update" in seen and "plan" not in seen and "tool_call" not in seen
    plan = [u for u in agent.updates(session_id) if u["sessionUpdate"] == "plan_update"][-1]
    assert plan["plan"]["type"] == "items" and plan["plan"]["entries"]
    diffs = [c for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"
             for c in u.get("content") or [] if c.get("type") == "diff"]
    assert diffs[0]["changes"] == [{"operation": "add", "path": "/tmp/new.txt", "fileType": "text"}]
    assert diffs[0]["patch"]["format"] == "git_patch" and "+++ /tmp/new.txt" in diffs[0]["patch"]["text"]


def test_available_commands_are_v2_commands(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    agent.wait_for(lambda: "available_commands_update" in kinds(agent, session_id))
    [update] = [u for u in agent.updates(session_id) if u["sessionUpdate"] == "available_commands_update"]
    assert all(c["type"] == "command" for c in update["availableCommands"])
    assert {"type": "text", "hint": "SECONDS"} in [c.get("input") for c in update["availableCommands"]]


def test_a_permission_request_has_a_title_and_its_tool_call_as_subject(launch):
    agent = launch("--ephemeral", "--agent", "tests.agents:AsksPermissionAgent", policy=ClientPolicy(permission="allow"))
    session_id = v2_session(agent)
    agent.prompt(session_id, "go").result()
    agent.wait_idle(session_id)
    [asked] = [m for m in agent.received() if m.get("method") == "session/request_permission"]
    assert asked["params"]["title"] == "Touch /tmp/x" and "toolCall" not in asked["params"]
    assert asked["params"]["subject"]["type"] == "tool_call"
    assert asked["params"]["subject"]["toolCall"]["toolCallId"]
    assert "allowed" in "".join(u["content"]["text"] for u in agent.updates(session_id) if u["sessionUpdate"] == "agent_message_chunk")
    # The turn waited on the user meanwhile: requires_action, then running again.
    states = [u["state"] for u in agent.updates(session_id) if u["sessionUpdate"] == "state_update"]
    assert states == ["running", "requires_action", "running", "idle"]


# -- 5. what v2 removed --------------------------------------------------------------------------
def test_client_files_and_terminals_are_missing_capabilities_under_v2(launch):
    policy = ClientPolicy(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True})
    agent = launch("--ephemeral", policy=policy)
    session_id = v2_session(agent)
    agent.prompt(session_id, "/read /etc/hostname").result()
    agent.wait_idle(session_id)
    agent.prompt(session_id, "/term true").result()
    agent.wait_idle(session_id, 2)
    methods = {m.get("method") for m in agent.received()}
    assert not {"fs/read_text_file", "terminal/create"} & methods
    failed = [c["content"]["text"] for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"
              and u.get("status") == "failed" for c in u.get("content") or []]
    assert any("did not advertise fs.readTextFile" in text for text in failed), failed


# -- 6. resume with replay -----------------------------------------------------------------------
def test_resume_replays_from_the_start_then_the_state_then_answers(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    session_id = v2_session(first)
    ack = first.prompt(session_id, "hello").result()
    first.wait_idle(session_id)
    first.close_input()
    assert first.wait_exit() == 0

    agent = launch("--state-dir", state)
    assert agent.initialize(version=V2)["protocolVersion"] == V2
    answer = agent.call("session/resume", {"sessionId": session_id, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    assert "modes" not in answer
    updates = agent.updates(session_id)
    replayed = [u for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert replayed and replayed[0]["messageId"] == ack["messageId"]
    assert updates[-1] == {"sessionUpdate": "state_update", "state": "idle"}
    # The response came after all of it.
    lines = [r.message for r in agent.records if r.direction == "in" and r.message is not None]
    answered = next(i for i, m in enumerate(lines) if m.get("result") is answer or m.get("result") == answer and "id" in m)
    assert all(m.get("method") != "session/update" for m in lines[answered + 1:])


def test_resume_without_replay_sends_only_the_state(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    session_id = v2_session(first)
    first.prompt(session_id, "hello").result()
    first.wait_idle(session_id)
    first.close_input()
    first.wait_exit()
    agent = launch("--state-dir", state)
    agent.initialize(version=V2)
    agent.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
    assert [u["sessionUpdate"] for u in agent.updates(session_id)] in (
        ["available_commands_update", "session_info_update", "state_update"],)
    assert agent.updates(session_id)[-1] == {"sessionUpdate": "state_update", "state": "idle"}


def test_resume_refuses_a_replay_cursor_it_does_not_support(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    error = agent.request("session/resume", {"sessionId": session_id, "cwd": "/tmp", "replayFrom": {"type": "_later"}}).error()
    assert error["code"] == -32602 and error["data"] == {"field": "replayFrom"}, error


def test_a_v1_session_resumes_under_v2_with_its_history(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    first.initialize()
    session_id = first.new_session()
    assert first.prompt(session_id, "/plan").result() == {"stopReason": "end_turn"}
    first.close_input()
    first.wait_exit()
    agent = launch("--state-dir", state)
    agent.initialize(version=V2)
    agent.call("session/resume", {"sessionId": session_id, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    seen = kinds(agent, session_id)
    assert "plan_update" in seen and "plan" not in seen and seen[-1] == "state_update"


def test_closing_a_running_session_reports_it_idle_before_the_close_answer(launch):
    """S2, S5 under v2: a close cancels the turn and answers after its idle state_update."""
    agent = launch("--ephemeral", "--agent", "tests.agents:SleepsAfterCancelAgent")
    session_id = v2_session(agent)
    agent.prompt(session_id, "wind down for 0.3").result()
    closed = agent.request("session/close", {"sessionId": session_id})
    assert closed.result() == {}
    lines = [r.message for r in agent.records if r.direction == "in" and r.message is not None]
    idle_at = next(i for i, m in enumerate(lines) if m.get("method") == "session/update"
                   and m["params"]["update"].get("state") == "idle")
    assert lines[idle_at]["params"]["update"]["stopReason"] == "cancelled"
    assert idle_at < next(i for i, m in enumerate(lines) if m.get("id") == closed.id and "result" in m)


def test_a_cancel_in_the_same_write_as_the_prompt_cancels_it(launch):
    """S11 under v2: a session/cancel read right after the prompt cancels that turn."""
    agent = launch("--ephemeral")
    session_id = v2_session(agent)
    prompt = agent.make_request("session/prompt", agent.prompt_params(session_id, "/wait"))
    agent.send(prompt, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    assert "messageId" in agent.pending_for(prompt).result()
    assert agent.wait_idle(session_id)["stopReason"] == "cancelled"


def test_a_form_is_asked_in_the_v2_shape(launch):
    policy = ClientPolicy(capabilities={"elicitation": {"form": {}}},
                          elicitations=[{"action": "accept", "content": {"answer": "blue"}}])
    agent = launch("--ephemeral", policy=policy)
    session_id = v2_session(agent)
    agent.prompt(session_id, "/ask Which colour?").result()
    agent.wait_idle(session_id)
    [asked] = [m for m in agent.received() if m.get("method") == "elicitation/create"]
    assert asked["params"]["mode"] == "form"
    said = "".join(u["content"]["text"] for u in agent.updates(session_id) if u["sessionUpdate"] == "agent_message_chunk")
    assert said == "you answered: blue"


def test_archiving_a_running_session_reports_it_idle_before_the_archive_answer(launch):
    """v2's archive closes the session as session/close does: the cancelled turn's idle
    state_update precedes the answer, and nothing of the session follows it."""
    agent = launch("--ephemeral", "--agent", "tests.agents:SleepsAfterCancelAgent")
    session_id = v2_session(agent)
    agent.prompt(session_id, "wind down for 0.3").result()
    archived = agent.request("session/archive", {"sessionId": session_id})
    assert archived.result() == {}
    agent.wait_idle(session_id)
    lines = [r.message for r in agent.records if r.direction == "in" and r.message is not None]
    answered_at = next(i for i, m in enumerate(lines) if m.get("id") == archived.id and "result" in m)
    idle_at = next(i for i, m in enumerate(lines) if m.get("method") == "session/update"
                   and m["params"]["update"].get("state") == "idle")
    assert idle_at < answered_at, "the idle state_update came after the archive's answer"
    assert lines[idle_at]["params"]["update"]["stopReason"] == "cancelled"


def test_the_unstable_session_methods_are_advertised_and_answer_in_v2_shapes(launch):
    agent = launch("--ephemeral")
    session = agent.initialize(version=V2)["capabilities"]["session"]
    assert {"fork", "archive", "status", "title"} <= set(session), session
    session_id = agent.call("session/new", {"cwd": "/tmp"})["sessionId"]
    fork = agent.call("session/fork", {"sessionId": session_id, "cwd": "/tmp"})
    assert "modes" not in fork and [o["configId"] for o in fork["configOptions"]] == ["mode", "model"]
    assert agent.call("session/set_title", {"sessionId": session_id, "title": "t"}) == {"title": "t"}
    assert agent.call("session/status", {"sessionId": session_id})["status"] == "open"
    assert agent.call("session/archive", {"sessionId": session_id}) == {}
    assert agent.call("session/unarchive", {"sessionId": session_id}) == {}


def test_stable_only_advertises_no_unstable_session_method_under_v2(launch):
    agent = launch("--ephemeral", "--stable-only")
    session = agent.initialize(version=V2)["capabilities"]["session"]
    assert not {"fork", "archive", "status", "title"} & set(session), session


def test_a_v2_client_claiming_v1_files_and_terminals_still_gets_capability_missing(launch):
    """v2 has no client files or terminals: capabilities a v2 client names anyway (v1's `fs` and
    `terminal`) are not read as v1's, so the turn's file read and terminal raise CapabilityMissing."""
    agent = launch("--ephemeral")
    claimed = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    assert agent.initialize(capabilities=claimed, version=V2)["protocolVersion"] == V2
    session_id = agent.call("session/new", {"cwd": "/tmp"})["sessionId"]
    for count, text in enumerate(["/read /etc/hostname", "/write /tmp/acp-green-v2-never.txt x", "/term true"], start=1):
        agent.prompt(session_id, text).result()
        agent.wait_idle(session_id, count)
    methods = {m.get("method") for m in agent.received()}
    assert not {"fs/read_text_file", "fs/write_text_file", "terminal/create"} & methods, methods
    failed = [c["content"]["text"] for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call_update"
              and u.get("status") == "failed" for c in u.get("content") or []]
    for capability in ("fs.readTextFile", "fs.writeTextFile", "terminals"):
        assert any(f"did not advertise {capability}" in text for text in failed), failed


def test_a_notice_needs_no_client_capability_under_v2(launch):
    agent = launch("--ephemeral")
    session_id = v2_session(agent)  # advertises nothing
    agent.prompt(session_id, "/notice warning Disk almost full").result()
    agent.wait_idle(session_id)
    [notice] = [u for u in agent.updates(session_id) if u["sessionUpdate"] == "notice"]
    assert notice["title"] == "Disk almost full" and notice["severity"] == "warning", notice


def test_every_demo_command_under_v2_sends_only_v2_shapes(launch, tmp_path):
    """Each of the demo's commands under v2, one turn each, with a client that answers forms and
    permissions: every message the agent writes passes the v2 schema (checked at teardown)."""
    policy = ClientPolicy(permission="allow", capabilities={"elicitation": {"form": {}}},
                          elicitations=[{"action": "accept", "content": {"answer": "blue"}}])
    agent = launch("--ephemeral", policy=policy)
    session_id = v2_session(agent)
    target = tmp_path / "file.txt"
    target.write_text("one\n")
    texts = ["/stream 3 16", "/sleep 0.01", "/read /etc/hostname", f"/write {target} two", "/mcp demo echo {\"text\": \"hi\"}",
             "/term true", f"/diff {target}", "/ask Colour?", "/fail", "/plan", "/think", "/image", "/notice error Broken",
             "/compact", "/longtool 0.01", "plain words"]
    for count, text in enumerate(texts, start=1):
        assert "messageId" in agent.prompt(session_id, text).result()
        assert agent.wait_idle(session_id, count)["stopReason"] in ("end_turn", "error"), text
    states = [u["state"] for u in agent.updates(session_id) if u["sessionUpdate"] == "state_update"]
    assert states.count("idle") == len(texts) and states[-1] == "idle"
