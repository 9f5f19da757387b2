"""OpeningStore: the store while it opens in the background (writes kept in order, reads wait)."""

from __future__ import annotations

import gevent
from gevent.event import Event

from acp_green.rpc.cancel import CancelToken
from acp_green.store import MemoryStore
from acp_green.store.opening import OpeningStore
from acp_green.store.session_record import SessionRecord
from acp_green.store.turns import TurnOutcome


class GatedOpener:
    """Makes a MemoryStore once `gate` is set; counts how often it was asked."""

    def __init__(self) -> None:
        self.gate = Event()
        self.calls = 0
        self.store = MemoryStore()

    def __call__(self) -> MemoryStore:
        self.calls += 1
        self.gate.wait(timeout=30)
        return self.store


def test_writes_before_the_store_opens_reach_it_in_call_order_as_they_were_handed_over():
    """A session saved, changed without saving, a turn begun, appended and ended, usage
    recorded: once open, the store holds what was handed over, in order; reads waited for it."""
    opener = GatedOpener()
    store = OpeningStore(opener)
    record = SessionRecord(session_id="s1", cwd="/tmp")
    store.save_session(record)
    record.mode_id = "changed-after-saving"  # not saved again: must not be stored
    updates = [b'{"a":1}']
    store.begin_turn("s1", "t1", 1.0, [b'{"p":1}'])
    store.append_history("s1", "t1", updates)
    updates.append(b'{"late":1}')  # the caller's list changed afterwards: not stored
    store.end_turn("s1", "t1", TurnOutcome("end_turn"))
    assert opener.calls == 0  # nothing needed it yet
    reader = gevent.spawn(store.load_session, "s1")
    gevent.sleep(0.01)
    assert not reader.ready()  # the read waits for the store
    opener.gate.set()
    loaded = reader.get(timeout=30)
    assert loaded is not None and loaded.mode_id != "changed-after-saving"
    assert store.history("s1") == [b'{"p":1}', b'{"a":1}']
    assert [t.stop_reason for t in store.turns("s1")] == ["end_turn"]
    assert opener.calls == 1
    store.save_session(SessionRecord(session_id="s2", cwd="/tmp"))  # once open: straight through
    assert opener.store.load_session("s2") is not None


def test_open_soon_opens_without_any_request_and_close_of_an_unused_store_opens_nothing():
    """open_soon starts the opening with no request waiting; a store never needed and never
    written to is not opened at close."""
    opener = GatedOpener()
    opener.gate.set()
    store = OpeningStore(opener)
    store.open_soon()
    gevent.sleep(0.01)
    assert store.store is opener.store
    unused = GatedOpener()
    OpeningStore(unused).close()
    assert unused.calls == 0


def test_a_turn_waiting_for_the_store_stops_waiting_when_cancelled():
    """wait_for_history_room waits for the opening store; a cancel ends the wait at once."""
    opener = GatedOpener()
    store = OpeningStore(opener)
    token = CancelToken()
    waiter = gevent.spawn(store.wait_for_history_room, token)
    gevent.sleep(0.01)
    assert not waiter.ready()
    token.set()
    waiter.join(timeout=30)
    assert waiter.successful() and store.store is None
    opener.gate.set()
    store.sync()
    assert store.store is opener.store
