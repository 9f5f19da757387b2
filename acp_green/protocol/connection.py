"""Connection-level ACP methods: `initialize`, `authenticate`, `logout`, and the `_`-extension requests."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..rpc import wire
from ..version import __version__
from ..agent import Agent, ExtensionCall
from ..rpc.cancel import CancelToken
from ..context import PROTOCOL_VERSION, ConnectionContext
from ..rpc.endpoint import Endpoint, Job, Kind, Route, control, fallback
from ..errors import MethodNotFound, NotInitialized, RpcError
from ..mcp.registry import McpRegistry
from ..rpc.params import Params
from ..sessions import SessionRegistry
from ..process.stats import STATS_METHOD, runtime_stats
from . import dialect_v2
from .dialect import OutgoingDialect

if TYPE_CHECKING:
    from ..store.base import Store


#: The schema's ProtocolVersion is a uint16.
MAX_PROTOCOL_VERSION = 65535


class ExtensionJob(Job):
    """An `_`-prefixed extension request handled by the agent in the background."""

    def __init__(self, handler: Callable[[ExtensionCall], Any], call: ExtensionCall) -> None:
        self.handler = handler
        self.call = call

    def run(self) -> Any:
        return self.handler(self.call)

    def shutdown(self) -> None:
        self.call.token.set()


class ConnectionMethods:
    """What the client negotiates once per connection, and the extensions the agent offers."""

    def __init__(self, agent: Agent, context: ConnectionContext, mcp: McpRegistry, endpoint: Endpoint,
                 sessions: SessionRegistry, store: Store, stable_only: bool = False, max_protocol_version: int = 2,
                 dialect: OutgoingDialect | None = None) -> None:
        self.agent = agent
        self.stable_only = stable_only
        self.max_protocol_version = max_protocol_version
        #: Every route registered, as `attach` left them (each says which versions it serves).
        self.registered: dict[str, Route] | None = None
        #: The method table each negotiated version is served (see `speak`).
        self.served: dict[int, dict[str, Route]] = {}
        #: How what this connection sends is shaped (the negotiated version's dialect).
        self.dialect = dialect if dialect is not None else OutgoingDialect()
        self.context = context
        self.mcp = mcp
        self.endpoint = endpoint
        self.sessions = sessions
        self.store = store
        # The runtime's own counters first, so the rig can sample any acp_green agent; an agent may override.
        self.extensions: dict[str, Callable[[ExtensionCall], Any]] = {STATS_METHOD: self.stats, **agent.extension_methods()}

    @control("initialize")
    def initialize(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        checked = Params(params, "initialize")
        requested = checked.required("protocolVersion", int)
        if not 0 <= requested <= MAX_PROTOCOL_VERSION:
            raise checked.refuse("protocolVersion", f"field 'protocolVersion' must be an integer from 0 to {MAX_PROTOCOL_VERSION} (uint16)")
        version = negotiated(requested, self.max_protocol_version)
        current = self.context.snapshot.protocol_version
        if current is not None and current != version and self.endpoint.active:
            # The dialect is the connection's: switching it would reshape (or stop reshaping)
            # what running requests send, against the version they were admitted under (S3).
            raise checked.refuse("protocolVersion", f"this connection speaks protocol version {current} while "
                                 f"{self.endpoint.active} requests run; it may switch to {version} once none runs")
        if version >= dialect_v2.VERSION:
            capabilities = checked.optional("capabilities", dict, {})
            client_info = checked.optional("info", dict)
        else:
            capabilities = checked.optional("clientCapabilities", dict, {})
            client_info = checked.optional("clientInfo", dict)
        self.context.initialized(version, capabilities, client_info)
        self.speak(version)
        agent = self.agent
        info = {"name": agent.name, "version": agent.version}
        if agent.title:
            info["title"] = agent.title
        return {
            "protocolVersion": version,
            "agentCapabilities": agent_capabilities(agent, stable_only=self.stable_only),
            "authMethods": [m.to_wire() for m in agent.auth_methods],
            "agentInfo": info,
            "_meta": {"acpGreen": {"runtimeVersion": __version__,
                                   "providedMcpServers": [] if self.stable_only else self.mcp.announce()}},
        }

    def speak(self, version: int) -> None:
        """Shape this connection for `version`: its dialect, and the routes that serve it.

        A method whose route does not serve `version` (`Route.versions`), or is unstable under
        `stable_only`, is gone from the table (-32601); under v2 `session/resume` replays in the
        background (`replayFrom`), batches are accepted, and what is sent is built in v2's shape."""
        endpoint = self.endpoint
        if self.registered is None:
            self.registered = dict(endpoint.routes)
        served = self.served.get(version)
        if served is None:
            picked = ((method, route.serving(version, self.stable_only)) for method, route in self.registered.items())
            served = self.served[version] = {method: route for method, route in picked if route is not None}
        endpoint.routes = dict(served)
        endpoint.dialect = dialect_v2.V2Dialect() if version >= dialect_v2.VERSION else None
        self.dialect.speak(version)
        setattr(endpoint, "accept_batches", version >= dialect_v2.VERSION)  # contract: the batches' switch

    def refusal_before_initialize(self, method: str) -> RpcError | None:
        """The endpoint's gate: until `initialize` succeeded, every other request is refused
        (-32600 `not_initialized`); ACP clients must initialize first."""
        if method == "initialize" or self.context.snapshot.initialized:
            return None
        return NotInitialized(wire.excerpt(method))

    @control("authenticate", versions=dialect_v2.V1_ONLY)
    def authenticate(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        log_in(self.agent, self.context, Params(params, "authenticate"))
        return {}

    @control("logout", versions=dialect_v2.V1_ONLY)
    def logout(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """-32601 unless the agent implements `Agent.logout`; afterwards the connection counts as
        not authenticated, so an agent with auth methods refuses session methods until `authenticate`."""
        Params(params, "logout")
        if not implements_logout(self.agent):
            raise MethodNotFound("logout")
        self.agent.logout(self.context.snapshot)
        self.context.authenticated(None)
        return {}

    # -- extensions --------------------------------------------------------------------------
    @fallback
    def extension_route(self, method: str) -> Route | None:
        """The route of an `_`-prefixed method the agent (or the runtime) handles."""
        if method.startswith("_") and method in self.extensions:
            return Route(Kind.BACKGROUND, partial(self.admit_extension, method))
        return None

    def admit_extension(self, method: str, params: Any, _id: wire.RequestId) -> ExtensionJob:
        return ExtensionJob(self.extensions[method], ExtensionCall(method, params, self.context.snapshot, CancelToken()))

    def stats(self, call: ExtensionCall) -> dict[str, Any]:
        """`_acp_green/stats`: the runtime's own counters."""
        endpoint = self.endpoint
        health = getattr(self.store, "health", None)
        return runtime_stats(endpoint.active, len(self.sessions), endpoint.outbound.queued_bytes, self.store.failed_writes,
                             health() if health is not None else None)


def negotiated(requested: int, highest: int) -> int:
    """The version answered to a client asking for `requested`: the highest served at or below it
    (1 for 0 and 1, as ever), never above `highest` (`--max-protocol-version`)."""
    return max(PROTOCOL_VERSION, min(requested, highest, dialect_v2.VERSION))


def log_in(agent: Agent, context: ConnectionContext, checked: Params) -> None:
    """v1's `authenticate` and v2's `auth/login`: a `methodId` the agent offers, which its
    `authenticate` hook accepts (or refuses by raising); the connection then counts as logged in."""
    method_id = checked.required("methodId", str)
    if not any(m.id == method_id for m in agent.auth_methods):
        raise checked.refuse("methodId", f"unknown methodId {wire.excerpt(method_id)!r}")
    agent.authenticate(method_id, context.snapshot)
    context.authenticated(method_id)


def implements_logout(agent: Agent) -> bool:
    """The agent's class overrides `Agent.logout`."""
    return getattr(type(agent), "logout", Agent.logout) is not Agent.logout


#: What `--stable-only` hides: ACP's unstable session capabilities this runtime answers
#: (session/fork, archive and unarchive, status, set_title; protocol/session_admin.py).
UNSTABLE_SESSION_CAPABILITIES = ("fork", "archive", "status", "title")


def agent_capabilities(agent: Agent, *, stable_only: bool = False) -> dict[str, Any]:
    """What this runtime offers every client, plus what `agent` declared: prompt content, logout.

    `stable_only`: nothing of ACP's unstable schema: neither the unstable session capabilities
    nor `mcpCapabilities.acp` (MCP-over-ACP)."""
    sessions: dict[str, Any] = {"additionalDirectories": {}, "list": {}, "delete": {}, "resume": {}, "close": {}}
    mcp: dict[str, Any] = {"http": True, "sse": False}
    if not stable_only:
        sessions.update((name, {}) for name in UNSTABLE_SESSION_CAPABILITIES)
        mcp["acp"] = True
    capabilities: dict[str, Any] = {
        "loadSession": True,
        "promptCapabilities": {"image": agent.accepts_images, "audio": agent.accepts_audio,
                               "embeddedContext": agent.accepts_embedded_context},
        "mcpCapabilities": mcp,
        "sessionCapabilities": sessions,
    }
    if implements_logout(agent):
        capabilities["auth"] = {"logout": {}}
    return capabilities
