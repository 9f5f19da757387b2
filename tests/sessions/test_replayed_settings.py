"""A stored `config_option_update` replayed to a client that cannot show boolean options: whatever
the stored bytes hold, every boolean option becomes its "true"/"false" select and nothing else changes;
a session/load does it for such a client only, and to that kind of update only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_green.demo import DemoAgent
from acp_green.rpc import wire
from acp_green.settings import booleans_as_selects
from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from tests.sessions.test_history_flow import replay_of

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                           max_leaves=8)
options = st.one_of(
    st.fixed_dictionaries({"id": st.text(max_size=4), "name": st.text(max_size=4), "type": st.just("boolean"),
                           "currentValue": json_values}),
    st.fixed_dictionaries({"id": st.text(max_size=4), "type": st.sampled_from(["select", "_x"]), "currentValue": json_values}),
    json_values,
)


@given(st.one_of(st.lists(options, max_size=5), json_values))
def test_every_boolean_option_becomes_its_select_and_nothing_else_changes(config_options):
    stored = {"sessionUpdate": "config_option_update", "configOptions": config_options}
    replayed = wire.loads(booleans_as_selects(wire.encode_json(stored)))
    if not isinstance(config_options, list):
        assert replayed == stored
        return
    assert len(replayed["configOptions"]) == len(config_options)
    for before, after in zip(config_options, replayed["configOptions"]):
        if isinstance(before, dict) and before.get("type") == "boolean":
            assert after == {**before, "type": "select", "currentValue": "true" if before["currentValue"] else "false",
                             "options": [{"value": "true", "name": "On"}, {"value": "false", "name": "Off"}]}
        else:
            assert after == before


VERBOSE = {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": True}
VERBOSE_SELECT = {**VERBOSE, "type": "select", "currentValue": "true",
                  "options": [{"value": "true", "name": "On"}, {"value": "false", "name": "Off"}]}
MODEL = {"id": "model", "name": "Model", "type": "select", "currentValue": "fast", "options": [{"value": "fast", "name": "Fast"}]}
STORED = [
    {"sessionUpdate": "config_option_update", "configOptions": [VERBOSE]},  # booleans only
    {"sessionUpdate": "config_option_update", "configOptions": [MODEL, {**VERBOSE, "currentValue": False}]},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": '{"type":"boolean"}'}},
    {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
]


@pytest.mark.parametrize("shows_booleans", [True, False])
def test_a_load_replays_stored_boolean_options_as_the_client_can_show_them(inprocess, tmp_path, shows_booleans):
    """A session/load replays each stored config_option_update's boolean options as booleans to a
    client that advertised `session.configOptions.boolean`, else as their "true"/"false" selects
    (whether or not the update holds a select too); every other update is replayed as stored."""
    state = str(tmp_path / "state")
    store = SqliteStore(statedb.db_path(state))
    store.save_session(SessionRecord("sess_b", "/tmp", [], updated_at=1.0))
    store.append_turn("sess_b", [wire.encode_json(u) for u in STORED], "end_turn")
    store.close()
    client = inprocess(DemoAgent(), state_dir=state).client
    client.initialize({"session": {"configOptions": {"boolean": {}}}} if shows_booleans else {})
    replay, _ = replay_of(client, "sess_b")
    if shows_booleans:
        assert replay == STORED
    else:
        assert replay == [{"sessionUpdate": "config_option_update", "configOptions": [VERBOSE_SELECT]},
                          {"sessionUpdate": "config_option_update",
                           "configOptions": [MODEL, {**VERBOSE_SELECT, "currentValue": "false"}]},
                          *STORED[2:]]
