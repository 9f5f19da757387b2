"""What start-up left alive is kept out of the garbage collector's full passes (heap.py), in a
real `acp-green serve`; the greenlet count the soak samples (the greenlets not yet finished)
still counts the frozen ones."""

from __future__ import annotations

import gc

from acp_green.process import heap


def test_after_the_first_message_serve_freezes_start_up_and_still_counts_every_unfinished_greenlet(launch):
    """Once the first message is handled and the store is open, the objects alive are in gc's
    permanent generation (so a full collection skips them); `_acp_green/stats` still counts the
    greenlets made before the freeze."""
    import gevent

    agent = launch()
    agent.initialize()
    agent.new_session()
    stats = agent.call("_acp_green/stats", {})
    for _ in range(1200):  # the freeze follows the store's opening in the background: wait for it
        if stats["gcFrozenObjects"] > 0:
            break
        gevent.sleep(0.05)
        stats = agent.call("_acp_green/stats", {})
    assert stats["gcFrozenObjects"] > 1000, stats  # modules, classes, functions: thousands
    assert stats["greenlets"] >= 3, stats  # the hub, the main greenlet and the reader at least
    assert isinstance(stats["finishedGreenlets"], int) and stats["finishedGreenlets"] >= 0, stats


def test_the_freeze_happens_once_and_the_count_includes_what_it_froze():
    before = heap.greenlet_count()
    was_frozen = gc.get_freeze_count()
    try:
        heap.freeze_start_up_objects()
        assert gc.get_freeze_count() > was_frozen
        assert heap.greenlet_count() == before  # the frozen greenlets are still counted
        frozen = gc.get_freeze_count()
        heap.freeze_start_up_objects()
        assert gc.get_freeze_count() == frozen  # once only
        assert heap.greenlet_count() == before
    finally:
        gc.unfreeze()
        heap._frozen_greenlets = None


def test_inside_all_objects_visible_the_frozen_greenlets_are_seen_and_counted_once_after():
    """A stack dump walks gc.get_objects(): inside `all_objects_visible` the greenlets frozen at
    start-up are in it; after, they are frozen again and still counted exactly once."""
    import gevent

    sleeper = gevent.spawn(gevent.sleep, 60)
    gevent.sleep(0)
    try:
        heap.freeze_start_up_objects()
        assert not any(obj is sleeper for obj in gc.get_objects())
        before = heap.greenlet_count()
        with heap.all_objects_visible():
            assert any(obj is sleeper for obj in gc.get_objects())
        assert not any(obj is sleeper for obj in gc.get_objects())
        assert heap.greenlet_count() == before
    finally:
        sleeper.kill()
        gc.unfreeze()
        heap._frozen_greenlets = None


def test_an_agent_served_in_process_leaves_the_host_heap_alone(inprocess):
    """Only a process serving its agent alone (serve_stdio, the CLI) freezes its heap: a Server
    embedded in a host process does not touch the host's garbage collector."""
    from acp_green.demo import DemoAgent

    was_frozen = gc.get_freeze_count()
    harness = inprocess(DemoAgent())
    harness.client.initialize()
    harness.client.new_session()
    assert gc.get_freeze_count() == was_frozen


def test_the_freeze_never_lets_another_greenlet_run_while_it_holds_every_object():
    """`gc.get_objects()` holds a reference to every object of the process: the freeze uses
    its list and drops it without a switch in between. Kept across yields (picked a slice at a
    time), it made `acp-green serve` die with SIGSEGV now and then when the walk overlapped
    the shutdown: an object it still held had been freed meanwhile."""
    import gevent

    ran_during: list[bool] = []
    freezing = [False]
    other = gevent.spawn(lambda: ran_during.append(freezing[0]))
    try:
        freezing[0] = True
        heap.freeze_start_up_objects()
        freezing[0] = False
        other.join(timeout=5)
        assert ran_during == [False]  # it ran, and only after the freeze
        assert heap.greenlet_count() >= 2  # the hub and this greenlet (`other` has finished)
    finally:
        other.kill()
        _reset_freeze()


def _reset_freeze() -> None:
    gc.unfreeze()
    heap._frozen_greenlets = None


