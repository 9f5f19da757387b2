"""Requests from the agent to the ACP client: our own id space (from 0), cancelled with `$/cancel_request`.

The waiting, cancelling and failing is `outgoing.OutgoingRequests`; this adds the ACP wire
forms and writes through the one outbound FIFO, which never blocks.
"""

from __future__ import annotations

import logging
from typing import Any

from . import wire
from .cancel import CancelToken
from ..errors import INVALID_REQUEST, ClientError, RpcError, TurnCancelled
from .outgoing import LateResult, OutgoingRequests
from .transport import Outbound

log = logging.getLogger(__name__)


class ClientRequests:
    """Requests from the agent to the client, matched with the client's responses by id."""

    def __init__(self, outbound: Outbound) -> None:
        self._outbound = outbound
        self._requests = OutgoingRequests(self._send_request, self._send_cancel, ClientError, first_id=0)

    def __len__(self) -> int:
        return len(self._requests)

    def call(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None,
             on_late_result: LateResult | None = None) -> Any:
        """Send a request and wait for its result; a set token releases the wait at once.

        A token already set sends nothing (TurnCancelled); a set token or a timeout sends
        `$/cancel_request` for our id. An error response raises ClientError. A request that
        makes something on the client passes `on_late_result`: a success that arrives after the
        wait ended goes there, to be released (outgoing.py).
        """
        if self._requests.closed_error is not None:
            raise self._requests.closed_error
        if token is not None and token.is_set():
            raise TurnCancelled()
        return self._requests.call(method, params, token, timeout, on_late_result)

    def send(self, method: str, params: Any) -> None:
        """Send a request and do not wait for it (a cleanup that must precede a response).

        Never blocks and is written at once, even once closed; the answer is dropped, an error
        answer logged.
        """
        self._requests.start_unawaited(method, params)

    def notify(self, method: str, params: Any) -> None:
        self._outbound.put(wire.encode_notification(method, params))

    def resolve(self, response: wire.Response) -> None:
        """Hand a client's response to the request waiting for it; one nobody waits for is logged."""
        if response.error is not None:
            answered = self._requests.reject(response.id, response.error)
        else:
            answered = self._requests.resolve(response.id, response.result)
        if answered is None:
            log.warning("ignoring a response to id %s, which the agent is not waiting for", wire.id_text(response.id))

    def fail_malformed(self, request_id: wire.RequestId, problem: str) -> bool:
        """A malformed answer to one of our requests: its waiter raises ClientError naming the
        problem, and the answer itself is never answered (JSON-RPC answers no response); logged
        once here. False when nobody waits for that id."""
        answered = self._requests.reject(request_id, {"code": INVALID_REQUEST, "message": f"malformed answer: {problem}"})
        if answered is None:
            return False
        log.warning("the client's answer to %s #%s is malformed (%s): the request fails", answered.method, wire.id_text(request_id), problem)
        return True

    def close(self, error: RpcError) -> None:
        """No answers can come any more: fail every waiter."""
        self._requests.close(error)

    def _send_request(self, request_id: int, method: str, params: Any) -> None:
        self._outbound.put(wire.encode_request(request_id, method, params))

    def _send_cancel(self, request_id: int, reason: str) -> None:
        # ACP's cancel notification carries no reason.
        self._outbound.put(wire.encode_notification("$/cancel_request", {"requestId": request_id}))
