"""Serving ACP: the process's parts wired together, one connection on stdio or many over the
network, run until EOF (stdio) or a signal, then shut down.

Shutdown (S13), per connection (`client_connection.py`): stop admitting, answer -32800 to every request read but not yet dispatched,
cancel every active prompt so its normal completion path runs, give background work
`shutdown_grace` seconds, kill and join what is left, free session resources (child
processes), then flush the writer while the client reads (bounded); once every connection has
ended, the process flushes the store.
SIGTERM, SIGINT, SIGHUP and every other catchable signal whose default would end the process
(`stop_signals`) take that path; SIGQUIT dumps every stack and serves on.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import gevent
from gevent.event import Event
from gevent.greenlet import Greenlet

from .process import heap
from . import protocol
from .agent import Agent
from .client_connection import ClientConnection, Shared
from .context import ConnectionContext
from .rpc.channel import ByteWriter
from .sessions import SessionClaims, SessionRegistry
from .store.opening import OpeningStore
from .rpc.transport import LineReader
from .serve_options import ServeOptions

if TYPE_CHECKING:
    from .remote import ListenOptions, RemoteListener
    from .store.base import Store
    from .tracing import WireTrace

log = logging.getLogger(__name__)


class Server:
    """The process part: the agent, its store, the session claims, signals and the heap.

    It serves one connection on a pair of descriptors (`serve`: stdio) or many over the network
    (`serve_listening`: WebSocket and Streamable HTTP). Each connection is a
    `client_connection.ClientConnection`; the store outlives them all and is closed last (S16).
    """

    def __init__(self, agent: Agent, options: ServeOptions | None = None, store: Store | None = None, *,
                 owns_process: bool = False) -> None:
        """Without `store`, the store of `options` opens in the background once the first message
        has been handled (or when something needs it first): see `OpeningStore`. `owns_process`:
        the process serves this agent alone (`serve_stdio`), so process-wide state such as the
        garbage collector may be tuned for it (heap.py); an embedding host's is left alone."""
        self.agent = agent
        self._owns_process = owns_process
        self.options = options or ServeOptions()
        self.store: Store = store if store is not None else OpeningStore(partial(_open_store, self.options))
        self.claims = SessionClaims(self.store)
        self.shared = Shared(agent, self.options, self.store, self.claims)
        #: The stdio connection once `serve` has started it (the one connection of a stdio process).
        self.connection: ClientConnection | None = None
        self._stop = Event()
        self.stop_reason: str | None = None
        self._started_up = False
        self._settler: Greenlet | None = None  # the start-up heap freeze (owns_process only)
        self._trace: WireTrace | None = None

    # The stdio connection's parts, by the names the process had when it was one connection.
    @property
    def protocol(self) -> protocol.AcpProtocol | None:
        return self.connection.protocol if self.connection is not None else None

    @property
    def sessions(self) -> SessionRegistry:
        if self.connection is None:
            raise RuntimeError("no connection yet: Server.sessions is the stdio connection's (call serve first)")
        return self.connection.sessions

    @property
    def context(self) -> ConnectionContext:
        if self.connection is None:
            raise RuntimeError("no connection yet: Server.context is the stdio connection's (call serve first)")
        return self.connection.context

    def request_stop(self, reason: str) -> None:
        """Begin shutdown; safe from any greenlet and from hub callbacks."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("shutting down: %s", reason)
        self._stop.set()
        if self.connection is not None:
            self.connection.request_end(reason)

    def new_connection(self, destination: int | ByteWriter, name: str) -> ClientConnection:
        """A connection of this process writing to `destination`; the caller serves it."""
        return ClientConnection(self.shared, destination, name=name, on_first_message=self._after_first_message,
                                trace=self._trace)

    def serve(self, read_fd: int, write_fd: int) -> int:
        """Serve one connection on the descriptors until EOF, a transport failure or a signal;
        returns the exit code (0)."""
        options = self.options
        if options.trace is not None:
            from .tracing import WireTrace  # only when asked: start-up imports nothing it does not use

            self._trace = WireTrace(options.trace, list(sys.orig_argv), os.getpid())
        connection = self.connection = self.new_connection(write_fd, "stdio")
        if self._stop.is_set():
            connection.request_end(self.stop_reason or "stopped")
        handlers = self._install_signal_handlers()
        try:
            connection.serve(LineReader(read_fd, options.max_line_bytes))
            if self.stop_reason is None:
                self.stop_reason = connection.stop_reason
        finally:
            try:
                self._close_process()
            finally:
                # Only now: a second SIGTERM during shutdown must not kill the process (S13, S16).
                for handler in handlers:
                    handler.cancel()
                if self._trace is not None:
                    by_signal = self.stop_reason is not None and self.stop_reason.startswith("SIG")
                    self._trace.finish(0, self.stop_reason if by_signal else None)
        return 0

    def serve_listening(self, listener: Listener) -> int:
        """Serve every connection `listener` accepts until a signal (or `request_stop`); each
        connection ends on its own (disconnect, DELETE, idle) and the store outlives them."""
        handlers = self._install_signal_handlers()
        try:
            listener.start(self)
            self._stop.wait()
        finally:
            try:
                listener.stop(self.options.shutdown_grace)
                self._close_process()
            finally:
                for handler in handlers:
                    handler.cancel()
        return 0

    def _after_first_message(self) -> None:
        """Open the store, then freeze what start-up left alive (heap.py), both in the background.

        The first message's answer (initialize) was queued already, so the writer, woken before
        the opener runs, writes it without waiting for either.
        """
        if self._started_up:
            return
        self._started_up = True
        if isinstance(self.store, OpeningStore):
            self.store.open_soon()
        if self._owns_process:
            self._settler = gevent.spawn(self._settle_heap)
            self._settler.name = "acp-settle-heap"

    def _settle_heap(self) -> None:
        if isinstance(self.store, OpeningStore):
            self.store.wait_open()  # sqlite3 and the store's modules are start-up too
        heap.freeze_start_up_objects()

    def _close_process(self) -> None:
        """After every connection ended: stop start-up work, then flush and close the store (S16)."""
        if self._settler is not None:
            # Start-up work only: a freeze not begun by now (still waiting for the store) is moot.
            self._settler.kill(block=True, timeout=1)
        try:
            self.store.close()  # commits every queued turn and usage record (S16)
        except Exception:
            log.exception("closing the store failed")

    def _install_signal_handlers(self) -> list:
        if not self.options.handle_signals or threading.current_thread() is not threading.main_thread():
            return []
        handlers = [gevent.signal_handler(signal.SIGQUIT, self.dump_stacks)]
        for signum in stop_signals():
            handlers.append(gevent.signal_handler(signum, self.request_stop, signal_name(signum)))
        return handlers

    def dump_stacks(self) -> None:
        """Write the stack of every thread and greenlet to stderr; serving goes on (SIGQUIT).

        Written to sys.stderr rather than logged: it was asked for, whatever the log level.
        Under `acp-green serve` sys.stderr is the sink, so an unread stderr cannot stall us.
        """
        from gevent.util import format_run_info

        try:
            with heap.all_objects_visible():  # the greenlets made during start-up were frozen
                lines = ["acp-green: SIGQUIT: the stack of every thread and greenlet (still serving)", *format_run_info()]
            for line in lines:  # line by line: a dump bigger than the sink loses its tail, not all of it
                sys.stderr.write(line + "\n")
        except Exception:
            log.exception("dumping the stacks failed")


class Listener(Protocol):
    """A network transport serving many connections of one `Server` (`remote.RemoteListener`)."""

    def start(self, server: Server) -> None:
        """Begin accepting; each connection is `server.new_connection(...)`, served in its own greenlet."""

    def stop(self, grace: float) -> None:
        """Stop accepting, end every connection (each with its grace) and wait for their ends."""


#: Signals whose default action would end the process and that `serve` leaves alone, with why:
#: SIGPIPE and SIGXFSZ are ignored by Python itself (a write fails with EPIPE or EFBIG instead);
#: SIGILL, SIGABRT, SIGBUS, SIGFPE and SIGSEGV are faults of the process itself, delivered while
#: C code runs that a Python handler could never return into (faulthandler's business); SIGKILL
#: and SIGSTOP cannot be caught. SIGQUIT dumps the stacks and serving goes on.
LEFT_ALONE = frozenset(getattr(signal, name) for name in (
    "SIGPIPE", "SIGXFSZ", "SIGILL", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGKILL", "SIGSTOP", "SIGQUIT",
) if hasattr(signal, name))

# Default action "terminate" or "core" (signal(7)); the rest (CHLD, CONT, STOP family, URG, WINCH) are harmless.
_TERMINATING = ("SIGHUP", "SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
                "SIGPWR", "SIGIO", "SIGPOLL", "SIGSYS", "SIGTRAP", "SIGSTKFLT", "SIGEMT", "SIGLOST", "SIGINFO")


def stop_signals() -> list[int]:
    """Every catchable signal whose default action would end the process without a shutdown:
    each takes the orderly stop of SIGTERM instead (real-time signals included)."""
    found = {getattr(signal, name) for name in _TERMINATING if hasattr(signal, name)}
    if hasattr(signal, "SIGRTMIN"):
        found.update(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
    return sorted(int(s) for s in found - LEFT_ALONE)


def signal_name(signum: int) -> str:
    """SIGUSR1, or SIGRTMIN+3 for a real-time signal without a name of its own."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}"


