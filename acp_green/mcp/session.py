"""The MCP servers of one session, as agent code reaches them through `turn.mcp(name)`.

- stdio servers declared in `session/new` are started in the background when the session
  opens, initialized once, and stopped (and reaped) when the session ends;
- `type: "http"` servers (MCP streamable HTTP) are connected and initialized in the background
  when the session opens, like stdio ones; their MCP session is ended (DELETE) and their
  connections closed when the session ends;
- `type: "acp"` servers declared by the client are reached on first use in the shape the client
  speaks (`acp_message`): an agent->client `mcp/connect`, disconnected when the session ends; or,
  for a client that answers `mcp/connect` -32601, one `mcp/message` per request by `serverId`;
- servers this process provides (in-process tools or `--provide-mcp`) are reachable by name too.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import AsyncResult
from gevent.greenlet import Greenlet

from ..rpc.cancel import CancelToken
from ..redact import scrub, secrets_of
from ..errors import METHOD_NOT_FOUND, ClientError, McpServerExited, McpUnavailable, RpcError, TurnCancelled, one_line
from .acp_message import CONNECT, MESSAGE, ClientShape, ServerIdChannel
from .bridge import ProvidedServer
from .client import AcpChannel, LoopbackChannel, McpClientSession, StdioChannel
from .jsonrpc import JsonRpcLink
from .starting import FairPlaces, wait_while_busy

if TYPE_CHECKING:
    from .httplink import HttpLink

log = logging.getLogger(__name__)

#: How long a stdio server may take to start and answer `initialize`.
START_TIMEOUT = 30.0
#: How many stdio servers may be starting (launched, `initialize` not yet answered) at once in
#: this process. Starting is CPU-heavy (a server on the official SDK imports for ~0.5 s of CPU):
#: dozens at once on a few cores starve the agent itself and its control answers come late.
#: The places go to the sessions in turn (`starting.FairPlaces`): one session's queue of
#: servers never holds back another session's.
STARTING_AT_ONCE = max(2, os.cpu_count() or 2)
#: A server slow to initialize gives its starting place back after this long at most, so one
#: that never answers delays the servers queued behind it by this much, not by START_TIMEOUT;
#: one whose processes are idle gives it back sooner (`starting.wait_while_busy`).
STAGGER = 2.0
_starting = FairPlaces(STARTING_AT_ONCE)


class _StartingPlace:
    """One of the STARTING_AT_ONCE places, taken in `owner`'s turn, given back on release(), once
    the server launched (`launched`) has been idle a few looks in a row, or after STAGGER seconds."""

    def __init__(self, owner: str) -> None:
        _starting.acquire(owner)
        self._held = True
        self._group: int | None = None  # the server's process group, once launched
        self._expiry = gevent.spawn(self._hold)

    def launched(self, pid: int) -> None:
        """The server's process started (it leads its own process group): watch its CPU use."""
        self._group = pid

    def _hold(self) -> None:
        wait_while_busy(lambda: self._group, STAGGER)
        self.release()

    def release(self) -> None:
        if self._held:
            self._held = False
            _starting.release()
            if self._expiry is not gevent.getcurrent():
                self._expiry.kill(block=False)


