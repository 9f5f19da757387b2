"""The agent author's API: subclass `Agent`, implement `prompt(turn)`; a `Turn` does the rest.

Nothing here knows about framing or descriptors: a turn sends through the connection's
outbound queue and asks the client through the pending-request map it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack, overload

from . import content, paths, update_checks
from .rpc import fairness, wire
from .rpc.cancel import CancelToken
from .context import ConnectionSnapshot
from .errors import CapabilityMissing, ClientError, NotCancellable, TurnCancelled
from .rpc.fairness import UpdateChannel
from .sessions import Session
from .tool_call_tokens import ToolCallTokens
from .update_checks import CompactionStatus, NoticeSeverity, PlanEntry, ToolCallStatus, ToolKind
from .usage import UsageCounters, utf8_size

if TYPE_CHECKING:
    # Prompt blocks, terminals and forms load when a turn first uses them, not at start-up
    # (their dataclasses are a noticeable share of the time to answer `initialize`).
    from .blocks import Block
    from .conversation import ConversationTurn
    from .elicitation import Elicited
    from .terminals import Terminal, TurnTerminals
    from .mcp.client import McpClientSession, McpTools
    from .mcp.tools import ToolServer

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})

#: The options `Turn.ask_permission` offers unless told otherwise.
ALLOW_OR_REJECT: tuple[Mapping[str, str], ...] = (
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
)
_ALLOWING = frozenset({"allow_once", "allow_always"})
#: A tool call in one of these statuses has ended (ACP v1's final statuses).
FINAL_TOOL_STATUSES = frozenset({"completed", "failed"})


@dataclass(frozen=True, slots=True)
class Permission:
    """What `Turn.ask_permission` got: granted (with the option chosen), or why not.

    When not granted, the tool call was already marked `failed` with `reason`.
    """

    granted: bool
    option_id: str | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.granted


@dataclass(frozen=True, slots=True)
class Mode:
    """A session mode the agent offers (`session/set_mode`)."""

    id: str
    name: str
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire = {"id": self.id, "name": self.name}
        if self.description:
            wire["description"] = self.description
        return wire


@dataclass(frozen=True, slots=True)
class SelectOption:
    """A select-type session config option (`session/set_config_option`)."""

    id: str
    name: str
    values: Sequence[tuple[str, str]]  # (value id, display name)
    default: str
    description: str | None = None
    category: str | None = None

    def to_wire(self, current: str) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "type": "select",
            "currentValue": current,
            "options": [{"value": v, "name": n} for v, n in self.values],
        }
        if self.description:
            wire["description"] = self.description
        if self.category:
            wire["category"] = self.category
        return wire

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and any(value == v for v, _ in self.values)

    def coerce(self, value: Any) -> str:
        """`value` as this option stores it; ValueError when it is none of the offered values."""
        if not self.accepts(value):
            raise ValueError(f"{wire.describe(value)} is not a value of {wire.excerpt(self.id)!r}")
        return value


#: The two values a boolean option offers to a client that cannot show `type: "boolean"`.
BOOLEAN_AS_SELECT = (("true", "On"), ("false", "Off"))


@dataclass(frozen=True, slots=True)
class BooleanOption:
    """An on/off session config option; agent code always sees a bool in `session.config`.

    Sent as `type: "boolean"` only to a client that advertised
    `clientCapabilities.session.configOptions.boolean`; any other client gets it as a select of
    "true"/"false", so a user of any client can still set it (omitting it would hide a setting
    the agent honours, and ACP forbids only the boolean type, not the option).
    """

    id: str
    name: str
    default: bool = False
    description: str | None = None
    category: str | None = None

    def to_wire(self, current: bool, *, boolean: bool = True) -> dict[str, Any]:
        wire: dict[str, Any] = {"id": self.id, "name": self.name}
        if boolean:
            wire.update({"type": "boolean", "currentValue": bool(current)})
        else:
            wire.update({"type": "select", "currentValue": "true" if current else "false",
                         "options": [{"value": v, "name": n} for v, n in BOOLEAN_AS_SELECT]})
        if self.description:
            wire["description"] = self.description
        if self.category:
            wire["category"] = self.category
        return wire

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool) or value in ("true", "false")

    def coerce(self, value: Any) -> bool:
        """A bool, or the select fallback's "true"/"false"; ValueError for anything else."""
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise ValueError(f"{wire.describe(value)} is not a value of {wire.excerpt(self.id)!r} (true or false)")


