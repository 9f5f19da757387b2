"""What a turn sends: its `session/update` notifications, checked, paced and in order (S5).

`Turn` (agent.py) holds one `TurnOutput` and delegates its sending methods to it; the handles a
turn returns (`ToolCallHandle`, `CompactionHandle`) hold it too, so they send the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypedDict, Unpack

from . import content, paths, update_checks
from .context import ConnectionSnapshot
from .rpc import fairness
from .rpc.cancel import CancelToken
from .rpc.fairness import UpdateChannel
from .sessions import Session
from .tool_call_tokens import ToolCallTokens
from .update_checks import CompactionStatus, NoticeSeverity, PlanEntry, ToolCallStatus, ToolKind
from .usage import UsageCounters, utf8_size

#: A tool call in one of these statuses has ended (ACP v1's final statuses).
FINAL_TOOL_STATUSES = frozenset({"completed", "failed"})


class ToolCallDetails(TypedDict, total=False):
    """What a tool call may carry besides its id, title, kind and status (snake_case here; sent
    as ACP spells it: raw_input as `rawInput`, meta as `_meta`). A field given as None is left out."""

    content: Sequence[Mapping[str, Any]]
    locations: Sequence[str | Mapping[str, Any]]
    raw_input: Any
    raw_output: Any
    name: str
    meta: Mapping[str, Any]


class ToolCallFields(ToolCallDetails, total=False):
    """What `tool_update` (and `ask_permission`) may patch."""

    title: str
    kind: ToolKind
    status: ToolCallStatus


_WIRE_NAMES = {"raw_input": "rawInput", "raw_output": "rawOutput", "meta": "_meta"}
_FIELD_NAMES = ToolCallFields.__required_keys__ | ToolCallFields.__optional_keys__
_CAMEL_NAMES = {wire_name: name for name, wire_name in _WIRE_NAMES.items()}


def wire_fields(where: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments as the wire names them; TypeError for one a tool call has not."""
    wire_fields = {}
    for name, value in fields.items():
        if name not in _FIELD_NAMES:
            hint = f" (did you mean {_CAMEL_NAMES[name]}?)" if name in _CAMEL_NAMES else ""
            raise TypeError(f"{where}: unexpected keyword argument {name!r}{hint}")
        if value is not None:
            wire_fields[_WIRE_NAMES.get(name, name)] = value
    return wire_fields


class TurnEnded(RuntimeError):
    """A `Turn` call that would send or ask something after the turn was answered: from a greenlet
    the agent left running, or through a handle kept past its turn. Nothing was sent (S5: nothing
    follows a prompt's response) and nothing changed, so the session's next turn is not affected."""

    def __init__(self, call: str) -> None:
        super().__init__(f"Turn.{call}: this turn has ended (its prompt was answered); nothing more can be sent or "
                         "asked in it. Finish the work before Agent.prompt returns, or do it in a later turn")
        self.call = call


def tool_call_id_of(tool_call: str | ToolCallHandle) -> str:
    """The id of a tool call given as its handle or as the id itself."""
    return tool_call.id if isinstance(tool_call, ToolCallHandle) else tool_call


class TurnUpdates(Protocol):
    """The runtime's record of a turn, seen from agent code: it turns each update into its wire
    line, numbers messages and keeps the turn's history (the author never sees either)."""

    ended: bool

    def update(self, update: dict[str, Any], sent: dict[str, Any] | None = None) -> bytes | None: ...

    def text_chunk(self, kind: str, text: str) -> bytes: ...

    def notice(self, update: dict[str, Any]) -> bytes | None: ...


