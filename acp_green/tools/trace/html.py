"""`acp-green trace html`: a trace (docs/TRACES.md) as one self-contained HTML page: the
conversation, per session, beside a timeline per session.

The page loads nothing: its CSS and JavaScript (html_assets/) are inlined, and its Content
Security Policy forbids every fetch and every script but the page's own (by hash). A trace is
untrusted input, so none of its text is ever written as HTML: the model goes into a JSON data
block with `<`, `>` and `&` escaped (so no `</script>` can end it) and every lone surrogate
written as a visible `\\udXXX` (so the page is valid UTF-8 whatever the trace held), and the
script puts text into the page only through textContent and attributes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import re
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
#: The page's script: the conversation's drawing first (the timeline's script calls it).
SCRIPTS = ("conversation.js", "timeline.js")


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a trace file, tolerantly: lines that are not a JSON object are skipped (counted in a warning).

    A stand-in for the shared reader (read.py); a crash may leave a last line cut short, and a
    line may be nested deeper than Python's parser goes. A number JSON cannot write (NaN, Infinity,
    1e400) is kept as its text, so the page's data stays JSON.
    """
    events: list[dict[str, Any]] = []
    skipped = 0
    from ...redact import open_no_follow  # a trace named through a symbolic link is refused, as show and check do

    with open_no_follow(path) as trace:
        data = trace.read()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8", errors="replace"), parse_constant=str, parse_float=_finite)
        except (ValueError, RecursionError):
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
    """What the page draws: lanes, the marks on them, the events a click shows, and the
    conversation (one section per lane, see `Conversation`)."""

    lanes: list[Lane]
    marks: list[Mark]
    events: list[dict[str, Any]]
    start: float
    duration: float
    meta: dict[str, Any] = field(default_factory=dict)
    conversation: list[dict[str, Any]] = field(default_factory=list)


