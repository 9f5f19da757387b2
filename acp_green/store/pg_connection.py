"""Connecting to PostgreSQL from the store thread without gevent, and without holding the GIL.

`acp-green serve` monkey-patches before psycopg is imported, and then psycopg picks its
pure-Python `wait_poll` over gevent's `select.poll` (psycopg.waiting: its C `wait_c` is skipped
whenever `select` is patched), and its connect waits on `selectors`' DefaultSelector, gevent's
too, after resolving the host with gevent's resolver. From the store thread, each of those would
start a gevent hub of its own on that thread. So a connection made here waits through
`_StoreConnection.wait` (psycopg_binary's `wait_c`, a poll(2) in C with the GIL released;
without the C module, a poll on the unpatched `select.poll`), and is opened by `connect`: the
host resolved with the unpatched `getaddrinfo`, then libpq's non-blocking connect polled the
same way, bounded by connect_timeout. (libpq's blocking connect would hold the GIL, and so the
hub, for up to connect_timeout.)
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECTION_DEFAULTS", "application_name", "connect", "is_psycopg_error", "psycopg_module"]

CONNECT_TIMEOUT = 10  # seconds: connect_timeout, unless the URL sets its own
# A dead peer host is noticed by TCP keepalives (an idle connection: 10 + 3 x 5 s) and by
# tcp_user_timeout (data sent and never acknowledged), instead of the kernel's ~15 minutes.
CONNECTION_DEFAULTS = {
    "connect_timeout": str(CONNECT_TIMEOUT),
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
_Result = TypeVar("_Result")


def is_psycopg_error(exc: BaseException) -> bool:
    """`exc` is psycopg's (the server refused or cannot be reached), told without importing psycopg."""
    return type(exc).__module__.split(".")[0] == "psycopg"


def application_name() -> str:
    """How this process's connection is named in pg_stat_activity (and so to another agent refused
    one of its sessions): printable ASCII, at most 63 bytes (the server cuts the rest)."""
    name = f"acp-green pid {os.getpid()} on {socket.gethostname()}"
    return "".join(c if " " <= c <= "~" else "?" for c in name)[:63]


@functools.cache
def psycopg_module() -> Any:
    import psycopg

    return psycopg


@functools.cache
def _store_connection() -> type[psycopg.Connection[Any]]:
    """psycopg's Connection, waiting without gevent (see the module's docstring)."""
    import psycopg
    from psycopg.abc import PQGen

    wait_fd = _wait_function()

    class _StoreConnection(psycopg.Connection[Any]):
        def wait(self, gen: PQGen[_Result], interval: float = 0.1, timeout: float | None = None) -> _Result:
            return cast(_Result, wait_fd(gen, self.pgconn.socket, interval, timeout))

    return _StoreConnection


def _wait_function() -> Callable[..., Any]:
    """psycopg_binary's C wait (poll(2), GIL released), else a wait on the unpatched poll."""
    from psycopg import waiting

    wait_c = getattr(waiting, "wait_c", None)
    if wait_c is not None:
        return cast("Callable[..., Any]", wait_c)
    return _wait_poll


def _real(module: str, name: str) -> Any:
    """`module.name` as it was before gevent's monkey-patching (the same when nothing was patched)."""
    from gevent.monkey import get_original

    return get_original(module, name)


def _wait_poll(gen: Any, fileno: int, interval: float = 0.1, timeout: float | None = None) -> Any:
    """psycopg's wait_poll, on the unpatched poll: the store thread never starts a gevent hub."""
    import select

    from psycopg import waiting

    poll = _real("select", "poll")()
    masks = {waiting.Wait.R: select.POLLIN, waiting.Wait.W: select.POLLOUT, waiting.Wait.RW: select.POLLIN | select.POLLOUT}
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        state = next(gen)
        poll.register(fileno, masks[state])
        while True:
            wait_s = interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
            events = poll.poll(int(wait_s * 1000))
            ready = 0
            for _fd, event in events:
                if event & select.POLLIN:
                    ready |= waiting.Ready.R
                if event & select.POLLOUT:
                    ready |= waiting.Ready.W
                if not ready and event & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    ready = waiting.Ready.R | waiting.Ready.W  # let libpq read the error
            state = gen.send(ready)
            poll.modify(fileno, masks[state])
            if deadline is not None and time.monotonic() >= deadline:
                raise psycopg_module().errors.ConnectionTimeout("wait timeout expired")
    except StopIteration as done:
        return done.value


