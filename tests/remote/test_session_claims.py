"""One session on one connection at a time: the claims every connection's registry shares."""

from __future__ import annotations

import pytest

from acp_green.errors import SessionInUse, UnknownSession
from acp_green.sessions import SessionClaims, SessionRegistry
from acp_green.store.base import MemoryStore


def _two(store=None) -> tuple[SessionRegistry, SessionRegistry, SessionClaims]:
    claims = SessionClaims()
    store = store or MemoryStore()
    return SessionRegistry(store, 600, claims, owner="A"), SessionRegistry(store, 600, claims, owner="B"), claims


def test_only_the_holder_releases_a_claim():
    claims = SessionClaims()
    claims.claim("s", "A")
    claims.release("s", "B")
    assert claims.owner_of("s") == "A"
    with pytest.raises(SessionInUse) as refused:
        claims.claim("s", "B")
    assert refused.value.data == {"reason": "session_in_use", "sessionId": "s", "owner": "A"}
    claims.claim("s", "A")  # the holder may claim again
    claims.release("s", "A")
    assert claims.owner_of("s") is None and len(claims) == 0
    claims.claim("s", "B")


def test_every_way_a_connection_names_a_held_session_is_refused_naming_the_holder():
    a, b, _claims = _two()
    session_id = a.create("/tmp", [], []).session_id
    for attempt in (lambda: b.get(session_id), lambda: b.reopen(session_id, "/tmp", [], []), lambda: b.delete(session_id),
                    lambda: b.set_title(session_id, "mine"), lambda: b.set_archived(session_id, True)):
        with pytest.raises(SessionInUse) as refused:
            attempt()
        assert refused.value.data["owner"] == "A"
    assert a.live(session_id) is not None and a.live(session_id).record.title != "mine"


@pytest.mark.parametrize("letting_go", ["drop", "close", "evict", "delete"])
def test_a_session_let_go_is_free_for_another_connection(letting_go):
    a, b, claims = _two()
    session_id = a.create("/tmp", [], []).session_id
    if letting_go == "drop":
        a.drop(session_id)
    elif letting_go == "close":
        a.close(session_id)
    elif letting_go == "evict":
        a.evict_idle(now=10**12)
    else:
        a.delete(session_id)
    assert claims.owner_of(session_id) is None
    if letting_go == "delete":
        with pytest.raises(UnknownSession):
            b.get(session_id)
        assert claims.owner_of(session_id) is None  # an unknown session leaves no claim behind
    else:
        assert b.get(session_id).session_id == session_id and claims.owner_of(session_id) == "B"


class FailingStateRead(MemoryStore):
    """A store whose state read fails once (a disk error mid-revival)."""

    failed = False

    def load_state(self, session_id):  # type: ignore[no-untyped-def]
        if not self.failed:
            self.failed = True
            raise OSError("disk gone")
        return super().load_state(session_id)


def test_a_revival_that_fails_leaves_no_claim_behind():
    a, b, claims = _two(FailingStateRead())
    session_id = a.create("/tmp", [], []).session_id
    a.drop(session_id)
    with pytest.raises(OSError):
        b.get(session_id)
    assert claims.owner_of(session_id) is None
    assert a.get(session_id).session_id == session_id
