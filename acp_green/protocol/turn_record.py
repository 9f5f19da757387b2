"""A running turn's record, owned by its prompt job: message ids, and its history handed to the store in pieces.

The author's `Turn` asks the record for the wire line of each update it sends (`update`,
`text_chunk`). The record builds the update's JSON once, keeps it, and derives the line from it;
the stored form is the update object itself (v1's shape). The line is in the shape of the
version the turn was admitted under (its `shapes`, dialect.py): where v2's shape differs, its
JSON is built from the update object; where it does not (every text chunk), the kept JSON is sent. Kept updates go to the store (`append_history`)
whenever PIECE_UPDATES of them or PIECE_BYTES are waiting, so a turn holds at most one piece
whatever its length, and the store thread still gets few, large writes.

Message ids: a message is a run of chunks of one kind from one speaker. The prompt is one user
message; agent chunks stay one message until a tool call, a plan or a chunk of another kind
intervenes; thought chunks form their own messages. Other updates (usage, mode, info) do not
end a message. Every message chunk carries its id (`TURN_ID.N`), stored with it, so a replay
shows the same ids as the live turn did.

Tool calls: the record knows every tool call the turn left open (announced or updated with a
status other than `completed` or `failed`). Settling the prompt closes each one with a `failed`
update before the response (`close_tool_calls`), whatever ended the turn: every tool call a turn
started gets a final status. One that still advertises `capabilities.cancel` (ACP v2) stops
advertising it in that same update.
"""

from __future__ import annotations

import base64
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..errors import one_line
from ..sessions import Session
from ..store.turns import TurnOutcome
from .dialect import V1, Shapes
from .updates import LINE_END, SessionUpdateEncoder, message_tail

if TYPE_CHECKING:
    from ..store.base import Store

log = logging.getLogger(__name__)

USER_MESSAGE = "user_message_chunk"
MESSAGE_CHUNKS = frozenset({USER_MESSAGE, "agent_message_chunk", "agent_thought_chunk"})
MESSAGE_BREAKS = frozenset({"tool_call", "tool_call_update", "plan"})
PIECE_UPDATES = 8192
PIECE_BYTES = 512 << 10
TOOL_CALL_UPDATES = frozenset({"tool_call", "tool_call_update"})
FINAL_TOOL_STATUSES = frozenset({"completed", "failed"})


class TurnAnswered(RuntimeError):
    """An update sent after the turn's response: nothing more may be sent or stored for it (S5)."""

    def __init__(self) -> None:
        super().__init__("this turn has already been answered; updates after the response are not allowed")


def new_turn_id() -> str:
    """A short id, unique within a session in practice (48 random bits, 8 URL-safe characters).

    What `secrets.token_urlsafe(6)` returns, without importing `secrets` (hmac and OpenSSL's
    hashlib, a noticeable share of start-up) for it."""
    return base64.urlsafe_b64encode(os.urandom(6)).decode("ascii")


