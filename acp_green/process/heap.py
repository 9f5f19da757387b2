"""The garbage collector's view of the process: what start-up left alive is kept out of its scans.

A full (oldest-generation) collection walks every tracked object, and after start-up most of
them are modules, classes and functions that live as long as the process. Walking them costs a
full pass many milliseconds on the hub, long enough to hold back control requests while a turn
or a replay allocates quickly. `freeze_start_up_objects` moves them to the collector's permanent
generation once (`gc.freeze`), so a full pass only walks what was made since.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import compress
from typing import Any
from weakref import WeakSet

from greenlet import greenlet

from ..rpc.fairness import share

_SCAN_SLICE = 2048  # objects looked at between two chances for the hub to poll
_frozen_greenlets: WeakSet[greenlet] | None = None  # the live greenlets the freeze moved out of gc's view
_unscanned: list[Any] = []  # frozen objects not yet looked at for greenlets


def _greenlets_among(objects: list[Any]) -> Iterable[greenlet]:
    # By exact type, in C: isinstance() would look up `__class__` on every object that is not a
    # greenlet, and a module with a `__getattr__` makes that slow (the whole walk took ~10 ms).
    kinds = {kind for kind in set(map(type, objects)) if issubclass(kind, greenlet)}
    return compress(objects, map(kinds.__contains__, map(type, objects)))


def _tracked_greenlets() -> int:
    # gc tracks greenlets and there is no other registry; dead ones still referenced count too.
    return sum(1 for _ in _greenlets_among(gc.get_objects()))


def _scan_slice() -> None:
    assert _frozen_greenlets is not None
    objects = _unscanned[-_SCAN_SLICE:]
    del _unscanned[-_SCAN_SLICE:]
    _frozen_greenlets.update(_greenlets_among(objects))


def freeze_start_up_objects() -> None:
    """Keep every object alive now out of later full collections (once; later calls do nothing).

    The hub waits only for `gc.get_objects()` (about a millisecond): the frozen greenlets are
    then picked out of that list a slice at a time, yielding between slices, so a control
    request that arrives meanwhile (a replay may have just begun) is not held behind the walk.
    """
    global _frozen_greenlets
    if _frozen_greenlets is not None:
        return
    _frozen_greenlets = WeakSet()
    _unscanned[:] = gc.get_objects()
    gc.freeze()
    fair = share()
    while _unscanned:
        _scan_slice()
        fair.yield_if_due()


def greenlet_count() -> int:
    """Greenlet objects in this process (the hub and the main greenlet included), frozen or not."""
    while _unscanned:  # asked while the freeze is still sorting its list: finish it now
        _scan_slice()
    return len(_frozen_greenlets or ()) + _tracked_greenlets()


@contextmanager
def all_objects_visible() -> Iterator[None]:
    """Inside, `gc.get_objects()` sees the frozen objects too (gevent's run info walks it to
    find every greenlet); they are frozen again after, with whatever else is alive then."""
    global _frozen_greenlets
    if _frozen_greenlets is None:
        yield
        return
    gc.unfreeze()
    # gc.get_objects() now sees every greenlet: counting the frozen ones apart too would count
    # them twice, and a walk the freeze had left unfinished is moot (everything is re-frozen after).
    _frozen_greenlets = WeakSet()
    _unscanned.clear()
    try:
        yield
    finally:
        _frozen_greenlets = WeakSet(_greenlets_among(gc.get_objects()))
        gc.freeze()
