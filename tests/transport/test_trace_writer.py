"""The trace writer (acp_green/tracing.py): each event is in the file as soon as it is given, in
order with a rising seq and a ts that never goes back; lines are cut from chunks of any size; a
file that cannot be written is said once and then left alone, and nothing raises."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from acp_green.tracing import StreamTrace, TraceWriter, WireTrace


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_each_event_is_in_the_file_once_given_without_a_close(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(str(path), "recorder")
    writer.start(["agent", "--x"], 42)
    assert read(path)[0]["fields"]["command"] == ["agent", "--x"]
    stream = StreamTrace(writer, "client")
    stream.feed(b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc"')
    assert [e["seq"] for e in read(path)] == [0, 1]
    stream.feed(b':"2.0","method":"b"}\n')
    assert [e.get("method") for e in read(path)] == [None, "a", "b"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_lines_are_cut_the_same_from_chunks_of_any_size(tmp_path):
    data = b'{"jsonrpc":"2.0","id":1,"result":{}}\n\nnot json\n\xff\xfe\n{"jsonrpc":"2.0","method":"m"}'
    expected = None
    for size in (1, 2, 3, 7, len(data)):
        path = tmp_path / f"{size}.jsonl"
        writer = TraceWriter(str(path), "recorder")
        stream = StreamTrace(writer, "agent")
        for at in range(0, len(data), size):
            stream.feed(data[at:at + size])
        stream.end()
        got = [{k: v for k, v in e.items() if k not in ("ts", "seq")} for e in read(path)]
        assert len(got) == 5 and got[-1]["newline"] is False and got[1]["raw"] == ""
        expected = expected or got
        assert got == expected, size


def test_time_never_goes_back_and_seq_counts_every_event(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(str(path), "runtime")
    writer.note("info", "one")
    writer.write([{"type": "trace"}], ts=0.0)  # a moment before the last event written
    writer.note("info", "three")
    written = read(path)
    assert [e["seq"] for e in written] == [0, 1, 2]
    assert written[0]["ts"] <= written[1]["ts"] <= written[2]["ts"] and written[1]["ts"] == written[0]["ts"]


def test_an_unwritable_file_is_said_once_and_nothing_raises(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="acp_green.tracing")
    for path in (tmp_path / "missing" / "t.jsonl", "/dev/full"):
        caplog.clear()
        writer = TraceWriter(str(path), "recorder")
        writer.start(None, None)
        stream = StreamTrace(writer, "client")
        for _ in range(3):
            stream.feed(b'{"jsonrpc":"2.0","method":"m"}\n')
        writer.finish(0, None)
        assert writer.failed
        assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"cannot write the trace file {path}"]


def test_the_runtime_trace_keeps_a_last_line_without_newline_in_its_place(tmp_path):
    path = tmp_path / "t.jsonl"
    trace = WireTrace(str(path), None, 7)
    trace.received(b'{"jsonrpc":"2.0","id":1,"method":"x"}\n')
    trace.sent(b'{"jsonrpc":"2.0","id":1,"res')
    trace.sent(b'ult":null}\n{"jsonrpc":"2.0","id":2,')
    trace.received(b"last")
    trace.finish(0, "SIGTERM")
    written = read(path)
    assert [(e["type"], e.get("from"), e.get("newline", True)) for e in written] == [
        ("trace", None, True), ("request", "client", True), ("response", "agent", True), ("line", "client", False),
        ("line", "agent", False), ("trace", None, True)]
    assert written[0]["fields"]["pid"] == 7 and written[0]["component"] == "runtime"
    assert written[-1]["fields"] == {"exit": 0, "signal": "SIGTERM"}