def _open_store(options: ServeOptions) -> Store:
    from .store.statedir import open_store

    return open_store(options.state_dir, options.ephemeral, store_url=options.store_url)


def serve(agent: Agent, read_fd: int | None = None, write_fd: int | None = None, options: ServeOptions | None = None, *,
          listen: str | ListenOptions | None = None) -> int:
    """Serve `agent` in this process: on the given descriptors (one connection), or with
    `listen` ("HOST:PORT" or `remote.ListenOptions`) to every client that connects over
    WebSocket or Streamable HTTP until a signal; the exit code (0)."""
    if listen is not None:
        if read_fd is not None or write_fd is not None:
            raise ValueError("serve: give either read_fd and write_fd (one connection) or listen (many), not both")
        return Server(agent, options).serve_listening(_listener(listen))
    if not isinstance(read_fd, int) or not isinstance(write_fd, int):
        raise TypeError("serve: read_fd and write_fd must be descriptors (int), or pass listen='HOST:PORT'")
    return Server(agent, options).serve(read_fd, write_fd)


def _listener(listen: str | ListenOptions) -> RemoteListener:
    from .remote import ListenOptions, RemoteListener, parse_address

    if isinstance(listen, str):
        host, port = parse_address(listen)
        listen = ListenOptions(host=host, port=port)
    if not isinstance(listen, ListenOptions):
        raise TypeError(f"serve: listen must be 'HOST:PORT' or a ListenOptions, not {type(listen).__name__}")
    return RemoteListener(listen)


