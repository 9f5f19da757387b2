"""session.state is stored by the registry: what can be stored (encode_state), and when (eviction, close)."""

from __future__ import annotations

import logging

import pytest

from acp_green import StateNotStorable
from acp_green.sessions import MAX_STATE_BYTES, SessionRegistry, encode_state
from acp_green.store.base import MemoryStore


def test_json_values_are_stored_and_others_are_refused_naming_the_key():
    assert encode_state({"a": [1, "é", None, True, 1.5, {"b": []}], "t": (1, 2)}) == '{"a":[1,"é",null,true,1.5,{"b":[]}],"t":[1,2]}'.encode()
    for state, key in (({"ok": 1, "when": object()}, "when"), ({"nan": float("nan")}, "nan"), ({1: "x"}, "1"),
                       ({"deep": {"set": {1}}}, "deep")):
        with pytest.raises(StateNotStorable) as raised:
            encode_state(state)
        assert raised.value.key == key and repr(key) in str(raised.value)


def test_a_state_over_the_limit_names_its_largest_key():
    state = {"small": "x" * 10, "big": "y" * (MAX_STATE_BYTES // 2), "bigger": "z" * (MAX_STATE_BYTES // 2 + 10)}
    with pytest.raises(StateNotStorable) as raised:
        encode_state(state)
    assert raised.value.key == "bigger" and "over the limit of 1048576" in str(raised.value)
    del state["small"], state["big"]
    assert len(encode_state(state)) <= MAX_STATE_BYTES


def test_an_evicted_session_comes_back_with_its_state():
    store = MemoryStore()
    sessions = SessionRegistry(store, idle_timeout=1.0)
    session = sessions.create("/tmp", [], [])
    session.state["name"] = "Ada"
    assert sessions.evict_idle(now=session.last_active + 10) == [session.session_id]
    revived = sessions.get(session.session_id)
    assert revived is not session and revived.state == {"name": "Ada"}


def test_an_unstorable_state_at_close_is_logged_and_the_stored_one_kept(caplog):
    store = MemoryStore()
    sessions = SessionRegistry(store, idle_timeout=1.0)
    session = sessions.create("/tmp", [], [])
    session.state["kept"] = 1
    sessions.save_state(session)
    session.state["broken"] = object()
    with caplog.at_level(logging.ERROR):
        assert sessions.close(session.session_id)
    assert "session.state['broken'] cannot be stored" in caplog.text and session.session_id in caplog.text
    assert sessions.get(session.session_id).state == {"kept": 1}
    assert store.load_session(session.session_id) is not None and store.failed_writes == 0