class ToolCallHandle:
    """A tool call `Turn.tool_call` announced: its `id`, the updates that move it on, and its
    own cancellation token (`token`, `cancelled`, `sleep`, `wait_cancelled`)."""

    __slots__ = ("id", "_output", "_token")

    def __init__(self, output: TurnOutput, tool_call_id: str) -> None:
        self.id = tool_call_id
        self._output = output
        self._token: CancelToken | None = None

    @property
    def token(self) -> CancelToken:
        """Set when the turn is cancelled, or when a client cancels this tool call alone (ACP v2
        `tool_call/cancel`, for one announced `cancellable`); pass it where a wait takes a token."""
        if self._token is None:
            self._token = self._output.tool_call_token(self.id)
        return self._token

    @property
    def cancelled(self) -> bool:
        return self.token.is_set()

    def sleep(self, seconds: float) -> bool:
        """Wait, unless this tool call (or its turn) is cancelled first; True if the full time passed."""
        return not self.token.wait(seconds)

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Wait until this tool call (or its turn) is cancelled; True if it was."""
        return self.token.wait(timeout)

    def update(self, **fields: Unpack[ToolCallFields]) -> None:
        """`Turn.tool_update` for this tool call."""
        self._output.tool_update(self.id, **fields)

    def complete(self, **fields: Unpack[ToolCallDetails]) -> None:
        """Mark it `completed` (with the content or raw output given)."""
        self._output.tool_update(self.id, status="completed", **fields)

    def fail(self, reason: str | None = None, **fields: Unpack[ToolCallDetails]) -> None:
        """Mark it `failed`; `reason` is shown as its first content item."""
        if reason is not None:
            fields["content"] = [content.text(reason), *(fields.get("content") or ())]
        self._output.tool_update(self.id, status="failed", **fields)

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"ToolCallHandle({self.id!r})"


def _compaction_id(compaction: str | CompactionHandle) -> str:
    return compaction.id if isinstance(compaction, CompactionHandle) else compaction


class CompactionHandle:
    """A context compaction `Turn.compaction` reported: its `id`, and the updates that move it on.

    Every call is checked and then sent only to a client that advertised `session.compaction`;
    for any other client it does nothing (`sent` says which), so agent code reads the same.
    """

    __slots__ = ("id", "_output")

    def __init__(self, output: TurnOutput, compaction_id: str) -> None:
        self.id = compaction_id
        self._output = output

    @property
    def sent(self) -> bool:
        """Whether this turn's client is sent compaction updates (it advertised `session.compaction`)."""
        return self._output.can_show_compaction

    def update(self, status: CompactionStatus | str, *, summary: Sequence[Mapping[str, Any]] | None = None,
               error: str | None = None, meta: Mapping[str, Any] | None = None) -> bool:
        """`Turn.compaction_update` for this compaction."""
        return self._output.compaction_update(self.id, status, summary=summary, error=error, meta=meta)

    def summary_chunk(self, content: str | Mapping[str, Any]) -> bool:
        """Append to its summary (`Turn.compaction_summary`): text, or one content block."""
        return self._output.compaction_summary(self.id, content)

    def complete(self, *, summary: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """Mark it `completed` (with the complete summary, if given)."""
        return self.update("completed", summary=summary)

    def fail(self, error: str | None = None) -> bool:
        """Mark it `failed`, with the error text the user should see."""
        return self.update("failed", error=error)

    def cancel(self) -> bool:
        """Mark it `cancelled`."""
        return self.update("cancelled")

    def __repr__(self) -> str:
        return f"CompactionHandle({self.id!r})"


class TurnOutput:
    """One turn's updates for its session: each checked as ACP requires, then sent in order
    through the turn's paced producer (fairness.py), so a fast stream cannot starve control traffic.

    `Turn` documents each method for the agent author; what is here is how the sending works.
    """

    def __init__(self, session: Session, cwd: str, snapshot: ConnectionSnapshot, channel: UpdateChannel,
                 updates: TurnUpdates, tool_calls: ToolCallTokens, usage: UsageCounters) -> None:
        self._session = session
        self._cwd = cwd
        self._snapshot = snapshot
        self._channel = channel
        self._paced = fairness.PacedProducer(channel)
        self._updates = updates
        self._tool_calls = tool_calls
        self._usage = usage

    @property
    def closed(self) -> bool:
        """True once the turn was answered: nothing more may be sent."""
        return self._updates.ended

    @property
    def can_show_compaction(self) -> bool:
        """The client advertised `session.compaction`: compaction updates are sent to it."""
        return self._snapshot.can_show_compaction()

    def check_open(self, call: str) -> None:
        """TurnEnded naming `call` (a `Turn` method) once the turn was answered; before anything is sent or changed."""
        if self._updates.ended:
            raise TurnEnded(call)

    def tool_call_token(self, tool_call_id: str) -> CancelToken:
        """The tool call's own token (made on first use, set with the turn's)."""
        return self._tool_calls.token(tool_call_id)

    def send(self, update: dict[str, Any]) -> None:
        """Any update, checked (`Turn.send`)."""
        self._send_checked(update, "send")

    def send_final(self, update: dict[str, Any]) -> None:
        """Queue a last update without yielding: the runtime sends it just before the response."""
        line = self._updates.notice(update)
        if line is not None:  # None: not sent in the negotiated version (its dialect said why)
            self._channel.put(line)

    def announce(self, kept: dict[str, Any], sent: dict[str, Any]) -> None:
        """A settings change: `kept` is what history stores, `sent` what this client is sent."""
        self._send_line(self._updates.update(kept, sent=sent))

    def say(self, text: str) -> None:
        """A chunk of the reply, counted in the turn's output bytes."""
        self._text_chunk("say", text)
        self._usage.output_bytes += utf8_size(text)
        self._paced.send(self._updates.text_chunk("agent_message_chunk", text))

    def think(self, text: str) -> None:
        """A chunk of reasoning (not counted as output)."""
        self._text_chunk("think", text)
        self._paced.send(self._updates.text_chunk("agent_thought_chunk", text))

    def _text_chunk(self, call: str, text: Any) -> None:
        """A chunk's text checked at the call (the streaming hot path: two cheap tests)."""
        self.check_open(call)
        if not isinstance(text, str):
            raise TypeError(f"Turn.{call}: text must be a string, got {type(text).__name__!r}")

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        """The complete plan, its entries checked."""
        self._send_checked({"sessionUpdate": "plan", "entries": update_checks.plan_entries("plan", entries)}, "plan")

    def tool_call(self, tool_call_id: str | None, title: str | None, *, kind: ToolKind, status: ToolCallStatus,
                  cancellable: bool, fields: Mapping[str, Any]) -> ToolCallHandle:
        """Announce a tool call (`Turn.tool_call`); an id is made when none is given."""
        if title is None:
            raise TypeError("tool_call: missing the title")
        if tool_call_id is None:
            tool_call_id = update_checks.new_tool_call_id()
        update = {"sessionUpdate": "tool_call", "toolCallId": tool_call_id, "title": title, "kind": kind, "status": status,
                  **wire_fields("tool_call", fields)}
        cancellable = cancellable and status not in FINAL_TOOL_STATUSES  # a final one has nothing left to cancel
        if cancellable and self._advertises_cancel:
            update["capabilities"] = {"cancel": {}}
        # Cancellable before it is sent: sending yields, and the client may cancel it meanwhile.
        known = self._tool_calls.is_cancellable(tool_call_id)
        self._tool_calls.announced(tool_call_id, cancellable)
        try:
            self._send_checked(update, "tool_call")
        except BaseException:  # ok: undoes the registration and re-raises (a GreenletExit too)
            if not known:
                self._tool_calls.finished(tool_call_id)
            raise
        return ToolCallHandle(self, tool_call_id)

    def tool_update(self, tool_call: str | ToolCallHandle, **fields: Unpack[ToolCallFields]) -> None:
        """Patch a tool call with the fields given (`Turn.tool_update`)."""
        tool_call_id = tool_call_id_of(tool_call)
        update = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, **wire_fields("tool_update", fields)}
        if update.get("status") in FINAL_TOOL_STATUSES and self._advertises_cancel and self._tool_calls.is_cancellable(tool_call_id):
            update["capabilities"] = None  # ACP v2: stop advertising the cancel once final
        self._send_checked(update, "tool_update")

    @property
    def _advertises_cancel(self) -> bool:
        """Whether this turn's client is told which tool calls it may cancel (ACP v2 and later)."""
        return (self._snapshot.protocol_version or 0) >= 2

    def notice(self, title: str, *, severity: NoticeSeverity | str, description: str | None,
               meta: Mapping[str, Any] | None) -> bool:
        """A notice (`Turn.notice`); True if sent."""
        update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
        if description is not None:
            update["description"] = description
        if meta is not None:
            update["_meta"] = meta
        return self._send_checked(update, "notice")

    def compaction(self, status: CompactionStatus | str, *, compaction_id: str | None, summary: Sequence[Mapping[str, Any]] | None,
                   error: str | None, meta: Mapping[str, Any] | None) -> CompactionHandle:
        """Report a compaction (`Turn.compaction`); an id is made when none is given."""
        self.check_open("compaction")
        if compaction_id is None:
            compaction_id = update_checks.new_compaction_id()
        self.compaction_update(compaction_id, status, summary=summary, error=error, meta=meta)
        return CompactionHandle(self, compaction_id)

    def compaction_update(self, compaction: str | CompactionHandle, status: CompactionStatus | str, *,
                          summary: Sequence[Mapping[str, Any]] | None, error: str | None, meta: Mapping[str, Any] | None) -> bool:
        """Move a compaction on (`Turn.compaction_update`); a field left None is not sent."""
        update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": _compaction_id(compaction),
                                  "status": status}
        for name, value in (("summary", summary), ("error", error), ("_meta", meta)):
            if value is not None:
                update[name] = value
        return self._send_checked(update, "compaction_update")

    def compaction_summary(self, compaction: str | CompactionHandle, content: str | Mapping[str, Any]) -> bool:
        """Append a chunk to a compaction's summary (`Turn.compaction_summary`)."""
        block = {"type": "text", "text": content} if isinstance(content, str) else content
        return self._send_checked({"sessionUpdate": "compaction_summary_chunk", "compactionId": _compaction_id(compaction),
                                   "content": block}, "compaction_summary")

    def _send_checked(self, update: Mapping[str, Any], where: str) -> bool:
        """Check `update` as ACP requires, remember a new tool call's id, then send it; an update
        the client did not advertise (a notice, a compaction) is checked and not sent: False.
        After the turn's response nothing is sent nor remembered: TurnEnded."""
        self.check_open(where)
        checked = update_checks.session_update(where, update)
        if not self._snapshot.accepts_update(checked["sessionUpdate"]):
            return False
        if checked["sessionUpdate"] == "tool_call":
            self._session.tool_call_ids.announce(where, checked["toolCallId"])
        if checked["sessionUpdate"] in paths.TOOL_CALL_UPDATES:
            checked = paths.tool_call_paths(checked, self._cwd)
            if checked.get("status") in FINAL_TOOL_STATUSES:
                self._tool_calls.finished(checked["toolCallId"])  # before sending, which yields
        self._send_line(self._updates.update(checked))
        return True

    def _send_line(self, line: bytes | None) -> None:
        """Send a line the turn's record built; None: kept in history, not sent in the negotiated version."""
        if line is not None:
            self._paced.send(line)
