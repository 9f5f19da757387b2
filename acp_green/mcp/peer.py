"""The client side of one MCP server's JSON-RPC, whatever carries it: our ids, pending calls, envelopes, decoding.

`McpPeer` is the one core every MCP link holds (`jsonrpc.JsonRpcLink`: a stdio child;
`httplink.HttpLink`: a streamable-HTTP server). A link gives it only its transport: how a
request's bytes and any other message's bytes reach the server (`send_request`, `send`), and
hands every message the server sends to `receive`. The pending-request table is
`outgoing.OutgoingRequests` (ids from 1); envelopes are `wire.encode_*`.

Input from a server is decoded as strictly as ACP input (`wire.decode`, then `wire.classify`):
NaN and Infinity, numbers Python cannot carry, nesting over `wire.MAX_NESTING`, invalid ids and
shapes that are not JSON-RPC are refused the same way. A server's request we can name (it has a
valid id) is answered as ACP would answer it (-32600 for a bad shape or an id already in flight,
-32602 for an unrepresentable number); anything else is logged and dropped, the first
LOGGED_INVALID of each link at WARNING and the rest only counted (`invalid_messages`), so a
server writing garbage without end cannot flood the agent's stderr.

Junk is what no correct server sends: a message that cannot be served, a line the transport
could not frame (`discard`), and a reply to an id nobody waits for beyond one per request we
ever sent (a late reply to a cancelled call is normal; more replies than requests is not).
Every kind is logged through the same bound, and after MAX_JUNK of them the link is given up
(`McpServerFlooding`, the link's `on_flooded`): what the server sends after that is not even decoded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..errors import InvalidRequest, McpError, McpServerFlooding, MethodNotFound, RpcError
from ..rpc.outgoing import OutgoingRequests, PendingRequest

log = logging.getLogger(__name__)

RequestHandler = Callable[[wire.Request], None]
NotificationHandler = Callable[[wire.Notification], None]
#: Carries one encoded request (our id, method, params, its bytes); raises if it cannot be sent at all.
RequestWriter = Callable[[int, str, Any, bytes], None]
#: Carries one encoded notification or response (its bytes, what it is for the log), after everything sent before it.
MessageWriter = Callable[[bytes, str], None]
#: Tells the server one of our requests is cancelled (our id, the reason); may run in the hub, so never blocks.
CancelWriter = Callable[[int, str], None]

#: How many unreadable messages of one link are logged; later ones are only counted.
LOGGED_INVALID = 10
#: How many junk messages (see above) a link takes before it is closed as flooding.
MAX_JUNK = 1000


class McpPeer:
    """Our end of the JSON-RPC conversation with one MCP server; the link that holds it is its transport."""

    def __init__(self, name: str, send_request: RequestWriter, send: MessageWriter, *,
                 on_request: RequestHandler | None = None, on_notification: NotificationHandler | None = None,
                 send_cancel: CancelWriter | None = None, on_response: Callable[[wire.Response], None] | None = None,
                 on_flooded: Callable[[McpServerFlooding], None] | None = None) -> None:
        """`send_cancel` defaults to a `notifications/cancelled` through `send`; `on_response` sees each
        reply before it is matched to its call; `on_flooded` stops the transport once the server has
        sent MAX_JUNK messages of junk (called from the reading side: it must not wait for the transport)."""
        self.name = name
        self._send_request = send_request
        self._send = send
        self._on_response = on_response
        self._on_flooded = on_flooded
        self._calls = OutgoingRequests(self._write_request, send_cancel or self._write_cancel, _error_from_reply, first_id=1)
        self._on_request = on_request or self._refuse_request
        self._on_notification = on_notification or self._log_notification
        self._serving: set[wire.IdKey | None] = set()  # ids of the server's requests we have not answered
        self.invalid_messages = 0  # junk of every kind, logged up to LOGGED_INVALID
        self.requests_sent = 0
        self.unawaited_replies = 0
        self.flooded = False

    # -- state ------------------------------------------------------------------------------
    @property
    def closed_error(self) -> BaseException | None:
        """Why no answers can come any more, once the server is gone; None while it is usable."""
        return self._calls.closed_error

    @property
    def alive(self) -> bool:
        return self.closed_error is None

    # -- sending ----------------------------------------------------------------------------
    def start_request(self, method: str, params: Any) -> PendingRequest:
        """Send a request now, in call order; the answer comes later (see `wait`)."""
        return self._calls.start(method, params)

    def wait(self, call: PendingRequest, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The call's result; McpError for an error reply; a set token cancels it (TurnCancelled).

        A timeout cancels the call (`notifications/cancelled`) only when a token was given; without
        one the call is forgotten and the server is told nothing.
        """
        return self._calls.wait(call, token, timeout, cancel_on_timeout=token is not None)

    def request(self, method: str, params: Any, token: CancelToken | None = None, timeout: float | None = None) -> Any:
        return self.wait(self.start_request(method, params), token, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification now, after everything sent before it."""
        self._send(wire.encode_notification(method, params), method)

    def respond(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """Answer a request the MCP server sent us."""
        self._serving.discard(wire.id_key(request_id))
        if error is not None:
            self._send(wire.encode_error(request_id, error), "an error response")
        else:
            self._send(wire.encode_result(request_id, result), "a response")

    def cancel(self, call: PendingRequest, reason: str, error: BaseException | None = None) -> None:
        """Tell the server to stop (our id) and release the waiter now; its late reply is dropped."""
        self._calls.cancel(call, reason, error)

    def fail_request(self, request_id: int, error: RpcError) -> None:
        """Fail one of our requests with the link's own error, as it is; nothing happens if nobody waits for it."""
        self._calls.reject(request_id, error)

    def _write_request(self, request_id: int, method: str, params: Any) -> None:
        # Encoded here, in the caller: a value JSON cannot carry raises before anything is sent.
        self._send_request(request_id, method, params, wire.encode_request(request_id, method, params))
        self.requests_sent += 1

    def _write_cancel(self, request_id: int, reason: str) -> None:
        self._send(cancel_notification(request_id, reason), "notifications/cancelled")

    # -- receiving --------------------------------------------------------------------------
    def receive(self, data: bytes | bytearray) -> None:
        """One message from the server (a line, an event's data, a body), strictly decoded and handled."""
        if self.flooded:
            return
        try:
            message = wire.decode(data)
        except wire.UnrepresentableNumber as exc:
            if isinstance(exc.source, wire.Request):
                self._refuse(exc.source.id, exc)
            else:
                self._dropped(exc)
            return
        except wire.InvalidMessage as exc:
            if exc.request_id is not None:
                self._refuse(exc.request_id, exc)
            else:
                self._dropped(exc)
            return
        except RpcError as exc:  # not JSON, too deep
            self._dropped(exc)
            return
        if isinstance(message, wire.Response):
            self._answered(message)
        elif isinstance(message, wire.Request):
            key = wire.id_key(message.id)
            if key in self._serving:
                self._refuse(message.id, InvalidRequest("Request id is already in flight"))
                return
            self._serving.add(key)
            self._on_request(message)
        else:
            self._on_notification(message)

    def _answered(self, response: wire.Response) -> None:
        if self._on_response is not None:
            self._on_response(response)
        if response.error is not None:
            answered = self._calls.reject(response.id, response.error)
        else:
            answered = self._calls.resolve(response.id, response.result)
        if answered is None:
            self.unawaited_replies += 1
            if self.unawaited_replies > self.requests_sent:
                self._count_invalid(InvalidRequest(f"a reply to id {wire.id_text(response.id)}, which nobody waits for"), "ignored")
            else:
                log.debug("MCP %s: dropping a reply to id %s that nobody waits for", self.name, wire.id_text(response.id))

    def _refuse(self, request_id: wire.RequestId, error: RpcError) -> None:
        """Answer a request of the server's that cannot be served, without touching its in-flight id."""
        self._count_invalid(error, "refused")
        self._send(wire.encode_error(request_id, error.to_wire()), "a refusal")

    def _dropped(self, error: RpcError) -> None:
        self._count_invalid(error, "ignored")

    def discard(self, reason: str) -> None:
        """Something the transport dropped before it was a message (a line over the limit): junk too."""
        self._count_invalid(InvalidRequest(reason), "skipped")

    def _count_invalid(self, error: RpcError, outcome: str) -> None:
        self.invalid_messages += 1
        if self.invalid_messages <= LOGGED_INVALID:
            log.warning("MCP %s: the server sent a message that cannot be served; %s: %s", self.name, outcome, error.message)
            if self.invalid_messages == LOGGED_INVALID:
                log.warning("MCP %s: further messages that cannot be served are counted, not logged", self.name)
        if self.invalid_messages >= MAX_JUNK and not self.flooded:
            self.flooded = True
            flood = McpServerFlooding(
                f"MCP server {self.name!r} was stopped: it sent {MAX_JUNK} messages that cannot be served "
                f"(the last: {error.message})", data={"limit": MAX_JUNK})
            log.warning("%s", flood.message)
            self.fail(flood)
            if self._on_flooded is not None:
                self._on_flooded(flood)  # the link stops its transport too

    def _refuse_request(self, request: wire.Request) -> None:
        """A server's own request when nobody relays them: answer ping, refuse the rest."""
        if request.method == "ping":
            self.respond(request.id, {})
        else:
            self.respond(request.id, error=MethodNotFound(request.method).to_wire())

    def _log_notification(self, notification: wire.Notification) -> None:
        log.debug("MCP %s: %s", self.name, notification.method)

    # -- ending -----------------------------------------------------------------------------
    def fail(self, error: Exception) -> None:
        """No answers can come any more: every pending call errors at once."""
        self._calls.close(error)


def cancel_notification(request_id: int, reason: str) -> bytes:
    """MCP's `notifications/cancelled` for one of our requests."""
    return wire.encode_notification("notifications/cancelled", {"requestId": request_id, "reason": reason})


def _error_from_reply(_method: str, error: Any) -> BaseException:
    """The server's error object as McpError (its code relayed); a link's own failure of one
    request (an RpcError it rejects the call with) passes as it is."""
    return error if isinstance(error, RpcError) else McpError.from_wire(error)
