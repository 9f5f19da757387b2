"""A deleted session's state is never written again (sessions.SessionRegistry.save_state): a turn
that ends after session/delete must not leave the state of a session that is gone in the store."""

from __future__ import annotations

from acp_green.sessions import SessionRegistry
from acp_green.store.base import MemoryStore


def test_the_state_of_a_deleted_session_is_not_stored_again():
    store = MemoryStore()
    sessions = SessionRegistry(store, idle_timeout=1.0)
    session = sessions.create("/tmp", [], [])
    session.state["step"] = 1
    sessions.save_state(session)
    assert store.load_state(session.session_id) is not None
    sessions.delete(session.session_id)
    session.state["step"] = 2  # the agent's turn goes on writing after the delete
    sessions.save_state(session)
    assert sessions.store_state(session)
    assert store.load_state(session.session_id) is None and store.load_session(session.session_id) is None