ConfigOption = SelectOption | BooleanOption


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command advertised with `available_commands_update`."""

    name: str
    description: str
    hint: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint:
            wire["input"] = {"hint": self.hint}
        return wire


@dataclass(frozen=True, slots=True)
class AuthMethod:
    """An `agent`-type authentication method; advertising one makes `session/new` require it."""

    id: str
    name: str
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire = {"id": self.id, "name": self.name}
        if self.description:
            wire["description"] = self.description
        return wire


@dataclass(slots=True)
class SessionView:
    """What agent code sees of a session."""

    session_id: str
    cwd: str
    additional_directories: list[str]
    mode_id: str | None
    config: dict[str, Any]
    mcp_servers: list[dict[str, Any]]
    state: dict[str, Any]

    @classmethod
    def of(cls, session: Session) -> "SessionView":
        record = session.record
        return cls(
            session.session_id, record.cwd, record.additional_directories, record.mode_id,
            record.config, session.mcp_servers, session.state,
        )


@dataclass(slots=True)
class ExtensionCall:
    """An `_`-prefixed extension request as an agent's handler receives it."""

    method: str
    params: Any
    snapshot: ConnectionSnapshot
    token: CancelToken


class Agent:
    """Base class for an ACP agent; every hook has a sensible default except `prompt`."""

    name: str = "acp-green-agent"
    title: str | None = None
    version: str = "0.0.0"
    modes: Sequence[Mode] = ()
    config_options: Sequence[ConfigOption] = ()
    commands: Sequence[Command] = ()
    auth_methods: Sequence[AuthMethod] = ()
    # Prompt content beyond text and resource links this agent reads (`promptCapabilities`); a
    # prompt carrying a kind not accepted here is refused with -32602 before the turn starts.
    accepts_images: bool = False
    accepts_audio: bool = False
    accepts_embedded_context: bool = False

    def authenticate(self, method_id: str, snapshot: ConnectionSnapshot) -> None:
        """Accept or refuse (raise) an `authenticate` request; runs in receive order."""

    def cancel_terminal(self, session: SessionView, terminal_id: str, snapshot: ConnectionSnapshot) -> None:
        """ACP v2 `terminal/cancel` for a terminal this agent runs itself; runs in receive order.

        Return to accept (then confirm with a `terminal_update` that sets `exitStatus`); raise
        `errors.NotCancellable("terminalId", terminal_id, why)` to refuse (-32602). The default
        knows no terminal: the runtime runs none of the agent's own (client terminals are v1's)."""
        raise NotCancellable("terminalId", terminal_id, "this agent runs no terminal of its own")

    def logout(self, snapshot: ConnectionSnapshot) -> None:
        """Forget the connection's credentials (`logout`); runs in receive order.

        Only an agent that overrides this advertises `agentCapabilities.auth.logout`; with
        `auth_methods`, the connection must `authenticate` again before any session method.
        """
        raise NotImplementedError

    def session_started(self, session: SessionView, snapshot: ConnectionSnapshot) -> None:
        """A session was created; runs in receive order, so keep it quick."""

    def mode_changed(self, session: SessionView, mode_id: str, snapshot: ConnectionSnapshot) -> None:
        """The client chose mode `mode_id` (`session/set_mode`; under ACP v2, `session/set_config_option`
        of the `mode` option); runs in receive order, before it is stored, so raising refuses it.
        `session.mode_id` is still the previous mode; the agent's own `Turn.set_mode` does not call this."""

    def config_changed(self, session: SessionView, config_id: str, value: Any, snapshot: ConnectionSnapshot) -> None:
        """The client set option `config_id` to `value` (a bool for a BooleanOption); as `mode_changed`
        (which, not this, sees a v2 client's change of the `mode` option that stands for the modes)."""

    def on_fork(self, source: SessionView, fork: SessionView, snapshot: ConnectionSnapshot) -> None:
        """A client forks `source` into the new session `fork` (`session/fork`); runs in receive order,
        before anything of the fork is stored. `fork.state` is already a copy of the source's state
        (as last stored), which this hook may change; the source is not to be changed here. Raise
        `errors.ForkRefused` to refuse the fork (-32602 `fork_refused`); any other exception answers
        -32603. `session_started` is not called for a fork."""

    def prompt(self, turn: "Turn") -> str | None:
        """Run one turn; return a stop reason (None means "end_turn")."""
        raise NotImplementedError

    def extension_methods(self) -> Mapping[str, Callable[[ExtensionCall], Any]]:
        """`_`-prefixed requests this agent answers; each runs in the background."""
        return {}

    def provided_mcp_servers(self) -> Sequence["ToolServer"]:
        """In-process MCP tool servers this agent provides over ACP (announced at initialize)."""
        return ()


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


