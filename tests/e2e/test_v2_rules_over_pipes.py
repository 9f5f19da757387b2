"""The concurrency rules under ACP v2 through the real CLI over real pipes (docs/RULES.md, v2 section).

A v2 prompt is answered at admission with `{messageId}`; its end is the session's idle
`state_update`. Every message the agent writes is checked against the v2 schema at teardown.
"""

from __future__ import annotations

import signal
from typing import Any

from acp_green.tools.rig.client import AgentProcess
from tests.store.test_e2e import serve_args, usage_json

V2 = 2


def v2_sessions(agent: AgentProcess, count: int = 1) -> list[str]:
    assert agent.initialize(version=V2)["protocolVersion"] == V2
    return [agent.call("session/new", {"cwd": "/tmp"})["sessionId"] for _ in range(count)]


def turn_lines(agent: AgentProcess, session_id: str) -> list[dict[str, Any]]:
    """The session's updates, in the order the agent wrote them."""
    return agent.updates(session_id)


def test_control_requests_answer_in_receive_order_while_prompts_run_S1_S2(launch):
    """S1, S2 under v2: behind running turns, control requests written in one go are answered in order."""
    agent = launch("--ephemeral")
    a, b = v2_sessions(agent, 2)
    agent.prompt(a, "/wait").result()
    agent.prompt(b, "/wait").result()
    sent = [agent.make_request("session/set_config_option", {"sessionId": a, "configId": "model", "type": "id", "value": "echo-careful"}),
            agent.make_request("session/new", {"cwd": "/tmp"}),
            agent.make_request("session/list", {}),
            agent.make_request("session/set_config_option", {"sessionId": a, "configId": "model", "type": "id", "value": "echo-fast"})]
    agent.send(*sent)
    answers = [agent.pending_for(m).result() for m in sent]
    assert answers[0]["configOptions"][-1]["currentValue"] == "echo-careful"
    assert answers[3]["configOptions"][-1]["currentValue"] == "echo-fast"
    assert answers[1]["sessionId"] in [s["sessionId"] for s in answers[2]["sessions"]]
    order = [m["id"] for m in agent.received() if "id" in m and "method" not in m]
    assert [order.index(m["id"]) for m in sent] == sorted(order.index(m["id"]) for m in sent)
    assert agent.idle_states(a) == agent.idle_states(b) == []  # answered while both turns ran
    agent.cancel(a)
    agent.cancel(b)
    assert agent.wait_idle(a)["stopReason"] == agent.wait_idle(b)["stopReason"] == "cancelled"


def test_thirty_two_running_turns_then_connection_busy_S9(launch):
    """S9 under v2: 32 acknowledged turns hold the 32 slots until their idle state_update; a 33rd
    prompt on a 33rd session is refused `connection_busy`, never acknowledged; control is still answered."""
    agent = launch("--ephemeral")
    sids = v2_sessions(agent, 34)
    acks = [agent.prompt(sid, "/wait").result() for sid in sids[:32]]
    assert all(set(ack) == {"messageId"} for ack in acks)
    refused = agent.prompt(sids[32], "one too many").error()
    assert refused["code"] == -32000 and refused["data"]["reason"] == "connection_busy", refused
    assert agent.idle_states(sids[32]) == []
    options = agent.call("session/set_config_option", {"sessionId": sids[33], "configId": "model", "type": "id", "value": "echo-careful"})
    assert options["configOptions"][-1]["currentValue"] == "echo-careful"
    for sid in sids[:32]:
        agent.cancel(sid)
    assert [agent.wait_idle(sid)["stopReason"] for sid in sids[:32]] == ["cancelled"] * 32
    # The slots are free again once every turn reported idle.
    assert "messageId" in agent.prompt(sids[32], "now").result()
    assert agent.wait_idle(sids[32])["stopReason"] == "end_turn"


def test_a_second_prompt_between_the_acknowledgement_and_idle_is_refused_S8(launch):
    """S8 under v2: a second prompt on a busy session is an error response, never an acknowledgement,
    and sends nothing for the session (no running, no echo)."""
    agent = launch("--ephemeral")
    [sid] = v2_sessions(agent)
    agent.prompt(sid, "/wait").result()
    before = len(agent.updates(sid))
    busy = agent.prompt(sid, "again").error()
    assert busy["code"] == -32000 and busy["data"]["reason"] == "session_busy"
    agent.cancel(sid)
    assert agent.wait_idle(sid)["stopReason"] == "cancelled"
    states = [u["state"] for u in agent.updates(sid) if u["sessionUpdate"] == "state_update"]
    assert states == ["running", "idle"], states
    assert [u for u in agent.updates(sid)[before:] if u["sessionUpdate"] == "user_message"] == []


def test_prompt_and_cancel_in_one_write_for_many_sessions_S11(launch):
    """S11 under v2: each cancel written right behind its prompt ends that turn `cancelled`; none is lost."""
    agent = launch("--ephemeral")
    sids = v2_sessions(agent, 8)
    messages: list[dict[str, Any]] = []
    prompts = []
    for sid in sids:
        prompt = agent.make_request("session/prompt", agent.prompt_params(sid, "/wait"))
        prompts.append(prompt)
        messages += [prompt, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}]
    agent.send(*messages)
    assert all("messageId" in agent.pending_for(p).result() for p in prompts)
    assert [agent.wait_idle(sid)["stopReason"] for sid in sids] == ["cancelled"] * len(sids)
    # And the next turn of each session runs normally (S12).
    agent.prompt(sids[0], "hello").result()
    assert agent.wait_idle(sids[0], 2)["stopReason"] == "end_turn"


