"""A turn's per-tool-call cancellation tokens, and which of its tool calls a client may cancel.

Each tool call's token is derived from the turn's: cancelling the turn sets every one that is
still running, and ACP v2's `tool_call/cancel` sets one alone (only a tool call its agent announced
`cancellable` and that has not reached a final status). A token is made the first time something
asks for it; the link to the turn's token is removed when the tool call ends or the turn does, so
a session token that outlives many turns never collects their callbacks.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import NotCancellable
from .rpc.cancel import CancelToken


class ToolCallTokens:
    """One turn's table: tool call id -> its token, and the ids a client may cancel now."""

    __slots__ = ("_turn_token", "_tokens", "_unlinks", "_cancellable")

    def __init__(self, turn_token: CancelToken) -> None:
        self._turn_token = turn_token
        self._tokens: dict[str, CancelToken] = {}
        self._unlinks: dict[str, Callable[[], None]] = {}  # id -> removes its callback from the turn's token
        self._cancellable: set[str] = set()

    def token(self, tool_call_id: str) -> CancelToken:
        """The tool call's token, made (and linked to the turn's) on first use."""
        found = self._tokens.get(tool_call_id)
        if found is None:
            found = self._tokens[tool_call_id] = CancelToken()
            self._unlinks[tool_call_id] = self._turn_token.on_cancel(found.set)
        return found

    def announced(self, tool_call_id: str, cancellable: bool) -> None:
        """A tool call was announced; a `cancellable` one may be cancelled until it ends."""
        if cancellable:
            self._cancellable.add(tool_call_id)

    def is_cancellable(self, tool_call_id: str) -> bool:
        return tool_call_id in self._cancellable

    def cancel(self, tool_call_id: str) -> None:
        """Set the tool call's token (idempotent); NotCancellable unless it is cancellable now."""
        if tool_call_id not in self._cancellable:
            raise NotCancellable("toolCallId", tool_call_id, "the running turn has no such tool call, it has already "
                                 "reached a final status, or it was not announced as cancellable")
        self.token(tool_call_id).set()

    def finished(self, tool_call_id: str) -> None:
        """The tool call reached a final status: no longer cancellable, no longer linked to the turn."""
        self._cancellable.discard(tool_call_id)
        unlink = self._unlinks.pop(tool_call_id, None)
        if unlink is not None:
            unlink()

    def close(self) -> None:
        """The turn ended: nothing is cancellable any more and no callback stays on the turn's token."""
        self._cancellable.clear()
        unlinks, self._unlinks = self._unlinks, {}
        for unlink in unlinks.values():
            unlink()