def _wire_fields(where: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments as the wire names them; TypeError for one a tool call has not."""
    wire_fields = {}
    for name, value in fields.items():
        if name not in _FIELD_NAMES:
            hint = f" (did you mean {_CAMEL_NAMES[name]}?)" if name in _CAMEL_NAMES else ""
            raise TypeError(f"{where}: unexpected keyword argument {name!r}{hint}")
        if value is not None:
            wire_fields[_WIRE_NAMES.get(name, name)] = value
    return wire_fields


def _tool_call_id(tool_call: str | ToolCallHandle) -> str:
    return tool_call.id if isinstance(tool_call, ToolCallHandle) else tool_call


class ToolCallHandle:
    """A tool call `Turn.tool_call` announced: its `id`, the updates that move it on, and its
    own cancellation token (`token`, `cancelled`, `sleep`, `wait_cancelled`)."""

    __slots__ = ("id", "_turn", "_token")

    def __init__(self, turn: TurnOutput, tool_call_id: str) -> None:
        self.id = tool_call_id
        self._turn = turn
        self._token: CancelToken | None = None

    @property
    def token(self) -> CancelToken:
        """Set when the turn is cancelled, or when a client cancels this tool call alone (ACP v2
        `tool_call/cancel`, for one announced `cancellable`); pass it where a wait takes a token."""
        if self._token is None:
            self._token = self._turn._tool_calls.token(self.id)
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
        self._turn.tool_update(self.id, **fields)

    def complete(self, **fields: Unpack[ToolCallDetails]) -> None:
        """Mark it `completed` (with the content or raw output given)."""
        self._turn.tool_update(self.id, status="completed", **fields)

    def fail(self, reason: str | None = None, **fields: Unpack[ToolCallDetails]) -> None:
        """Mark it `failed`; `reason` is shown as its first content item."""
        if reason is not None:
            fields["content"] = [content.text(reason), *(fields.get("content") or ())]
        self._turn.tool_update(self.id, status="failed", **fields)

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

    __slots__ = ("id", "_turn")

    def __init__(self, turn: TurnOutput, compaction_id: str) -> None:
        self.id = compaction_id
        self._turn = turn

    @property
    def sent(self) -> bool:
        """Whether this turn's client is sent compaction updates (it advertised `session.compaction`)."""
        return self._turn.can_show_compaction

    def update(self, status: CompactionStatus | str, *, summary: Sequence[Mapping[str, Any]] | None = None,
               error: str | None = None, meta: Mapping[str, Any] | None = None) -> bool:
        """`Turn.compaction_update` for this compaction."""
        return self._turn.compaction_update(self.id, status, summary=summary, error=error, meta=meta)

    def summary_chunk(self, content: str | Mapping[str, Any]) -> bool:
        """Append to its summary (`Turn.compaction_summary`): text, or one content block."""
        return self._turn.compaction_summary(self.id, content)

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


class TurnUpdates(Protocol):
    """The runtime's record of a turn, seen from agent code: it turns each update into its wire
    line, numbers messages and keeps the turn's history (the author never sees either)."""

    ended: bool

    def update(self, update: dict[str, Any], sent: dict[str, Any] | None = None) -> bytes: ...

    def text_chunk(self, kind: str, text: str) -> bytes: ...

    def notice(self, update: dict[str, Any]) -> bytes: ...


class SettingsAnnouncement(Protocol):
    """A settings change as history keeps it and as this client is sent it (`settings.Announcement`)."""

    @property
    def kept(self) -> dict[str, Any]: ...

    @property
    def sent(self) -> dict[str, Any]: ...


class TurnSettings(Protocol):
    """What a turn changes through its session's settings (`settings.SessionSettings` in the runtime)."""

    def set_mode(self, session: Session, mode_id: str) -> None: ...

    def set_config(self, session: Session, config_id: str, value: Any) -> Any: ...

    def config_options(self, session: Session, snapshot: ConnectionSnapshot) -> list[dict[str, Any]]: ...

    def mode_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> SettingsAnnouncement: ...

    def config_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> SettingsAnnouncement: ...


class TurnInput:
    """A running prompt's input, its token and what its client can do: what agent code reads,
    and how it waits or stops. The state is set by `Turn.__init__`."""

    _session: Session
    session_id: str
    session: SessionView
    prompt: list[dict[str, Any]]
    token: CancelToken
    snapshot: ConnectionSnapshot
    usage: UsageCounters
    _channel: UpdateChannel
    _out: fairness.PacedProducer
    _updates: TurnUpdates
    _call_client: Callable[..., Any]
    _tool_calls: ToolCallTokens

    # -- input -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The prompt's text blocks joined (resource links appear as their URI)."""
        parts = []
        for block in self.prompt:
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            elif block.get("type") == "resource_link":
                parts.append(block.get("uri", ""))
        return "".join(parts)

    @property
    def blocks(self) -> tuple[Block, ...]:
        """The prompt as typed blocks, in order (text, image, audio, resource, resource link)."""
        from .blocks import blocks_of

        return blocks_of(self.prompt)

    @property
    def closed(self) -> bool:
        """True once the turn was answered: nothing more may be sent."""
        return self._updates.ended

    @property
    def cancelled(self) -> bool:
        return self.token.is_set()

    @property
    def can_read_files(self) -> bool:
        """The client advertised `fs.readTextFile` (check before asking the user anything)."""
        return self.snapshot.can_read_files()

    @property
    def can_write_files(self) -> bool:
        """The client advertised `fs.writeTextFile` (check before asking the user anything)."""
        return self.snapshot.can_write_files()

    def resolve_path(self, path: str) -> str:
        """`path` made absolute against the session's cwd (paths.py: lexical; `..` may leave cwd)."""
        return paths.resolve(self.session.cwd, path)

    def check_cancelled(self) -> None:
        """Raise TurnCancelled if the turn was cancelled."""
        if self.token.is_set():
            raise TurnCancelled()

    @property
    def can_run_terminals(self) -> bool:
        """The client advertised `terminal` (check before asking the user anything)."""
        return self.snapshot.has_terminal()

    @property
    def can_show_notices(self) -> bool:
        """The client advertised `session.notices`: `notice` sends it notices."""
        return self.snapshot.can_show_notices()

    @property
    def can_show_compaction(self) -> bool:
        """The client advertised `session.compaction`: `compaction` and its updates reach it."""
        return self.snapshot.can_show_compaction()

    @property
    def can_elicit(self) -> bool:
        """The client advertised form elicitation (`elicitation.form`)."""
        from .elicitation import can_elicit_forms

        return can_elicit_forms(self.snapshot)

    # -- waiting -----------------------------------------------------------------------------
    def sleep(self, seconds: float) -> bool:
        """Wait, unless cancelled first; True if the full time passed."""
        return not self.token.wait(seconds)

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Wait until the turn is cancelled; True if it was."""
        return self.token.wait(timeout)


class TurnOutput(TurnInput):
    """What a turn sends: `session/update` notifications for its session, in order (S5)."""

    # -- output ------------------------------------------------------------------------------
    def send(self, update: dict[str, Any]) -> None:
        """Send one `session/update` for this session, in order (S5).

        Shares the hub fairly with other streams and with control traffic (fairness.py), and
        waits while the outbound backlog is over its high-water mark, so a fast
        stream cannot starve cancellation. Not released by the token: a cancelled turn that
        flushes what it has left must not bury control responses under a backlog (S10).
        Relative paths in a tool call's `locations` and `content` are sent absolute (paths.py).
        An update ACP would not accept (an unknown kind; a tool call, plan, message chunk,
        notice or compaction with a field of the wrong shape; a tool call id this session already
        used) raises TypeError/ValueError here, and nothing is sent. A `notice` or compaction
        update for a client that did not advertise it is not sent (see `notice`, `compaction`).
        """
        self._send_checked(update, "send")

    def send_final(self, update: dict[str, Any]) -> None:
        """Queue a last update without yielding; the runtime uses it just before the response."""
        self._channel.put(self._updates.notice(update))

    def say(self, text: str) -> None:
        """Stream a chunk of the agent's reply."""
        self.usage.output_bytes += utf8_size(text)
        self._out.send(self._updates.text_chunk("agent_message_chunk", text))

    def think(self, text: str) -> None:
        """Stream a chunk of the agent's reasoning."""
        self._out.send(self._updates.text_chunk("agent_thought_chunk", text))

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        """Send the complete plan (each entry: content, priority, status); the client replaces the
        previous one. Entries ACP would not accept raise TypeError/ValueError, and nothing is sent."""
        self._send_checked({"sessionUpdate": "plan", "entries": update_checks.plan_entries("plan", entries)}, "plan")

    @overload
    def tool_call(self, tool_call_id: str | None, title: str, *, kind: ToolKind = "other", status: ToolCallStatus = "pending",
                  cancellable: bool = False, **fields: Unpack[ToolCallDetails]) -> ToolCallHandle: ...
    @overload
    def tool_call(self, *, title: str, kind: ToolKind = "other", status: ToolCallStatus = "pending",
                  cancellable: bool = False, **fields: Unpack[ToolCallDetails]) -> ToolCallHandle: ...
    def tool_call(self, tool_call_id: str | None = None, title: str | None = None, *, kind: ToolKind = "other",
                  status: ToolCallStatus = "pending", cancellable: bool = False,
                  **fields: Unpack[ToolCallDetails]) -> ToolCallHandle:
        """Announce a tool call and return its handle (`update`, `complete`, `fail`).

        Without `tool_call_id` the runtime makes one no other tool call has had; an id this
        session already announced raises ValueError. `locations` are path strings or
        `{"path": ..., "line": ...}` (content.location); a relative path is sent absolute. A field
        ACP would not accept raises TypeError/ValueError naming it, and nothing is sent. One left
        pending or in progress is failed by the runtime when the turn ends.

        `cancellable`: the agent honours the handle's `token`, so a client may cancel this tool
        call alone (ACP v2 `tool_call/cancel`; advertised to a v2 client as `capabilities.cancel`
        until the tool call reaches a final status). Confirm a cancel with a final status
        (`handle.fail("Cancelled")`); the turn goes on.
        """
        if title is None:
            raise TypeError("tool_call: missing the title")
        if tool_call_id is None:
            tool_call_id = update_checks.new_tool_call_id()
        update = {"sessionUpdate": "tool_call", "toolCallId": tool_call_id, "title": title, "kind": kind, "status": status,
                  **_wire_fields("tool_call", fields)}
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
        """Patch a tool call: only the fields given (status, content, raw_output, ...) are sent,
        checked as `tool_call` checks them."""
        tool_call_id = _tool_call_id(tool_call)
        update = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, **_wire_fields("tool_update", fields)}
        if update.get("status") in FINAL_TOOL_STATUSES and self._advertises_cancel and self._tool_calls.is_cancellable(tool_call_id):
            update["capabilities"] = None  # ACP v2: stop advertising the cancel once final
        self._send_checked(update, "tool_update")

    @property
    def _advertises_cancel(self) -> bool:
        """Whether this turn's client is told which tool calls it may cancel (ACP v2 and later)."""
        return (self.snapshot.protocol_version or 0) >= 2

    # -- notices and compaction (sent only to a client that advertised them) ------------------
    def notice(self, title: str, *, severity: NoticeSeverity | str = "info", description: str | None = None,
               meta: Mapping[str, Any] | None = None) -> bool:
        """Tell the user something outside the conversation (ACP `notice`): `title` plain text, not
        empty; `severity` "info", "warning", "error" (or an extension value starting with `_`).

        Sent, stored and replayed on `session/load` only for a client that advertised
        `session.notices`; for any other client it is a no-op (nothing sent, nothing stored),
        and the return value says which: True if sent. ACP lets an agent say it as a message
        instead (`if not turn.notice(...): turn.say(...)`); the runtime never does that for you,
        as it would change the reply. A malformed argument raises TypeError/ValueError naming
        it either way.
        """
        update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
        if description is not None:
            update["description"] = description
        if meta is not None:
            update["_meta"] = meta
        return self._send_checked(update, "notice")

    def compaction(self, status: CompactionStatus | str = "in_progress", *, compaction_id: str | None = None,
                   summary: Sequence[Mapping[str, Any]] | None = None, error: str | None = None,
                   meta: Mapping[str, Any] | None = None) -> CompactionHandle:
        """Report a context compaction (ACP `compaction_update`) and return its handle
        (`summary_chunk`, `update`, `complete`, `fail`, `cancel`).

        Without `compaction_id` the runtime makes one no other compaction has had. `status` is
        "in_progress", "completed", "failed", "cancelled" (or an extension value starting with
        `_`); `summary` the complete summary as content blocks. Sent, stored and replayed only
        for a client that advertised `session.compaction`; for any other client every call is a
        no-op (`handle.sent` is False). A malformed argument raises TypeError/ValueError naming it.
        """
        if compaction_id is None:
            compaction_id = update_checks.new_compaction_id()
        self.compaction_update(compaction_id, status, summary=summary, error=error, meta=meta)
        return CompactionHandle(self, compaction_id)

    def compaction_update(self, compaction: str | CompactionHandle, status: CompactionStatus | str, *,
                          summary: Sequence[Mapping[str, Any]] | None = None, error: str | None = None,
                          meta: Mapping[str, Any] | None = None) -> bool:
        """Move a compaction on: its new status, and (when given) its complete summary (`[]` clears
        it) or error text; a field left None is left as it was. True if sent (see `compaction`)."""
        update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": _compaction_id(compaction),
                                  "status": status}
        for name, value in (("summary", summary), ("error", error), ("_meta", meta)):
            if value is not None:
                update[name] = value
        return self._send_checked(update, "compaction_update")

    def compaction_summary(self, compaction: str | CompactionHandle, content: str | Mapping[str, Any]) -> bool:
        """Append one chunk to a compaction's summary (ACP `compaction_summary_chunk`): text, or
        a content block. True if sent (see `compaction`)."""
        block = {"type": "text", "text": content} if isinstance(content, str) else content
        return self._send_checked({"sessionUpdate": "compaction_summary_chunk", "compactionId": _compaction_id(compaction),
                                   "content": block}, "compaction_summary")

    def _send_checked(self, update: Mapping[str, Any], where: str) -> bool:
        """Check `update` as ACP requires, remember a new tool call's id, then send it; an update
        the client did not advertise (a notice, a compaction) is checked and not sent: False."""
        checked = update_checks.session_update(where, update)
        if not self.snapshot.accepts_update(checked["sessionUpdate"]):
            return False
        if checked["sessionUpdate"] == "tool_call":
            self._session.tool_call_ids.announce(where, checked["toolCallId"])
        if checked["sessionUpdate"] in paths.TOOL_CALL_UPDATES:
            checked = paths.tool_call_paths(checked, self.session.cwd)
            if checked.get("status") in FINAL_TOOL_STATUSES:
                self._tool_calls.finished(checked["toolCallId"])  # before sending, which yields
        self._out.send(self._updates.update(checked))
        return True