def test_eof_with_turns_running_reports_every_turn_idle_then_exits_S13(launch):
    """S13 under v2: at EOF every acknowledged turn (waiting, sleeping, streaming, ignoring its
    cancel until killed at the grace) sends its idle state_update, and the process exits 0."""
    agent = launch("--ephemeral", "--agent", "tests.agents:IgnoresCancelAgent", "--shutdown-grace", "1")
    sids = v2_sessions(agent, 4)
    for sid, text in zip(sids, ["/wait", "/sleep 60", "/stream 1000000 64", "/stubborn"]):
        agent.prompt(sid, text).result()
    agent.wait_for(lambda: len(agent.updates(sids[2])) > 5, what="the stream to start")
    agent.wait_for(lambda: any(u["sessionUpdate"] == "agent_message_chunk" and u["content"]["text"] == "not listening"
                                   for u in agent.updates(sids[3])),
                   what="the stubborn turn to start")
    agent.close_input()
    assert agent.wait_exit(timeout=30) == 0
    for sid in sids:
        states = [u for u in agent.updates(sid) if u["sessionUpdate"] == "state_update" and u["state"] == "idle"]
        assert [s["stopReason"] for s in states] == ["cancelled"], (sid, states)
        assert agent.updates(sid)[-1]["sessionUpdate"] == "state_update", agent.updates(sid)[-3:]


def test_usage_is_never_lost_under_v2_S16(launch, tmp_path):
    """S16 under v2: each turn's final usage_update precedes its idle state_update, and every
    acknowledged prompt (ended, failed, cancelled, cut by SIGTERM) leaves one usage record."""
    state = str(tmp_path / "state")
    agent = launch(*serve_args(state))
    a, b, c = v2_sessions(agent, 3)
    agent.prompt(a, "one").result()
    assert agent.wait_idle(a)["stopReason"] == "end_turn"
    kinds = [u["sessionUpdate"] for u in agent.updates(a)]
    assert kinds[-2:] == ["usage_update", "state_update"], kinds
    agent.prompt(b, "/fail").result()
    assert agent.wait_idle(b)["stopReason"] == "error"
    assert agent.prompt(b, "/wait").result()
    assert agent.prompt(b, "refused").error()["data"]["reason"] == "session_busy"
    agent.cancel(b)
    assert agent.wait_idle(b, 2)["stopReason"] == "cancelled"
    agent.prompt(c, "/sleep 600").result()
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit() == 0
    assert agent.wait_idle(c)["stopReason"] == "cancelled"
    for sid in (a, b, c):
        kinds = [u["sessionUpdate"] for u in agent.updates(sid)]
        states = [u.get("state") for u in agent.updates(sid)]
        # Nothing of a turn follows its idle state_update: no usage_update between idle and the next running.
        for at, now in enumerate(states):
            if now == "idle":
                following = states[at + 1:].index("running") + at + 1 if "running" in states[at + 1:] else len(kinds)
                assert "usage_update" not in kinds[at + 1:following], (sid, kinds)
    report = usage_json(state)
    assert report["totals"]["prompts"] == 4
    assert report["totals"]["byStopReason"] == {"cancelled": 2, "end_turn": 1, "error": 1}


def test_a_v2_session_loads_under_v1_with_its_history(launch, tmp_path):
    """The store is version-neutral: a session made under v2 loads under v1 with v1's shapes."""
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    [sid] = v2_sessions(first)
    first.prompt(sid, "/plan").result()
    first.wait_idle(sid)
    first.prompt(sid, "/diff /tmp/v2-made.txt").result()
    first.wait_idle(sid, 2)
    first.close_input()
    assert first.wait_exit() == 0
    agent = launch("--state-dir", state)
    agent.initialize()
    answer = agent.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    assert "modes" in answer
    kinds = [u["sessionUpdate"] for u in agent.updates(sid)]
    assert "plan" in kinds and "tool_call" in kinds and "user_message_chunk" in kinds
    assert not {"plan_update", "state_update", "user_message"} & set(kinds), kinds
    assert agent.prompt(sid, "again").result() == {"stopReason": "end_turn"}


def test_a_turn_that_fails_after_its_cancel_still_reports_cancelled_S14(launch):
    """S14 under v2: once cancelled, the idle state_update says `cancelled` whatever happened after."""
    agent = launch("--ephemeral", "--agent", "tests.agents:RaisesAfterCancelAgent")
    [sid] = v2_sessions(agent)
    agent.prompt(sid, "x").result()
    agent.cancel(sid)
    assert agent.wait_idle(sid) == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    assert "messageId" in agent.prompt(sid, "y").result()  # released: the session takes the next prompt
    agent.cancel(sid)
    assert agent.wait_idle(sid, 2)["stopReason"] == "cancelled"
