"""Each session's MCP servers: started when a session declares them, stopped when it ends.

A mapping from session id to the `SessionMcp` that resolves `turn.mcp(name)` for it. Only
sessions that declared servers, or whose turn asked for one, have an entry: the many that
never use MCP cost no closer. `declaration_fault` is the shape a declaration must have before
any session is made or reopened with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..mcp.registry import McpRegistry
from ..rpc import wire
from ..rpc.cancel import CancelToken
from ..sessions import Session

if TYPE_CHECKING:
    from ..mcp.client import McpClientSession
    from ..mcp.session import SessionMcp


#: The transports whose entries name a URL and the headers sent to it (McpServerHttp, McpServerSse).
URL_TRANSPORTS = frozenset({"http", "sse"})


def declaration_fault(entry: dict[str, Any]) -> tuple[str, str] | None:
    """Where one declared server's entry breaks ACP's shape for its transport, and how: the path
    under the entry (`.headers[1].value`) and what it must be, or None.

    Checked for every entry before a session is made or reopened, so a malformed declaration is
    the client's error (-32602), never an internal error after a session was already made. Shapes
    only, as the schema types them (McpServerStdio, McpServerHttp, McpServerSse): a value of the
    right type that cannot be used (an empty command, a URL that is not http, a header HTTP cannot
    carry) is that server's failure to start, told to the turn that asks for it (mcp/session.py).
    An absent or null field reads as missing, as the starting code reads it (the schema's
    `x-deserialize-default-on-null` for the arrays).
    """
    kind = entry.get("type")
    kind = kind if isinstance(kind, str) else "stdio"  # as mcp/session.py reads it: stdio entries carry no type
    strings = ("name", "command") if kind == "stdio" else ("name", "url") if kind in URL_TRANSPORTS else ("name",)
    for field in strings:
        value = entry.get(field)
        if value is not None and not isinstance(value, str):
            return f".{field}", f"must be a string, not {wire.describe(value)}"
    if kind == "stdio":
        args = entry.get("args")
        if args is not None and not isinstance(args, list):
            return ".args", f"must be an array of strings, not {wire.describe(args)}"
        for index, arg in enumerate(args or []):
            if not isinstance(arg, str):
                return f".args[{index}]", f"must be a string, not {wire.describe(arg)}"
        return _pairs_fault(entry, "env", "EnvVariable")
    if kind in URL_TRANSPORTS:
        return _pairs_fault(entry, "headers", "HttpHeader")
    return None


def _pairs_fault(entry: dict[str, Any], field: str, shape: str) -> tuple[str, str] | None:
    """`entry[field]` as an array of `shape` objects, each with a string `name` and `value`."""
    items = entry.get(field)
    if items is None:
        return None
    if not isinstance(items, list):
        return f".{field}", f"must be an array of {{name, value}} objects ({shape}), not {wire.describe(items)}"
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f".{field}[{index}]", f"must be a {{name, value}} object ({shape}), not {wire.describe(item)}"
        for key in ("name", "value"):
            if key not in item:
                return f".{field}[{index}].{key}", "is missing: it must be a string"
            if not isinstance(item[key], str):
                return f".{field}[{index}].{key}", f"must be a string, not {wire.describe(item[key])}"
    return None


class SessionMcpServers(Mapping[str, "SessionMcp"]):
    """The `SessionMcp` of every session that started one, by session id."""

    def __init__(self, registry: McpRegistry, call_client: Callable[..., Any], notify_client: Callable[[str, Any], None],
                 acp: bool = True) -> None:
        self.registry = registry
        self.acp = acp  # `type: "acp"` servers are reached (MCP-over-ACP); not with --stable-only
        self._call_client = call_client
        self._notify_client = notify_client
        self._running: dict[str, SessionMcp] = {}
        self._closers: dict[str, Callable[[], None]] = {}  # the closer each running set put in its session's resources

    def __getitem__(self, session_id: str) -> SessionMcp:
        return self._running[session_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)

    def start_declared(self, session: Session) -> None:
        """Start the servers `session` declares, in the background; a session that declares
        none gets its SessionMcp on first use."""
        if session.mcp_servers:
            self.for_session(session)

    def redeclared(self, session: Session) -> None:
        """The client declared the session's servers anew (load, resume): stop what the old
        declaration started, in the background, and start the new stdio servers.

        The old set's closer leaves the session's resources: replaced, not accumulated, so the
        old set is closed once, here, and the session's end closes only the set in force."""
        session_id = session.session_id
        previous = self._running.pop(session_id, None)
        closer = self._closers.pop(session_id, None)
        if closer is not None and closer in session.resources:
            session.resources.remove(closer)
        if previous is not None:
            self.registry.close_in_background(previous.close)
        self.start_declared(session)

    def client_session(self, session: Session, name: str, token: CancelToken) -> McpClientSession:
        """`turn.mcp(name)`: an initialized MCP client session for the server `name`."""
        return self.for_session(session).get(name, token)

    def for_session(self, session: Session) -> SessionMcp:
        """The session's MCP servers, started on first use (session/new, load, resume, or the
        first prompt after an eviction); stopped through the session's closers when it ends."""
        found = self._running.get(session.session_id)
        if found is None:
            from ..mcp.session import SessionMcp  # processes, JSON-RPC, HTTP: loaded on first use

            session_id = session.session_id
            found = SessionMcp(
                session_id, session.record.cwd, session.mcp_servers, self.registry.by_name,
                call_client=self._call_client, notify_client=self._notify_client,
                on_outbound=self._outbound_changed, shape=self.registry.client_shape, acp=self.acp,
            )
            self._running[session_id] = found

            def close(found: SessionMcp = found) -> None:
                if self._running.get(session_id) is found:
                    del self._running[session_id]
                    self._closers.pop(session_id, None)
                # Reaping its processes can take a second: never in the receive loop (S10).
                self.registry.close_in_background(found.close)

            session.resources.append(close)
            self._closers[session_id] = close
            found.start()
        return found

    def _outbound_changed(self, connection_id: str, name: str | None) -> None:
        if name is None:
            self.registry.remove_outbound(connection_id)
        else:
            self.registry.add_outbound(connection_id, name)
