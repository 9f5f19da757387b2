"""A turn's per-tool-call cancellation tokens, and which of its tool calls a client may cancel.

Each tool call's token is derived from the turn's: cancelling the turn sets every one (a wait on
a finished tool call's token is released too, as every wait in a cancelled turn is), and ACP v2's
`tool_call/cancel` sets one alone, for a tool call its agent announced `cancellable` that has not
reached a final status. A token is made the first time something asks for it. The turn's token
gets one callback for all of them, removed when the turn ends: a session's token outlives many
turns and must not collect theirs.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import NotCancellable
from .rpc.cancel import CancelToken


class ToolCallTokens:
    """One turn's table: tool call id -> its token, and the ids a client may cancel now."""

    __slots__ = ("_turn_token", "_tokens", "_unlink", "_closed", "_cancellable")

    def __init__(self, turn_token: CancelToken) -> None:
        self._turn_token = turn_token
        self._tokens: dict[str, CancelToken] = {}
        self._unlink: Callable[[], None] | None = None  # removes our one callback from the turn's token
        self._closed = False
        self._cancellable: set[str] = set()

    def token(self, tool_call_id: str) -> CancelToken:
        """The tool call's token, made on first use (already set if the turn was cancelled)."""
        found = self._tokens.get(tool_call_id)
        if found is None:
            found = self._tokens[tool_call_id] = CancelToken()
            if self._turn_token.is_set():
                found.set()
            elif self._unlink is None and not self._closed:
                self._unlink = self._turn_token.on_cancel(self._cancel_all)
        return found

    def _cancel_all(self) -> None:
        for token in list(self._tokens.values()):
            token.set()

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
        """The tool call reached a final status: a client can no longer cancel it."""
        self._cancellable.discard(tool_call_id)

    def close(self) -> None:
        """The turn ended: nothing is cancellable any more and no callback stays on the turn's token."""
        self._closed = True
        self._cancellable.clear()
        unlink, self._unlink = self._unlink, None
        if unlink is not None:
            unlink()
