"""While the disk cannot take writes (store/waiting_writes.WaitingWrites), reads see the waiting writes:
a waiting delete hides the session from load and list, whether it was saved on disk already or
only waits itself."""

from __future__ import annotations

import time

from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from tests.helpers import wait_until
from tests.store.test_faults import DiskFull, write_a_session


def test_a_waiting_delete_hides_the_session_from_reads_during_an_outage(tmp_path, monkeypatch):
    path = statedb.db_path(str(tmp_path / "state"))
    disk = DiskFull(monkeypatch)
    store = SqliteStore(path)
    try:
        store.save_session(SessionRecord("on-disk", "/tmp", updated_at=time.time()))
        store.sync()
        disk.full = True
        write_a_session(store, "waiting")
        wait_until(lambda: store.retries >= 1, what="the store to meet the full disk")
        store.delete_session("on-disk")
        store.delete_session("waiting")
        assert store.waiting_writes >= 2 and not store.degraded
        assert store.load_session("on-disk") is None and store.load_session("waiting") is None
        assert store.list_sessions() == []
        disk.full = False
        store.sync()
        assert store.load_session("on-disk") is None and store.list_sessions() == []
    finally:
        store.close()


def test_a_page_of_sessions_stays_full_when_waiting_deletes_remove_some_of_it(tmp_path, monkeypatch):
    path = statedb.db_path(str(tmp_path / "state"))
    disk = DiskFull(monkeypatch)
    store = SqliteStore(path)
    try:
        for index, session_id in enumerate(("a", "b", "c", "d")):
            store.save_session(SessionRecord(session_id, "/tmp", updated_at=float(index + 1)))
        store.sync()
        disk.full = True
        write_a_session(store, "waiting")
        wait_until(lambda: store.retries >= 1, what="the store to meet the full disk")
        store.delete_session("waiting")
        store.delete_session("d")
        store.delete_session("c")
        assert [r.session_id for r in store.list_sessions(limit=2)] == ["b", "a"]
    finally:
        disk.full = False
        store.close()
