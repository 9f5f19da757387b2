"""A session's stored conversation as agent code reads it: turns of typed values, read a page at a time.

`Turn.history()` returns a `Conversation` iterator. It asks the store for a page of turns
(TURN_PAGE at a time), then for each turn its stored updates in bounded pages, and builds one
`ConversationTurn` from them; only that turn and the current page of turn headers are held,
whatever the length of the session. Every read goes through the store (the SQLite store's
thread), so the hub never waits on the disk. What is read is what replay sends to an editor:
the same after `session/load`, `session/resume`, an eviction and a restart, and for a session
another process stored.

Building a turn from its updates: the prompt is the user's message chunks' content blocks;
agent messages and thoughts are grouped by `messageId` where present, else consecutive chunks
of one kind are joined; a tool call is its `tool_call` with every `tool_call_update` merged in
(so its status is the final one); each `plan` is kept. `items` keeps them in the order they
first appeared, which is what rebuilding a model's message list needs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

from .blocks import Block, OtherBlock, ResourceLinkBlock, TextBlock, block_of
from .store.turns import FAILED

if TYPE_CHECKING:
    from .store.interface import Store

log = logging.getLogger(__name__)

TURN_PAGE = 64  # turn headers per store read
UPDATE_PAGE_ENTRIES = 1024  # a turn's updates per store read (as replay reads them)
UPDATE_PAGE_BYTES = 256 << 10


@dataclass(frozen=True, slots=True)
class ConversationMessage:
    """One agent message or thought: its chunks' text joined, and their content blocks."""

    kind: Literal["message", "thought"]
    text: str
    blocks: tuple[Block, ...]
    message_id: str | None


@dataclass(frozen=True, slots=True)
class ConversationToolCall:
    """A tool call as it ended: its announcement with every update merged in."""

    tool_call_id: str
    title: str
    kind: str
    status: str  # the last status sent: "completed", "failed", or what it was left at
    content: tuple[Mapping[str, Any], ...]
    raw_input: Any
    raw_output: Any
    locations: tuple[Mapping[str, Any], ...]

    @property
    def text(self) -> str:
        """The text of its content items (`{"type": "content", "content": {"type": "text", ...}}`) joined."""
        return "".join(
            str(item["content"].get("text", "")) for item in self.content
            if isinstance(item.get("content"), Mapping) and item["content"].get("type") == "text"
        )


@dataclass(frozen=True, slots=True)
class ConversationPlan:
    """A plan the agent sent: its entries as sent."""

    entries: tuple[Mapping[str, Any], ...]


ConversationItem = Union[ConversationMessage, ConversationToolCall, ConversationPlan]


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One stored turn: the user's prompt, what the agent sent, and how the turn ended.

    `index` is the turn's position in the session (0 for the first). `stop_reason` is an ACP
    stop reason, "error" for a failed turn (`error` says why), "aborted", or None for a turn
    that has no outcome (its process ended first, or it is the one running). `complete` is
    False when some of its updates could not be stored.
    """

    index: int
    turn_id: str
    started_at: float
    prompt: tuple[Block, ...]
    items: tuple[ConversationItem, ...]
    stop_reason: str | None
    error: str | None
    complete: bool

    @property
    def prompt_text(self) -> str:
        """The prompt's text blocks joined (resource links as their URI), as `Turn.text` reads it."""
        parts = []
        for block in self.prompt:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ResourceLinkBlock):
                parts.append(block.uri)
        return "".join(parts)

    @property
    def messages(self) -> tuple[ConversationMessage, ...]:
        return tuple(item for item in self.items if isinstance(item, ConversationMessage) and item.kind == "message")

    @property
    def thoughts(self) -> tuple[ConversationMessage, ...]:
        return tuple(item for item in self.items if isinstance(item, ConversationMessage) and item.kind == "thought")

    @property
    def tool_calls(self) -> tuple[ConversationToolCall, ...]:
        return tuple(item for item in self.items if isinstance(item, ConversationToolCall))

    @property
    def plans(self) -> tuple[ConversationPlan, ...]:
        return tuple(item for item in self.items if isinstance(item, ConversationPlan))

    @property
    def reply_text(self) -> str:
        """The agent's messages' text joined (not its thoughts)."""
        return "".join(message.text for message in self.messages)

    @property
    def failed(self) -> bool:
        return self.stop_reason == FAILED

    @property
    def ended(self) -> bool:
        """False for a turn with no outcome (interrupted, or still running)."""
        return self.stop_reason is not None


