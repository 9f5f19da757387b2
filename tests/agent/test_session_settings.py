"""Config options: boolean options beside select (type "boolean" only for a client that
advertised `session.configOptions.boolean`, else a "true"/"false" select), the agent's hooks on
client changes, and mode/config changes from inside a running turn (stored, then announced).
End to end through `acp-green serve`; every message is schema-checked at teardown."""

from __future__ import annotations

import json

import pytest

from acp_green.tools.rig.client import RpcErrorResponse
from tests.helpers import said

SETTINGS = ("--agent", "tests.surface_agents:SettingsAgent")
BOOLEANS = {"session": {"configOptions": {"boolean": {}}}}


def _option(options: list[dict], config_id: str) -> dict:
    return next(o for o in options if o["id"] == config_id)


def _agent_sent_boolean_type(agent) -> bool:
    """Anything the agent wrote carrying a `type: "boolean"` config option."""
    return any(r.direction == "in" and b'"type":"boolean"' in r.raw.replace(b" ", b"") for r in agent.records)


def test_a_boolean_option_is_sent_as_boolean_to_a_client_that_shows_booleans(launch):
    """session/new carries `type: "boolean"` with a bool; set_config_option with `type: "boolean"`
    answers every option, the boolean now true."""
    agent = launch(*SETTINGS)
    agent.initialize(BOOLEANS)
    new = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert _option(new["configOptions"], "verbose") == {"id": "verbose", "name": "Verbose", "type": "boolean",
                                                        "currentValue": False, "description": "Say more"}
    answer = agent.call("session/set_config_option", {"sessionId": new["sessionId"], "configId": "verbose",
                                                      "type": "boolean", "value": True})
    assert [o["id"] for o in answer["configOptions"]] == ["model", "verbose"]
    assert _option(answer["configOptions"], "verbose")["currentValue"] is True


@pytest.mark.parametrize("capabilities", [{}, {"session": None}, {"session": {"configOptions": None}},
                                          {"session": {"configOptions": {}}}, {"session": {"configOptions": {"boolean": None}}}])
def test_without_the_capability_a_boolean_option_is_a_true_false_select(launch, capabilities):
    """No `type: "boolean"` ever reaches a client that did not advertise it: the option is a select
    of "true"/"false", which the client sets like any select; agent code still sees a bool."""
    agent = launch(*SETTINGS)
    agent.initialize(capabilities)
    new = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    sid = new["sessionId"]
    verbose = _option(new["configOptions"], "verbose")
    assert (verbose["type"], verbose["currentValue"]) == ("select", "false")
    assert [o["value"] for o in verbose["options"]] == ["true", "false"]
    answer = agent.call("session/set_config_option", {"sessionId": sid, "configId": "verbose", "value": "true"})
    assert _option(answer["configOptions"], "verbose")["currentValue"] == "true"
    agent.prompt(sid, "/set verbose false").result()
    update = [u for u in agent.updates(sid) if u["sessionUpdate"] == "config_option_update"][-1]
    assert _option(update["configOptions"], "verbose")["currentValue"] == "false"
    assert "('verbose', False)" in said(agent.updates(sid))
    assert not _agent_sent_boolean_type(agent)


def test_bad_config_values_are_refused_and_change_nothing(launch):
    """A select value not offered, a string for `type: "boolean"`, a bool for a select: -32602 naming `value`."""
    agent = launch(*SETTINGS)
    agent.initialize(BOOLEANS)
    sid = agent.new_session()
    for params in ({"configId": "model", "value": "medium"}, {"configId": "verbose", "type": "boolean", "value": "true"},
                   {"configId": "model", "type": "boolean", "value": True}, {"configId": "verbose", "value": "yes"}):
        with pytest.raises(RpcErrorResponse) as refused:
            agent.call("session/set_config_option", {"sessionId": sid, **params})
        assert refused.value.code == -32602 and refused.value.error["data"]["field"] == "value", params
    agent.prompt(sid, "/hooks").result()
    assert said(agent.updates(sid)) == " [mode=ask config=[('model', 'fast'), ('verbose', False)]]"