def test_a_frozen_greenlet_that_ends_and_is_released_is_no_longer_counted_nor_kept():
    """The frozen greenlets are held weakly: one that ends leaves the count, and once dropped it
    is freed, as it would have been had it never been frozen (the count keeps nothing alive)."""
    import weakref

    import gevent

    from gevent.event import Event

    release = Event()
    ender = gevent.spawn(release.wait)
    gevent.sleep(0)
    try:
        heap.freeze_start_up_objects()
        with_it = heap.greenlet_count()
        release.set()
        ender.join(timeout=30)
        assert ender.dead
        gone = weakref.ref(ender)
        del ender
        gevent.sleep(0)  # the hub's callback that notified its links held it until now
        assert heap.greenlet_count() == with_it - 1
        gc.collect()
        assert gone() is None  # nothing of the count's holds it
    finally:
        _reset_freeze()


def test_the_count_asked_right_after_the_freeze_is_exact():
    """`_acp_green/stats` asked once the freeze is done counts every greenlet, none missed
    (frozen, so invisible to gc.get_objects()) and none counted twice."""
    import gevent

    gc.collect()  # greenlets left unreachable by earlier tests must not leave the count meanwhile
    before = heap.greenlet_count()
    seen: list[int] = []
    freezer = gevent.spawn(heap.freeze_start_up_objects)
    asker = gevent.spawn(lambda: seen.append(heap.greenlet_count()))
    try:
        freezer.join(timeout=30)
        asker.join(timeout=30)
        assert seen == [before + 1]  # the asker itself (the freezer ran first, and has finished)
    finally:
        asker.kill()
        freezer.kill()
        _reset_freeze()


def test_greenlets_made_after_the_freeze_are_counted_once_after_a_stack_dump():
    """A stack dump re-freezes everything alive, greenlets made since the start-up freeze too:
    they stay counted, and nothing is counted twice, inside the dump or after it."""
    import gevent
    from gevent.event import Event

    try:
        heap.freeze_start_up_objects()
        release = Event()
        later = gevent.spawn(release.wait)
        gevent.sleep(0)
        before = heap.greenlet_count()
        with heap.all_objects_visible():
            assert heap.greenlet_count() == before
        assert not any(obj is later for obj in gc.get_objects())  # frozen with the rest
        assert heap.greenlet_count() == before
        release.set()
        later.join(timeout=30)
        del later
        gevent.sleep(0)  # the hub's callback that notified its links held it until now
        assert heap.greenlet_count() == before - 1
    finally:
        _reset_freeze()


def test_a_finished_greenlet_is_not_counted_while_it_waits_for_the_collector():
    """The count is of greenlets not yet finished. One that ended but is still in gc's view (kept
    by a reference cycle until a collection frees it, which for one that lived a while is a full
    collection, seconds away) is not counted: counting it made the soak's short runs see the count
    climb by hundreds a minute with the collector's rhythm and call that a leak."""
    import gevent
    from gevent.event import Event

    class Cycle:
        greenlet: object = None

    gc.collect()
    gc.disable()  # the cycle below must wait for a collection, as it would between full passes
    try:
        before = heap.greenlet_count()
        finished_before = heap.greenlet_counts().finished
        release = Event()
        holder = Cycle()
        waiter = gevent.spawn(release.wait)
        holder.greenlet, waiter.holder = waiter, holder  # type: ignore[attr-defined]
        gevent.sleep(0)
        assert heap.greenlet_count() == before + 1  # waiting: counted
        release.set()
        waiter.join(timeout=30)
        del waiter, holder
        gevent.sleep(0)
        assert any(isinstance(obj, gevent.Greenlet) and obj.dead for obj in gc.get_objects())  # still in gc's view
        assert heap.greenlet_count() == before  # finished: not counted
        assert heap.greenlet_counts().finished == finished_before + 1  # but shown apart until collected
        gc.collect()
        assert heap.greenlet_counts().finished == finished_before
    finally:
        gc.enable()
        gc.collect()


def test_finished_greenlets_something_keeps_stay_in_the_finished_count_after_a_collection():
    """What the unfinished count cannot show (a finished greenlet kept for good: memory, not a
    waiter) the finished count does, once a full collection has freed the garbage."""
    import gevent

    kept = []
    gc.collect()
    before = heap.greenlet_counts()
    for _ in range(5):
        kept.append(gevent.spawn(lambda: None))
    gevent.joinall(kept, timeout=30)
    gc.collect()
    after = heap.greenlet_counts()
    assert after.unfinished == before.unfinished
    assert after.finished == before.finished + 5
    del kept[:]
    gevent.sleep(0)  # the hub's callback that notified the last one's links held it until now
    gc.collect()
    assert heap.greenlet_counts().finished == before.finished
