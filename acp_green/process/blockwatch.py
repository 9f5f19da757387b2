"""The block watchdog: a WARNING on stderr when code holds the event loop too long.

Blocking code in a greenlet (time.sleep or a socket read without monkey-patching, a long CPU
loop) stops every session at once, cancels included, and nothing else would say so. A timer on
the hub stamps the time every quarter threshold; a real OS thread (one that monkey-patching
leaves real) looks at the stamp as often, and when it is older than the threshold it logs the
hub thread's stack as it is at that moment, naming the innermost function of the agent's own
code (outside the standard library, site-packages, gevent and acp_green).

One block is reported once, however long it lasts; after a warning the next ones are counted,
not logged, for REPEAT_EVERY seconds, and the next warning says how many there were.

Why not gevent's own monitor thread (`gevent.config.monitor_thread`): it fits in principle, but
it installs a greenlet trace function called on every switch, and each report walks every
object in the heap for greenlets; the stamp costs one timer callback per quarter threshold.
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from time import perf_counter
from types import FrameType

import gevent
from gevent.monkey import get_original

log = logging.getLogger(__name__)

# Real thread, lock and sleep even in a monkey-patched process: the watchdog must run while the hub is stuck.
_start_new_thread = get_original("_thread", "start_new_thread")
_allocate_lock = get_original("_thread", "allocate_lock")

#: Seconds after a warning during which further blocks are only counted.
REPEAT_EVERY = 30.0
#: Frames of the blocked stack shown, innermost last.
STACK_LIMIT = 25

_LIBRARY_DIRS = tuple(
    os.path.realpath(path) + os.sep
    for path in {*(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
                 os.path.dirname(os.path.dirname(os.path.abspath(gevent.__file__))),
                 os.path.dirname(os.path.abspath(__file__))}
)


class BlockWatch:
    """Watches the hub of the thread that starts it; `stop()` ends the watching thread."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.period = threshold / 4
        self.reported = 0  # warnings logged
        self.suppressed = 0  # blocks seen after the last warning and not logged
        hub = gevent.get_hub()
        self._hub_thread = hub.thread_ident
        self._last_tick: float | None = None  # None until the loop first turns: start-up is not watched
        self._reported_tick: float | None = None
        self._last_warning: float | None = None
        self._timer = hub.loop.timer(self.period, self.period, ref=False)  # never keeps the loop alive
        self._timer.start(self._tick)
        hub.loop.run_callback(self._tick)  # armed from the loop's first turn, not a period later
        self._stopped = _allocate_lock()
        self._stopped.acquire()
        _start_new_thread(self._thread_main, ())

    def stop(self) -> None:
        """End the watching thread (it exits within one period) and the hub's timer."""
        self._timer.stop()
        self._timer.close()
        if self._stopped.locked():
            self._stopped.release()

    # -- the hub -------------------------------------------------------------------------------
    def _tick(self) -> None:
        self._last_tick = perf_counter()

    # -- the watching thread -------------------------------------------------------------------
    def _thread_main(self) -> None:
        while not self._stopped.acquire(True, self.period):
            last = self._last_tick
            if last is None or last == self._reported_tick:
                continue  # not started yet, or this block was reported already
            held = perf_counter() - last
            if held >= self.threshold:
                self._reported_tick = last
                try:
                    self._block_seen(held)
                except Exception:  # ok: the watchdog must never end the process
                    log.debug("the block watchdog failed to report a block", exc_info=True)

    def _block_seen(self, held: float) -> None:
        now = perf_counter()
        if self._last_warning is not None and now - self._last_warning < REPEAT_EVERY:
            self.suppressed += 1
            return
        frame = sys._current_frames().get(self._hub_thread)
        if frame is None:
            return
        self._last_warning = now
        self.reported += 1
        suppressed, self.suppressed = self.suppressed, 0
        log.warning("%s", block_report(frame, held, self.threshold, suppressed))


def block_report(frame: FrameType, held: float, threshold: float, suppressed: int = 0) -> str:
    """The warning for a loop held `held` seconds so far, `frame` being where it is now."""
    culprit = own_code_frame(frame) or frame
    here = f"{culprit.f_code.co_name} ({culprit.f_code.co_filename}:{culprit.f_lineno})"
    inner = "" if culprit is frame else f", inside {frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})"
    earlier = f" ({suppressed} more blocks since the last warning were not reported)" if suppressed else ""
    stack = "".join(traceback.format_stack(frame, limit=STACK_LIMIT)).rstrip()
    from .patching import is_patched, unpatched_advice

    # Unpatched, the likely culprit is a plain blocking call: say why the process is not patched and how to patch it.
    remedy = "run CPU-heavy work in gevent.get_hub().threadpool" if is_patched() else unpatched_advice()
    return (f"the event loop is blocked: {here}{inner} has held it for {held:.2f}s so far (over {threshold:g}s), so every "
            f"session, cancels included, waits until it returns; {remedy}.{earlier}\nStack (innermost last):\n{stack}")


def own_code_frame(frame: FrameType) -> FrameType | None:
    """The innermost frame whose code is not in a library (stdlib, site-packages, gevent, acp_green)."""
    for candidate in _outward(frame):
        filename = candidate.f_code.co_filename
        if filename.startswith("<") and not filename.startswith("<string"):
            continue  # <frozen importlib._bootstrap> and the like
        if not os.path.realpath(filename).startswith(_LIBRARY_DIRS):
            return candidate
    return None


def _outward(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def start(threshold: float) -> BlockWatch | None:
    """Watch this thread's hub (`--block-warning`); None when `threshold` is 0 (off)."""
    return BlockWatch(threshold) if threshold > 0 else None
