"""Requests this side sent and still awaits: our ids, one waiter each, cancellation, failing all at close.

Shared by the ACP endpoint (requests to the client) and the MCP client (requests to a server
process); each supplies how a request and a cancel notification are written and what an error
reply becomes. A request leaves the table exactly once — answered, cancelled, failed at close,
or its wait ended — so a late reply finds no waiter. It is dropped, unless the request came
with an `on_late_result`: a request that makes something on the peer (a client terminal) must
not leak it when nobody waits any more, so a success that arrives after its waiter stopped
waiting goes to that callback, which releases it. This layer knows no method names: the caller
supplies the callback. Cancelling writes the cancel notification before the waiter is
released, and never blocks: a token may set it from the hub.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import gevent
from gevent.event import AsyncResult

from . import wire
from .cancel import CancelToken
from ..errors import RequestCancelled, TurnCancelled

log = logging.getLogger(__name__)

#: Writes one request (id, method, params); raises if it cannot be written at all.
SendRequest = Callable[[int, str, Any], None]
#: Writes the peer's cancel notification for one of our ids, with a reason.
SendCancel = Callable[[int, str], None]
#: Turns a peer's error reply to `method` into the exception its waiter raises.
ErrorFromReply = Callable[[str, Any], BaseException]
#: Given the result of a request answered after its waiter stopped waiting: releases what the
#: peer made for it. Runs where replies are read (the receive loop): it must not block.
LateResult = Callable[[Any], None]

#: Abandoned requests (with an `on_late_result`) remembered at most; the oldest is forgotten first.
MAX_ABANDONED = 1024


class PendingRequest:
    """One request we sent and have not had answered."""

    __slots__ = ("id", "method", "result", "on_late_result")

    def __init__(self, request_id: int, method: str, on_late_result: LateResult | None = None) -> None:
        self.id = request_id
        self.method = method
        self.result = AsyncResult()
        self.on_late_result = on_late_result


class OutgoingRequests:
    """Our id counter and the table of requests awaiting the peer's reply."""

    def __init__(self, send_request: SendRequest, send_cancel: SendCancel, error_from_reply: ErrorFromReply,
                 *, first_id: int = 0) -> None:
        self._send_request = send_request
        self._send_cancel = send_cancel
        self._error_from_reply = error_from_reply
        self._next_id = first_id
        self._pending: dict[wire.IdKey | None, PendingRequest] = {}
        # Requests whose waiter stopped waiting before the reply, kept for their on_late_result (oldest first).
        self._abandoned: dict[wire.IdKey | None, PendingRequest] = {}
        self.closed_error: BaseException | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def start(self, method: str, params: Any, on_late_result: LateResult | None = None) -> PendingRequest:
        """Write a request now and register its waiter; raises the close error once closed.

        `on_late_result` gets the result of a success that arrives after the waiter stopped
        waiting (see the module)."""
        if self.closed_error is not None:
            raise self.closed_error
        pending = PendingRequest(self._next_id, method, on_late_result)
        self._next_id += 1
        key = wire.id_key(pending.id)
        self._pending[key] = pending
        try:
            self._send_request(pending.id, method, params)
        except BaseException:  # ok: re-raised; a request that was never written has no waiter
            self._pending.pop(key, None)
            raise
        return pending

    def start_unawaited(self, method: str, params: Any) -> None:
        """Write a request nobody will wait for; never blocks. Its reply is dropped, an error
        reply logged. Written even once closed: the peer may still read what it can no longer
        answer (a cleanup sent while the agent shuts down)."""
        pending = PendingRequest(self._next_id, method)
        self._next_id += 1
        key = wire.id_key(pending.id)
        if self.closed_error is None:
            self._pending[key] = pending  # so its reply is recognised, not reported as unknown
            pending.result.rawlink(partial(_log_unawaited_failure, method))
        try:
            self._send_request(pending.id, method, params)
        except BaseException:  # ok: re-raised; a request that was never written has no waiter
            self._pending.pop(key, None)
            raise

    def wait(self, pending: PendingRequest, token: CancelToken | None = None, timeout: float | None = None,
             *, cancel_on_timeout: bool = True) -> Any:
        """The reply's result, or its error raised; a set token cancels it (TurnCancelled).

        A timeout raises gevent.Timeout and, with `cancel_on_timeout`, cancels the request; a NaN
        timeout raises ValueError. However the wait ends (a kill too), the request is forgotten
        afterwards.
        """
        remove = token.on_cancel(lambda: self.cancel(pending, "cancelled by the caller", TurnCancelled())) if token is not None else None
        try:
            if timeout is not None and timeout != timeout:  # a NaN timer stops gevent's hub for good
                raise ValueError("a wait cannot last NaN seconds")
            return pending.result.get(timeout=timeout)
        except gevent.Timeout:
            if cancel_on_timeout:
                self.cancel(pending, "timed out", TurnCancelled())
            raise
        finally:
            if remove is not None:
                remove()
            self._stop_waiting(pending)

    def call(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None,
             on_late_result: LateResult | None = None) -> Any:
        """Write a request and wait for its reply (see `wait` and `start`)."""
        return self.wait(self.start(method, params, on_late_result), token, timeout)

    def cancel(self, pending: PendingRequest, reason: str, error: BaseException | None = None) -> bool:
        """Tell the peer to stop (our id) and release the waiter now; False if it was no longer pending."""
        if not self._stop_waiting(pending):
            return False
        self._send_cancel(pending.id, reason)
        pending.result.set_exception(error if error is not None else RequestCancelled())
        return True

    def _stop_waiting(self, pending: PendingRequest) -> bool:
        """Take `pending` out of the table (False if it was not there); one with an
        on_late_result is remembered, so a late success still reaches it."""
        key = wire.id_key(pending.id)
        if self._pending.pop(key, None) is None:
            return False
        if pending.on_late_result is not None and self.closed_error is None:
            self._abandoned[key] = pending
            if len(self._abandoned) > MAX_ABANDONED:
                oldest = self._abandoned.pop(next(iter(self._abandoned)))
                log.warning("forgot %s #%s: its late answer, if any, will not be released", oldest.method, oldest.id)
        return True

    def resolve(self, request_id: Any, result: Any) -> PendingRequest | None:
        """A success reply: wake its waiter, or hand a late one to its on_late_result; None (and
        nothing done) if nobody waits for that id."""
        key = wire.id_key(request_id)
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.result.set(result)
            return pending
        late = self._abandoned.pop(key, None)
        if late is not None and late.on_late_result is not None:
            log.info("%s #%s was answered after its waiter stopped waiting: releasing what it made", late.method, late.id)
            try:
                late.on_late_result(result)
            except Exception:  # the reader must go on
                log.exception("releasing what the late answer to %s #%s made failed", late.method, late.id)
        return late

    def reject(self, request_id: Any, error: Any) -> PendingRequest | None:
        """An error reply: its waiter raises what `error_from_reply` makes of it; None if nobody
        waits. A late error made nothing: the abandoned request is just forgotten."""
        key = wire.id_key(request_id)
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.result.set_exception(self._error_from_reply(pending.method, error))
            return pending
        return self._abandoned.pop(key, None)

    def close(self, error: BaseException) -> None:
        """No answers can come any more: every waiter, and every later request, raises `error`.

        The first close error stays: it says why the peer went away.
        """
        if self.closed_error is None:
            self.closed_error = error
        self._abandoned.clear()  # no late answer can come either
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.result.set_exception(error)


def _log_unawaited_failure(method: str, result: AsyncResult) -> None:
    error = result.exception
    if error is not None:
        log.warning("%s (sent without waiting) failed: %s", method, error)
