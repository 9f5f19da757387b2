"""A cancelled turn still running when the cancel grace ends is interrupted at its blocking call.

An agent that watches its token ends by itself, within the grace. Plain blocking code does not:
`time.sleep`, a socket read in urllib, requests, httpx or a model SDK, `subprocess.run`'s wait.
Under monkey-patching each of those waits is a switch to the hub, so the hub can raise
TurnInterrupted there, in the turn's own greenlet, and the turn unwinds through the agent's
`finally` blocks and answers `cancelled`. `subprocess.run` and `subprocess.call` kill their
child on any exception. Closing a response from the cancel callback instead reads as a
reentrant call on the buffered reader the turn is blocked in; an interrupt has no such race.

An unpatched process blocks in C, where nothing can be raised: the block watcher says so.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import gevent
from greenlet import greenlet as Greenlet

from ..errors import TurnInterrupted
from ..rpc.cancel import CancelToken

log = logging.getLogger(__name__)

#: Seconds a cancelled turn may take to end by itself before it is interrupted (`--cancel-grace`).
DEFAULT_CANCEL_GRACE = 0.5
#: Seconds a turn may run on after its interrupt before a WARNING says it caught it (its session
#: stays busy until it returns, and nothing else would say why).
IGNORED_AFTER = 5.0


class CancelInterrupt:
    """Raises TurnInterrupted in one turn's greenlet `grace` seconds after its token is set,
    unless `disarm` came first. `math.inf` never interrupts.

    The throw happens in a hub callback, where the turn's greenlet cannot be running, and checks
    `_armed` there: once `disarm` returned, no interrupt can reach the runtime's own settling."""

    __slots__ = ("_target", "_grace", "_armed", "_timer", "_remove", "_name")

    def __init__(self, token: CancelToken, grace: float, name: str = "a turn") -> None:
        self._target: Greenlet = gevent.getcurrent()
        self._grace = grace
        self._name = name
        self._armed = not math.isinf(grace)
        self._timer: Any = None
        self._remove = token.on_cancel(self._start) if self._armed else _nothing

    def _start(self) -> None:
        if not self._armed:
            return
        self._timer = gevent.get_hub().loop.timer(self._grace)
        self._timer.start(self._fire)

    def _fire(self) -> None:
        if not self._armed or self._target.dead:
            return
        self._armed = False
        log.info("%s was still running %.2f s after its cancel: interrupting its blocking call", self._name, self._grace)
        self._timer.close()
        self._timer = gevent.get_hub().loop.timer(IGNORED_AFTER)
        self._timer.start(self._ran_on)
        self._target.throw(TurnInterrupted(f"cancelled, and still running after the cancel grace ({self._grace:g} s)"))

    def _ran_on(self) -> None:
        if self._timer is not None and not self._target.dead:
            log.warning("%s caught its interrupt (acp_green.TurnInterrupted) and is still running %.0f s later: its "
                        "session stays busy until it returns; let TurnInterrupted propagate (catch Exception, not "
                        "BaseException)", self._name, IGNORED_AFTER)

    def disarm(self) -> None:
        """The turn's agent code has returned: no interrupt from now on."""
        self._armed = False
        self._remove()
        if self._timer is not None:
            self._timer.close()
            self._timer = None


def _nothing() -> None:
    """The remover of a callback never registered."""
