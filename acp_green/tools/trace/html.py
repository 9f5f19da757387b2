"""`acp-green trace html`: a trace (docs/TRACES.md) as one self-contained HTML page, a timeline per session.

The page loads nothing: its CSS and JavaScript (html_assets/) are inlined, and its Content
Security Policy forbids every fetch and every script but the page's own (by hash). A trace is
untrusted input, so none of its text is ever written as HTML: the model goes into a JSON data
block with `<`, `>` and `&` escaped (so no `</script>` can end it), and the script puts text into
the page only through textContent and attributes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Requests whose answer names the session they made: their bar goes into that session's lane.
SESSION_MAKERS = ("session/new", "session/fork")
CANCELS = ("session/cancel", "$/cancel_request")
#: Event fields the page never needs when the raw line is there (it pretty-prints the raw line).
PARSED_FIELDS = ("params", "payload")


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file, tolerantly: lines that are not a JSON object are skipped (counted in a warning).

    A stand-in for the shared reader (read.py); a crash may leave a last line cut short.
    """
    events: list[dict[str, Any]] = []
    skipped = 0
    for line in Path(path).read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8", errors="replace"))
        except ValueError:
            skipped += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            skipped += 1
    if skipped:
        log.warning("%s: skipped %d lines that are not trace events", path, skipped)
    return events


@dataclass
class Mark:
    """One thing drawn on a lane: a request's bar (send to answer) or a tick (a single event)."""

    lane: int
    kind: str  # "bar" or "tick"
    classes: str  # from a fixed vocabulary only: never text from the trace
    start: float
    end: float
    events: list[int]  # indexes into Timeline.events: a bar's request, then its response if any
    label: str
    row: int = 0  # ticks share row 0; bars are packed into rows 1.. so concurrent ones do not overlap


@dataclass
class Lane:
    """A session's row of the timeline, or the connection's (messages with no session)."""

    session: str | None
    rows: int = 1


@dataclass
class Timeline:
    """What the page draws: lanes, the marks on them, and the events a click shows."""

    lanes: list[Lane]
    marks: list[Mark]
    events: list[dict[str, Any]]
    start: float
    duration: float
    meta: dict[str, Any] = field(default_factory=dict)


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _id_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _made_session(request: dict[str, Any], response: dict[str, Any] | None) -> str | None:
    """The session a request belongs to: its own, or the one its answer made."""
    if isinstance(request.get("session"), str):
        return str(request["session"])
    payload = response.get("payload") if response is not None else None
    if request.get("method") in SESSION_MAKERS and isinstance(payload, dict) and isinstance(payload.get("sessionId"), str):
        return str(payload["sessionId"])
    return None


def _bar_classes(request: dict[str, Any], response: dict[str, Any] | None) -> str:
    classes = ["mark", "bar", "from-agent" if request.get("from") == "agent" else "from-client"]
    if response is None:
        classes.append("open")
    elif response.get("is_error"):
        classes.append("error")
    elif isinstance(response.get("payload"), dict) and response["payload"].get("stopReason") == "cancelled":
        classes.append("cancelled")
    return " ".join(classes)


def _tick(event: dict[str, Any]) -> tuple[str, str] | None:
    """A tick's classes and label, or None for an event that is not drawn (the recorder's first and last notes)."""
    kind = event.get("type")
    if kind == "notification":
        method = str(event.get("method"))
        if method == "session/update":
            params = event.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            what = update.get("sessionUpdate") if isinstance(update, dict) else None
            return "mark tick update", f"update {what}" if isinstance(what, str) else "update"
        if method in CANCELS:
            return "mark tick cancel", method
        return "mark tick notification", method
    if kind == "batch":
        members = event.get("members")
        return "mark tick notification", f"batch of {len(members) if isinstance(members, list) else '?'}"
    if kind == "line":
        return "mark tick bad-line error", f"not a message: {event.get('error', '?')}"
    if kind == "response":
        return "mark tick orphan error", f"answer to no request (id {_id_key(event.get('id'))})"
    if kind == "trace":
        fields = event.get("fields")
        if isinstance(fields, dict) and ("format" in fields or "exit" in fields):
            return None
        level = event.get("level")
        loud = " log-error" if level in ("warn", "error") else ""
        return f"mark tick log{loud}", f"{event.get('component', '?')}: {str(event.get('message', ''))[:120]}"
    return "mark tick unknown", f"event of type {str(kind)[:40]}"


def _page_event(event: dict[str, Any]) -> dict[str, Any]:
    """What the page keeps of an event: everything but the parsed copies of a raw line it has."""
    if "raw" in event or "raw_b64" in event:
        return {k: v for k, v in event.items() if k not in PARSED_FIELDS}
    return dict(event)


