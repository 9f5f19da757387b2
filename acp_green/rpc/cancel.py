"""The cancellation token: the one thing every wait in acp_green can be cancelled by.

A bottom-layer module (it imports only gevent): the session registry hands tokens out, the
endpoint's and the MCP client's pending tables, the store and the agent API wait on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gevent.event import Event

log = logging.getLogger(__name__)


class CancelToken:
    """A one-shot cancellation flag with callbacks; setting it never blocks."""

    __slots__ = ("event", "_callbacks")

    def __init__(self) -> None:
        self.event = Event()
        self._callbacks: list[Callable[[], object]] = []

    def is_set(self) -> bool:
        """True once the token was set (it never unsets)."""
        return self.event.is_set()

    def set(self) -> None:
        if self.event.is_set():
            return
        self.event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a listener's bug must not stop the others
                log.exception("cancellation callback failed")

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first. A NaN timeout raises ValueError:
        gevent's hub stops serving every greenlet once a timer of NaN seconds starts."""
        if timeout is not None and timeout != timeout:
            raise ValueError("a wait cannot last NaN seconds")
        return self.event.wait(timeout)

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` when the token is set (at once if it already is); returns a remover."""
        if self.event.is_set():
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove
