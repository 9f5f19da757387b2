"""The unit layer for `sessions.SessionRegistry`, `Session` and `CancelToken`: reservations, tokens and
their callbacks (S8, S11, S12, S14), idle eviction and its exact boundary (S15), closing and deleting
a session with or without a running prompt and the order its resources are freed in; driven
directly (with a fake clock where time matters), no endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import sessions as sessions_module
from acp_green.rpc.cancel import CancelToken
from acp_green.errors import UnknownSession
from acp_green.sessions import SessionRegistry
from acp_green.store import MemoryStore
from tests.helpers import FakeClock

TIMEOUT = 60.0
NOW = 1_000.0


def _registry(idle_timeout: float = 60.0) -> tuple[SessionRegistry, MemoryStore]:
    """A registry on a store of its own and the real clock (a test that needs a time passes it)."""
    store = MemoryStore()
    return SessionRegistry(store, idle_timeout), store


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(sessions_module, "time", fake)
    return fake


@pytest.fixture
def registry(clock: FakeClock) -> Iterator[SessionRegistry]:
    store = MemoryStore()
    yield SessionRegistry(store, idle_timeout=TIMEOUT)
    store.close()


# -- reservations and tokens ----------------------------------------------------------------------
def test_S11_reserve_binds_the_current_token_so_a_cancel_right_after_reaches_that_prompt(registry):
    """S11: the token a prompt gets at admission is the one the next session/cancel sets."""
    session = registry.create("/tmp", [], [])
    token = session.reserve(owner := object())
    session.cancel()
    assert token.is_set()
    session.release(owner)


def test_S12_a_cancel_never_reaches_the_next_prompt(registry):
    """S12: after a cancel the session has a fresh token: the next prompt starts uncancelled, and a
    cancel with no prompt running is spent without touching the next one."""
    session = registry.create("/tmp", [], [])
    first = session.reserve(owner := object())
    session.cancel()
    session.release(owner)
    second = session.reserve(owner)
    assert first.is_set() and not second.is_set() and second is not first
    session.release(owner)
    session.cancel()  # idle: nothing to cancel
    assert not session.reserve(owner).is_set()


def test_S14_only_the_owner_releases_and_releasing_twice_is_harmless(registry):
    """S14/S8: a release by anyone but the reservation's owner leaves the session reserved; the
    owner's release frees it, and a second release changes nothing."""
    session = registry.create("/tmp", [], [])
    owner = object()
    session.reserve(owner)
    session.release(object())
    assert session.busy
    session.release(owner)
    session.release(owner)
    assert not session.busy
    other = object()
    session.reserve(other)
    session.release(owner)  # a stale release from the first prompt
    assert session.busy and session.active_prompt is other


def test_cancel_callbacks_run_once_and_a_late_listener_runs_at_once(registry):
    """A token's callbacks run when it is set, once; one added after it was set runs immediately."""
    token = registry.create("/tmp", [], []).token
    seen: list[str] = []
    token.on_cancel(lambda: seen.append("early"))
    remove = token.on_cancel(lambda: seen.append("removed"))
    remove()
    token.set()
    token.set()
    token.on_cancel(lambda: seen.append("late"))
    assert seen == ["early", "late"]


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


# -- idle eviction (S15) ----------------------------------------------------------------------------
def test_S15_idle_time_is_strictly_more_than_the_timeout(registry, clock):
    """S15: a session idle exactly the timeout stays; one tick more and it is evicted."""
    session = registry.create("/tmp", [], [])
    clock.now += TIMEOUT
    assert registry.evict_idle() == []
    clock.now += 0.001
    assert registry.evict_idle() == [session.session_id]
    assert not registry.is_live(session.session_id)


def test_S15_a_busy_session_is_never_evicted_however_long_it_runs(registry, clock):
    session = registry.create("/tmp", [], [])
    session.reserve(owner := object())
    for _ in range(5):
        clock.now += 10 * TIMEOUT
        assert registry.evict_idle() == []
    session.release(owner)


def test_S15_release_and_get_refresh_the_last_active_time(registry, clock):
    """S15: idle time counts from the last use: the end of a prompt (release) or any request
    naming the session (get)."""
    session = registry.create("/tmp", [], [])
    session.reserve(owner := object())
    clock.now += 5 * TIMEOUT
    session.release(owner)
    clock.now += TIMEOUT - 1
    assert registry.evict_idle() == []
    registry.get(session.session_id)
    clock.now += TIMEOUT - 1
    assert registry.evict_idle() == []
    clock.now += 2
    assert registry.evict_idle() == [session.session_id]


