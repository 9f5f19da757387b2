"""One client connection: its endpoint, its ACP features, its context and its live sessions.

A connection reads the client's messages from a `MessageSource` and writes through its own
`Outbound` to a `ByteWriter`; which transport stands behind them (stdio, a WebSocket, an HTTP
connection's event streams) is not its business. Every rule holds per connection: control in
receive order, `max_background` background jobs, one prompt per session, the end of input as
a disconnect with a grace, idle sessions evicted.

The process (`server.Server`) owns what connections share: the agent, the store and the
`SessionClaims` that keep one session on one connection at a time.

The end of a connection (S13): stop admitting, answer every request read but not yet
dispatched, cancel every active prompt so its normal completion path runs, give background
work `shutdown_grace` seconds, kill and join what is left, free its sessions (their MCP
servers close; the store keeps them for another connection), then flush its output while the
client reads (bounded).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gevent
from gevent.event import Event
from gevent.greenlet import Greenlet

from . import protocol
from .agent import Agent
from .context import ConnectionContext
from .errors import LineTooLong, OutOfMemory
from .rpc.channel import ByteWriter, MessageSource
from .rpc.endpoint import Endpoint
from .rpc.transport import Line, Outbound
from .sessions import SessionClaims, SessionRegistry

if TYPE_CHECKING:
    from .serve_options import ServeOptions
    from .store.interface import Store
    from .tracing import WireTrace

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Shared:
    """What every connection of one process uses: the agent, the options, the store, the claims."""

    agent: Agent
    options: ServeOptions
    store: Store
    claims: SessionClaims


class ClientConnection:
    """Serves one client over one message source and one byte writer, until either ends."""

    def __init__(self, shared: Shared, destination: int | ByteWriter, *, name: str = "stdio",
                 on_first_message: Callable[[], None] | None = None, trace: WireTrace | None = None) -> None:
        """`name`: how this connection is named to another one refused a session it holds.
        `on_first_message`: called once, after the first message was handled (start-up work
        the process defers until the first answer is queued)."""
        self.name = name
        self.options = options = shared.options
        self.context = ConnectionContext()
        self.sessions = SessionRegistry(shared.store, options.idle_timeout, shared.claims, owner=name)
        self._on_first_message = on_first_message
        self._trace = trace
        self.stop_reason: str | None = None
        self._stop = Event()
        self.ended = Event()  # set once the end (S13) has run: output flushed, sessions freed
        self._reading = False
        self._reader: Greenlet | None = None
        self.outbound = Outbound(destination, options.output, on_failure=lambda exc: self.request_end(f"output failed: {exc}"),
                                 on_written=trace.sent if trace is not None else None)
        endpoint = Endpoint(self.outbound, max_background=options.max_background)
        self.protocol = protocol.attach(
            endpoint, shared.agent, self.context, self.sessions, shared.store,
            provided_commands=options.provide_mcp, max_mcp_servers=options.max_mcp_servers,
            stable_only=options.stable_only, max_protocol_version=options.max_protocol_version,
            cancel_grace=options.cancel_grace,
        )

    @property
    def endpoint(self) -> Endpoint:
        return self.protocol.endpoint

    def request_end(self, reason: str) -> None:
        """Begin this connection's end; safe from any greenlet and from hub callbacks."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("connection %s ending: %s", self.name, reason)
        self._stop.set()
        reader = self._reader
        if reader is not None and self._reading and reader is not gevent.getcurrent():
            reader.kill(block=False)  # parked in a read: nothing half-handled is lost

    def serve(self, source: MessageSource) -> None:
        """Read `source` until it ends, the output fails or `request_end`; then end (S13)."""
        self._reader = Greenlet(self._receive, source)
        self._reader.name = "acp-reader"
        self._reader.start()
        evictor = gevent.spawn(self._evict_idle)
        try:
            self._stop.wait()
        finally:
            try:
                self._shut_down(evictor, source)
            finally:
                source.close()
                self.ended.set()

    # -- reading -----------------------------------------------------------------------------
    def _traced(self, line: Line) -> Line:
        """`line`, written to the trace first when there is one (`--trace`)."""
        if self._trace is not None:
            if line.too_long:
                self._trace.note("warn", f"a line longer than {self.options.max_line_bytes} bytes was skipped unread")
            elif line.out_of_memory:
                self._trace.note("error", "a line that did not fit in memory was dropped unread")
            else:
                self._trace.received(line.data)
        return line

    def _dispatch(self, line: Line, unread: bool = False) -> None:
        """One line to the endpoint, traced first: handled, or (`unread`: read before the end but
        never dispatched) refused; a line skipped as too long or too big for memory is answered."""
        self._traced(line)
        endpoint = self.endpoint
        if line.too_long:
            endpoint.reject_line(LineTooLong(f"Line longer than {self.options.max_line_bytes} bytes was skipped"))
        elif line.out_of_memory:
            endpoint.reject_line(OutOfMemory("The line did not fit in the memory available and was dropped"), line.request_id)
        elif unread:
            endpoint.refuse_unread(line.data)
        else:
            endpoint.handle_line(line.data)

    def _receive(self, source: MessageSource) -> None:
        reason = "input closed"
        endpoint = self.endpoint
        lines = source.lines()
        start_up_done = False
        try:
            while not self._stop.is_set():
                self._reading = True
                try:
                    line = next(lines, None)
                finally:
                    self._reading = False
                if line is None:
                    break
                self._dispatch(line)
                if not start_up_done:
                    start_up_done = True
                    if self._on_first_message is not None:
                        self._on_first_message()
                if endpoint.outbound.over_input_limit:
                    # Over the hard limit background work is refused (output_backlog), but every
                    # request, even garbage, still queues a reply: a client that writes without
                    # reading could grow our memory without bound. Read on once it reads.
                    log.warning("output backlog at twice its hard limit: input paused until the client reads")
                    endpoint.outbound.wait_below_high_water(self._stop)  # a stop ends the pause
                gevent.sleep(0)  # a buffered burst must not starve the greenlets it admitted
        except OSError as exc:
            reason = f"input failed: {exc}"
        finally:
            self.request_end(reason)

    def _evict_idle(self) -> None:
        interval = max(0.05, min(self.options.idle_timeout / 2, 30.0))
        while not self._stop.wait(interval):
            self.sessions.evict_idle()

    # -- the end (S13) -----------------------------------------------------------------------
    def _shut_down(self, evictor: Greenlet, source: MessageSource) -> None:
        endpoint = self.endpoint
        endpoint.admitting = False
        if self._reader is not None and not self._reader.dead:
            self._reader.join(timeout=self.options.shutdown_grace)  # finishing a control message
            self._reader.kill(block=True, timeout=1)
        # Lines already read but never dispatched: each request among them gets one answer.
        for line in source.unread_lines():
            self._dispatch(line, unread=True)
        evictor.kill(block=False)
        self.outbound.release_producers()
        killed = self.protocol.shut_down(self.options.shutdown_grace)
        if killed:
            log.warning("%d background requests were aborted at the end of the grace", killed)
        if not self.outbound.close():
            log.warning("output not fully flushed (client not reading or gone)")
