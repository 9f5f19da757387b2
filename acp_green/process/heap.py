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
from dataclasses import dataclass
from itertools import compress
from typing import Any
from weakref import WeakSet

from greenlet import greenlet

_frozen_greenlets: WeakSet[greenlet] | None = None  # the live greenlets the freeze moved out of gc's view


def _greenlets_among(objects: list[Any]) -> list[greenlet]:
    # By exact type, in C: isinstance() would look up `__class__` on every object that is not a
    # greenlet, and a module with a `__getattr__` makes that slow (the whole walk took ~10 ms).
    kinds = {kind for kind in set(map(type, objects)) if issubclass(kind, greenlet)}
    return list(compress(objects, map(kinds.__contains__, map(type, objects))))


@dataclass(frozen=True, slots=True)
class GreenletCount:
    """The greenlets in this process, frozen or not (the hub and the main greenlet included).

    `unfinished` is what a leak of greenlets grows: ones that never end (a waiter nobody wakes).
    Finished ones are apart: one stays in gc's view until a collection frees it (a full one, for
    one that lived through two), so a count of every greenlet climbed and fell with the
    collector's rhythm, by hundreds over seconds, and a short soak read that as a leak. A finished
    greenlet that is kept for good is memory: `finished` stays high after a full collection."""

    unfinished: int  # running, waiting, or spawned and not yet started
    finished: int  # finished, still in gc's view: kept, or garbage not yet collected


def _count(greenlets: list[greenlet]) -> GreenletCount:
    finished = sum(1 for each in greenlets if each.dead)
    return GreenletCount(len(greenlets) - finished, finished)


def freeze_start_up_objects() -> None:
    """Keep every object alive now out of later full collections (once; later calls do nothing).

    The list `gc.get_objects()` returns is used and dropped within this one call, never kept
    across a switch: it holds a reference to every object of the process, and one kept while
    other greenlets ran (the greenlets were once picked out of it a slice at a time between
    yields) made `serve` crash now and then (SIGSEGV) when the walk overlapped its shutdown —
    an object the list still held was freed meanwhile, and dropping the list freed it twice.
    Picking the greenlets out costs about as long as `gc.get_objects()` itself (a millisecond or two).
    """
    global _frozen_greenlets
    if _frozen_greenlets is not None:
        return
    objects = gc.get_objects()
    frozen = _greenlets_among(objects)
    del objects
    gc.freeze()
    _frozen_greenlets = WeakSet(frozen)


def greenlet_counts() -> GreenletCount:
    """The greenlets in this process, unfinished and finished (gc tracks greenlets, and there is
    no other registry: this walks `gc.get_objects()`, a few milliseconds)."""
    return _count([*(_frozen_greenlets or ()), *_greenlets_among(gc.get_objects())])


def greenlet_count() -> int:
    """Greenlets in this process not yet finished, frozen or not (`GreenletCount.unfinished`)."""
    return greenlet_counts().unfinished


@contextmanager
def all_objects_visible() -> Iterator[None]:
    """Inside, `gc.get_objects()` sees the frozen objects too (gevent's run info walks it to
    find every greenlet); they are frozen again after, with whatever else is alive then."""
    global _frozen_greenlets
    if _frozen_greenlets is None:
        yield
        return
    gc.unfreeze()
    # gc.get_objects() now sees every greenlet: counting the frozen ones apart too would count them twice.
    _frozen_greenlets = WeakSet()
    try:
        yield
    finally:
        _frozen_greenlets = WeakSet(_greenlets_among(gc.get_objects()))
        gc.freeze()