def _finite(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return default
    return number if math.isfinite(number) else default


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


def _bar_label(request: dict[str, Any], response: dict[str, Any] | None) -> str:
    method = str(request.get("method"))
    if response is not None and response.get("is_error"):
        return f"{method} → {_error_text(response.get('payload'))}"
    return method


def _error_text(error: Any) -> str:
    """An error object as `error CODE message`, in a few words."""
    if not isinstance(error, dict):
        return "error"
    return f"error {_short(error.get('code'), 20)} {_short(error.get('message'), 100)}".rstrip()


def _short(value: Any, limit: int) -> str:
    """A value of the trace as text of at most `limit` characters (a string as it is, anything else as JSON)."""
    text = value if isinstance(value, str) else "" if value is None else json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the agent's stderr: which lines are errors (an ERROR log line, a traceback) --------------------

#: A log line at error level, as the common formats write it (`acp-green ERROR name: ...`, Python's
#: `ERROR:root:...`, `[ERROR]`, `level=error`, JSON `"level":"error"`, a Rust panic, an exception's line).
ERROR_LINE = re.compile(r"(?<![A-Za-z0-9_])(?:ERROR|CRITICAL|FATAL|PANIC)(?![A-Za-z0-9_])"
                        r"|(?i:\blevel\"?\s*[=:]\s*\"?(?:error|err|fatal|critical)\b)|\bpanicked at\b"
                        r"|^[A-Z][A-Za-z0-9_.]*(?:Error|Exception): ")
WARNING_LINE = re.compile(r"(?<![A-Za-z0-9_])(?:WARNING|WARN)(?![A-Za-z0-9_])|(?i:\blevel\"?\s*[=:]\s*\"?warn(?:ing)?\b)")
TRACEBACK = "Traceback (most recent call last):"
#: Lines that carry on a traceback or stack trace: indented frames, blank lines, chained exceptions.
_CARRY_ON = ("During handling of the above exception", "The above exception was the direct cause", TRACEBACK)


def log_level(event: dict[str, Any]) -> str | None:
    """"error" or "warn" for a `trace` event that reports one (by its level, or for the agent's
    stderr, whose level is always info, by what the line says), else None."""
    level = event.get("level")
    if level in ("error", "warn"):
        return str(level)
    message = event.get("message")
    if event.get("component") != "agent" or not isinstance(message, str):
        return None
    if ERROR_LINE.search(message) or message.startswith(TRACEBACK):
        return "error"
    return "warn" if WARNING_LINE.search(message) else None


def _carries_on(message: str) -> bool:
    return not message.strip() or message[:1].isspace() or message.startswith(_CARRY_ON)


def log_errors(events: list[dict[str, Any]]) -> dict[int, list[int]]:
    """The errors the agent's stderr reports: the index of each one's first line -> the indexes of
    all its lines. A traceback is one error with all its lines (its last, the exception, too); one
    right after an ERROR line (as `logging.exception` writes it) belongs to that line, and so do
    indented lines after it (a stack trace's frames)."""
    errors: dict[int, list[int]] = {}
    group: list[int] | None = None  # the error the next stderr lines may carry on
    in_traceback = False
    for index, event in enumerate(events):
        message = event.get("message")
        if event.get("type") != "trace" or not isinstance(message, str):
            continue
        if event.get("component") != "agent":  # the recorder's or the runtime's own note: one line
            if event.get("level") == "error":
                errors[index] = [index]
            continue
        if group is not None and (_carries_on(message) or in_traceback):
            group.append(index)
            if message.startswith(TRACEBACK):
                in_traceback = True
            elif not _carries_on(message):  # the exception's line ends the traceback
                in_traceback = False
            continue
        group = None
        in_traceback = message.startswith(TRACEBACK)
        if log_level(event) == "error":
            group = errors[index] = [index]
    return errors


def _tick(event: dict[str, Any], level: str | None) -> tuple[str, str] | None:
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
        loud = {"error": " error", "warn": " log-warn"}.get(level or "", "")
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
    """Pairs requests with their answers, lays every event out on its session's lane, and reads
    the conversation off the same lanes."""
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
    errors = log_errors(events)
    folded = {line for lines in errors.values() for line in lines[1:]}  # drawn with their error's first line
    lane_of: dict[str | None, int] = {None: 0}
    lanes = [Lane(None)]
    lane_of_event = [0] * len(events)
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
            lane_of_event[index] = lane(_made_session(event, response))
            if index in answers:
                lane_of_event[answers[index]] = lane_of_event[index]
            marks.append(Mark(lane_of_event[index], "bar", _bar_classes(event, response), times[index], stop,
                              [index] + ([answers[index]] if index in answers else []), _bar_label(event, response)))
        elif index not in answered and index not in folded:
            tick = _tick(event, log_level(event) if event.get("type") == "trace" else None)
            if tick is not None:
                session = event.get("session")
                lane_of_event[index] = lane(session if isinstance(session, str) else None)
                marks.append(Mark(lane_of_event[index], "tick", tick[0], times[index], times[index],
                                  errors.get(index, [index]), _error_label(events, errors[index]) if index in errors else tick[1]))
    _pack_rows(marks, lanes)
    conversation = Conversation(events, times, answers, lane_of_event, errors).build(len(lanes))
    page_events = [_page_event(event) for event in events]
    for index, event in enumerate(page_events):
        event["ts"] = times[index]
        event.setdefault("seq", index)
    return Timeline(lanes, marks, page_events, start, end - start, _meta(events), conversation)


def _error_label(events: list[dict[str, Any]], lines: list[int]) -> str:
    """An error of the agent's stderr (or a note's) in a line: its first line, and a traceback's exception."""
    who = _short(events[lines[0]].get("component"), 40) or "?"
    first = _short(events[lines[0]].get("message"), 120)
    last = events[lines[-1]].get("message")
    if len(lines) > 1 and isinstance(last, str) and not _carries_on(last):
        return f"{who}: {first} … {_short(last, 120)}"
    return f"{who}: {first}"


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


# -- the conversation: what was said and done, per session, in order ------------------------------

#: Updates whose text runs are joined into one entry: the chunks of a reply, a thought, a user message.
TEXT_RUNS = {"agent_message_chunk": "reply", "agent_thought_chunk": "thought", "user_message_chunk": "user"}
#: The parameter that says what a request is about, by the first of these it has.
_SUBJECTS = ("path", "cwd", "command", "terminalId", "modeId", "configId", "protocolVersion", "sessionId")
_ANSWERS = ("sessionId", "stopReason", "terminalId", "protocolVersion")


def _params(event: dict[str, Any], key: str) -> Any:
    """An event's parsed params (or payload), from its raw line when the event has no parsed copy."""
    if key in event:
        return event[key]
    raw = event.get("raw")
    try:
        message = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    return message.get("params") if key == "params" else message.get("error", message.get("result"))


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def content_text(block: Any) -> str:
    """A content block as text: its text, or what it is in brackets (an image, a link, a resource)."""
    kind = _get(block, "type")
    if kind == "text":
        return _short(_get(block, "text"), 1 << 30)
    if kind == "resource_link":
        return f"[link {_short(_get(block, 'name'), 200)} {_short(_get(block, 'uri'), 400)}]"
    if kind == "resource":
        return f"[resource {_short(_get(block, 'resource', 'uri'), 400)}]"
    if kind == "content":  # a tool call's content wraps a block
        return content_text(_get(block, "content"))
    if kind == "diff":
        return f"[diff of {_short(_get(block, 'path'), 400)}]"
    if kind == "terminal":
        return f"[terminal {_short(_get(block, 'terminalId'), 100)}]"
    return f"[{_short(kind, 40) or '?'}]"


def _blocks_text(blocks: Any) -> str:
    return "".join(content_text(block) for block in blocks) if isinstance(blocks, list) else ""


def _answer(payload: Any, is_error: bool) -> tuple[str, str]:
    """(outcome, what) of an answer: "error" and its code and message, "cancelled", or "ok" and its gist."""
    if is_error:
        return "error", _error_text(payload)
    if not isinstance(payload, dict):
        return "ok", "ok"
    for key in _ANSWERS:
        if key in payload:
            value = payload[key]
            if key == "stopReason":
                return ("cancelled" if value == "cancelled" else "ok"), _short(value, 200)
            return "ok", _short(value, 200) if key == "sessionId" else f"{key} {_short(value, 200)}"
    if isinstance(payload.get("sessions"), list):
        return "ok", f"{len(payload['sessions'])} sessions"
    if isinstance(payload.get("content"), str):
        lines = len(payload["content"].splitlines())
        return "ok", f"{lines} line{'' if lines == 1 else 's'}"
    return "ok", "ok"


def _subject(params: Any) -> str:
    """What a request is about, in a few words: a path, a directory, a command, or the first key parameter."""
    for key in _SUBJECTS:
        if isinstance(params, dict) and key in params:
            value = _short(params[key], 400)
            return value if key in ("path", "cwd", "command") else f"{key} {value}"
    return ""


def _line_text(event: dict[str, Any]) -> str:
    """A line that was no message, as text (bytes that are not UTF-8 as \\xNN)."""
    if isinstance(event.get("raw"), str):
        return _short(event["raw"], 400)
    try:
        data = base64.b64decode(str(event.get("raw_b64", "")), validate=True)
    except ValueError:
        return "?"
    return _short(data[:1600].decode("utf-8", "backslashreplace"), 400)


class Conversation:
    """The trace read as a conversation, one section per lane of the timeline (the connection's,
    then each session's): prompts, the agent's replies (a run of chunks joined into one text),
    thoughts, tool calls with their status, permission requests with their answer, plans, cancels,
    the other requests, updates and notes in a line, and errors, in the order they happened.

    An entry is a dict for the page: `k` its kind, `ev` the indexes of the events it stands for,
    and the fields of its kind (texts from the trace, never markup)."""

    def __init__(self, events: list[dict[str, Any]], times: list[float], answers: dict[int, int], lanes: list[int],
                 errors: dict[int, list[int]]) -> None:
        self._events = events
        self._times = times
        self._asked_by = {response: request for request, response in answers.items()}
        self._lanes = lanes
        self._errors = errors
        self._folded = {line for lines in errors.values() for line in lines[1:]}
        self._sections: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}  # request index -> its entry, its answer still to come
        self._tools: dict[tuple[int, str], dict[str, Any]] = {}

    def build(self, lanes: int) -> list[dict[str, Any]]:
        self._sections = [{"title": None, "cwd": None, "entries": []} for _ in range(lanes)]
        for index, event in enumerate(self._events):
            kind = event.get("type")
            if kind == "request":
                self._request(index, event)
            elif kind == "response":
                self._response(index, event)
            elif kind == "notification":
                self._notification(index, event)
            elif kind == "batch":
                members = event.get("members")
                self._add(index, "notice", text=f"batch of {len(members) if isinstance(members, list) else '?'}")
            elif kind == "line":
                self._add(index, "error", title="a line that is no message",
                          text=f"{_short(event.get('error'), 200)}: {_line_text(event)}")
            elif kind == "trace":
                self._note(index, event)
        for asked, entry in self._open.items():  # a prompt the trace ends before its answer: say so at the end
            if entry["k"] == "prompt":
                self._add(asked, "end", outcome="open", answer="no answer", took=self._times[-1] - self._times[asked])
        return self._sections

    def _add(self, index: int, entry_kind: str, /, **fields: Any) -> dict[str, Any]:
        entry = {"k": entry_kind, "ev": [index], **fields}
        self._sections[self._lanes[index]]["entries"].append(entry)
        return entry

    def _last(self, index: int) -> dict[str, Any] | None:
        entries = self._sections[self._lanes[index]]["entries"]
        return entries[-1] if entries else None

    def _request(self, index: int, event: dict[str, Any]) -> None:
        params = _params(event, "params")
        method = _short(event.get("method"), 200)
        if method == "session/prompt" and event.get("from") == "client":
            self._open[index] = self._add(index, "prompt", text=_blocks_text(_get(params, "prompt")))
            return
        if method == "session/request_permission":
            call = _get(params, "toolCall")
            known = self._tools.get((self._lanes[index], _short(_get(call, "toolCallId"), 200)), {})
            options = _get(params, "options")
            self._open[index] = self._add(
                index, "permission", title=_short(_get(call, "title") or known.get("title") or "a tool call", 2000),
                options=[[_short(_get(o, "optionId"), 200), _short(_get(o, "name"), 400), _short(_get(o, "kind"), 40)]
                         for o in options] if isinstance(options, list) else [], outcome="open", answer="")
            return
        if method in ("session/new", "session/load", "session/resume", "session/fork") and isinstance(_get(params, "cwd"), str):
            self._sections[self._lanes[index]]["cwd"] = params["cwd"]
        self._open[index] = self._add(index, "request", side=_short(event.get("from"), 40), method=method,
                                      what=_subject(params), outcome="open", answer="")

    def _response(self, index: int, event: dict[str, Any]) -> None:
        asked = self._asked_by.get(index)
        outcome, what = _answer(_params(event, "payload"), event.get("is_error") is True)
        if asked is None:
            self._add(index, "error", title=f"an answer to no request (id {_id_key(event.get('id'))})", text=what)
            return
        entry = self._open.pop(asked)
        took = self._times[index] - self._times[asked]
        if entry["k"] == "prompt":
            self._add(index, "end", outcome=outcome, answer=what, took=took)
            return
        if entry["k"] == "permission" and outcome == "ok":
            outcome, what = self._chosen(entry, _params(event, "payload"))
        entry.update(outcome=outcome, answer=what, took=took)
        entry["ev"].append(index)

    @staticmethod
    def _chosen(entry: dict[str, Any], payload: Any) -> tuple[str, str]:
        """A permission's answer: the option chosen (by its name), or cancelled."""
        if _get(payload, "outcome", "outcome") == "cancelled":
            return "cancelled", "cancelled"
        chosen = _short(_get(payload, "outcome", "optionId"), 200)
        names = {option[0]: option[1] for option in entry["options"]}
        return "ok", names.get(chosen) or chosen

    def _notification(self, index: int, event: dict[str, Any]) -> None:
        method = event.get("method")
        params = _params(event, "params")
        if method == "session/update" and isinstance(_get(params, "update"), dict):
            self._update(index, params["update"])
        elif method == "session/cancel":
            self._add(index, "cancel")
        else:
            request = _get(params, "requestId")
            self._add(index, "notice", text=_short(method, 200) + (f" (request {_id_key(request)})" if request is not None else ""))

    def _update(self, index: int, update: dict[str, Any]) -> None:
        what = update.get("sessionUpdate")
        last = self._last(index)
        if what in TEXT_RUNS:
            message_id = update.get("messageId")
            if last is not None and last["k"] == TEXT_RUNS[what] and last.get("id") == message_id:
                last["text"] += content_text(update.get("content"))
                last["ev"].append(index)
            else:
                self._add(index, TEXT_RUNS[what], text=content_text(update.get("content")), id=message_id)
        elif what in ("tool_call", "tool_call_update"):
            self._tool(index, update)
        elif what == "plan":
            entries = update.get("entries")
            items = [[_short(_get(e, "status"), 40), _short(_get(e, "content"), 4000), _short(_get(e, "priority"), 40)]
                     for e in entries] if isinstance(entries, list) else []
            if last is not None and last["k"] == "plan":  # a plan is replaced whole: show the latest of a run
                last.update(items=items, revisions=last["revisions"] + 1)
                last["ev"].append(index)
            else:
                self._add(index, "plan", items=items, revisions=1)
        else:
            self._info(index, update, last)

    def _tool(self, index: int, update: dict[str, Any]) -> None:
        key = (self._lanes[index], _short(update.get("toolCallId"), 200))
        entry = self._tools.get(key)
        if entry is None:
            entry = self._tools[key] = self._add(index, "tool", title="", kind="", status="", statuses=[], content="",
                                                 locations=[])
        else:
            entry["ev"].append(index)
        if "title" in update:
            entry["title"] = _short(update["title"], 2000)
        if "kind" in update:
            entry["kind"] = _short(update["kind"], 40)
        status = update.get("status")
        if status is not None and _short(status, 40) != entry["status"]:
            entry["status"] = _short(status, 40)
            entry["statuses"].append(entry["status"])
        if isinstance(update.get("content"), list):
            entry["content"] = _short("\n".join(content_text(block) for block in update["content"]), 4000)
        if isinstance(update.get("locations"), list):
            entry["locations"] = [_short(_get(place, "path"), 400) for place in update["locations"]]

    def _info(self, index: int, update: dict[str, Any], last: dict[str, Any] | None) -> None:
        """An update told in a line: available commands, the session's title, its mode, usage; a run of one kind is folded."""
        what = _short(update.get("sessionUpdate"), 80)
        if what == "available_commands_update":
            commands = update.get("availableCommands")
            text = " ".join("/" + _short(_get(c, "name"), 80) for c in commands) if isinstance(commands, list) else ""
        elif what == "session_info_update" and "title" in update:
            text = "title: " + _short(update["title"], 2000)
            self._sections[self._lanes[index]]["title"] = _short(update["title"], 2000)
        elif what == "current_mode_update":
            text = "mode: " + _short(update.get("currentModeId"), 200)
        elif what == "usage_update":
            text = f"used {_short(update.get('used'), 40)} of {_short(update.get('size'), 40)}"
        else:
            text = ""
        if last is not None and last["k"] == "info" and last["what"] == what:
            last.update(text=text, count=last["count"] + 1)
            last["ev"].append(index)
        else:
            self._add(index, "info", what=what, text=text, count=1)

    def _note(self, index: int, event: dict[str, Any]) -> None:
        fields = event.get("fields")
        if index in self._folded or isinstance(fields, dict) and ("format" in fields or "exit" in fields):
            return
        message = _short(event.get("message"), 1 << 30)
        component = _short(event.get("component"), 40) or "?"
        if index in self._errors:
            lines = self._errors[index]
            title = "an error on the agent's stderr" if component == "agent" else f"an error of the {component}"
            entry = self._add(index, "error", title=title,
                              text="\n".join(_short(self._events[line].get("message"), 1 << 30) for line in lines))
            entry["ev"] = list(lines)
            return
        level = log_level(event)
        last = self._last(index)
        if level is None and last is not None and last["k"] == "log" and last["who"] == component and not last["warn"]:
            last["text"] += "\n" + message
            last["ev"].append(index)
        else:
            self._add(index, "log", who=component, warn=level == "warn", text=message)


