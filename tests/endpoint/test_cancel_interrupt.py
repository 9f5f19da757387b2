"""protocol/interrupt.py: the interrupt of a cancelled turn's blocking call, on its own.

S14: a turn that ends by itself is never interrupted, and none is once its agent code returned
(disarm), so an interrupt can never land in the runtime's settling of the turn.
"""

from __future__ import annotations

import math

import gevent
import pytest

from acp_green.errors import TurnInterrupted
from acp_green.protocol.interrupt import CancelInterrupt
from acp_green.rpc.cancel import CancelToken


def blocked_turn(token: CancelToken, grace: float, seconds: float = 10.0, disarm_after: float | None = None) -> gevent.Greenlet:
    """A greenlet standing for a turn: arms an interrupt, then sleeps `seconds`; returns how it ended."""

    def body() -> str:
        interrupt = CancelInterrupt(token, grace, "a test turn")
        try:
            if disarm_after is not None:
                gevent.sleep(disarm_after)
                interrupt.disarm()
            gevent.sleep(seconds)
            return "slept"
        except TurnInterrupted:
            return "interrupted"
        finally:
            interrupt.disarm()

    return gevent.spawn(body)


def test_s14_a_cancelled_blocking_call_is_interrupted_once_the_grace_is_over():
    token = CancelToken()
    turn = blocked_turn(token, grace=0.05)
    gevent.sleep(0)
    token.set()
    assert turn.get(timeout=5) == "interrupted"


def test_s14_no_interrupt_without_a_cancel():
    turn = blocked_turn(CancelToken(), grace=0.0, seconds=0.2)
    assert turn.get(timeout=5) == "slept"


def test_s14_a_disarmed_interrupt_never_lands_even_with_its_timer_running():
    """The cancel starts the timer; the agent code returns (disarm) before it fires: the turn
    then sleeps on, past the grace, untouched."""
    token = CancelToken()
    turn = blocked_turn(token, grace=0.1, seconds=0.4, disarm_after=0.02)
    gevent.sleep(0)
    token.set()
    assert turn.get(timeout=5) == "slept"


@pytest.mark.parametrize("grace", [math.inf])
def test_an_infinite_grace_never_interrupts(grace):
    token = CancelToken()
    turn = blocked_turn(token, grace=grace, seconds=0.2)
    gevent.sleep(0)
    token.set()
    assert turn.get(timeout=5) == "slept"


def test_an_interrupt_of_a_greenlet_that_has_ended_is_nothing():
    """The timer fires after its turn's greenlet ended without a disarm: no error in the hub."""
    token = CancelToken()
    holder: list[CancelInterrupt] = []
    ended = gevent.spawn(lambda: holder.append(CancelInterrupt(token, 0.01)))
    ended.join()
    token.set()
    gevent.sleep(0.05)
    assert ended.dead and ended.successful()


def test_a_disarmed_interrupt_leaves_no_callback_on_the_token():
    """A session's token outlives its uncancelled turns: each turn's interrupt takes its callback
    off again, so 1,000 turns leave none behind."""
    token = CancelToken()

    def turn() -> None:
        CancelInterrupt(token, 0.5).disarm()

    for _ in range(1000):
        gevent.spawn(turn).join()
    assert token._callbacks == []


def test_an_interrupt_the_turn_swallows_is_said_at_warning_once_it_has_run_on(caplog, monkeypatch):
    """A turn that catches TurnInterrupted and keeps running holds its session busy: a WARNING
    says so once it has run on for IGNORED_AFTER seconds after the interrupt."""
    from acp_green.protocol import interrupt

    monkeypatch.setattr(interrupt, "IGNORED_AFTER", 0.05)
    token = CancelToken()

    def stubborn() -> None:
        armed = CancelInterrupt(token, 0.01, "the turn of sess_x")
        try:
            gevent.sleep(10)
        except TurnInterrupted:
            gevent.sleep(0.3)
        armed.disarm()

    turn = gevent.spawn(stubborn)
    gevent.sleep(0)
    with caplog.at_level("WARNING", logger="acp_green.protocol.interrupt"):
        token.set()
        turn.join(timeout=5)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "the turn of sess_x" in warnings[0] and "caught" in warnings[0], warnings