def test_the_agent_hooks_see_client_changes_and_may_refuse_them(launch):
    """`mode_changed` and `config_changed` run for the client's changes, with the new value (a bool
    for the boolean option); the hook refusing mode `locked` leaves the mode unchanged."""
    agent = launch(*SETTINGS)
    agent.initialize()
    sid = agent.new_session()
    agent.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
    agent.call("session/set_config_option", {"sessionId": sid, "configId": "verbose", "value": "true"})
    agent.call("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "slow"})
    with pytest.raises(RpcErrorResponse) as refused:
        agent.call("session/set_mode", {"sessionId": sid, "modeId": "locked"})
    assert refused.value.code == -32602
    agent.prompt(sid, "/hooks").result()
    assert said(agent.updates(sid)) == ("mode ask->code; config verbose=True; config model='slow'"
                                        " [mode=code config=[('model', 'slow'), ('verbose', True)]]")


def test_changes_from_inside_a_turn_are_announced_and_stored(launch, tmp_path):
    """`turn.set_mode` sends `current_mode_update`, `turn.set_config` a `config_option_update` with
    every option, both before the prompt's response; a new process loading the session reports
    both. The agent's own changes do not call its hooks; an unknown mode is a ValueError and sends nothing."""
    state = ("--state-dir", str(tmp_path))
    agent = launch(*SETTINGS, *state)
    agent.initialize(BOOLEANS)
    sid = agent.new_session()
    assert agent.prompt(sid, "/mode code").result() == {"stopReason": "end_turn"}
    assert agent.prompt(sid, "/set verbose true").result() == {"stopReason": "end_turn"}
    agent.prompt(sid, "/mode nosuch").result()
    agent.prompt(sid, "/hooks").result()
    updates = [u for u in agent.updates(sid) if u["sessionUpdate"] in ("current_mode_update", "config_option_update")]
    assert updates[0] == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
    assert updates[1]["sessionUpdate"] == "config_option_update"
    assert [(o["id"], o["currentValue"]) for o in updates[1]["configOptions"]] == [("model", "fast"), ("verbose", True)]
    assert len(updates) == 2
    text = said(agent.updates(sid))
    assert "refused: unknown mode 'nosuch'" in text
    assert text.endswith(" [mode=code config=[('model', 'fast'), ('verbose', True)]]")
    assert text.count("->") == 0  # no hook ran
    agent.close()

    again = launch(*SETTINGS, *state)
    again.initialize(BOOLEANS)
    loaded = again.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    assert loaded["modes"]["currentModeId"] == "code"
    assert _option(loaded["configOptions"], "verbose")["currentValue"] is True


# -- ACP v2: no session modes, so the modes are the `mode` config option ------------------------
def _values(options: list[dict]) -> dict[str, object]:
    return {o["configId"]: o["currentValue"] for o in options}


def test_under_v2_the_modes_are_the_mode_config_option(launch, tmp_path):
    """A v2 client is offered the agent's modes as a select option `mode` (category "mode") before
    the agent's own options, sets it with session/set_config_option (the agent's `mode_changed`
    hook runs first and may refuse it, -32602), and a turn's `set_mode` is announced with
    `config_option_update`; a resume in a new process reports the stored mode."""
    state = ("--state-dir", str(tmp_path))
    agent = launch(*SETTINGS, *state)
    assert agent.initialize(version=2)["protocolVersion"] == 2
    new = agent.call("session/new", {"cwd": "/tmp"})
    sid = new["sessionId"]
    assert "modes" not in new
    mode = new["configOptions"][0]
    assert mode == {"configId": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
                    "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"},
                                {"value": "locked", "name": "Locked"}]}
    assert [o["configId"] for o in new["configOptions"]] == ["mode", "model", "verbose"]

    answer = agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "code"})
    assert _values(answer["configOptions"]) == {"mode": "code", "model": "fast", "verbose": False}
    messages = {}
    for refused_value in ("locked", "nosuch", True, 3):
        with pytest.raises(RpcErrorResponse) as refused:
            agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": refused_value})
        assert refused.value.code == -32602, refused_value
        messages[repr(refused_value)] = refused.value.error["message"]
    assert "unknown mode 'nosuch'" in messages["'nosuch'"] and "not true" in messages["True"], messages

    agent.prompt(sid, "/mode ask").result()
    agent.wait_idle(sid)
    [update] = [u for u in agent.updates(sid) if u["sessionUpdate"] == "config_option_update"]
    assert _values(update["configOptions"]) == {"mode": "ask", "model": "fast", "verbose": False}
    assert not [u for u in agent.updates(sid) if u["sessionUpdate"] == "current_mode_update"]
    agent.prompt(sid, "/hooks").result()
    agent.wait_idle(sid, 2)
    assert "mode ask->code [mode=ask" in said(agent.updates(sid))
    agent.close()

    again = launch(*SETTINGS, *state)
    again.initialize(version=2)
    resumed = again.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
    assert _values(resumed["configOptions"])["mode"] == "ask"