# -- the page ----------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no `<`, `>` or `&` (so no `</script>` or `<!--`), no line
    separators, and valid UTF-8: a lone surrogate (a trace may hold "\\ud800" anywhere) becomes the
    text `\\ud800`, shown as such."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return _SURROGATE.sub(lambda found: f"\\\\u{ord(found.group()):04x}", text)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("html_assets", name).read_text(encoding="utf-8")


def render_page(timeline: Timeline, title: str) -> str:
    """The whole HTML page for a timeline; `title` (a file name: untrusted too) travels in the data."""
    data = {
        "title": title, "meta": timeline.meta, "start": timeline.start, "duration": timeline.duration,
        "lanes": [{"session": lane.session, "rows": lane.rows} for lane in timeline.lanes],
        "marks": [[m.lane, m.row, m.kind, m.classes, m.start, m.end, m.events, m.label] for m in timeline.marks],
        "events": timeline.events, "conversation": timeline.conversation,
    }
    script = "\n".join(_asset(name) for name in SCRIPTS)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<title>ACP trace</title>\n"
        f"<style>\n{_asset('timeline.css')}</style>\n</head>\n<body data-view=\"both\">\n"
        "<header id=\"head\"></header>\n<div id=\"views\">\n"
        "<section id=\"conversation\" aria-label=\"conversation\"></section>\n"
        "<div id=\"timeline-pane\"><main id=\"timeline\"><div id=\"canvas\"></div></main>\n"
        "<aside id=\"detail\" hidden></aside>\n"
        "<p id=\"hint\">Click a mark, or a time in the conversation, to see its message here.</p></div>\n</div>\n"
        f"<script type=\"application/json\" id=\"trace-data\">{_script_json(data)}</script>\n"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


def write_html(trace: str | Path, output: str | Path) -> Timeline:
    """Reads a trace file and writes its page; returns the timeline drawn (for the command's summary)."""
    timeline = build_timeline(load_events(trace))
    from ...redact import write_private  # the page holds the conversation: 0600, never through a symbolic link
    write_private(output, render_page(timeline, Path(trace).name))
    return timeline
