"""Chat's view of stored sessions: the agent's `session/list` as lines, a loaded session's replayed
history, compactly, and the deletion of a session chat started and never used.

A `session/load` replays the whole conversation as `session/update` notifications before its
answer. Chat does not stream it again: `History` keeps one short entry per message, tool call and
plan (messages cut to a line), shown once the agent answers; thoughts are left out. `SessionSwitch`
is the listener in place of the renderer while a session opens: what belongs to the replay goes to
the history, and from the answer on the renderer follows the opened session (switched in the
reader greenlet, so the updates that follow the answer at once are not lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
import gevent

from .chat_render import Renderer, Screen, block_text
from .chat_text import harmless
from .client import AgentProcess, Pending

#: Characters of a replayed message shown (the first ones, on one line).
EXCERPT = 100
#: History lines shown at most: a longer session is shown by its last ones.
MAX_LINES = 40
#: A session's other updates (commands, mode) kept while it opens, to show once it has: the last ones.
MAX_DEFERRED = 16
#: Sessions `/sessions` shows at most (the most recently active, as the agent orders them).
MAX_LISTED = 30
#: Seconds chat waits for the agent to delete (or close) a session no prompt went to.
DISCARD_WAIT = 3.0
SPEAKERS = {"user_message_chunk": "you", "agent_message_chunk": "agent"}
#: The updates a replay is made of: kept in the history (thoughts left out), never shown live.
REPLAYED = frozenset({*SPEAKERS, "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})


def discard_session(agent: AgentProcess, capabilities: Mapping[str, Any], session_id: str, screen: Screen) -> None:
    """Delete a session chat started and no prompt went to (session/delete; session/close when the
    agent offers no delete), so that starting chat and leaving (or leaving it for another, /load)
    stores nothing. Waits DISCARD_WAIT seconds at most; an agent that refuses is said in one line."""
    offered = capabilities.get("sessionCapabilities")
    offered = offered if isinstance(offered, dict) else {}
    method = next((f"session/{name}" for name in ("delete", "close") if isinstance(offered.get(name), dict)), None)
    if method is None or agent.eof.is_set():
        return
    try:
        pending = agent.request(method, {"sessionId": session_id})
    except OSError:  # its input is closed: it is going
        return
    gevent.wait([pending.waitable, agent.eof], timeout=DISCARD_WAIT, count=1)
    error = pending.response(timeout=0).get("error") if pending.done else None
    if error is not None:
        error = error if isinstance(error, dict) else {}
        screen.note(harmless(f"chat: the agent did not {method.removeprefix('session/')} the session {session_id}, which no "
                             f"prompt went to: {error.get('message')} ({error.get('code')})"))


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """`text` on one line (blanks collapsed), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def session_lines(sessions: Sequence[Any], current: str | None, cwd: str) -> list[str]:
    """One line per SessionInfo: `* ID  2026-12-01 18:29  title  (in /other/dir)`; * marks the current session."""
    lines = []
    for info in sessions:
        if not isinstance(info, Mapping) or not isinstance(info.get("sessionId"), str):
            continue
        when = str(info.get("updatedAt") or "")[:16].replace("T", " ")
        title = excerpt(str(info.get("title") or ""), 60)
        where = "" if info.get("cwd") == cwd else f"  (in {info.get('cwd')})"
        mark = "*" if info["sessionId"] == current else " "
        lines.append(harmless(f"{mark} {info['sessionId']}  {when}  {title}{where}".rstrip()))
    return lines


@dataclass(slots=True)
class Entry:
    """One line of the history: a message (its speaker and text so far), a tool call (its title and status) or a plan."""

    kind: str
    text: str
    status: str = ""
    tool_id: str | None = None