def _announce(url: str) -> None:
    """The first line a listening agent writes: where clients connect (the real port if 0 was asked)."""
    ws_url = "ws" + url[len("http"):]
    sys.stderr.write(f"acp-green: serving ACP at {url} (WebSocket: {ws_url}); stop with Ctrl-C or SIGTERM\n")


def serve_listening(agent: Agent, listen: str | ListenOptions, options: ServeOptions | None = None, *,
                    log_level: str = "WARNING", monkey_patch: bool = True) -> int:
    """Serve `agent` to every client that connects to `listen` exactly as
    `acp-green serve --listen` does, until a signal; the exit code.

    Stdout is not the wire here: logs go to stderr through the sink that never blocks the hub,
    and the first line says where clients connect. Patching is as `serve_stdio`'s.
    """
    options = options or ServeOptions()
    if options.trace is not None:
        raise ValueError("serve_listening: --trace records one connection; it is for stdio only")
    listener = _listener(listen)
    listener.on_started = _announce
    with ServingProcess(options, log_level, monkey_patch, "acp-green serve --listen") as process:
        if process.refused:
            log.warning("serving without gevent monkey-patching (a blocking call will hold every connection): %s",
                        "; ".join(process.refused))
        return Server(agent, options, owns_process=True).serve_listening(listener)
    return 1  # serving failed: ServingProcess logged why