class _StdioServer:
    """A stdio MCP server started for a session: starts in the background, initialized once.

    A server that cannot start is logged at WARNING with why, `ready` holds McpUnavailable
    with the same words for the turn that asks for it, and its process is stopped and reaped.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None, cwd: str | None, session_id: str) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.session_id = session_id
        self.link: JsonRpcLink | None = None
        self.ready: AsyncResult = AsyncResult()
        self._starter = Greenlet(self._start)
        self._starter.name = f"mcp-start-{name}"
        self._starter.start()

    def _start(self) -> None:
        place = _StartingPlace(self.session_id)
        try:
            self.ready.set(self._launch_and_initialize(place))
        except McpUnavailable as exc:
            log.warning("session %s: %s", self.session_id, exc)
            self.ready.set_exception(exc)
        finally:
            place.release()
        if self.ready.exception is not None and self.link is not None:
            # `ready` keeps the failure and nothing asks this process again, but it may still run
            # (it answered initialize with an error, or never answered): stop and reap it now, not
            # when the session ends, after its starting place went to the next server.
            self.link.close()

    def _launch_and_initialize(self, place: _StartingPlace) -> McpClientSession:
        try:
            self.link = JsonRpcLink(self.argv, name=self.name, env=self.env, cwd=self.cwd)
        except OSError as exc:  # no such command, not executable, out of descriptors (EMFILE)...
            raise McpUnavailable(f"MCP server {self.name!r} failed to start ({self.argv[0]}): {exc.strerror or exc}") from None
        place.launched(self.link.pid)
        session = McpClientSession(self.name, StdioChannel(self.link))
        try:
            session.initialize(timeout=START_TIMEOUT)
        except McpServerExited as exc:  # exited at once: its message has the code and its stderr's tail
            raise McpUnavailable(f"MCP server {self.name!r} failed to start: {exc.message}") from None
        except RpcError as exc:
            raise McpUnavailable(f"MCP server {self.name!r} failed to start: initialize failed: {exc.message}") from None
        except gevent.Timeout:
            raise McpUnavailable(f"MCP server {self.name!r} failed to start: no answer to initialize within {START_TIMEOUT:g}s") from None
        return session

    @property
    def pid(self) -> int | None:
        return self.link.pid if self.link is not None else None

    def close(self) -> None:
        self._starter.kill(block=True, timeout=2)
        if self.link is not None:
            self.link.close()


class _HttpServer:
    """An MCP streamable-HTTP server declared for a session: connected and initialized in the background.

    A server that cannot be reached is logged at WARNING with why, and `ready` holds
    McpUnavailable with the same words for the turn that asks for it.
    """

    def __init__(self, name: str, url: str, headers: dict[str, str], session_id: str) -> None:
        self.name = name
        self.url = url
        self.headers = headers
        self.session_id = session_id
        self.link: HttpLink | None = None
        self.ready: AsyncResult = AsyncResult()
        self._starter = Greenlet(self._start)
        self._starter.name = f"mcp-connect-{name}"
        self._starter.start()

    def _start(self) -> None:
        try:
            self.ready.set(self._connect_and_initialize())
        except McpUnavailable as exc:
            log.warning("session %s: %s", self.session_id, exc)
            self.ready.set_exception(exc)

    def _connect_and_initialize(self) -> McpClientSession:
        from .httplink import HttpLink  # only sessions that declare an HTTP server pay for it

        try:
            self.link = HttpLink(self.url, name=self.name, headers=self.headers)
        except ValueError as exc:  # the URL's parser may quote it
            raise McpUnavailable(f"MCP server {self.name!r} cannot be reached: {scrub(str(exc), secrets_of(self.url))}") from None
        session = McpClientSession(self.name, self.link)
        try:
            session.initialize(timeout=START_TIMEOUT)
        except RpcError as exc:  # refused, unreachable, or an error answer to initialize
            raise McpUnavailable(f"MCP server {self.name!r} failed to connect: {exc.message}") from None
        except gevent.Timeout:
            raise McpUnavailable(f"MCP server {self.name!r} failed to connect: no answer to initialize within {START_TIMEOUT:g}s") from None
        return session

    @property
    def pid(self) -> None:
        return None  # not a process of ours

    def close(self) -> None:
        self._starter.kill(block=True, timeout=2)
        if self.link is not None:
            self.link.close()


class SessionMcp:
    """Resolves `turn.mcp(name)` for one session and owns what that starts."""

    def __init__(self, session_id: str, cwd: str | None, servers: list[dict[str, Any]], provided: dict[str, ProvidedServer],
                 call_client: Callable[..., Any], notify_client: Callable[[str, Any], None],
                 on_outbound: Callable[[str, str | None], None], shape: ClientShape | None = None,
                 acp: bool = True) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.declared = {s["name"]: s for s in servers if isinstance(s.get("name"), str)}
        self.provided = provided
        self._call_client = call_client
        self._notify_client = notify_client
        self._on_outbound = on_outbound  # (connectionId, name) registers; (connectionId, None) removes
        self._shape = shape if shape is not None else ClientShape()  # shared by the ACP connection's sessions
        self._acp = acp  # False: `acp` servers are of a transport not offered (--stable-only advertises none)
        self.stdio: dict[str, _StdioServer] = {}
        self.http: dict[str, _HttpServer] = {}
        self.unstartable: dict[str, str] = {}  # name -> why its declaration cannot be started
        self.sessions: dict[str, McpClientSession] = {}
        self.outbound: dict[str, str] = {}  # name -> connectionId
        self.closed = False

    def start(self) -> None:
        """Start every declared stdio and HTTP server in the background (ACP: agents SHOULD connect to all)."""
        for name, entry in self.declared.items():
            kind = _kind(entry)
            try:
                if kind == "stdio":
                    argv, env = _stdio_command(entry)
                    self.stdio[name] = _StdioServer(name, argv, env, self.cwd, self.session_id)
                elif kind == "http":
                    url, headers = _http_target(entry)
                    self.http[name] = _HttpServer(name, url, headers, self.session_id)
            except ValueError as exc:
                verb = "start" if kind == "stdio" else "connect"
                self.unstartable[name] = f"MCP server {name!r} failed to {verb}: {exc}"
                log.warning("session %s: %s", self.session_id, self.unstartable[name])

    def get(self, name: str, token: CancelToken) -> McpClientSession:
        """An initialized MCP client session for `name`; McpUnavailable if there is none."""
        if self.closed:
            raise McpUnavailable("the session has ended")
        session = self.sessions.get(name)
        if session is not None:
            return session
        if name in self.stdio:
            return self._wait_ready(self.stdio[name], token)
        if name in self.http:
            return self._wait_ready(self.http[name], token)
        if name in self.unstartable:
            raise McpUnavailable(self.unstartable[name])
        entry = self.declared.get(name)
        if entry is not None:
            kind = _kind(entry)
            if kind == "acp" and self._acp:
                return self._connect_acp(name, entry, token)
            raise McpUnavailable(f"MCP server {name!r} uses the {kind} transport, which this agent does not support")
        server = self.provided.get(name)
        if server is None:
            raise McpUnavailable(f"this session has no MCP server named {name!r}")
        if server.tools is not None:
            session = McpClientSession(name, LoopbackChannel(server.tools))
            session.initialize(token)
            self.sessions[name] = session
            return session
        self.stdio[name] = _StdioServer(name, list(server.argv), None, None, self.session_id)
        return self._wait_ready(self.stdio[name], token)

    def _wait_ready(self, server: _StdioServer | _HttpServer, token: CancelToken) -> McpClientSession:
        gevent.wait([server.ready, token.event], count=1)
        if not server.ready.ready():
            raise TurnCancelled()
        return server.ready.get()  # raises McpUnavailable if it failed to start or connect

    def _connect_acp(self, name: str, entry: dict[str, Any], token: CancelToken) -> McpClientSession:
        """Reach a client's server in the shape the client speaks: connect first, and the
        `message` shape once the client has answered `mcp/connect` -32601 (see `acp_message`)."""
        server_id = entry.get("serverId", entry.get("acpId", entry.get("id")))
        if not isinstance(server_id, str):
            raise McpUnavailable(f"MCP server {name!r} has no serverId")
        if self._shape.known != MESSAGE:
            try:
                result = self._call_client("mcp/connect", {"serverId": server_id}, token=token, on_late_result=self._disconnect_late)
            except ClientError as exc:
                if exc.code != METHOD_NOT_FOUND or self._shape.known == CONNECT:
                    raise McpUnavailable(f"the client refused mcp/connect for {name!r}: {exc.explanation}") from None
                self._shape.known = MESSAGE  # it has no mcp/connect: it speaks the newer shape
            else:
                self._shape.known = CONNECT
                return self._open_connection(name, result, token)
        session = McpClientSession(name, ServerIdChannel(self._call_client, server_id, self._shape))
        session.initialize(token)
        self.sessions[name] = session
        return session

    def _open_connection(self, name: str, result: Any, token: CancelToken) -> McpClientSession:
        """The `connect` shape: an MCP session on the connection `mcp/connect` returned."""
        connection_id = (result or {}).get("connectionId")
        if not isinstance(connection_id, str):
            raise McpUnavailable(f"mcp/connect for {name!r} returned no connectionId")
        self.outbound[name] = connection_id
        self._on_outbound(connection_id, name)
        session = McpClientSession(name, AcpChannel(self._call_client, self._notify_client, connection_id))
        try:
            session.initialize(token)
        except BaseException:  # ok: re-raised; cancelled or refused, do not leave the client's connection open
            del self.outbound[name]
            self._on_outbound(connection_id, None)
            gevent.spawn(self._disconnect, connection_id)
            raise
        self.sessions[name] = session
        return session

    def pids(self) -> dict[str, int]:
        """Process ids of the stdio servers started for this session (diagnostics, tests)."""
        return {name: s.pid for name, s in self.stdio.items() if s.pid is not None}

    def close(self) -> None:
        """The session ended: stop and reap its stdio servers, end its HTTP ones' MCP sessions and
        close their connections; disconnect its ACP bridges."""
        self.closed = True
        stdio, self.stdio = self.stdio, {}
        http, self.http = self.http, {}
        servers: list[_StdioServer | _HttpServer] = [*stdio.values(), *http.values()]
        closers = [gevent.spawn(server.close) for server in servers]
        for name, connection_id in list(self.outbound.items()):
            self._on_outbound(connection_id, None)
            gevent.spawn(self._disconnect, connection_id)
        self.outbound.clear()
        self.sessions.clear()
        gevent.joinall(closers, timeout=10)

    def _disconnect_late(self, result: Any) -> None:
        """An `mcp/connect` answered after the turn stopped waiting for it: the client opened a
        connection nobody will use; close it (from a greenlet: this runs where replies are read)."""
        connection_id = result.get("connectionId") if isinstance(result, dict) else None
        if isinstance(connection_id, str):
            gevent.spawn(self._disconnect, connection_id)

    def _disconnect(self, connection_id: str) -> None:
        try:
            self._call_client("mcp/disconnect", {"connectionId": connection_id}, timeout=5)
        except (Exception, gevent.Timeout) as exc:  # best effort: the client may be gone
            log.debug("mcp/disconnect %s: %s", connection_id, one_line(str(exc)))


def _kind(entry: dict[str, Any]) -> str:
    kind = entry.get("type")
    return kind if isinstance(kind, str) else "stdio"  # stdio entries carry no type (schema)


def _stdio_command(entry: dict[str, Any]) -> tuple[list[str], dict[str, str] | None]:
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError("no command")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("args must be a list of strings")
    env_list = entry.get("env") or []
    env = {}
    for item in env_list if isinstance(env_list, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str):
            env[item["name"]] = item["value"]
    return [command, *args], env or None


#: A header name as HTTP allows it (RFC 9110 token characters).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _http_target(entry: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The URL and headers of an `http` entry; ValueError for what cannot be sent as given."""
    url = entry.get("url")
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise ValueError("its url is not an http:// or https:// URL")
    declared = entry.get("headers") or []
    if not isinstance(declared, list):  # ACP checked it already (declaration_fault); `start` takes a ValueError only
        raise ValueError("its headers are not an array of {name, value} objects")
    headers: dict[str, str] = {}
    for item in declared:
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(value, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError("every header needs a name (HTTP token characters) and a string value")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"header {name!r} has a line break or NUL in its value")
        headers[name] = value
    return url, headers
