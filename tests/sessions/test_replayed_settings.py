"""A stored `config_option_update` replayed to a client that cannot show boolean options: whatever
the stored bytes hold, every boolean option becomes its "true"/"false" select and nothing else changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_green.rpc import wire
from acp_green.settings import booleans_as_selects

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
