"""A Streamable HTTP connection's routing of its messages to event streams, and the bounded
source network transports push into: unit and property tests."""

from __future__ import annotations

import json

import gevent
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.remote.event_streams import EventStreams
from acp_green.rpc.channel import Line, PushedMessages


def _line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _drain(stream) -> list[dict]:
    taken = stream.take(0) or []
    return [json.loads(line) for line in taken]


def test_initialize_is_captured_for_its_post_and_nothing_else():
    streams = EventStreams(1 << 20, 8)
    answer = streams.capture_answer(0)
    streams.write(memoryview(_line({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}})))
    assert json.loads(answer.get(timeout=1)) == {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}
    assert _drain(streams.connection_stream) == []


def test_a_new_sessions_answer_goes_to_the_connection_and_its_updates_wait_on_its_own_stream():
    streams = EventStreams(1 << 20, 8)
    streams.note_request(1, "session/new", None)
    streams.write(memoryview(_line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})
                             + _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1"}})))
    assert [m.get("id") for m in _drain(streams.connection_stream)] == [1]
    assert [m.get("method") for m in _drain(streams.session_streams["s1"])] == ["session/update"]


def test_a_session_requests_answer_goes_to_that_sessions_stream_and_a_load_answers_on_the_connection():
    streams = EventStreams(1 << 20, 8)
    assert streams.session_stream("s1") is not None
    streams.note_request(2, "session/prompt", "s1")
    streams.note_request("2", "session/load", "s1")  # "2" is another id than 2
    streams.write(memoryview(_line({"jsonrpc": "2.0", "id": "2", "result": {}}) + _line({"jsonrpc": "2.0", "id": 2, "result": {}})))
    assert [m["id"] for m in _drain(streams.connection_stream)] == ["2"]
    assert [m["id"] for m in _drain(streams.session_streams["s1"])] == [2]


def test_a_message_for_a_session_without_a_stream_goes_to_the_connections():
    streams = EventStreams(1 << 20, 8)
    streams.note_request(3, "session/prompt", "unseen")
    streams.write(memoryview(_line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "unseen"}})
                             + _line({"jsonrpc": "2.0", "id": 3, "result": {}})))
    assert len(_drain(streams.connection_stream)) == 2 and "unseen" not in streams.session_streams


def test_session_streams_are_bounded():
    streams = EventStreams(1 << 20, 2)
    assert streams.session_stream("a") and streams.session_stream("b")
    assert streams.session_stream("c") is None
    assert streams.session_stream("a") is streams.session_streams["a"]


def test_the_writer_waits_while_a_stream_being_read_is_full_and_goes_on_once_it_is_read():
    streams = EventStreams(100, 8)
    streams.connection_stream.reader_attached = True
    line = _line({"jsonrpc": "2.0", "method": "x", "params": {"pad": "p" * 200}})
    writer = gevent.spawn(streams.write, memoryview(line + line))
    gevent.sleep(0.05)
    assert not writer.ready()  # one line is over the bound alone: the second waits, as on a full pipe
    assert len(streams.connection_stream.take(1)) == 1
    writer.join(timeout=5)
    assert writer.ready() and len(streams.connection_stream.take(1)) == 1


def test_streams_nobody_reads_hold_four_bounds_in_all_and_then_the_writer_waits():
    streams = EventStreams(1000, 8)
    streams.session_stream("unread")
    update = _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "unread", "pad": "p" * 400}})
    writer = gevent.spawn(lambda: [streams.write(memoryview(update)) for _ in range(20)])
    gevent.sleep(0.05)
    assert not writer.ready()
    assert 3000 < streams.session_streams["unread"].buffered <= 4000
    answer = gevent.spawn(streams.write, memoryview(_line({"jsonrpc": "2.0", "id": 1, "result": {}})))
    with gevent.Timeout(5):
        while not (writer.ready() and answer.ready()):  # read at last: every write goes on
            streams.session_streams["unread"].take(0.01)
    assert len(streams.connection_stream.take(0)) == 1


def test_the_end_of_the_connection_releases_a_waiting_writer_and_ends_every_stream():
    streams = EventStreams(10, 8)
    streams.session_stream("s")
    writer = gevent.spawn(streams.write, memoryview(_line({"jsonrpc": "2.0", "method": "x", "params": {}})))
    gevent.sleep(0.01)
    streams.close()
    writer.join(timeout=5)
    assert writer.ready()
    assert streams.connection_stream.take(0) is not None  # what was written is still readable...
    assert streams.connection_stream.take(0) is None       # ...then the stream ends
    assert streams.session_streams["s"].take(0) is None


messages = st.lists(st.one_of(
    st.builds(lambda i, s: ("answer", i, s), st.integers(0, 5), st.sampled_from([None, "s1", "s2"])),
    st.builds(lambda s: ("update", None, s), st.sampled_from([None, "s1", "s2", "s3"])),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(messages, st.sets(st.sampled_from(["s1", "s2"])))
def test_every_line_reaches_exactly_one_stream_in_the_order_written(sequence, open_streams):
    streams = EventStreams(1 << 20, 8)
    for session_id in open_streams:
        streams.session_stream(session_id)
    written = []
    for n, (kind, request_id, session_id) in enumerate(sequence):
        if kind == "answer":
            streams.note_request(request_id, "session/prompt", session_id)
            message = {"jsonrpc": "2.0", "id": request_id, "result": {"n": n}}
        else:
            message = {"jsonrpc": "2.0", "method": "session/update", "params": {"n": n, **({"sessionId": session_id} if session_id else {})}}
        written.append(n)
        streams.write(memoryview(_line(message)))
    got = [_drain(streams.connection_stream)] + [_drain(s) for s in streams.session_streams.values()]
    numbers = [[(m.get("result") or m.get("params"))["n"] for m in stream] for stream in got]
    assert sorted(n for stream in numbers for n in stream) == written
    assert all(stream == sorted(stream) for stream in numbers)


def test_pushed_messages_hold_the_pusher_at_the_bound_and_hand_out_what_was_pushed():
    source = PushedMessages(max_pending=2)
    pusher = gevent.spawn(lambda: [source.push(Line(str(n).encode())) for n in range(5)])
    gevent.sleep(0.05)
    assert not pusher.ready()
    lines = source.lines()
    got = [next(lines).data for _ in range(5)]
    pusher.join(timeout=5)
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert source.push(Line(b"5"))
    assert [line.data for line in source.unread_lines()] == [b"5"]
    source.end()
    assert next(lines, None) is None
    assert source.push(Line(b"late")) is False


def test_the_end_of_input_releases_a_held_pusher():
    source = PushedMessages(max_pending=1)
    source.push(Line(b"a"))
    pusher = gevent.spawn(source.push, Line(b"b"))
    gevent.sleep(0.01)
    source.end()
    pusher.join(timeout=5)
    assert pusher.value is False


def test_the_end_of_the_connection_answers_a_waiting_initialize_with_nothing_at_once():
    streams = EventStreams(1 << 20, 8)
    answer = streams.capture_answer(0)
    streams.close()
    assert answer.ready() and answer.get() is None  # its POST answers 504 now, not after 30 s