def connect(url: str, options: dict[str, str] | None = None) -> psycopg.Connection[Any]:
    """Connect to `url` without gevent and without holding the GIL while waiting: psycopg.OperationalError
    when the server cannot be reached or refuses."""
    pg = psycopg_module()
    from psycopg import pq
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params: dict[str, Any] = conninfo_to_dict(url)
    except pg.ProgrammingError as exc:  # a malformed URL: said without the URL itself
        raise pg.OperationalError(f"invalid connection URL: {exc}") from None
    for name, value in CONNECTION_DEFAULTS.items():
        params.setdefault(name, value)
    params["application_name"] = application_name()
    if options:
        settings = " ".join(f"-c {name}={value}" for name, value in options.items())
        params["options"] = f"{params['options']} {settings}" if params.get("options") else settings
    params = _resolved(params)
    timeout = int(params.get("connect_timeout") or 0)
    deadline = time.monotonic() + timeout if timeout > 0 else None
    pgconn = pq.PGconn.connect_start(make_conninfo("", **params).encode())
    try:
        _poll_connect(pgconn, deadline)
    except BaseException:  # ok: free the half-open connection, then re-raise
        pgconn.finish()
        raise
    pgconn.nonblocking = 1
    conn = _store_connection()(pgconn)
    conn.autocommit = True
    return conn


def _poll_connect(pgconn: Any, deadline: float | None) -> None:
    """Drive libpq's non-blocking connect to the end on the unpatched poll."""
    import select

    pg = psycopg_module()
    from psycopg import pq

    poll_class = _real("select", "poll")
    while True:
        if pgconn.status == pq.ConnStatus.BAD:
            raise pg.OperationalError(f"connection is bad: {_message(pgconn)}")
        status = pgconn.connect_poll()
        if status == pq.PollingStatus.OK:
            return
        if status == pq.PollingStatus.FAILED:
            raise pg.OperationalError(f"connection failed: {_message(pgconn)}")
        mask = select.POLLIN if status == pq.PollingStatus.READING else select.POLLOUT
        poll = poll_class()
        poll.register(pgconn.socket, mask)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise pg.errors.ConnectionTimeout("connection timeout expired")
            if poll.poll(1000 if left is None else max(1, min(1000, int(left * 1000)))):
                break


def _message(pgconn: Any) -> str:
    return pgconn.error_message.decode("utf-8", "replace").strip() or "no message from libpq"


def _resolved(params: dict[str, Any]) -> dict[str, Any]:
    """`params` with each host name resolved (the unpatched getaddrinfo) into `hostaddr`, one
    attempt per address, so libpq never resolves (which would hold the GIL)."""
    pg = psycopg_module()
    if params.get("hostaddr") or os.environ.get("PGHOSTADDR"):
        return params
    hosts = str(params.get("host") or os.environ.get("PGHOST") or "").split(",")
    ports = str(params.get("port") or os.environ.get("PGPORT") or "").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        return params  # libpq says what is wrong
    if all(_needs_no_lookup(host) for host in hosts):
        return params
    getaddrinfo = _real("socket", "getaddrinfo")
    attempts: list[tuple[str, str, str]] = []
    failure: OSError | None = None
    for host, port in zip(hosts, ports):
        if _needs_no_lookup(host):
            attempts.append((host, "", port))
            continue
        try:
            infos = getaddrinfo(host, port or "5432", proto=socket.IPPROTO_TCP, type=socket.SOCK_STREAM)
        except OSError as exc:
            failure = exc
            continue
        attempts.extend((host, info[4][0], port) for info in infos)
    if not attempts:
        raise pg.OperationalError(f"cannot resolve {', '.join(hosts)}: {failure}")
    resolved = dict(params)
    resolved["host"] = ",".join(host for host, _, _ in attempts)
    resolved["hostaddr"] = ",".join(addr for _, addr, _ in attempts)
    if any(port for _, _, port in attempts):
        resolved["port"] = ",".join(port for _, _, port in attempts)
    return resolved


def _needs_no_lookup(host: str) -> bool:
    """A unix socket directory (or none: the default socket), or an IP address already."""
    if not host or host.startswith(("/", "@")):
        return True
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True
