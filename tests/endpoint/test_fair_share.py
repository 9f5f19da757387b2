"""FairShare.yield_if_due (S10): free while a hub iteration's budget lasts; once it is spent the
callers wait in one line and are let through, in order, while a later iteration's budget lasts,
so however many streams there are they do about one budget of work per iteration between them."""

from __future__ import annotations

import time

import gevent

from acp_green.rpc import fairness


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_within_the_budget_of_an_iteration_nothing_waits() -> None:
    share = fairness.FairShare(budget=10.0)
    loop = gevent.get_hub().loop
    other_ran = []
    gevent.spawn(other_ran.append, True)
    start = loop.iteration
    for _ in range(100):
        share.yield_if_due()
    assert loop.iteration == start and other_ran == []  # never left this greenlet


def test_a_spent_budget_waits_for_a_later_iteration() -> None:
    share = fairness.FairShare(budget=0.001)
    loop = gevent.get_hub().loop
    share.yield_if_due()  # starts this iteration's budget
    start = loop.iteration
    _busy(0.002)
    share.yield_if_due()
    assert loop.iteration > start


def test_many_streams_share_one_budget_per_iteration_in_turn() -> None:
    budget, unit = 0.002, 0.0005
    share = fairness.FairShare(budget=budget)
    loop = gevent.get_hub().loop
    work: dict[int, float] = {}  # hub iteration -> streaming work done in it
    turns: list[int] = []

    def stream(n: int) -> None:
        for _ in range(8):
            share.yield_if_due()
            _busy(unit)
            work[loop.iteration] = work.get(loop.iteration, 0.0) + unit
            turns.append(n)

    streams = [gevent.spawn(stream, n) for n in range(20)]
    gevent.joinall(streams, timeout=30)
    assert all(s.dead for s in streams) and len(turns) == 160
    # A budget, plus the one unit that spends it, per iteration: not one unit per stream.
    assert max(work.values()) <= budget + 2 * unit, work
    # In line, first come first served: when the first stream is through, each other has had turns.
    first_done = min(i for i, n in enumerate(turns) if turns[:i + 1].count(n) == 8)
    assert all(turns[:first_done].count(n) >= 2 for n in range(20)), turns[:first_done]


def test_a_stream_killed_while_it_waits_leaves_the_line_and_the_others_go_on() -> None:
    share = fairness.FairShare(budget=0.0005)
    done: list[int] = []

    def stream(n: int) -> None:
        for _ in range(5):
            _busy(0.001)
            share.yield_if_due()
        done.append(n)

    streams = [gevent.spawn(stream, n) for n in range(4)]
    gevent.sleep(0)  # each has started and waits in line by now, or soon will
    streams[1].kill()
    gevent.joinall(streams, timeout=30)
    assert sorted(done) == [0, 2, 3] and not share._line