def test_an_agent_option_named_mode_is_not_shadowed_under_v2(launch):
    """An agent whose own config option is `mode` keeps it: its modes are then not offered to a v2 client."""
    agent = launch("--agent", "tests.surface_agents:ModeOptionAgent")
    agent.initialize(version=2)
    new = agent.call("session/new", {"cwd": "/tmp"})
    assert [(o["configId"], o.get("category")) for o in new["configOptions"]] == [("mode", None)]
    answer = agent.call("session/set_config_option", {"sessionId": new["sessionId"], "configId": "mode", "value": "b"})
    assert _values(answer["configOptions"]) == {"mode": "b"}


def test_a_v1_client_still_gets_modes_and_no_mode_option(launch):
    agent = launch(*SETTINGS)
    agent.initialize()
    new = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert new["modes"]["currentModeId"] == "ask"
    assert [o["id"] for o in new["configOptions"]] == ["model", "verbose"]
    for value in ("code", "ask", None, True):
        with pytest.raises(RpcErrorResponse) as refused:
            agent.call("session/set_config_option", {"sessionId": new["sessionId"], "configId": "mode", "value": value})
        assert refused.value.code == -32602 and "unknown configId 'mode'" in refused.value.error["message"], refused.value.error


def test_under_v2_the_mode_option_refuses_anything_but_one_of_its_modes(launch, tmp_path):
    """Every value that is not a mode id (or a mode id sent as `type: "boolean"`) is refused
    -32602 before the hook runs, the mode unchanged; an accepted one is stored, so a new process
    resumes the session in it."""
    state = ("--state-dir", str(tmp_path))
    agent = launch(*SETTINGS, *state)
    agent.initialize(version=2)
    sid = agent.call("session/new", {"cwd": "/tmp"})["sessionId"]
    values = [None, [], ["code"], {}, {"value": "code"}, "x" * 100_000, "true", "", 0, 1.5, False, "Code", " code"]
    requests = [{"value": v, **kind} for v in values for kind in ({}, {"type": "id"}, {"type": "boolean"})]
    requests += [{"type": "boolean", "value": "code"}, {"type": 3, "value": "code"}, {}]
    for extra in requests:
        with pytest.raises(RpcErrorResponse) as refused:
            agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", **extra})
        assert refused.value.code == -32602, (extra, refused.value.error)
    with pytest.raises(RpcErrorResponse) as unknown:
        agent.call("session/set_config_option", {"sessionId": "nosuch", "configId": "mode", "type": "id", "value": "code"})
    assert unknown.value.code == -32002
    answer = agent.call("session/set_config_option", {"sessionId": sid, "configId": "model", "type": "id", "value": "slow"})
    assert _values(answer["configOptions"])["mode"] == "ask"
    agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "type": "id", "value": "code"})
    agent.prompt(sid, "/hooks").result()
    agent.wait_idle(sid)
    assert "mode ask->code [mode=code" in said(agent.updates(sid)), said(agent.updates(sid))
    agent.prompt(sid, "/mode locked").result()  # the agent's own change: no hook, so not refused
    agent.wait_idle(sid, 2)
    assert said(agent.updates(sid)).endswith("[mode=locked config=[('model', 'slow'), ('verbose', False)]]")
    agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "type": "id", "value": "code"})
    agent.close()  # the last change came from the client, after the last turn: stored by the request itself

    again = launch(*SETTINGS, *state)
    again.initialize(version=2)
    resumed = again.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
    assert _values(resumed["configOptions"]) == {"mode": "code", "model": "slow", "verbose": False}


def test_under_v2_an_agent_with_modes_and_no_options_offers_the_mode_option(launch, tmp_path):
    """The `mode` option is offered even when the agent has no option of its own, each value with
    its mode's description; a session stored without a mode (made by an agent that had none)
    is in the first mode, under v2 and v1 alike."""
    state = ("--state-dir", str(tmp_path))
    before = launch("--agent", "tests.agents:KeepsItsTurnAgent", *state)
    before.initialize(version=2)
    old = before.call("session/new", {"cwd": "/tmp"})["sessionId"]
    before.close()

    agent = launch("--agent", "tests.surface_agents:ModesOnlyAgent", *state)
    agent.initialize(version=2)
    new = agent.call("session/new", {"cwd": "/tmp"})
    assert new["configOptions"] == [{"configId": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "plan",
                                     "options": [{"value": "plan", "name": "Plan", "description": "Think first"},
                                                 {"value": "act", "name": "Act", "description": "Change files"}]}]
    resumed = agent.call("session/resume", {"sessionId": old, "cwd": "/tmp"})
    assert _values(resumed["configOptions"]) == {"mode": "plan"}
    agent.close()
    v1 = launch("--agent", "tests.surface_agents:ModesOnlyAgent", *state)
    v1.initialize()
    resumed = v1.call("session/resume", {"sessionId": old, "cwd": "/tmp", "mcpServers": []})
    assert resumed["modes"]["currentModeId"] == "plan" and "configOptions" not in resumed


