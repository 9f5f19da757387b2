"""The recorder's lines (acp_green/tools/trace/record_lines.py): a line of any length, cut into
chunks anywhere, is traced as the event `tracing.wire_event` makes of the whole line, whether it
was held in memory or spooled to a file and written back in pieces (its long strings streamed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.tools.trace import record_lines
from acp_green.tools.trace.record_lines import LineTracer, RecordWriter
from acp_green.tracing import encode_event, note_event, wire_event

# Pieces of a JSON string's body, escapes among them, that a cut may fall inside of.
_BODY_PIECES = ["a", "é", "中", "😀", "\\n", "\\\\", '\\"', "\\/", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\u0000", "\\t"]
_texts = st.text(max_size=12) | st.text(min_size=8, max_size=60)
_leaves = st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70) | \
    st.floats(allow_nan=False, allow_infinity=False) | _texts
_values = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
                       max_leaves=12)
_ids = st.none() | st.integers(min_value=-5, max_value=2 ** 40) | _texts
_messages = st.one_of(
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _ids, "method": _texts, "params": _values}),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "method": _texts,
                           "params": st.fixed_dictionaries({"sessionId": _texts, "update": _values})}),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _ids, "result": _values}),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _ids, "error": _values}),
    _values,
)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """One line without its newline: a message or a batch (as JSON of any spacing, with or without
    escapes), a string literal of escapes, any bytes, or one of those cut short or with a byte changed."""
    kind = draw(st.sampled_from(["message", "batch", "escapes", "bytes"]))
    if kind == "bytes":
        line = draw(st.binary(max_size=80))
    elif kind == "escapes":
        body = "".join(draw(st.lists(st.sampled_from(_BODY_PIECES), max_size=40)))
        line = ('{"jsonrpc":"2.0","method":"m","params":{"sessionId":"' + body + '","text":"' + body + '"}}').encode()
    else:
        value = draw(_messages) if kind == "message" else draw(st.lists(_messages, min_size=1, max_size=3))
        separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\t")]))
        line = json.dumps(value, ensure_ascii=draw(st.booleans()), separators=separators).encode()
    damage = draw(st.sampled_from(["none", "none", "cut", "byte"]))
    if damage == "cut" and line:
        line = line[:draw(st.integers(0, len(line) - 1))]
    elif damage == "byte" and line:
        at = draw(st.integers(0, len(line) - 1))
        line = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1:]
    return line.replace(b"\n", b" ")


def _traced(tmp: Path, lines: list[bytes], last_newline: bool, cuts: list[int], stderr: bool = False) -> list[dict[str, Any]]:
    """The events a LineTracer writes for `lines` passed in chunks cut at `cuts`."""
    path = tmp / "t.jsonl"
    writer = RecordWriter(str(path), "recorder")
    tracer = LineTracer(writer, "agent", stderr=stderr, directory=str(tmp))
    stream = b"\n".join(lines) + (b"\n" if last_newline else b"")
    edges = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    for start, end in zip(edges, edges[1:]):
        tracer.feed(stream[start:end])
    tracer.end()
    writer.close()
    found = []
    for line in path.read_bytes().splitlines():
        event = json.loads(line)
        assert event.pop("seq") == len(found)
        event.pop("ts")
        found.append(event)
    return found


def _expected(lines: list[bytes], last_newline: bool, stderr: bool = False) -> list[dict[str, Any]]:
    """What `tracing` makes of each whole line, through the trace file's encoding."""
    kept = lines if last_newline or lines[-1] else lines[:-1]  # an empty last line without newline is no line
    events = []
    for index, line in enumerate(kept):
        newline = last_newline or index < len(lines) - 1
        event = note_event("agent", "info", line.decode("utf-8", "replace")) if stderr else wire_event(line, "agent", newline=newline)
        events.append(json.loads(encode_event(event)))
    return events


def _same(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert len(found) == len(expected), (found, expected)
    for event, wanted in zip(found, expected):
        if wanted["type"] == "line" and not wanted["error"].startswith("invalid UTF-8"):
            # Why a line is no message is said in the same words, but positions are the skeleton's.
            assert event["type"] == "line" and isinstance(event.get("error"), str) and event["error"]
            event, wanted = {**event, "error": ""}, {**wanted, "error": ""}
        assert event == wanted


# Every line spooled, every string over 9 bytes (the longest member name an event reads, sessionId)
# streamed, in reads of 5 bytes.
_SPOOLED = {"SPOOL_AT": 0, "LONG_STRING": 9, "PIECE": 5}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_lines(), min_size=1, max_size=4), last_newline=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=10 ** 6), max_size=6), spool_at=st.sampled_from([0, 24, 1 << 20]))
def test_each_line_is_traced_as_wire_event_makes_it_spooled_or_not(tmp_path, lines, last_newline, cuts, spool_at):
    """Every line spooled, those over 24 bytes, or none."""
    with mock.patch.multiple(record_lines, **{**_SPOOLED, "SPOOL_AT": spool_at}):
        _same(_traced(tmp_path, lines, last_newline, cuts), _expected(lines, last_newline))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=4),
       cuts=st.lists(st.integers(min_value=0, max_value=10 ** 6), max_size=6))
def test_each_stderr_line_is_a_note_of_its_text_spooled_or_not(tmp_path, lines, cuts):
    with mock.patch.multiple(record_lines, **_SPOOLED):
        _same(_traced(tmp_path, lines, True, cuts, stderr=True), _expected(lines, True, stderr=True))


def test_a_line_with_more_structure_than_is_decoded_says_so_and_keeps_its_bytes(tmp_path):
    line = json.dumps({"jsonrpc": "2.0", "method": "m", "params": {"list": list(range(200)), "text": "x" * 50}}).encode()
    with mock.patch.multiple(record_lines, SPOOL_AT=10, SKELETON_MAX=100, LONG_STRING=9):
        [event] = _traced(tmp_path, [line], True, [7, 300])
    assert event["type"] == "line" and event["raw"] == line.decode()
    assert "not decoded by the recorder: more than 100 bytes of this line" in event["error"]


def test_a_spooled_line_leaves_no_file_behind(tmp_path):
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": "é" * 3000}}).encode()
    with mock.patch.multiple(record_lines, SPOOL_AT=100):
        [event] = _traced(tmp_path, [line], True, [50, 5000])
    assert event["type"] == "response" and event["payload"] == {"text": "é" * 3000}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # the spool was unlinked from the start
