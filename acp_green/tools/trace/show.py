"""`acp-green trace show`: a trace as a readable timeline, one section per session.

Requests are paired with their answers (outcome and latency on one line); what the agent sends
while a prompt runs is indented under it; runs of updates of one kind fold into one line
("12 agent_message_chunk"); errors and cancels are marked. Styles are click's, which drops them
when the output is not a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from .read import Note, Trace, WireEvent, visible

__all__ = ["Timeline", "render", "timeline"]

CONNECTION = ""  # the section of what belongs to no session (initialize, stderr, garbage)
_SUMMARY = 48


@dataclass(slots=True)
class Item:
    """One line of the timeline: an exchange, a folded run of updates, a notification, a note."""

    ts: float
    depth: int
    event: WireEvent | Note
    answer: WireEvent | None = None  # an exchange's response
    count: int = 1  # a folded run's length
    kind: str | None = None  # a folded run's sessionUpdate


@dataclass(slots=True)
class Timeline:
    """The items of each section, sections in order of first appearance."""

    sections: dict[str, list[Item]] = field(default_factory=dict)


def timeline(trace: Trace, session: str | None = None, grep: str | None = None) -> Timeline:
    """Pair, group, nest and fold a trace's events; keep only `session`'s and those containing `grep`."""
    answers = _answers(trace.wire)
    answered = {id(a) for a in answers.values()}
    sessions_of = _sessions(trace.wire, answers)
    open_prompts: dict[str, set[int]] = {}  # session -> lines of its prompts not yet answered
    closes: dict[int, tuple[str, int]] = {id(a): (sessions_of.get(line, CONNECTION), line) for line, a in answers.items()}
    result = Timeline()
    for event in trace.events:
        if isinstance(event, Note):
            section = CONNECTION
            if not _wanted(event.message, grep) or (session is not None and section != session):
                continue
            result.sections.setdefault(section, []).append(Item(event.ts, 0, event))
            continue
        if id(event) in closes:
            owner, line = closes[id(event)]
            open_prompts.get(owner, set()).discard(line)
        if id(event) in answered:
            continue  # shown with its request
        section = sessions_of.get(event.line, CONNECTION)
        depth = 1 if open_prompts.get(section) else 0
        if event.kind == "request" and event.method == "session/prompt":
            open_prompts.setdefault(section, set()).add(event.line)
        answer = answers.get(event.line)
        if session is not None and section != session:
            continue
        if not (_wanted(event.text(), grep) or (answer is not None and _wanted(answer.text(), grep))):
            continue
        _append(result.sections.setdefault(section, []), Item(event.ts, depth, event, answer))
    return result


def _append(items: list[Item], item: Item) -> None:
    """Add an item, folding a session/update into the run of its kind just before it."""
    event = item.event
    if isinstance(event, WireEvent) and event.kind == "notification" and event.method == "session/update":
        update = event.params.get("update") if isinstance(event.params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        item.kind = kind if isinstance(kind, str) else "?"
        last = items[-1] if items else None
        if last is not None and last.kind == item.kind and last.depth == item.depth:
            last.count += 1
            return
    items.append(item)


def _answers(events: Sequence[WireEvent]) -> dict[int, WireEvent]:
    """The line of each request -> the first response to it, from the peer it was sent to."""
    waiting: dict[tuple[str, str, str], int] = {}
    found: dict[int, WireEvent] = {}
    for event in events:
        if event.kind == "request":
            waiting[(event.sender, event.receiver, _key(event.id))] = event.line
        elif event.kind == "response":
            line = waiting.pop((event.receiver, event.sender, _key(event.id)), None)
            if line is not None:
                found[line] = event
    return found


def _sessions(events: Sequence[WireEvent], answers: dict[int, WireEvent]) -> dict[int, str]:
    """The line of each event -> its session: params.sessionId, else the one its answer names (session/new)."""
    found: dict[int, str] = {}
    for event in events:
        session = event.session
        answer = answers.get(event.line)
        if session is None and answer is not None and isinstance(answer.message.get("result"), dict):
            named = answer.message["result"].get("sessionId")
            session = named if isinstance(named, str) else None
        if session is not None:
            found[event.line] = session
    return found


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _wanted(text: str, grep: str | None) -> bool:
    return grep is None or grep in text


# -- rendering -------------------------------------------------------------------------------------


def render(trace: Trace, shown: Timeline, path: str) -> Iterator[str]:
    """The timeline as lines of text, styled with click.style."""
    yield click.style(visible(path), bold=True) + _header(trace)
    for section, items in shown.sections.items():
        yield ""
        yield click.style("connection" if section == CONNECTION else f"session {visible(section)}", bold=True)
        for item in items:
            yield f"{item.ts:>10.3f}  {'    ' * item.depth}{_describe(item)}"
    for damage in trace.damaged:
        yield click.style(f"line {damage.line} unreadable: {visible(damage.reason)}", fg="red")


def _header(trace: Trace) -> str:
    header, footer = trace.header or {}, trace.footer
    parts = []
    if isinstance(header.get("command"), list):
        parts.append("command: " + " ".join(str(a) for a in header["command"]))
    if isinstance(header.get("started"), str):
        parts.append(f"started {header['started']}")
    if footer is not None:
        parts.append(f"signal {footer.get('signal')}" if footer.get("signal") else f"exit {footer.get('exit')}")
    else:
        parts.append("no end recorded")
    return "  " + visible("  ".join(parts))


def _describe(item: Item) -> str:
    event = item.event
    if isinstance(event, Note):
        return click.style(f"[{event.component} {event.level}] ", dim=True) + visible(event.message)
    arrow = "->" if event.sender == "client" else "<-" if event.receiver == "client" else f"{event.sender}->{event.receiver}"
    if item.kind is not None:
        return f"{arrow} {item.count} {visible(item.kind)}"
    if event.kind == "batch":
        return f"{arrow} batch of {len(event.message)}: {_cut(event.text())}"
    if event.kind == "line":
        return click.style(f"{arrow} not a message ({visible(event.why or '?')}): {_cut(event.text())}", fg="red")
    if event.kind == "response" and event.id is None and event.is_error:  # the answer to a line with no usable id
        return f"{arrow} answer with id null: {_outcome(event, event)}"
    if event.kind == "response":
        return click.style(f"{arrow} response #{_cut(_key(event.id))} to no request: {_cut(event.text())}", fg="red")
    name = f"{arrow} {visible(event.method or '?')}"
    if event.kind == "notification":
        if event.method in ("session/cancel", "$/cancel_request"):
            return click.style(f"{name}  CANCEL", fg="yellow", bold=True)
        return name + _summary(event)
    head = f"{name} #{_cut(_key(event.id))}{_summary(event)}"
    if item.answer is None:
        return head + click.style("  => no answer", fg="red")
    latency = _latency(item.answer.ts - event.ts)
    return f"{head}  => {_outcome(event, item.answer)}  {latency}"


def _summary(event: WireEvent) -> str:
    """A word on what the message is about: the prompt's text, the path, the permission's title."""
    params = event.params if isinstance(event.params, dict) else {}
    found: Any = None
    if event.method == "session/prompt" and isinstance(params.get("prompt"), list):
        found = " ".join(str(b.get("text", f"[{b.get('type')}]")) for b in params["prompt"] if isinstance(b, dict))
    elif isinstance(params.get("path"), str):
        found = params["path"]
    elif isinstance(params.get("command"), str):
        found = params["command"]
    elif isinstance(params.get("toolCall"), dict):
        found = params["toolCall"].get("title")
    return f' "{_cut(found)}"' if isinstance(found, str) and found else ""


def _outcome(request: WireEvent, answer: WireEvent) -> str:
    message = answer.message if isinstance(answer.message, dict) else {}
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        return click.style(f"ERROR {error.get('code')} {_cut(str(error.get('message')))}", fg="red", bold=True)
    result = message.get("result")
    result = result if isinstance(result, dict) else {}
    if isinstance(result.get("stopReason"), str):
        reason = visible(result["stopReason"])
        return click.style(reason, fg="yellow", bold=True) if reason == "cancelled" else reason
    if isinstance(result.get("sessionId"), str):
        return visible(result["sessionId"])
    if isinstance(result.get("outcome"), dict):
        outcome = result["outcome"]
        return visible(str(outcome.get("optionId") or outcome.get("outcome")))
    if request.method == "initialize" and "protocolVersion" in result:
        return f"protocolVersion {_cut(json.dumps(result['protocolVersion']))}"
    return "ok"


def _latency(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _cut(text: str, limit: int = _SUMMARY) -> str:
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
