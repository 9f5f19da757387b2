"""ACP v1 as an agent: `attach` builds each feature on an endpoint, which routes to them.

| module | holds |
|---|---|
| `connection.py` | `initialize`, `authenticate`, `logout`, the `_`-extension requests (`_acp_green/stats`) |
| `session_methods.py` | session/new, load, resume, list, delete, close, set_mode, set_config_option, cancel |
| `session_admin.py` | the unstable session/fork, archive, unarchive, set_title, status (not with `stable_only`) |
| `prompt.py` | `session/prompt`: admission, the turn's job and the usage ledger |
| `turn_record.py` | a running turn's record: message ids, its history handed to the store in pieces |
| `replay.py` | `session/load`'s replay: a background job reading history in pages |
| `access.py` | the auth check and the session a request names |
| `session_mcp.py` | each session's MCP servers |
| `updates.py` | encoding `session/update`, session info, titles |
| `dialect.py` | the connection's outgoing dialect: each update and request built in the negotiated version's shape |
| `dialect_v2.py` | ACP v2 (draft) as a dialect: pure functions from v1 shapes to v2's |
| `v2_methods.py` | ACP v2's `auth/login`, `auth/logout`, `tool_call/cancel`, `terminal/cancel` (version 2 only) |

The endpoint exists first; every feature gets what it needs from it at construction and
registers its own handlers (`Endpoint.add_feature`). Agent behaviour comes only from `Agent`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from ..agent import Agent
from ..context import ConnectionContext
from ..rpc.endpoint import Endpoint, Kind, Route
from ..errors import RequestCancelled
from ..mcp.registry import McpRegistry, provided_servers
from ..sessions import SessionRegistry
from ..settings import SessionSettings
from .access import SessionAccess
from .connection import ConnectionMethods
from .dialect import OutgoingDialect
from .dialect_v2 import V1_ONLY, V2_ONLY
from .interrupt import DEFAULT_CANCEL_GRACE
from .prompt import PromptLedger, PromptService
from .session_mcp import SessionMcpServers
from .session_admin import SessionAdmin, admit_archive_v2
from .session_methods import SessionMethods, admit_close_v2, admit_resume_v2
from .v2_methods import V2Methods

if TYPE_CHECKING:
    from ..store.base import Store

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AcpProtocol:
    """ACP's agent side on one endpoint: the features `attach` registered, and how they end."""

    endpoint: Endpoint
    sessions: SessionRegistry
    store: Store
    mcp: McpRegistry
    session_mcp: SessionMcpServers
    connection: ConnectionMethods
    session_methods: SessionMethods
    prompt_service: PromptService
    prompts: PromptLedger

    def shut_down(self, grace: float) -> int:
        """End the connection once nothing more is read; returns how many requests were killed.

        Cancel every active prompt (its normal completion path runs), fail every wait for the
        client, give background work `grace` seconds, free every session (its MCP servers start
        closing; the store keeps it for another connection), close every bridge and reap its
        process (S13). The store is the process's: `server.Server` closes it once every
        connection has ended (S16).
        """
        endpoint = self.endpoint
        endpoint.admitting = False
        # Belt and braces, and an equivalent mutant (no test can tell it gone): a busy session is
        # reserved by a job still in the endpoint's table (PromptJob, ReplayJob), and drain() below
        # calls each job's shutdown(), which cancels the same token; client.close() in between
        # switches to no greenlet, so no agent code can see the difference.
        for session in self.sessions:
            if session.busy:
                session.cancel()
        endpoint.client.close(RequestCancelled("The connection is closing"))
        killed = endpoint.drain(grace)
        for session in self.sessions:
            self.sessions.drop(session.session_id)  # session-scoped MCP servers start closing here
        try:
            self.mcp.close_all()  # bridges and session servers: none outlives the connection
        except Exception:
            log.exception("closing MCP bridges failed")
        return killed


def attach(
    endpoint: Endpoint,
    agent: Agent,
    context: ConnectionContext,
    sessions: SessionRegistry,
    store: Store,
    *,
    provided_commands: tuple[tuple[str, tuple[str, ...]], ...] = (),
    max_mcp_servers: int = 64,
    stable_only: bool = False,
    max_protocol_version: int = 2,
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
) -> AcpProtocol:
    """Build ACP's features for `agent` on `endpoint` and register their routes there.

    `stable_only`: ACP's unstable methods are not registered (they answer -32601 like any unknown
    method): session/fork, archive, unarchive, set_title, status, and MCP-over-ACP (mcp/connect,
    message, disconnect); `initialize` advertises none of them. `cancel_grace`: seconds a cancelled
    turn may run on before it is interrupted at its blocking call (interrupt.py)."""
    client = endpoint.client
    mcp = McpRegistry(
        provided_servers(agent.provided_mcp_servers(), provided_commands),
        call_client=client.call,
        notify_client=client.notify,
    )
    session_mcp = SessionMcpServers(mcp, client.call, client.notify, acp=not stable_only)
    access = SessionAccess(agent, context, sessions)
    prompts = PromptLedger(store, sessions)
    dialect = OutgoingDialect()  # the connection's: `initialize` picks the negotiated version's
    connection = ConnectionMethods(agent, context, mcp, endpoint, sessions, store, stable_only, max_protocol_version, dialect)
    settings = SessionSettings(agent, sessions)
    session_methods = SessionMethods(agent, access, sessions, store, session_mcp, endpoint.outbound, settings, max_mcp_servers,
                                     stable_only, dialect)
    prompt_service = PromptService(agent, access, prompts, session_mcp, endpoint.outbound, client.call, settings, client.send,
                                   dialect, cancel_grace)
    features: tuple[object, ...] = (connection, session_methods, prompt_service)
    admin = None if stable_only else SessionAdmin(agent, session_methods)
    if admin is not None:
        features += (admin, mcp)
    for feature in features:
        endpoint.add_feature(feature)
    endpoint.add_feature(V2Methods(agent, access, prompts))  # its routes serve version 2 only
    endpoint.gate = connection.refusal_before_initialize
    v2_route(endpoint, "session/resume", Route(Kind.BACKGROUND, partial(admit_resume_v2, session_methods)))
    v2_route(endpoint, "session/close", Route(Kind.BACKGROUND, partial(admit_close_v2, session_methods), frees_resources=True))
    if admin is not None:  # archiving closes the session: under v2, answered after a running turn's idle
        v2_route(endpoint, "session/archive", Route(Kind.BACKGROUND, partial(admit_archive_v2, admin), frees_resources=True,
                                                    unstable=True))
    return AcpProtocol(endpoint, sessions, store, mcp, session_mcp, connection, session_methods, prompt_service, prompts)


def v2_route(endpoint: Endpoint, method: str, route: Route) -> None:
    """`method` answered by `route` under v2, by the route registered for it under v1."""
    endpoint.routes[method] = replace(endpoint.routes[method], versions=V1_ONLY, otherwise=replace(route, versions=V2_ONLY))


__all__ = ["AcpProtocol", "attach"]