class History:
    """A session's replayed conversation, kept as short entries in the order they arrived: the last MAX_LINES of them."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.dropped = 0  # earlier entries no longer kept: a long session is shown by its end
        self.turns = 0
        self._tools: dict[str, Entry] = {}

    def add(self, update: Mapping[str, Any]) -> None:
        kind = str(update.get("sessionUpdate"))
        last = self.entries[-1] if self.entries else None
        if kind in SPEAKERS:
            text = block_text(update.get("content"))
            if last is not None and last.kind == kind:
                last.text = (last.text + text)[: EXCERPT * 4]  # enough for the excerpt; a long reply is not kept whole
            else:
                self.turns += kind == "user_message_chunk"
                self._append(Entry(kind, text[: EXCERPT * 4]))
        elif kind in ("tool_call", "tool_call_update"):
            tool_id = str(update.get("toolCallId"))
            entry = self._tools.get(tool_id)
            if entry is None:
                entry = self._tools[tool_id] = Entry("tool", tool_id, "pending", tool_id)
                self._append(entry)
            if isinstance(update.get("title"), str):
                entry.text = update["title"]
            if isinstance(update.get("status"), str):
                entry.status = update["status"]
        elif kind == "plan":
            steps = [e for e in update.get("entries") or [] if isinstance(e, Mapping)]
            done = sum(1 for e in steps if e.get("status") == "completed")
            text = f"{done} of {len(steps)} steps done"
            if last is not None and last.kind == "plan":
                last.text = text
            else:
                self._append(Entry("plan", text))

    def _append(self, entry: Entry) -> None:
        self.entries.append(entry)
        if len(self.entries) > MAX_LINES:
            gone = self.entries.pop(0)
            self.dropped += 1
            if gone.tool_id is not None:
                self._tools.pop(gone.tool_id, None)

    def lines(self) -> list[str]:
        """The history as dim lines: `you: …`, `agent: …`, `[tool] title: status`, `[plan] 2 of 3 steps done`."""
        shown = [f"({self.dropped} earlier lines not shown)"] if self.dropped else []
        for entry in self.entries:
            if entry.kind in SPEAKERS:
                shown.append(f"{SPEAKERS[entry.kind]}: {excerpt(entry.text)}")
            elif entry.kind == "tool":
                shown.append(f"[tool] {excerpt(entry.text)}: {excerpt(entry.status, 20)}")
            else:
                shown.append(f"[{entry.kind}] {excerpt(entry.text)}")
        return [click.style(harmless(line), dim=True) for line in shown]


class SessionSwitch:
    """The listener while `pending` (session/new, load or resume) opens a session: the replay goes
    to `history`; from the answer on, the renderer shows the opened session."""

    def __init__(self, pending: Pending, renderer: Renderer, session_id: str | None, history: History | None) -> None:
        self.pending = pending
        self.renderer = renderer
        self.session_id = session_id  # None: the one session/new names in its answer
        self.history = history
        self.switched = False
        self._deferred: list[dict[str, Any]] = []  # the session's other updates before the answer (its commands): shown once switched

    def __call__(self, message: dict[str, Any]) -> None:
        if not self.pending.done:
            params = message.get("params") if message.get("method") == "session/update" else None
            if isinstance(params, dict) and params.get("sessionId") == self.session_id and self.session_id is not None:
                update = params.get("update")
                if isinstance(update, dict) and update.get("sessionUpdate") in REPLAYED:
                    if self.history is not None:
                        self.history.add(update)
                else:
                    self._deferred = [*self._deferred[-(MAX_DEFERRED - 1):], message]  # bounded: the last ones are the ones that count
                return
        else:
            self.finish()
        self.renderer(message)

    def finish(self) -> str | None:
        """Once answered: the session opened (None if it was refused), which the renderer now shows."""
        result = self.pending.response(timeout=0).get("result")
        opened = self.session_id if self.session_id is not None else (result or {}).get("sessionId") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(opened, str):
            return None
        if not self.switched:
            self.switched = True
            self.renderer.switch(opened)
            deferred, self._deferred = self._deferred, []
            for message in deferred:
                self.renderer(message)
        return opened