class TurnRequests(TurnOutput):
    """What a turn asks the client (permission, files, forms), waiting cooperatively; cancelling
    the turn releases every wait."""

    # -- asking the client -------------------------------------------------------------------
    def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Send any request to the client and wait; cancellation releases the wait at once."""
        return self._call_client(method, params, token=self.token, timeout=timeout)

    def request_permission(self, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Ask the user; returns the outcome object (`selected` with optionId, or `cancelled`).

        The low-level form: `ask_permission` also handles refusals, failures and cancellation.
        Cancelling the tool call alone (ACP v2 `tool_call/cancel`) cancels the request: `cancelled`.
        """
        where = "request_permission"
        checked = update_checks.tool_call_fields(where, tool_call, announce=False)
        params = {"sessionId": self.session_id, "toolCall": paths.tool_call_paths(checked, self.session.cwd),
                  "options": update_checks.permission_options(where, options)}
        try:
            result = self._call_client("session/request_permission", params, token=self._tool_calls.token(checked["toolCallId"]))
        except TurnCancelled:
            self.check_cancelled()  # the turn's own cancel ends the turn
            return {"outcome": "cancelled"}  # only the tool call was cancelled: nothing was granted
        outcome = result.get("outcome") if isinstance(result, dict) else result
        if outcome is None:
            return {"outcome": "cancelled"}
        if not isinstance(outcome, dict):
            # A malformed answer grants nothing; the agent code reads a dict either way.
            raise ClientError("session/request_permission", {"message": f"malformed result: the outcome is {wire.describe(outcome)}, not an object"})
        return outcome

    def ask_permission(self, tool_call: str | ToolCallHandle, options: Sequence[Mapping[str, Any]] = ALLOW_OR_REJECT,
                       **fields: Unpack[ToolCallFields]) -> Permission:
        """Ask the user whether `tool_call` (a handle or an id) may run (`fields`: its title,
        kind, locations... as the user should see them, checked as `tool_update` checks them).

        Granted only when the user picked an offered `allow_*` option. Otherwise — rejected, the
        request cancelled by the client, a client error, a malformed answer — the tool call is
        marked `failed` with the reason and the turn goes on. If the turn itself is cancelled
        meanwhile, raises TurnCancelled (the turn answers `cancelled`). Check what the client
        can do (`can_write_files`...) before asking.
        """
        tool_call_id = _tool_call_id(tool_call)
        asked = {"toolCallId": tool_call_id, **_wire_fields("ask_permission", fields)}
        where = "ask_permission"
        update_checks.tool_call_fields(where, asked, announce=False)  # a mistake raises here, not as a refusal
        update_checks.permission_options(where, options)
        try:
            outcome = self.request_permission(asked, options)
        except ClientError as exc:
            self.check_cancelled()
            return self._refused(tool_call_id, None, f"Permission request failed: {exc.explanation}")
        self.check_cancelled()
        answer = outcome.get("outcome")
        if answer == "cancelled":
            cancelled_here = self._tool_calls.token(tool_call_id).is_set()
            return self._refused(tool_call_id, None, "Cancelled" if cancelled_here else "Permission request cancelled by the client")
        if answer != "selected":
            return self._refused(tool_call_id, None, f"Permission denied: the client answered the outcome {wire.describe(answer)}")
        option_id = outcome.get("optionId")
        offered = next((o for o in options if o.get("optionId") == option_id), None)
        if offered is None:
            return self._refused(tool_call_id, None, f"Permission denied: the client selected {wire.describe(option_id)}, "
                                 "which was not offered")
        if offered.get("kind") in _ALLOWING:
            return Permission(True, option_id)
        return self._refused(tool_call_id, option_id, "Permission denied")

    def _refused(self, tool_call_id: str, option_id: str | None, reason: str) -> Permission:
        self.tool_update(tool_call_id, status="failed", content=[text_content(reason)])
        return Permission(False, option_id, reason)

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        """Read a file through the client (which sees unsaved editor buffers); a relative path is from cwd."""
        if not self.snapshot.can_read_files():
            raise CapabilityMissing("the client did not advertise fs.readTextFile")
        params: dict[str, Any] = {"sessionId": self.session_id, "path": self.resolve_path(path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = self.request("fs/read_text_file", params)
        # `null` or `{}` is not an empty file: the client said nothing about the file at all.
        if not isinstance(result, dict) or "content" not in result:
            raise ClientError("fs/read_text_file", {"message": f"malformed result: the client's answer has no content ({wire.describe(result)} without a 'content' string)"})
        content = result["content"]
        if not isinstance(content, str):
            raise ClientError("fs/read_text_file", {"message": f"malformed result: the client's answer has no content ('content' is {wire.describe(content)}, not a string)"})
        return content

    def write_text_file(self, path: str, content: str) -> None:
        """Write a file through the client; a relative path is from cwd."""
        if not self.snapshot.can_write_files():
            raise CapabilityMissing("the client did not advertise fs.writeTextFile")
        self.request("fs/write_text_file", {"sessionId": self.session_id, "path": self.resolve_path(path), "content": content})

    def elicit(self, message: str, schema: Mapping[str, Any], *, tool_call_id: str | None = None) -> Elicited:
        """Ask the user to fill a form (`elicitation/create`, mode "form"); `schema` is the form's
        flat JSON Schema object. Cancelling the turn cancels the request (TurnCancelled).

        Raises CapabilityMissing unless the client advertised `elicitation.form`.
        """
        from .elicitation import can_elicit_forms, elicited, form_params

        if not can_elicit_forms(self.snapshot):
            raise CapabilityMissing("the client did not advertise form elicitation (clientCapabilities.elicitation.form)")
        return elicited(self.request("elicitation/create", form_params(self.session_id, message, schema, tool_call_id)))


class Turn(TurnRequests):
    """One running prompt: its input, its token, and everything it may send or ask.

    What it reads and how it waits is `TurnInput`, what it sends `TurnOutput`, what it asks the
    client `TurnRequests`; here is what it reaches through the runtime: session settings, MCP
    servers and client terminals.
    """

    def __init__(
        self,
        *,
        session: Session,
        prompt: list[dict[str, Any]],
        token: CancelToken,
        snapshot: ConnectionSnapshot,
        channel: UpdateChannel,
        updates: TurnUpdates,
        call_client: Callable[..., Any],
        mcp: Callable[[str, CancelToken], "McpClientSession"] | None = None,
        send_client: Callable[[str, Any], None] | None = None,
        settings: TurnSettings | None = None,
        history: Callable[[bool, int | None], Iterator[ConversationTurn]] | None = None,
        save_state: Callable[[Session], None] | None = None,
    ) -> None:
        self._session = session
        self._history = history
        self._save_state = save_state
        self._tool_calls = ToolCallTokens(token)
        self.session_id = session.session_id
        self.session = SessionView.of(session)
        self.prompt = prompt
        self.token = token
        self.snapshot = snapshot
        self.usage = UsageCounters()
        self._channel = channel
        self._out = fairness.PacedProducer(channel)
        self._updates = updates
        self._call_client = call_client
        self._mcp = mcp
        self._send_client = send_client  # requests written without waiting (terminal cleanups)
        self._settings = settings
        # Only text a block of type "text" carries (checked at admission); other blocks may hold
        # a "text" field of any type, an extra field ACP lets a client send.
        self.usage.input_bytes = sum(utf8_size(b["text"]) for b in prompt if b.get("type") == "text")

    # -- session settings --------------------------------------------------------------------
    def set_mode(self, mode_id: str) -> None:
        """Switch the session's mode: stored, then announced (`current_mode_update`; under v2, where
        modes are the `mode` config option, `config_option_update`). ValueError if unknown."""
        settings = self._changed_settings()
        settings.set_mode(self._session, mode_id)
        self.session.mode_id = mode_id
        self._announce(settings.mode_announcement(self._session, self.snapshot))

    def set_config(self, config_id: str, value: Any) -> None:
        """Set a config option: stored, then `config_option_update` with every option sent."""
        settings = self._changed_settings()
        settings.set_config(self._session, config_id, value)
        self._announce(settings.config_announcement(self._session, self.snapshot))

    def _announce(self, announcement: SettingsAnnouncement) -> None:
        self._out.send(self._updates.update(announcement.kept, sent=announcement.sent))

    def _changed_settings(self) -> TurnSettings:
        if self._settings is None:
            raise RuntimeError("this turn was built without session settings")
        return self._settings

    # -- the stored conversation and state -----------------------------------------------------
    def history(self, *, newest_first: bool = False, since_turn: int | None = None) -> Iterator[ConversationTurn]:
        """The session's earlier turns as stored, oldest first (or `newest_first`), from turn
        index `since_turn` on; the running turn is not among them.

        An iterator that reads the store a page at a time (conversation.py): a long history is
        never held at once, and the hub never waits on the disk. The same after `session/load`,
        `session/resume`, an eviction or a restart: it is what replay sends the editor.
        """
        if self._history is None:
            raise RuntimeError("this turn was built without access to the store")
        return self._history(newest_first, since_turn)

    def save_state(self) -> None:
        """Store `session.state` now; StateNotStorable, naming the key, if a value cannot be.

        The runtime stores it anyway when the turn ends (and on session/close), where an
        unstorable value can only be logged; calling this gets the error in the agent's code.
        """
        if self._save_state is None:
            raise RuntimeError("this turn was built without access to the store")
        self._save_state(self._session)

    # -- MCP ---------------------------------------------------------------------------------
    def mcp(self, server: str, *, token: CancelToken | None = None) -> "McpTools":
        """An MCP client session with the server named `server`, bound to this turn's token (or
        to `token`: a tool call's `handle.token`, so cancelling that tool call cancels its calls).

        The name is one declared in `session/new` (stdio or `type: "acp"`) or one this process
        provides. Raises McpUnavailable if there is none; cancelling the turn cancels its calls
        (TurnCancelled), whichever token they are bound to.
        """
        from .errors import McpUnavailable
        from .mcp.client import McpTools

        if self._mcp is None:
            raise McpUnavailable("MCP is not available to this turn")
        bound = self.token if token is None else token
        return McpTools(self._mcp(server, bound), bound)

    # -- terminals (terminals.py) -------------------------------------------------------------
    def terminal(self, command: str, args: Sequence[str] = (), *, cwd: str | None = None,
                 env: Mapping[str, str] | None = None, output_byte_limit: int | None = None) -> Terminal:
        """Run `command` in a client terminal: `with turn.terminal("make", ["test"]) as term: ...`.

        A relative `cwd` is taken from the session's cwd. On cancellation the runtime kills the
        command; whatever ends the turn, it releases the terminal before the prompt's response.
        Raises CapabilityMissing unless the client advertised `terminal`.
        """
        if not self.snapshot.has_terminal():
            raise CapabilityMissing("the client did not advertise the terminal capability (clientCapabilities.terminal)")
        return self._turn_terminals().create(command, args, env=env, output_byte_limit=output_byte_limit,
                                             cwd=self.resolve_path(cwd) if cwd is not None else None)

    def close_resources(self) -> None:
        """The runtime calls this as the turn ends, before its response: every terminal still
        open is released, and no tool call can be cancelled alone any more. Never blocks nor raises."""
        self._tool_calls.close()
        terminals = getattr(self, "_terminals", None)
        if terminals is not None:
            terminals.close()

    def cancel_tool_call(self, tool_call_id: str) -> None:
        """The runtime calls this for ACP v2 `tool_call/cancel`: set that tool call's token.

        NotCancellable (-32602) unless this turn announced it `cancellable` and it has not
        reached a final status. Returns at once whether or not the agent's code looks at the token."""
        self._tool_calls.cancel(tool_call_id)

    def _turn_terminals(self) -> TurnTerminals:
        terminals = getattr(self, "_terminals", None)
        if terminals is None:
            if self._send_client is None:
                raise CapabilityMissing("this turn cannot run terminals: it has no way to release them")
            from .terminals import TurnTerminals

            terminals = self._terminals = TurnTerminals(self.session_id, self.token, self._call_client, self._send_client)
        return terminals


#: A tool call's content item holding plain text (content.py holds every such helper).
text_content = content.text
