"""Review: a Streamable HTTP connection's event streams must bound its memory and must not let
one unread stream hold every other stream of the connection."""

from __future__ import annotations

import json

import gevent

from acp_green.remote.event_streams import EventStreams


def _update(session_id: str, size: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": session_id, "text": "x" * size}}).encode() + b"\n"


def test_what_all_streams_of_a_connection_hold_is_bounded_not_per_stream():
    """Each stream holds up to max_buffered unread; with 64 streams each kept just under it the
    writer never waits, so one connection holds 64 x max_buffered (1024 x 1 MiB by default,
    outside the output backlog, so output_backlog never refuses anything)."""
    max_buffered = 10_000
    streams = EventStreams(max_buffered, 64)
    for i in range(64):
        streams.session_stream(f"s{i}")

    def write() -> None:
        for i in range(64):
            for _ in range(9):
                streams.write(memoryview(_update(f"s{i}", 900)))

    writer = gevent.spawn(write)
    gevent.sleep(0.5)  # the writer either finished or waits for a reader
    held = streams.connection_stream.buffered + sum(s.buffered for s in streams.session_streams.values())
    writer.kill()
    assert held <= 4 * max_buffered, f"{held} bytes held unread by one connection (max_buffered {max_buffered})"


def test_an_unread_session_stream_does_not_stop_the_connections_own_stream():
    """A client reading the connection's stream (control answers) but not yet one session's:
    once that session's stream is full, the writer waits on it and the next answer meant for
    the connection's stream never arrives (head-of-line blocking; S10 within a connection)."""
    streams = EventStreams(10_000, 8)
    streams.session_stream("busy")
    streams.note_request(7, "session/list", None)

    def write() -> None:
        streams.write(memoryview(_update("busy", 20_000)))
        streams.write(memoryview(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"sessions": []}}).encode() + b"\n"))

    writer = gevent.spawn(write)
    taken = streams.connection_stream.take(5)
    writer.kill()
    assert taken and [json.loads(line).get("id") for line in taken] == [7], taken
