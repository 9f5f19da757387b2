"""The agent author's API: subclass `Agent`, implement `prompt(turn)`; a `Turn` does the rest.

Nothing here knows about framing or descriptors: a turn sends through the connection's
outbound queue and asks the client through the pending-request map it is given. `Turn` is the
author's whole surface; the work behind it is its collaborators': what it sends
(turn_output.py), what it asks the client (turn_requests.py), what it reaches through the
runtime (turn_runtime.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack, overload

from . import content, paths
from .rpc import wire
from .rpc.cancel import CancelToken
from .context import ConnectionSnapshot
from .errors import NotCancellable, TurnCancelled
from .rpc.fairness import UpdateChannel
from .sessions import Session
from .tool_call_tokens import ToolCallTokens
from .turn_output import (
    CompactionHandle as CompactionHandle,
    ToolCallDetails as ToolCallDetails,
    ToolCallFields as ToolCallFields,
    ToolCallHandle as ToolCallHandle,
    TurnEnded as TurnEnded,
    TurnOutput,
    TurnUpdates,
)
from .turn_requests import ALLOW_OR_REJECT as ALLOW_OR_REJECT, Permission as Permission, TurnRequests
from .turn_runtime import TurnRuntime, TurnSettings
from .update_checks import CompactionStatus, NoticeSeverity, PlanEntry, ToolCallStatus, ToolKind
from .usage import UsageCounters, utf8_size

if TYPE_CHECKING:
    # Prompt blocks, terminals and forms load when a turn first uses them, not at start-up
    # (their dataclasses are a noticeable share of the time to answer `initialize`).
    from .blocks import Block
    from .conversation import ConversationTurn
    from .elicitation import Elicited
    from .terminals import Terminal
    from .mcp.client import McpClientSession, McpTools
    from .mcp.tools import ToolServer

#: What `Agent.prompt` may return (ACP's StopReason), in the schema's order; None means "end_turn".
STOP_REASON_ORDER = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
STOP_REASONS = frozenset(STOP_REASON_ORDER)


def stop_reason_problem(agent: "Agent", returned: Any) -> str | None:
    """What is wrong with what `agent.prompt` returned, as one line naming the valid stop reasons; None if nothing."""
    if isinstance(returned, str) and returned in STOP_REASONS:
        return None
    shown = repr(wire.excerpt(returned)) if isinstance(returned, str) else f"a value of type {type(returned).__name__!r}"
    return (f"{type(agent).__name__}.prompt returned {shown}, which is not a stop reason: return one of "
            f"{', '.join(map(repr, STOP_REASON_ORDER))} (or None, meaning 'end_turn')")


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
    _session: Session = field(repr=False, compare=False)

    @classmethod
    def of(cls, session: Session) -> "SessionView":
        record = session.record
        return cls(
            session.session_id, record.cwd, record.additional_directories, record.mode_id,
            record.config, session.mcp_servers, session,
        )

    @property
    def state(self) -> dict[str, Any]:
        """The session's own dict, the one the runtime stores (docs/SESSIONS.md)."""
        return self._session.state

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        # The session's, not this view's: a state replaced here (`session.state = {}`) is the
        # one stored at the turn's end, and the one the next turn and every hook see.
        self._session.state = value


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