class Conversation(Iterator[ConversationTurn]):
    """The stored turns of one session, read lazily a page at a time (see the module)."""

    def __init__(self, store: Store, session_id: str, *, newest_first: bool = False, since_turn: int | None = None,
                 skip_turn_id: str | None = None) -> None:
        if since_turn is not None and (type(since_turn) is not int or since_turn < 0):
            raise ValueError(f"since_turn must be a turn index (an int >= 0), not {since_turn!r}")
        self._store = store
        self._session_id = session_id
        self._newest_first = newest_first
        self._since = since_turn or 0
        self._skip = skip_turn_id
        self._page: list[Any] = []
        self._page_at = 0  # the position (in the order asked) of the page's first turn
        self._offset = 0  # the next position to ask the store for
        self._count: int | None = None  # the number of turns, for numbering newest first
        self._done = False
        self.pages_read = 0  # store reads of turn headers and of updates (diagnostics, tests)

    def __iter__(self) -> Conversation:
        return self

    def __next__(self) -> ConversationTurn:
        while True:
            if not self._page:
                if self._done:
                    raise StopIteration
                self._fill()
                continue
            stored = self._page.pop(0)
            position = self._page_at
            self._page_at += 1
            index = self._index(position)
            if stored.turn_id == self._skip:
                continue
            if self._newest_first and index < self._since:
                self._done, self._page = True, []
                raise StopIteration
            return self._turn(index, stored)

    def _index(self, position: int) -> int:
        if not self._newest_first:
            return position
        if self._count is None:
            self._count = len_turns(self._store, self._session_id)
        return self._count - 1 - position

    def _fill(self) -> None:
        if not self._newest_first and self._offset < self._since:
            self._offset = self._page_at = self._since
        page = self._store.turn_page(self._session_id, self._offset, TURN_PAGE, self._newest_first)
        self.pages_read += 1
        self._page_at = self._offset
        self._offset += len(page)
        self._page = list(page)
        if len(page) < TURN_PAGE:
            self._done = True

    def _turn(self, index: int, stored: Any) -> ConversationTurn:
        builder = _TurnBuilder()
        after = None
        while True:
            page = self._store.history_page(self._session_id, after, UPDATE_PAGE_ENTRIES, UPDATE_PAGE_BYTES, stored.turn_id)
            self.pages_read += 1
            for entry in page.entries:
                builder.add(entry.update)
            if page.after is None:
                break
            after = page.after
        return builder.build(index, stored)


def len_turns(store: Store, session_id: str) -> int:
    """How many turns the session has, counted a page of headers at a time."""
    count = 0
    while True:
        page = store.turn_page(session_id, count, 4096)
        count += len(page)
        if len(page) < 4096:
            return count


class _TurnBuilder:
    """Folds one turn's stored updates, in order, into its prompt and items."""

    def __init__(self) -> None:
        self.prompt: list[Mapping[str, Any]] = []
        self.items: list[Any] = []  # ConversationPlan, or a mutable draft of a message / tool call
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None  # the message draft the previous chunk went to

    def add(self, raw: bytes) -> None:
        try:
            update = json.loads(raw)
        except ValueError:
            return  # not an update (a damaged entry): replay skips it too
        if type(update) is not dict:
            return
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":
            if isinstance(update.get("content"), Mapping):
                self.prompt.append(update["content"])
        elif kind in ("agent_message_chunk", "agent_thought_chunk"):
            self._chunk("message" if kind == "agent_message_chunk" else "thought", update)
            return
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "plan":
            entries = update.get("entries")
            self.items.append(ConversationPlan(tuple(e for e in entries if isinstance(e, Mapping)) if isinstance(entries, list) else ()))
        else:
            return  # usage, mode and info updates neither belong to nor break a message
        self.last = None

    def _chunk(self, kind: str, update: dict[str, Any]) -> None:
        content = update.get("content")
        message_id = update.get("messageId") if isinstance(update.get("messageId"), str) else None
        draft = self.messages.get((kind, message_id)) if message_id is not None else None
        if draft is None and message_id is None and self.last is not None and self.last["kind"] == kind and self.last["id"] is None:
            draft = self.last
        if draft is None:
            draft = {"draft": "message", "kind": kind, "id": message_id, "blocks": []}
            self.items.append(draft)
            if message_id is not None:
                self.messages[(kind, message_id)] = draft
        if isinstance(content, Mapping):
            draft["blocks"].append(content)
        self.last = draft

    def _tool(self, update: dict[str, Any]) -> None:
        tool_call_id = update.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return
        draft = self.tools.get(tool_call_id)
        if draft is None:
            draft = self.tools[tool_call_id] = {"draft": "tool", "toolCallId": tool_call_id, "title": "", "kind": "other",
                                                "status": "pending", "content": [], "rawInput": None, "rawOutput": None,
                                                "locations": []}
            self.items.append(draft)
        for name in ("title", "kind", "status", "content", "rawInput", "rawOutput", "locations"):
            if name in update and update[name] is not None:
                draft[name] = update[name]

    def build(self, index: int, stored: Any) -> ConversationTurn:
        items: list[ConversationItem] = []
        for draft in self.items:
            if isinstance(draft, ConversationPlan):
                items.append(draft)
            elif draft["draft"] == "message":
                blocks = blocks_of(draft["blocks"])
                text = "".join(b["text"] for b in draft["blocks"] if b.get("type") == "text" and isinstance(b.get("text"), str))
                items.append(ConversationMessage(draft["kind"], text, blocks, draft["id"]))
            else:
                items.append(ConversationToolCall(
                    draft["toolCallId"], str(draft["title"]), str(draft["kind"]), str(draft["status"]),
                    _mappings(draft["content"]), draft["rawInput"], draft["rawOutput"], _mappings(draft["locations"]),
                ))
        return ConversationTurn(index, stored.turn_id, stored.started_at, blocks_of(self.prompt), tuple(items),
                                stored.stop_reason, stored.error, stored.complete)


def blocks_of(blocks: list[Mapping[str, Any]]) -> tuple[Block, ...]:
    """Stored content blocks typed; one whose fields do not fit its type (a damaged or foreign
    history) is kept as an OtherBlock rather than lost."""
    typed: list[Block] = []
    for block in blocks:
        try:
            typed.append(block_of(block))
        except (KeyError, TypeError):
            typed.append(OtherBlock(str(block.get("type")), dict(block)))
    return tuple(typed)


def _mappings(value: Any) -> tuple[Mapping[str, Any], ...]:
    return tuple(item for item in value if isinstance(item, Mapping)) if isinstance(value, list) else ()
