"""Shutdown while input is paused on the output backlog: the stop ends the pause at once."""

from __future__ import annotations

from typing import Any

import gevent

from acp_green.demo import DemoAgent
from acp_green.rpc.transport import OutputLimits


def test_request_stop_ends_the_input_pause_without_waiting_out_the_grace(inprocess: Any) -> None:
    """17a: with the reader paused at twice the hard limit (a client writing without reading),
    `request_stop` ends the pause: the reader is gone long before a 60 s grace would let it go."""
    limits = OutputLimits(high_water=16 << 10, low_water=4 << 10, hard_limit=64 << 10, flush_stall_timeout=1)
    harness = inprocess(DemoAgent(), shutdown_grace=60.0, output=limits)
    client, server = harness.client, harness.server
    client.initialize()
    outbound = server.protocol.endpoint.outbound
    client.pause_reading()
    gevent.spawn(client.send_raw, b"not json\n" * 6000)
    client.wait_for(lambda: outbound.over_input_limit and server.connection._reading is False, what="input to pause")
    reader = server.connection._reader
    server.request_stop("test")
    client.wait_for(lambda: reader.dead, timeout=20, what="the paused reader to end on request_stop")
    client.resume_reading()
    client.wait_for(lambda: harness.greenlet.dead, timeout=20, what="the server to return")
    assert harness.exit_code == 0