#: Seconds the last stderr lines may take to reach a reader at exit.
STDERR_EXIT_FLUSH = 2.0


def serve_stdio(agent: Agent, options: ServeOptions | None = None, *, log_level: str = "WARNING",
                monkey_patch: bool = True) -> int:
    """Serve `agent` on this process's stdin/stdout exactly as `acp-green serve` does; the exit code.

    Claims fds 0/1 for the wire (stray prints go to stderr) and routes stderr through the sink
    that never blocks the hub; from the call on, nothing may block on fd 2.

    `monkey_patch`: unless the process is patched already, patch it here, first thing, but only
    when nothing patching comes too late for is in use: not when `ssl` was imported (any HTTPS
    client library imports it) or another thread runs. Then it serves unpatched (said at INFO; a
    block then gets the watchdog's WARNING, options.block_warning): to patch, call
    gevent's `patch_all()` at the very top of the script, before its other imports, or serve
    with `acp-green serve --agent`, which patches before importing the agent.
    """
    options = options or ServeOptions()
    with ServingProcess(options, log_level, monkey_patch, "acp-green serve", claim_stdio=True) as process:
        if process.refused:
            log.info("serving without gevent monkey-patching (blocking calls will hold every session; the block watchdog "
                     "warns when one does): %s; call gevent.monkey.patch_all() before any other import, or serve with "  # ok: advice text
                     "`acp-green serve --agent module:Class`", "; ".join(process.refused))  # ok: advice text
        assert process.wire is not None
        return Server(agent, options, owns_process=True).serve(*process.wire)
    return 1  # serving failed: ServingProcess logged why


class ServingProcess:
    """What a process that serves one agent sets up around it and undoes after: patching (when
    safe; `refused` says why not), the wire's descriptors (`claim_stdio`: `wire`), the stderr
    sink, logging and the watchdog. An exception from serving is logged CRITICAL and swallowed
    (the caller then returns exit code 1); the last stderr lines are flushed, bounded, whatever
    happens."""

    def __init__(self, options: ServeOptions, log_level: str, monkey_patch: bool, what: str, *,
                 claim_stdio: bool = False) -> None:
        self._options, self._log_level, self._what = options, log_level, what
        self._monkey_patch, self._claim_stdio = monkey_patch, claim_stdio
        self.refused: list[str] = []
        self.wire: tuple[int, int] | None = None

    def __enter__(self) -> ServingProcess:
        from .process.patching import patch_for_serving

        self.refused = patch_for_serving(self._monkey_patch)  # records why not, for the watchdog's WARNING
        from .process import blockwatch, logsetup, stderrsink

        if self._claim_stdio:
            from .rpc import transport

            self.wire = transport.claim_stdio()
        self._sink = stderrsink.install()
        logsetup.configure(self._log_level)  # (again): the handler now writes through the sink
        self._watch = blockwatch.start(self._options.block_warning)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        try:
            if exc is not None and isinstance(exc, Exception):
                log.critical("%s failed", self._what, exc_info=exc)
                return True
            return False
        finally:
            if self._watch is not None:
                self._watch.stop()
            self._sink.flush(timeout=STDERR_EXIT_FLUSH)  # bounded: a stderr nobody reads cannot hold the exit
