"""`acp-green trace html` without a browser: the timeline it lays out for a known trace, the tolerant
reader, and a page that loads nothing and never turns trace text into markup (the page in a real
browser: test_trace_html_browser.py)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_green.cli import cli
from acp_green.tools.trace.html import Timeline, build_timeline, load_events, render_page, write_html
from tests.trace_samples import HOSTILE, TraceBuilder, three_sessions


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, Timeline]:
    builder, _expected = three_sessions()
    path = builder.write(tmp_path / "three.jsonl")
    return path, build_timeline(load_events(path))


def marks_with(timeline: Timeline, *classes: str) -> list:
    return [m for m in timeline.marks if set(classes) <= set(m.classes.split())]


def test_one_lane_per_session_in_order_after_the_connections_lane(sample):
    _path, timeline = sample
    assert [lane.session for lane in timeline.lanes] == [None, "sess-a", "sess-b", "sess-c"]


def test_requests_are_bars_from_send_to_answer_in_their_sessions_lane(sample):
    _path, timeline = sample
    _builder, expected = three_sessions()
    bars = marks_with(timeline, "bar")
    assert len(bars) == expected.requests
    by_method = {(m.label, m.lane) for m in bars}
    assert ("initialize", 0) in by_method and ("session/list", 0) in by_method
    # session/new has no session of its own: its bar opens the lane of the session its answer made.
    assert {m.lane for m in bars if m.label == "session/new"} == {1, 2, 3}
    permission = next(m for m in bars if m.label == "session/request_permission")
    request, response = (timeline.events[i] for i in permission.events)
    assert (permission.start, permission.end) == (request["ts"], response["ts"]) and permission.end - permission.start == pytest.approx(0.315)
    assert "from-agent" in permission.classes.split() and permission.lane == 1


def test_updates_are_ticks_and_cancels_errors_and_open_requests_are_marked(sample):
    _path, timeline = sample
    _builder, expected = three_sessions()
    assert len(marks_with(timeline, "tick", "update")) == expected.updates
    assert [m.lane for m in marks_with(timeline, "tick", "cancel")] == [2]
    assert [(m.label, m.lane) for m in marks_with(timeline, "bar", "cancelled")] == [("session/prompt", 2)]
    assert [(m.label, m.lane) for m in marks_with(timeline, "bar", "error")] == [("session/prompt → error -32603 Internal error", 3)]
    assert [m.lane for m in marks_with(timeline, "bad-line", "error")] == [0]
    opened = marks_with(timeline, "bar", "open")
    assert len(opened) == expected.unanswered and opened[0].end == timeline.start + timeline.duration
    # The recorder's first and last notes are the page's header, not marks; the agent's stderr is.
    assert [m.label for m in marks_with(timeline, "log")] == ["agent: demo agent ready"]
    assert timeline.meta["command"] == ["acp-green", "serve"] and timeline.meta["signal"] == "SIGTERM"


def test_concurrent_requests_of_a_lane_get_rows_of_their_own(sample):
    _path, timeline = sample
    lane_a = [m for m in marks_with(timeline, "bar") if m.lane == 1]
    prompt = next(m for m in lane_a if m.label == "session/prompt" and "open" not in m.classes)
    permission = next(m for m in lane_a if m.label == "session/request_permission")
    assert prompt.row != permission.row and min(prompt.row, permission.row) >= 1
    assert timeline.lanes[1].rows == 1 + max(m.row for m in lane_a)


def test_an_answer_to_no_request_is_an_orphan_error_and_events_without_a_raw_line_are_kept():
    t = TraceBuilder()
    t.answer("agent", 99, {})
    t.events.append({"ts": 0.5, "type": "notification", "from": "client", "to": "agent", "method": "session/cancel",
                     "session": "s1", "params": {"sessionId": "s1"}})  # as the Rust conductor writes it: no raw
    timeline = build_timeline(t.events)
    assert [m.classes for m in timeline.marks] == ["mark tick orphan error", "mark tick cancel"]
    assert timeline.events[1]["params"] == {"sessionId": "s1"}


def test_the_reader_skips_what_is_not_an_event_and_keeps_the_rest(tmp_path, caplog):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b'{"ts": 0, "type": "trace", "message": "a"}\n\n[1, 2]\n'
                     b'{"ts": 0.1, "type": "notification", "method": "x", "params": {}}\n{"ts": 0.2, "ty')
    with caplog.at_level(logging.WARNING):
        events = load_events(path)
    assert [e["type"] for e in events] == ["trace", "notification"]
    assert "skipped 2 lines" in caplog.text


def _data_block(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_trace_text_never_becomes_markup_in_the_page(sample):
    path, timeline = sample
    page = render_page(timeline, HOSTILE)
    assert HOSTILE not in page and "<img" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    data = _data_block(page)
    assert data["title"] == HOSTILE
    assert any(HOSTILE in event.get("raw", "") for event in data["events"])


def test_the_page_loads_nothing_and_allows_only_its_own_script(sample):
    _path, timeline = sample
    page = render_page(timeline, "three.jsonl")
    # Links within the page (a fragment: `href = "#seq=..."`) load nothing; any other address would.
    assert not re.search(r"""src\s*=|href\s*=(?!\s*"#)|@import|url\(|<link""", page.replace(_json_text(page), ""))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    import base64
    import hashlib
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    assert f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'" in policy


def _json_text(page: str) -> str:
    return re.search(r'id="trace-data">(.*?)</script>', page, re.S).group(1)


def test_the_command_writes_the_page_and_says_what_it_drew(sample, tmp_path):
    path, _timeline = sample
    out = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["trace", "html", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 sessions" in result.output and _data_block(out.read_text())["lanes"][1]["session"] == "sess-a"
    default = CliRunner().invoke(cli, ["trace", "html", str(path)])
    assert default.exit_code == 0 and path.with_suffix(".html").exists()


def test_the_command_never_overwrites_the_trace(tmp_path):
    path = TraceBuilder().write(tmp_path / "t.html")
    result = CliRunner().invoke(cli, ["trace", "html", str(path), "-o", str(path)])
    assert result.exit_code == 2 and "overwrite" in result.output
    assert path.read_text() == ""


def test_write_html_returns_what_it_drew(sample, tmp_path):
    path, timeline = sample
    drawn = write_html(path, tmp_path / "x.html")
    assert len(drawn.marks) == len(timeline.marks) and (tmp_path / "x.html").stat().st_size > 0
