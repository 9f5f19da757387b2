"""FairShare.yield_if_due: free while a hub iteration's budget lasts, a park for the next poll
once it is spent (exactly at the budget included). Clock, loop and sleep are stand-ins."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import pytest

from acp_green.rpc import fairness


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    state = SimpleNamespace(now=1000.0, sleeps=[])
    monkeypatch.setattr(fairness, "time", SimpleNamespace(monotonic=lambda: state.now))
    monkeypatch.setattr(fairness, "gevent", SimpleNamespace(sleep=state.sleeps.append, get_hub=gevent.get_hub))
    return state


def _share() -> fairness.FairShare:
    share = fairness.FairShare(budget=1.0)
    share._loop = SimpleNamespace(iteration=7)
    return share


def test_within_the_budget_of_an_iteration_nothing_waits(clock: SimpleNamespace) -> None:
    share = _share()
    share.yield_if_due()  # starts the iteration's budget at 1000.0
    clock.now = 1000.5
    share.yield_if_due()
    assert clock.sleeps == []


def test_a_spent_budget_parks_the_caller_until_the_next_poll(clock: SimpleNamespace) -> None:
    share = _share()
    share.yield_if_due()
    clock.now = 1001.0  # exactly the budget
    share.yield_if_due()
    assert clock.sleeps == [fairness._AFTER_NEXT_POLL]
    share._loop.iteration = 8  # the next iteration: a fresh budget
    share.yield_if_due()
    assert clock.sleeps == [fairness._AFTER_NEXT_POLL]
