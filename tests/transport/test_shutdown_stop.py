"""S13, how the server stops, in-process (`Server.serve` on pipes): at EOF a running prompt gets
the whole shutdown grace to wind down after its cancel, and a stop requested while the reader
waits for input (SIGTERM on an idle agent) ends that wait at once instead of waiting out the grace.
"""

from __future__ import annotations

import time

import gevent

from tests.agents import SleepsAfterCancelAgent
from tests.helpers import said


def test_at_eof_a_prompt_winding_down_within_the_grace_ends_cancelled_not_aborted_S13_S16(inprocess):
    """An agent that takes 0.5 s to wind down once cancelled, with a 5 s grace: the drain waits
    for it, so its prompt answers `cancelled` and its usage record says `cancelled` -- not
    `aborted`, which is what a kill before the grace is over leaves."""
    harness = inprocess(SleepsAfterCancelAgent(), shutdown_grace=5.0)
    client = harness.client
    client.initialize()
    sid = client.new_session()
    pending = client.prompt(sid, "wind down for 0.5")
    client.wait_for(lambda: "started" in said(client.updates(sid)), what="the prompt to start")
    assert harness.finish() == 0
    assert pending.result(timeout=5) == {"stopReason": "cancelled"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["cancelled"]


def test_a_stop_requested_while_the_reader_waits_for_input_ends_the_read_at_once_S13(inprocess):
    """An idle agent told to stop (what the SIGTERM handler does) kills its reader, parked in a
    read with nothing half-handled, rather than joining it for the 30 s grace: the reader is dead
    and `serve` has returned long before the grace would have run out."""
    harness = inprocess(SleepsAfterCancelAgent(), shutdown_grace=30.0)
    harness.client.initialize()
    server = harness.server
    gevent.sleep(0.05)  # the reader is back in its read, waiting for the next line
    assert server.connection._reader is not None and not server.connection._reader.dead
    started = time.monotonic()
    server.request_stop("SIGTERM")
    harness.greenlet.join(timeout=10)  # generous, and still a third of the grace
    assert harness.greenlet.dead, "serve() was still joining a reader parked in a read"
    assert server.connection._reader.dead and harness.exit_code == 0
    assert server.stop_reason == "SIGTERM"
    assert time.monotonic() - started < 10
