"""`session/load` and `session/resume` keep a session's `updatedAt` when they change nothing of it
(sessions.SessionRegistry.reopen): an editor reloading a session must not move it in session/list.
A reopen with another cwd or other additional directories, a prompt, a mode or config change
still update it."""

from __future__ import annotations

import time
from typing import Any

from acp_green.sessions import SessionRegistry
from acp_green.store.base import MemoryStore

OLD = 1_000_000.0  # an updated time long past: any save since is later


def _registry_with_session(cwd: str = "/w", directories: list[str] | None = None) -> tuple[MemoryStore, SessionRegistry, str]:
    store = MemoryStore()
    sessions = SessionRegistry(store, idle_timeout=1.0)
    session = sessions.create(cwd, list(directories or []), [])
    session.record.updated_at = OLD
    store.save_session(session.record)
    return store, sessions, session.session_id


def _stored_updated_at(store: MemoryStore, session_id: str) -> float:
    record = store.load_session(session_id)
    assert record is not None
    return record.updated_at


def test_reopening_as_it_was_keeps_updated_at_live_and_revived():
    store, sessions, sid = _registry_with_session("/w", ["/extra"])
    for _ in range(2):  # live
        session = sessions.reopen(sid, "/w", ["/extra"], [{"name": "m", "command": "x", "args": [], "env": []}])
        assert session.record.updated_at == OLD and _stored_updated_at(store, sid) == OLD
    live = sessions.live(sid)
    assert live is not None
    assert sessions.evict_idle(now=live.last_active + 10) == [sid]
    revived = sessions.reopen(sid, "/w", ["/extra"], [])  # from the store
    assert revived is not live and revived.record.updated_at == OLD and _stored_updated_at(store, sid) == OLD


def test_reopening_elsewhere_updates_and_stores_it():
    store, sessions, sid = _registry_with_session("/w", ["/extra"])
    session = sessions.reopen(sid, "/elsewhere", ["/extra"], [])
    assert session.record.updated_at > OLD
    stored = store.load_session(sid)
    assert stored is not None and stored.cwd == "/elsewhere" and stored.updated_at == session.record.updated_at

    store, sessions, sid = _registry_with_session("/w", ["/extra"])
    session = sessions.reopen(sid, "/w", ["/extra", "/more"], [])
    stored = store.load_session(sid)
    assert stored is not None and stored.additional_directories == ["/extra", "/more"] and stored.updated_at > OLD


# -- through the real CLI, across a restart ------------------------------------------------------------
def _listed(agent: Any) -> list[tuple[str, str, str]]:
    """session/list as (sessionId, updatedAt, cwd), in its order (most recently updated first)."""
    return [(s["sessionId"], s["updatedAt"], s["cwd"]) for s in agent.call("session/list", {})["sessions"]]


def test_load_and_resume_keep_updated_at_and_the_list_order_a_prompt_changes_them(launch, tmp_path):
    state = str(tmp_path / "state")
    first = launch("--state-dir", state)
    first.initialize()
    older = first.new_session("/tmp")
    assert first.prompt(older, "first").result() == {"stopReason": "end_turn"}
    time.sleep(0.01)  # updatedAt has milliseconds
    newer = first.new_session("/tmp")
    assert first.prompt(newer, "second").result() == {"stopReason": "end_turn"}
    before = _listed(first)
    assert [s[0] for s in before] == [newer, older]
    assert first.close() == 0

    second = launch("--state-dir", state)
    second.initialize()
    assert _listed(second) == before
    for method in ("session/load", "session/load", "session/resume"):
        second.call(method, {"sessionId": older, "cwd": "/tmp", "mcpServers": []})
        assert _listed(second) == before, method  # the same updatedAt, the same order

    time.sleep(0.01)
    assert second.prompt(older, "again").result() == {"stopReason": "end_turn"}
    after = _listed(second)
    assert [s[0] for s in after] == [older, newer]  # the prompt moved it first
    assert after[0][1] > before[1][1] and after[1] == before[0]
    assert second.close() == 0

    third = launch("--state-dir", state)
    third.initialize()
    assert _listed(third) == after  # as stored
    time.sleep(0.01)
    third.call("session/resume", {"sessionId": newer, "cwd": "/var"})  # another cwd: a real change
    moved = _listed(third)
    assert moved[0][0] == newer and moved[0][2] == "/var" and moved[0][1] > after[0][1]
    assert third.close() == 0