@pytest.mark.parametrize("version", [1, 2])
def test_the_mode_is_set_while_a_turn_runs_under_either_version(launch, version):
    """v1's session/set_mode is answered while the session's turn runs; v2's `mode` option is too."""
    agent = launch("--ephemeral")
    agent.initialize(version=version)
    sid = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]
    turn = agent.prompt(sid, "/wait")  # admitted before the next request is read (receive order)
    if version == 1:
        assert agent.call("session/set_mode", {"sessionId": sid, "modeId": "code"}) == {}
    else:
        answer = agent.call("session/set_config_option", {"sessionId": sid, "configId": "mode", "type": "id", "value": "code"})
        assert _values(answer["configOptions"])["mode"] == "code"
    assert not turn.done if version == 1 else agent.idle_states(sid) == []  # the turn still runs
    agent.cancel(sid)
    assert (turn.result() if version == 1 else agent.wait_idle(sid))["stopReason"] == "cancelled"


@pytest.mark.parametrize("version", [1, 2])
def test_a_value_type_v2_does_not_know_is_refused_under_v2_only(launch, version):
    """v2: "Agents MUST reject a session/set_config_option request with a value type they do not
    support with -32602", the option unchanged; v1 reads an unknown type with a string value as a value id."""
    agent = launch(*SETTINGS)
    agent.initialize(version=version)
    sid = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]
    key = "id" if version == 1 else "configId"
    changes = [("model", "slow")] + ([("mode", "code")] if version == 2 else [])
    for config_id, value in changes:
        for value_type in ("_custom", "select", ""):
            params = {"sessionId": sid, "configId": config_id, "type": value_type, "value": value}
            if version == 1:
                assert _option(agent.call("session/set_config_option", params)["configOptions"], config_id)["currentValue"] == value
                continue
            with pytest.raises(RpcErrorResponse) as refused:
                agent.call("session/set_config_option", params)
            assert refused.value.code == -32602 and "unsupported value type" in refused.value.error["message"], refused.value.error
    verbose = {"value": "true"} if version == 1 else {"type": "boolean", "value": True}  # the two types v2 knows
    options = agent.call("session/set_config_option", {"sessionId": sid, "configId": "verbose", **verbose})["configOptions"]
    assert {o[key]: o["currentValue"] for o in options} == ({"model": "slow", "verbose": "true"} if version == 1 else
                                                           {"mode": "ask", "model": "fast", "verbose": True})


