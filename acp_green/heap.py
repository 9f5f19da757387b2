"""The garbage collector's view of the process: what start-up left alive is kept out of its scans.

A full (oldest-generation) collection walks every tracked object, and after start-up most of
them are modules, classes and functions that live as long as the process. Walking them costs a
full pass many milliseconds on the hub, long enough to hold back control requests while a turn
or a replay allocates quickly. `freeze_start_up_objects` moves them to the collector's permanent
generation once (`gc.freeze`), so a full pass only walks what was made since.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from greenlet import greenlet

_frozen_greenlets: int | None = None  # greenlets moved out of gc's view by the freeze


def _tracked_greenlets() -> int:
    # gc tracks greenlets and there is no other registry; dead ones still referenced count too.
    return sum(1 for obj in gc.get_objects() if isinstance(obj, greenlet))


def freeze_start_up_objects() -> None:
    """Keep every object alive now out of later full collections (once; later calls do nothing)."""
    global _frozen_greenlets
    if _frozen_greenlets is None:
        _frozen_greenlets = _tracked_greenlets()
        gc.freeze()


def greenlet_count() -> int:
    """Greenlet objects in this process (the hub and the main greenlet included), frozen or not."""
    return (_frozen_greenlets or 0) + _tracked_greenlets()


@contextmanager
def all_objects_visible() -> Iterator[None]:
    """Inside, `gc.get_objects()` sees the frozen objects too (gevent's run info walks it to
    find every greenlet); they are frozen again after, with whatever else is alive then."""
    global _frozen_greenlets
    if _frozen_greenlets is None:
        yield
        return
    gc.unfreeze()
    try:
        yield
    finally:
        _frozen_greenlets = _tracked_greenlets()
        gc.freeze()