class Turn:
    """One running prompt: its input, its token, and everything it may send or ask.

    The author's whole surface, each method documented here. What it sends is its
    `turn_output.TurnOutput`'s work, what it asks the client its `turn_requests.TurnRequests`',
    what it reaches through the runtime (session settings, the store, MCP servers, client
    terminals) its `turn_runtime.TurnRuntime`'s; it reads its input and waits itself.
    """

    def __init__(self, *, session: Session, prompt: list[dict[str, Any]], token: CancelToken, snapshot: ConnectionSnapshot,
                 channel: UpdateChannel, updates: TurnUpdates, call_client: Callable[..., Any],
                 mcp: Callable[[str, CancelToken], "McpClientSession"] | None = None,
                 send_client: Callable[[str, Any], None] | None = None, settings: TurnSettings | None = None,
                 history: Callable[[bool, int | None], Iterator[ConversationTurn]] | None = None,
                 save_state: Callable[[Session], None] | None = None) -> None:
        self.session_id = session.session_id
        self.session = SessionView.of(session)
        self.prompt = prompt
        self.token = token
        self.snapshot = snapshot
        self.usage = UsageCounters()
        # Only text a block of type "text" carries (checked at admission); other blocks may hold
        # a "text" field of any type, an extra field ACP lets a client send.
        self.usage.input_bytes = sum(utf8_size(b["text"]) for b in prompt if b.get("type") == "text")
        cwd = self.session.cwd
        self._tool_calls = ToolCallTokens(token)  # shared: sending, asking and the runtime's cancel all use it
        self._output = TurnOutput(session, cwd, snapshot, channel, updates, self._tool_calls, self.usage)
        self._requests = TurnRequests(self.session_id, cwd, snapshot, token, call_client, self._tool_calls, self._output)
        self._runtime = TurnRuntime(session, cwd, snapshot, token, self._output, call_client=call_client, send_client=send_client,
                                    mcp=mcp, settings=settings, history=history, save_state=save_state)

    # -- input -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The prompt's text blocks joined (resource links appear as their URI)."""
        return prompt_text(self.prompt)

    @property
    def blocks(self) -> tuple[Block, ...]:
        """The prompt as typed blocks, in order (text, image, audio, resource, resource link)."""
        from .blocks import blocks_of

        return blocks_of(self.prompt)

    @property
    def closed(self) -> bool:
        """True once the turn was answered: each call that sends or asks then raises TurnEnded, sending nothing."""
        return self._output.closed

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

    # -- output (turn_output.py) ---------------------------------------------------------------
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
        self._output.send(update)

    def send_final(self, update: dict[str, Any]) -> None:
        """Queue a last update without yielding; the runtime uses it just before the response."""
        self._output.send_final(update)

    def say(self, text: str) -> None:
        """Stream a chunk of the agent's reply (a str: anything else raises TypeError)."""
        self._output.say(text)

    def think(self, text: str) -> None:
        """Stream a chunk of the agent's reasoning (a str: anything else raises TypeError)."""
        self._output.think(text)

    def plan(self, entries: Sequence[PlanEntry]) -> None:
        """Send the complete plan (each entry: content, priority, status); the client replaces the
        previous one. Entries ACP would not accept raise TypeError/ValueError, and nothing is sent."""
        self._output.plan(entries)

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
        return self._output.tool_call(tool_call_id, title, kind=kind, status=status, cancellable=cancellable, fields=fields)

    def tool_update(self, tool_call: str | ToolCallHandle, **fields: Unpack[ToolCallFields]) -> None:
        """Patch a tool call: only the fields given (status, content, raw_output, ...) are sent,
        checked as `tool_call` checks them."""
        self._output.tool_update(tool_call, **fields)

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
        return self._output.notice(title, severity=severity, description=description, meta=meta)

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
        return self._output.compaction(status, compaction_id=compaction_id, summary=summary, error=error, meta=meta)

    def compaction_update(self, compaction: str | CompactionHandle, status: CompactionStatus | str, *,
                          summary: Sequence[Mapping[str, Any]] | None = None, error: str | None = None,
                          meta: Mapping[str, Any] | None = None) -> bool:
        """Move a compaction on: its new status, and (when given) its complete summary (`[]` clears
        it) or error text; a field left None is left as it was. True if sent (see `compaction`)."""
        return self._output.compaction_update(compaction, status, summary=summary, error=error, meta=meta)

    def compaction_summary(self, compaction: str | CompactionHandle, content: str | Mapping[str, Any]) -> bool:
        """Append one chunk to a compaction's summary (ACP `compaction_summary_chunk`): text, or
        a content block. True if sent (see `compaction`)."""
        return self._output.compaction_summary(compaction, content)

    # -- asking the client (turn_requests.py) -----------------------------------------------------
    def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Send any request to the client and wait; cancellation releases the wait at once."""
        return self._requests.request(method, params, timeout)

    def request_permission(self, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Ask the user; returns the outcome object (`selected` with optionId, or `cancelled`).

        The low-level form: `ask_permission` also handles refusals, failures and cancellation.
        Cancelling the tool call alone (ACP v2 `tool_call/cancel`) cancels the request: `cancelled`.
        """
        return self._requests.request_permission(tool_call, options)

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
        return self._requests.ask_permission(tool_call, options, fields)

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        """Read a file through the client (which sees unsaved editor buffers); a relative path is from cwd."""
        return self._requests.read_text_file(path, line=line, limit=limit)

    def write_text_file(self, path: str, content: str) -> None:
        """Write a file through the client; a relative path is from cwd."""
        self._requests.write_text_file(path, content)

    def elicit(self, message: str, schema: Mapping[str, Any], *, tool_call_id: str | None = None) -> Elicited:
        """Ask the user to fill a form (`elicitation/create`, mode "form"); `schema` is the form's
        flat JSON Schema object. Cancelling the turn cancels the request (TurnCancelled).

        Raises CapabilityMissing unless the client advertised `elicitation.form`.
        """
        return self._requests.elicit(message, schema, tool_call_id=tool_call_id)

    # -- through the runtime (turn_runtime.py): settings, the store, MCP, terminals ------------------
    def set_mode(self, mode_id: str) -> None:
        """Switch the session's mode: stored, then announced (`current_mode_update`; under v2, where
        modes are the `mode` config option, `config_option_update`). ValueError if unknown."""
        self._runtime.set_mode(mode_id)
        self.session.mode_id = mode_id

    def set_config(self, config_id: str, value: Any) -> None:
        """Set a config option: stored, then `config_option_update` with every option sent."""
        self._runtime.set_config(config_id, value)

    def history(self, *, newest_first: bool = False, since_turn: int | None = None) -> Iterator[ConversationTurn]:
        """The session's earlier turns as stored, oldest first (or `newest_first`), from turn
        index `since_turn` on; the running turn is not among them.

        An iterator that reads the store a page at a time (conversation.py): a long history is
        never held at once, and the hub never waits on the disk. The same after `session/load`,
        `session/resume`, an eviction or a restart: it is what replay sends the editor.
        """
        return self._runtime.history(newest_first, since_turn)

    def save_state(self) -> None:
        """Store `session.state` now; StateNotStorable, naming the key, if a value cannot be.

        The runtime stores it anyway when the turn ends (and on session/close), where an
        unstorable value can only be logged; calling this gets the error in the agent's code.
        """
        self._runtime.save_state()

    def mcp(self, server: str, *, token: CancelToken | None = None) -> "McpTools":
        """An MCP client session with the server named `server`, bound to this turn's token (or
        to `token`: a tool call's `handle.token`, so cancelling that tool call cancels its calls).

        The name is one declared in `session/new` (stdio or `type: "acp"`) or one this process
        provides. Raises McpUnavailable if there is none; cancelling the turn cancels its calls
        (TurnCancelled), whichever token they are bound to.
        """
        return self._runtime.mcp(server, token)

    def terminal(self, command: str, args: Sequence[str] = (), *, cwd: str | None = None,
                 env: Mapping[str, str] | None = None, output_byte_limit: int | None = None) -> Terminal:
        """Run `command` in a client terminal: `with turn.terminal("make", ["test"]) as term: ...`.

        A relative `cwd` is taken from the session's cwd. On cancellation the runtime kills the
        command; whatever ends the turn, it releases the terminal before the prompt's response.
        Raises CapabilityMissing unless the client advertised `terminal`.
        """
        return self._runtime.terminal(command, args, cwd=cwd, env=env, output_byte_limit=output_byte_limit)

    def close_resources(self) -> None:
        """The runtime calls this as the turn ends, before its response: every terminal still
        open is released, and no tool call can be cancelled alone any more. Never blocks nor raises."""
        self._tool_calls.close()
        self._runtime.close()

    def cancel_tool_call(self, tool_call_id: str) -> None:
        """The runtime calls this for ACP v2 `tool_call/cancel`: set that tool call's token.

        NotCancellable (-32602) unless this turn announced it `cancellable` and it has not
        reached a final status. Returns at once whether or not the agent's code looks at the token."""
        self._tool_calls.cancel(tool_call_id)


def prompt_text(prompt: Sequence[Mapping[str, Any]]) -> str:
    """A prompt's text blocks joined, resource links as their URI (what `Turn.text` is)."""
    parts = []
    for block in prompt:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "resource_link":
            parts.append(block.get("uri", ""))
    return "".join(parts)


#: A tool call's content item holding plain text (content.py holds every such helper).
text_content = content.text