def test_S15_an_evicted_session_comes_back_from_the_store_with_its_mcp_servers(registry, clock):
    """S15: a request naming an evicted session revives it from the store (a new live handle, no
    replay) with the MCP servers it declared; it counts as freshly active."""
    servers = [{"name": "tools", "command": "/bin/true", "args": [], "env": []}]
    session = registry.create("/work", ["/extra"], servers)
    clock.now += TIMEOUT + 1
    assert registry.evict_idle() == [session.session_id]
    revived = registry.get(session.session_id)
    assert revived is not session
    assert (revived.record.cwd, revived.record.additional_directories, revived.mcp_servers) == ("/work", ["/extra"], servers)
    assert registry.evict_idle() == []


def test_S15_a_closed_session_does_not_come_back_with_its_mcp_servers(registry, clock):
    """An evicted session that is then closed forgets its dormant MCP declarations."""
    session = registry.create("/tmp", [], [{"name": "t", "command": "/bin/true", "args": [], "env": []}])
    clock.now += TIMEOUT + 1
    registry.evict_idle()
    assert registry.close(session.session_id) is False  # not live: nothing to cancel
    assert registry.get(session.session_id).mcp_servers == []


def test_S15_an_archived_session_does_not_come_back_with_its_mcp_servers(registry, clock):
    """session/archive closes as session/close would, an evicted session too: its dormant MCP
    declarations (which may carry secrets) are forgotten, and it stays archived."""
    session = registry.create("/tmp", [], [{"name": "t", "command": "/bin/true", "args": [], "env": []}])
    clock.now += TIMEOUT + 1
    registry.evict_idle()
    registry.set_archived(session.session_id, True)
    revived = registry.get(session.session_id)
    assert revived.mcp_servers == [] and revived.record.archived


@settings(deadline=None, max_examples=60)
@given(idle=st.lists(st.floats(min_value=0, max_value=3 * TIMEOUT, allow_nan=False), min_size=1, max_size=8),
       busy=st.data())
def test_S15_eviction_takes_exactly_the_idle_sessions_that_are_not_busy(idle, busy):
    """S15 as a property: after any mix of idle times and reservations, evict_idle returns exactly
    the sessions idle more than the timeout and not reserved."""
    clock = FakeClock()
    original = sessions_module.time
    sessions_module.time = clock  # the fixture's monkeypatch is per test, not per example
    try:
        registry = SessionRegistry(MemoryStore(), idle_timeout=TIMEOUT)
        start = clock.now
        sessions = []
        for seconds in idle:
            clock.now = start - seconds
            sessions.append(registry.create("/tmp", [], []))
        reserved = busy.draw(st.lists(st.booleans(), min_size=len(idle), max_size=len(idle)))
        for session, is_busy in zip(sessions, reserved):
            if is_busy:
                session.active_prompt = object()  # reserve() would refresh the time
        clock.now = start
        expected = {s.session_id for s, seconds, b in zip(sessions, idle, reserved) if seconds > TIMEOUT and not b}
        assert set(registry.evict_idle()) == expected
        assert all(registry.is_live(s.session_id) == (s.session_id not in expected) for s in sessions)
    finally:
        sessions_module.time = original


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


# -- close and delete (S8) --------------------------------------------------------------------------
def test_S8_closing_a_busy_session_cancels_it_and_keeps_it_until_the_prompt_ends(registry):
    """S8: session/close of a running session sets its prompt's token but keeps it live (reserved)
    until that prompt ends; then it is freed, its resources closed once."""
    session = registry.create("/tmp", [], [])
    closed: list[str] = []
    session.resources.append(lambda: closed.append("closed"))
    token = session.reserve(owner := object())
    assert registry.close(session.session_id) is True
    assert token.is_set() and registry.is_live(session.session_id) and closed == []
    session.release(owner)
    registry.prompt_ended(session)
    assert not registry.is_live(session.session_id) and closed == ["closed"]
    registry.prompt_ended(session)
    assert closed == ["closed"]


def test_delete_forgets_the_session_everywhere(registry):
    session = registry.create("/tmp", [], [])
    registry.delete(session.session_id)
    assert not registry.is_live(session.session_id)
    with pytest.raises(UnknownSession):
        registry.get(session.session_id)


@pytest.mark.parametrize("session_id", [None, 7, ["sess"], "sess_unknown"])
def test_unknown_or_ill_typed_session_ids_are_unknown_session(registry, session_id):
    with pytest.raises(UnknownSession):
        registry.get(session_id)


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
        except Exception as exc:  # UnknownSession carries ACP's resource-not-found code
            assert type(exc).__name__ == "UnknownSession"
        else:
            raise AssertionError(f"{bad!r} was accepted")
