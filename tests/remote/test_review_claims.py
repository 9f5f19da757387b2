"""Review: a session deleted by one connection while another loads it must not come back."""

from __future__ import annotations

import gevent

from acp_green.errors import SessionInUse
from acp_green.sessions import SessionClaims, SessionRegistry, UnknownSession
from acp_green.store.statedir import open_store


def test_a_delete_racing_a_load_on_another_connection_never_both_succeed(tmp_path):
    """A's session/load reads the store (a yield) before it claims; B's delete in that window
    sees no holder, deletes, and A then claims and revives the deleted session, whose record
    `reopen` saves again: the delete 'succeeded' and the session is back (sessions.py `get`)."""
    store = open_store(str(tmp_path / "state"))
    try:
        claims = SessionClaims()
        maker = SessionRegistry(store, 600, claims, owner="maker")
        session_id = maker.create("/tmp", [], []).session_id
        maker.drop(session_id)
        a = SessionRegistry(store, 600, claims, owner="A")
        b = SessionRegistry(store, 600, claims, owner="B")
        loading = gevent.spawn(a.reopen, session_id, "/tmp", [], [])
        gevent.sleep(0)  # A is parked in its store read
        try:
            b.delete(session_id)
            deleted = True
        except SessionInUse:
            deleted = False
        loading.join(timeout=30)
        loaded = loading.successful()
        if not loaded:
            assert isinstance(loading.exception, UnknownSession), loading.exception
        assert not (deleted and loaded), "both the delete and the load succeeded"
        gevent.sleep(0.2)
        if deleted:
            assert store.load_session(session_id) is None, "a deleted session is back in the store"
    finally:
        store.close()
