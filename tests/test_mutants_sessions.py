"""sessions.py behaviours that mutation testing (scripts/mutation.sh) found no test asserting:
cancel tokens and their callbacks, the eviction boundary, closing and deleting a session with or
without a running prompt, and the order resources are freed in. Driven directly.
"""

from __future__ import annotations

import gevent

from acp_green.cancel import CancelToken
from acp_green.sessions import SessionRegistry
from acp_green.store import MemoryStore

NOW = 1_000.0


def _registry(idle_timeout: float = 60.0) -> tuple[SessionRegistry, MemoryStore]:
    store = MemoryStore()
    return SessionRegistry(store, idle_timeout), store


def test_a_failing_cancel_callback_does_not_stop_the_others():
    token = CancelToken()
    ran: list[str] = []

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("listener bug")

    token.on_cancel(broken)
    token.on_cancel(lambda: ran.append("second"))
    token.set()
    assert ran == ["broken", "second"]
    assert token.is_set() and token.wait(0)
    token.set()  # a second set runs nothing again
    assert ran == ["broken", "second"]


def test_on_cancel_after_the_token_is_set_runs_at_once_and_a_removed_callback_never_runs():
    token = CancelToken()
    ran: list[str] = []
    remove = token.on_cancel(lambda: ran.append("removed"))
    token.on_cancel(lambda: ran.append("kept"))
    remove()
    remove()  # idempotent
    assert not token.is_set() and token.wait(0) is False
    token.set()
    assert ran == ["kept"]
    token.on_cancel(lambda: ran.append("late"))()
    assert ran == ["kept", "late"]


def test_S12_cancel_sets_the_turns_token_and_installs_a_fresh_one():
    registry, _ = _registry()
    session = registry.create("/tmp", [], [])
    owner = object()
    token = session.reserve(owner)
    session.cancel()
    assert token.is_set()
    assert session.token is not token and not session.token.is_set()


def test_S15_a_session_idle_exactly_the_timeout_is_kept_and_one_past_it_evicted():
    registry, store = _registry(idle_timeout=60.0)
    session = registry.create("/tmp", [], [{"name": "srv", "command": "x", "args": [], "env": []}])
    session.last_active = NOW
    sid = session.session_id
    assert registry.evict_idle(NOW + 60.0) == []
    assert registry.evict_idle(NOW + 60.5) == [sid]
    assert not registry.is_live(sid) and registry.live(sid) is None
    # It comes back from the store with its MCP server declarations.
    revived = registry.get(sid)
    assert revived is not session and revived.mcp_servers == session.mcp_servers
    assert store.load_session(sid) is not None


def test_closing_an_idle_session_frees_it_and_its_resources_in_reverse_order():
    registry, store = _registry()
    session = registry.create("/tmp", [], [])
    freed: list[int] = []
    session.resources += [lambda: freed.append(1), lambda: 1 / 0, lambda: freed.append(3)]
    assert registry.close(session.session_id) is True
    assert freed == [3, 1], "every closer runs, last opened first, a failing one does not stop the rest"
    assert not registry.is_live(session.session_id)
    assert store.load_session(session.session_id) is not None, "close keeps the stored record"
    assert registry.close(session.session_id) is False
    assert len(registry) == 0


def test_closing_a_busy_session_cancels_it_and_frees_it_when_the_prompt_ends():
    registry, _ = _registry()
    session = registry.create("/tmp", [], [])
    freed: list[str] = []
    session.resources.append(lambda: freed.append("mcp"))
    owner = object()
    token = session.reserve(owner)
    assert registry.close(session.session_id) is True
    assert token.is_set() and registry.is_live(session.session_id) and freed == []
    registry.prompt_ended(session)  # still reserved: nothing yet
    assert registry.is_live(session.session_id) and freed == []
    session.release(owner)
    registry.prompt_ended(session)
    assert not registry.is_live(session.session_id) and freed == ["mcp"]


def test_deleting_a_busy_session_forgets_it_at_once_and_frees_it_when_the_prompt_ends():
    registry, store = _registry()
    session = registry.create("/tmp", [], [])
    freed: list[str] = []
    session.resources.append(lambda: freed.append("mcp"))
    owner = object()
    token = session.reserve(owner)
    registry.delete(session.session_id)
    assert token.is_set() and not registry.is_live(session.session_id)
    assert store.load_session(session.session_id) is None
    assert freed == []
    session.release(owner)
    registry.prompt_ended(session)
    assert freed == ["mcp"]


def test_deleting_an_idle_session_frees_its_resources_now():
    registry, store = _registry()
    session = registry.create("/tmp", [], [])
    freed: list[str] = []
    session.resources.append(lambda: freed.append("mcp"))
    registry.delete(session.session_id)
    assert freed == ["mcp"] and store.load_session(session.session_id) is None


def test_resources_freed_from_the_hub_run_in_a_greenlet_of_their_own():
    """A prompt ending in a hub callback (a rawlink) must not block the hub freeing resources."""
    registry, _ = _registry()
    session = registry.create("/tmp", [], [])
    where: list[object] = []
    session.resources.append(lambda: where.append(gevent.getcurrent()))
    owner = object()
    session.reserve(owner)
    registry.close(session.session_id)
    session.release(owner)
    gevent.get_hub().loop.run_callback(registry.prompt_ended, session)
    gevent.sleep(0)
    gevent.sleep(0)
    assert where and where[0] is not gevent.get_hub()


def test_an_unknown_or_non_string_session_id_is_unknown_session():
    registry, _ = _registry()
    for bad in ("sess_nope", 7, None):
        try:
            registry.get(bad)
        except Exception as exc:  # UnknownSession carries the invalid-params code
            assert type(exc).__name__ == "UnknownSession"
        else:
            raise AssertionError(f"{bad!r} was accepted")