def test_history_keeps_v1_shapes_of_a_v2_turns_settings_changes(launch, tmp_path):
    """A v2 client is sent the `mode` option when a turn changes the mode or an option, but history
    keeps what v1 knows: a v1 client loading the session later is replayed `current_mode_update`
    and the options without `mode`; a v2 resume replays neither mode update."""
    state = ("--state-dir", str(tmp_path))
    agent = launch(*SETTINGS, *state)
    agent.initialize(version=2)
    sid = agent.call("session/new", {"cwd": "/tmp"})["sessionId"]
    for turns, command in enumerate(("/mode code", "/set model slow"), start=1):
        agent.prompt(sid, command).result()
        agent.wait_idle(sid, count=turns)
    sent = [u for u in agent.updates(sid) if u["sessionUpdate"] in ("config_option_update", "current_mode_update")]
    assert [[(o["configId"], o["currentValue"]) for o in u["configOptions"]][:2] for u in sent] == [
        [("mode", "code"), ("model", "fast")], [("mode", "code"), ("model", "slow")]]
    agent.close()

    v1 = launch(*SETTINGS, *state)
    v1.initialize()
    v1.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    replayed = [u for u in v1.updates(sid) if u["sessionUpdate"] in ("config_option_update", "current_mode_update")]
    assert replayed[0] == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
    assert [[(o["id"], o["currentValue"]) for o in u["configOptions"]] for u in replayed[1:]] == [
        [("model", "slow"), ("verbose", "false")]]
    v1.close()

    v2 = launch(*SETTINGS, *state)
    v2.initialize(version=2)
    resumed = v2.call("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    assert [(o["configId"], o["currentValue"]) for o in resumed["configOptions"]][:2] == [("mode", "code"), ("model", "slow")]
    assert [u["sessionUpdate"] for u in v2.updates(sid) if "mode" in u["sessionUpdate"]] == []


@pytest.mark.parametrize("shows_booleans", [True, False])
def test_a_replayed_boolean_option_is_shown_as_the_loading_client_can(launch, tmp_path, shows_booleans):
    """History keeps a turn's boolean option as a boolean; a later client that did not advertise
    booleans is replayed it as its "true"/"false" select (ACP: no `type: "boolean"` unless advertised)."""
    state = ("--state-dir", str(tmp_path))
    agent = launch(*SETTINGS, *state)
    agent.initialize(BOOLEANS)
    sid = agent.new_session()
    agent.prompt(sid, "/set verbose true").result()
    agent.close()

    again = launch(*SETTINGS, *state)
    again.initialize(BOOLEANS if shows_booleans else None)
    again.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    [replayed] = [u for u in again.updates(sid) if u["sessionUpdate"] == "config_option_update"]
    verbose = _option(replayed["configOptions"], "verbose")
    if shows_booleans:
        assert verbose == {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": True, "description": "Say more"}
    else:
        assert verbose == {"id": "verbose", "name": "Verbose", "type": "select", "currentValue": "true", "description": "Say more",
                           "options": [{"value": "true", "name": "On"}, {"value": "false", "name": "Off"}]}
    assert not _agent_sent_boolean_type(again) if not shows_booleans else _agent_sent_boolean_type(again)


_CLIENTS = {"v1 with booleans": (BOOLEANS, 1), "v1 without": (None, 1), "v2": (None, 2)}


@pytest.mark.parametrize("loader", list(_CLIENTS))
@pytest.mark.parametrize("writer", list(_CLIENTS))
def test_settings_changed_under_one_client_replay_as_each_other_client_can_show_them(launch, tmp_path, writer, loader):
    """Every pair of (v1 with booleans, v1 without, v2): a turn under `writer` changes the mode, a
    boolean and a select; a new process loads the session (v2: resume from the start) under
    `loader`. A v1 loader is replayed the mode change and no `mode` option, booleans as it can
    show them (none of type boolean without the capability); a v2 loader gets booleans as booleans
    and no mode update; every loader ends with the values the turns set."""
    state = ("--state-dir", str(tmp_path))
    capabilities, version = _CLIENTS[writer]
    agent = launch(*SETTINGS, *state)
    agent.initialize(capabilities, version=version)
    sid = agent.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]
    for turns, command in enumerate(("/mode code", "/set verbose true", "/set model slow"), start=1):
        agent.prompt(sid, command).result()
        if version == 2:
            agent.wait_idle(sid, count=turns)  # this turn's idle, not the first one's
    agent.close()

    capabilities, version = _CLIENTS[loader]
    again = launch(*SETTINGS, *state)
    again.initialize(capabilities, version=version)
    if version == 1:
        answer = again.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    else:
        answer = again.call("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    key = "id" if version == 1 else "configId"
    replayed = [u for u in again.updates(sid) if u["sessionUpdate"] in ("config_option_update", "current_mode_update")]
    options = [u["configOptions"] for u in replayed if u["sessionUpdate"] == "config_option_update"]
    assert len(options) == 2
    verbose = [o for o in options[-1] if o[key] == "verbose"][0]
    if loader == "v1 without":
        assert (verbose["type"], verbose["currentValue"]) == ("select", "true")
        assert not _agent_sent_boolean_type(again)
    else:
        assert (verbose["type"], verbose["currentValue"]) == ("boolean", True)
    if version == 1:
        assert replayed[0] == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
        assert all(o["id"] != "mode" for each in options for o in each)
        assert answer["modes"]["currentModeId"] == "code"
    else:
        assert [u["sessionUpdate"] for u in replayed] == ["config_option_update"] * 2
        assert all(o["configId"] != "mode" for each in options for o in each)  # docs/V2.md: the answer has it
        assert [o["currentValue"] for o in answer["configOptions"] if o["configId"] == "mode"] == ["code"]
    assert {o[key]: o["currentValue"] for o in options[-1]}["model"] == "slow"