def _pack_rows(marks: list[Mark], lanes: list[Lane]) -> None:
    """Gives each bar the first row of its lane that is free at its start (greedy interval packing)."""
    ends: dict[int, list[float]] = {}
    for mark in sorted((m for m in marks if m.kind == "bar"), key=lambda m: (m.start, m.end)):
        rows = ends.setdefault(mark.lane, [])
        for index, end in enumerate(rows):
            if end < mark.start:
                rows[index] = mark.end
                mark.row = index + 1
                break
        else:
            rows.append(mark.end)
            mark.row = len(rows)
    for lane_index, rows in ends.items():
        lanes[lane_index].rows = len(rows) + 1


def build_timeline(events: list[dict[str, Any]]) -> Timeline:
    """Pairs requests with their answers and lays every event out on its session's lane."""
    times: list[float] = []
    last = 0.0
    for event in events:
        last = _number(event.get("ts"), last)
        times.append(last)
    start = min(times, default=0.0)
    end = max(times, default=0.0)
    answers: dict[int, int] = {}
    pending: dict[tuple[Any, str], int] = {}
    orphans: set[int] = set()
    for index, event in enumerate(events):
        if event.get("type") == "request":
            pending[(event.get("from"), _id_key(event.get("id")))] = index
        elif event.get("type") == "response":
            asked = pending.pop((event.get("to"), _id_key(event.get("id"))), None)
            if asked is None:
                orphans.add(index)
            else:
                answers[asked] = index
    answered = set(answers.values())
    lane_of: dict[str | None, int] = {None: 0}
    lanes = [Lane(None)]
    marks: list[Mark] = []

    def lane(session: str | None) -> int:
        if session not in lane_of:
            lane_of[session] = len(lanes)
            lanes.append(Lane(session))
        return lane_of[session]

    for index, event in enumerate(events):
        if event.get("type") == "request":
            response = events[answers[index]] if index in answers else None
            stop = times[answers[index]] if index in answers else end
            marks.append(Mark(lane(_made_session(event, response)), "bar", _bar_classes(event, response), times[index], stop,
                              [index] + ([answers[index]] if index in answers else []), str(event.get("method"))))
        elif index not in answered:
            tick = _tick(event)
            if tick is not None:
                session = event.get("session")
                marks.append(Mark(lane(session if isinstance(session, str) else None), "tick", tick[0],
                                  times[index], times[index], [index], tick[1]))
    _pack_rows(marks, lanes)
    page_events = [_page_event(event) for event in events]
    for index, event in enumerate(page_events):
        event["ts"] = times[index]
        event.setdefault("seq", index)
    return Timeline(lanes, marks, page_events, start, end - start, _meta(events))


def _meta(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The recorder's header fields (command, start time) and how the recording ended."""
    meta: dict[str, Any] = {}
    for event in events:
        fields = event.get("fields")
        if event.get("type") == "trace" and isinstance(fields, dict):
            if "format" in fields:
                meta.update({k: fields.get(k) for k in ("format", "command", "started", "pid")})
            if "exit" in fields:
                meta.update({"exit": fields.get("exit"), "signal": fields.get("signal")})
    return meta


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no `<`, `>` or `&` (so no `</script>` or `<!--`), no line separators."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("html_assets", name).read_text(encoding="utf-8")


def render_page(timeline: Timeline, title: str) -> str:
    """The whole HTML page for a timeline; `title` (a file name: untrusted too) travels in the data."""
    data = {
        "title": title, "meta": timeline.meta, "start": timeline.start, "duration": timeline.duration,
        "lanes": [{"session": lane.session, "rows": lane.rows} for lane in timeline.lanes],
        "marks": [[m.lane, m.row, m.kind, m.classes, m.start, m.end, m.events, m.label] for m in timeline.marks],
        "events": timeline.events,
    }
    script = _asset("timeline.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<title>ACP trace</title>\n"
        f"<style>\n{_asset('timeline.css')}</style>\n</head>\n<body>\n"
        "<header id=\"head\"></header>\n<main id=\"timeline\"><div id=\"canvas\"></div></main>\n"
        "<aside id=\"detail\" hidden></aside>\n"
        f"<script type=\"application/json\" id=\"trace-data\">{_script_json(data)}</script>\n"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


def write_html(trace: str | Path, output: str | Path) -> Timeline:
    """Reads a trace file and writes its page; returns the timeline drawn (for the command's summary)."""
    timeline = build_timeline(load_events(trace))
    Path(output).write_text(render_page(timeline, Path(trace).name), encoding="utf-8")
    return timeline
