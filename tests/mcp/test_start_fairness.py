"""MCP servers start a few at a time in the process, and the places go to the sessions in turn:
one session's servers that never answer `initialize` cannot starve another session's."""

from __future__ import annotations

import time

import gevent

from acp_green.mcp.starting import FairPlaces
from tests.helpers import wait_until
from tests.mcp_helpers import RECORDER, stdio_entry

MUTE = 40  # servers that never answer initialize: 40 x STAGGER (2 s) / 2 places = 40 s of queue


def test_one_sessions_mute_servers_do_not_delay_another_sessions_server(launch):
    """12: session A declares 40 servers that never answer initialize; session B's working server
    answers its tool call within a bound far below A's queue (40 s when the places were first come,
    first served, process-wide)."""
    agent = launch("--ephemeral")
    agent.initialize()
    mute = [{"name": f"mute{i}", "command": "sleep", "args": ["600"], "env": []} for i in range(MUTE)]
    agent.new_session(mcp_servers=mute)
    started = time.monotonic()
    session_b = agent.new_session(mcp_servers=[stdio_entry("st", RECORDER)])
    assert agent.prompt(session_b, "/mcp st pid").result(timeout=60) == {"stopReason": "end_turn"}
    took = time.monotonic() - started
    print(f"session B's server answered its first tool call after {took:.1f}s")
    assert took < 15, f"session B's server waited {took:.1f}s behind session A's"


def test_places_go_to_the_owners_in_turn():
    """A freed place goes to the next owner that waits, not to the oldest waiter."""
    places = FairPlaces(1)
    order: list[str] = []

    def take(owner: str, tag: str) -> None:
        places.acquire(owner)
        order.append(tag)

    places.acquire("a")
    waiters = [gevent.spawn(take, "a", f"a{i}") for i in range(3)]
    gevent.sleep(0)
    waiters.append(gevent.spawn(take, "b", "b0"))
    gevent.sleep(0)
    for _ in range(4):
        places.release()
        gevent.sleep(0)
    assert order == ["a0", "b0", "a1", "a2"]
    places.release()
    assert places.free == 1


def test_a_waiter_killed_gives_its_turn_or_its_place_on():
    """A waiter killed while it waits leaves the queue; one killed after it was handed a place passes it on."""
    places = FairPlaces(1)
    places.acquire("a")
    gone = gevent.spawn(places.acquire, "a")
    gevent.sleep(0)
    gone.kill()
    assert places.waiting == 0
    handed = gevent.spawn(places.acquire, "b")
    after = gevent.spawn(places.acquire, "c")
    gevent.sleep(0)
    handed.kill(block=False)  # the kill is delivered before b can resume with the place...
    places.release()  # ...handed to b here
    wait_until(lambda: handed.dead, timeout=5, what="b killed")
    wait_until(lambda: after.dead, timeout=5, what="c got the place b was handed")
    assert places.free == 0 and places.waiting == 0
