"""Each session's MCP servers: started when a session declares them, stopped when it ends.

A mapping from session id to the `SessionMcp` that resolves `turn.mcp(name)` for it. Only
sessions that declared servers, or whose turn asked for one, have an entry: the many that
never use MCP cost no closer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..mcp.registry import McpRegistry
from ..rpc.cancel import CancelToken
from ..sessions import Session

if TYPE_CHECKING:
    from ..mcp.client import McpClientSession
    from ..mcp.session import SessionMcp


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