class TurnRecord:
    """One turn's bookkeeping: its id, its open message, and the updates not yet handed to the store."""

    __slots__ = (
        "store", "session", "session_id", "turn_id", "started_at", "ended", "_encoder", "_line_head",
        "_messages", "_kind", "_message_id", "_chunk_head", "_tail", "_pending", "_pending_bytes", "_piece_updates",
        "_piece_bytes", "_open_tools", "_cancel_advertised", "_token", "_settling", "user_message_id", "_shapes",
    )

    def __init__(self, store: Store, session: Session, encoder: SessionUpdateEncoder, turn_id: str | None = None,
                 token: CancelToken | None = None, shapes: Shapes = V1) -> None:
        self.store = store
        self._shapes = shapes  # the negotiated version's: what each update is sent as
        self.session = session
        self.session_id = session.session_id
        self.turn_id = turn_id or new_turn_id()
        self.started_at = time.time()
        self.ended = False
        self._encoder = encoder
        self._line_head = encoder.head
        self._messages = 0
        self._kind: str | None = None  # the kind of the open message; None when none is open
        self._message_id = ""
        self._chunk_head = b""
        self._tail = b""
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._piece_updates = PIECE_UPDATES
        self._piece_bytes = PIECE_BYTES
        # toolCallId -> whether the agent gave it content (closing it then keeps that content)
        self._open_tools: dict[Any, bool] = {}
        self._cancel_advertised: set[str] = set()  # open tool calls whose last `capabilities` offered cancel
        self._token = token  # the turn's: a cancelled turn stops waiting for the store
        self._settling = False  # settling never waits (it may run on the hub)
        self.user_message_id = ""  # the prompt's message id, once `begin` stored it

    # -- messages ------------------------------------------------------------------------------
    def _open_message(self, kind: str) -> None:
        self._kind = kind
        self._message_id = message_id = f"{self.turn_id}.{self._messages}"
        self._messages += 1
        self._chunk_head = self._encoder.chunk_head(kind)
        self._tail = message_tail(message_id)

    # -- the turn's updates --------------------------------------------------------------------
    def begin(self, prompt: list[dict[str, Any]]) -> None:
        """Store the turn's start with its prompt as one user message (each block one chunk).

        A block JSON cannot carry is left out and logged: the rest of the turn is still worth keeping.
        """
        self._open_message(USER_MESSAGE)
        self.user_message_id = self._message_id
        entries = []
        for index, block in enumerate(prompt):
            try:
                entries.append(wire.encode_json({"sessionUpdate": USER_MESSAGE, "content": block, "messageId": self._message_id}))
            except Exception as exc:
                log.error("prompt block %d of a turn of %s cannot be stored: %s", index, self.session_id, one_line(str(exc)))
        if not self.session.deleted:
            self.store.begin_turn(self.session_id, self.turn_id, self.started_at, entries)

    def text_chunk(self, kind: str, text: str) -> bytes:
        """The line of a text chunk of `kind` (the streaming hot path); the chunk is kept."""
        if self.ended:
            raise TurnAnswered()
        if kind != self._kind:
            self._open_message(kind)
        update_json = self._chunk_head + wire.json_text(text) + self._tail
        self._keep(update_json)
        return self._line_head + update_json + LINE_END

    def update(self, update: dict[str, Any], sent: dict[str, Any] | None = None) -> bytes | None:
        """The line of any update the turn sends; a message chunk gets its message's id. It is kept.

        `sent`, when given, is what the client is sent in its place (a v2 client's settings
        change: settings.Announcement); `update` is still what history keeps. None: nothing is
        sent (the negotiated version has no such update, or its shape could not be built)."""
        if self.ended:
            raise TurnAnswered()
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if kind in MESSAGE_CHUNKS:
            if kind != self._kind:
                self._open_message(kind)
            if "messageId" not in update:
                update = {**update, "messageId": self._message_id}
        elif kind in MESSAGE_BREAKS:
            self._kind = None
            if kind in TOOL_CALL_UPDATES:
                self._track_tool_call(kind, update)
        update_json = wire.encode_json(update)
        self._keep(update_json)
        sent_json = self._shapes.encoded(update, update_json) if sent is None else self._shapes.encoded(sent)
        return None if sent_json is None else self._line_head + sent_json + LINE_END

    def _track_tool_call(self, kind: str, update: dict[str, Any]) -> None:
        tool_call_id = update.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return  # not a tool call id the client can know either
        if "capabilities" in update:
            capabilities = update["capabilities"]
            if isinstance(capabilities, dict) and capabilities.get("cancel") is not None:
                self._cancel_advertised.add(tool_call_id)
            else:
                self._cancel_advertised.discard(tool_call_id)
        status = update.get("status", "pending" if kind == "tool_call" else None)
        if status in FINAL_TOOL_STATUSES:
            self._open_tools.pop(tool_call_id, None)
            self._cancel_advertised.discard(tool_call_id)
        elif status is not None or tool_call_id in self._open_tools:
            has_content = self._open_tools.get(tool_call_id, False) or bool(update.get("content"))
            self._open_tools[tool_call_id] = has_content

    @property
    def open_tool_calls(self) -> list[Any]:
        """Ids of the tool calls started and not yet `completed` or `failed`, in the order first seen."""
        return list(self._open_tools)

    def close_tool_calls(self, reason: str) -> list[bytes]:
        """The lines that end every open tool call `failed` (kept in history); the reason becomes
        the content of a call that has none, so content the agent gave stays as it was."""
        self._settling = True
        lines = []
        for tool_call_id, has_content in list(self._open_tools.items()):
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "failed"}
            if not has_content:
                update["content"] = [{"type": "content", "content": {"type": "text", "text": reason}}]
            if tool_call_id in self._cancel_advertised:
                update["capabilities"] = None
            line = self.update(update)
            if line is not None:
                lines.append(line)
        return lines

    def notice(self, update: dict[str, Any]) -> bytes | None:
        """The line of an update about the turn that is not part of its history (the final usage)."""
        update_json = self._shapes.encoded(update)
        return None if update_json is None else self._line_head + update_json + LINE_END

    def _keep(self, update_json: bytes) -> None:
        """Keep one update for the store; a full piece (PIECE_UPDATES or PIECE_BYTES) is handed over.

        The one rule for text chunks and every other update alike (one call per streamed chunk
        costs well under a microsecond, next to the chunk's JSON)."""
        pending = self._pending
        pending.append(update_json)
        self._pending_bytes += len(update_json)
        if self._pending_bytes >= self._piece_bytes or len(pending) >= self._piece_updates:
            self.flush()
            if not self._settling:
                # Back-pressure from the disk: a turn never gets far ahead of what is committed.
                self.store.wait_for_history_room(self._token)

    # -- handing it to the store ---------------------------------------------------------------
    def flush(self) -> None:
        """Hand the kept updates to the store; never blocks. A deleted session's are dropped."""
        pending = self._pending
        if not pending:
            return
        self._pending, self._pending_bytes = [], 0
        if not self.session.deleted:
            self.store.append_history(self.session_id, self.turn_id, pending)

    def end(self, outcome: TurnOutcome) -> None:
        """No more updates: store what is kept and the turn's outcome; never blocks."""
        self.ended = True
        self.flush()
        if not self.session.deleted:
            self.store.end_turn(self.session_id, self.turn_id, outcome)
