"""ACP v1 as an agent: the method table and what each method does.

The handlers here speak ACP on top of the generic endpoint; agent behaviour comes only
from the `Agent` they are given.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from . import __version__, wire
from .agent import STOP_REASONS, Agent, ExtensionCall, SessionView, Turn
from .context import PROTOCOL_VERSION, ConnectionContext
from .endpoint import Endpoint, Job, Kind, Outcome, Reply, Route
from .errors import (
    AuthRequired,
    InternalError,
    InvalidParams,
    MethodNotFound,
    SessionBusy,
    UnknownSession,
    one_line,
)
from .sessions import CancelToken, Session, SessionRegistry
from .stats import STATS_METHOD, runtime_stats
from .store import Store
from .usage import UsageRecord

log = logging.getLogger(__name__)


# -- parameter checks (the message names the field: DESIGN §6) -------------------------------
def _params(params: Any, method: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidParams(f"{method}: params must be an object")
    return params


def _require(params: dict[str, Any], name: str, kind: type | tuple[type, ...], method: str) -> Any:
    if name not in params:
        raise InvalidParams(f"{method}: missing required field {name!r}", data={"field": name})
    value = params[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidParams(f"{method}: field {name!r} has the wrong type", data={"field": name})
    return value


def _optional(params: dict[str, Any], name: str, kind: type | tuple[type, ...], method: str, default: Any = None) -> Any:
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InvalidParams(f"{method}: field {name!r} has the wrong type", data={"field": name})
    return value


def _absolute_path(params: dict[str, Any], name: str, method: str) -> str:
    path = _require(params, name, str, method)
    if not os.path.isabs(path):
        raise InvalidParams(f"{method}: field {name!r} must be an absolute path", data={"field": name})
    return path


def _string_list(params: dict[str, Any], name: str, method: str) -> list[str]:
    values = _optional(params, name, list, method, [])
    if not all(isinstance(v, str) and os.path.isabs(v) for v in values):
        raise InvalidParams(f"{method}: field {name!r} must list absolute paths", data={"field": name})
    return list(values)


def _mcp_servers(params: dict[str, Any], method: str, required: bool) -> list[dict[str, Any]]:
    if required:
        servers = _require(params, "mcpServers", list, method)
    else:
        servers = _optional(params, "mcpServers", list, method, [])
    if not all(isinstance(s, dict) for s in servers):
        raise InvalidParams(f"{method}: every entry of 'mcpServers' must be an object", data={"field": "mcpServers"})
    return list(servers)


class PromptJob(Job):
    """One `session/prompt`: admitted with its session reserved and its token bound."""

    def __init__(self, protocol: "AcpAgentProtocol", session: Session, request_id: wire.RequestId, turn: Turn) -> None:
        self.protocol = protocol
        self.session = session
        self.request_id = request_id
        self.turn = turn
        self.token = turn.token
        self.started = time.time()
        self.started_mono = time.monotonic()

    def run(self) -> Any:
        turn = self.turn
        if turn.cancelled:  # cancelled between admission and our first switch (S11)
            return {"stopReason": "cancelled"}
        stop_reason = self.protocol.agent.prompt(turn) or "end_turn"
        if stop_reason not in STOP_REASONS:
            raise InternalError(f"Agent returned an unknown stop reason {stop_reason!r}")
        return {"stopReason": stop_reason}

    def settle(self, outcome: Outcome) -> Outcome:
        """Release the reservation, finalize usage and history, and pick the answer (S14, S16)."""
        self.session.release(self)
        turn = self.turn
        if self.token.is_set():
            # Once cancelled, the answer is `cancelled` whatever happened after (S14).
            stop = "aborted" if outcome.killed else "cancelled"
            final = Outcome(result={"stopReason": "cancelled"})
        elif outcome.error is not None:
            stop, final = "error", outcome
        elif outcome.killed or outcome.cancelled:
            stop, final = ("aborted" if outcome.killed else "cancelled"), Outcome(result={"stopReason": "cancelled"})
        else:
            stop, final = outcome.result["stopReason"], outcome
        usage = turn.usage
        if usage.context_size is not None and not turn.closed:
            used = usage.context_used if usage.context_used is not None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
            turn.send_final({"sessionUpdate": "usage_update", "used": used, "size": usage.context_size})
        turn.closed = True
        self.protocol.finish_turn(self, stop)
        return final

    def cancel(self) -> bool:
        self.protocol.cancel_prompt(self)
        return True

    def shutdown(self) -> None:
        self.protocol.cancel_prompt(self)


class ExtensionJob(Job):
    """An `_`-prefixed extension request handled by the agent in the background."""

    def __init__(self, handler: Callable[[ExtensionCall], Any], call: ExtensionCall) -> None:
        self.handler = handler
        self.call = call

    def run(self) -> Any:
        return self.handler(self.call)

    def shutdown(self) -> None:
        self.call.token.set()


class AcpAgentProtocol:
    """ACP's agent side over one connection: the method table and its handlers."""

    def __init__(
        self,
        agent: Agent,
        context: ConnectionContext,
        sessions: SessionRegistry,
        store: Store,
        endpoint_factory: Callable[..., Endpoint],
    ) -> None:
        self.agent = agent
        self.context = context
        self.sessions = sessions
        self.store = store
        self.endpoint = endpoint_factory(
            routes=self.routes(),
            fallback=self._extension_route,
            notifications={"session/cancel": self.on_session_cancel},
        )
        # The runtime's own counters first, so the rig can sample any acp_green agent; an agent may override.
        self._extensions = {STATS_METHOD: self._stats, **agent.extension_methods()}
        self.prompts: dict[str, PromptJob] = {}

    # -- the method table --------------------------------------------------------------------
    def routes(self) -> dict[str, Route]:
        control, background = Kind.CONTROL, Kind.BACKGROUND
        return {
            "initialize": Route(control, self.initialize),
            "authenticate": Route(control, self.authenticate),
            "session/new": Route(control, self.session_new),
            "session/set_mode": Route(control, self.session_set_mode),
            "session/set_config_option": Route(control, self.session_set_config_option),
            "session/prompt": Route(background, self.admit_prompt),
        }

    def _extension_route(self, method: str) -> Route | None:
        if method.startswith("_") and method in self._extensions:
            return Route(Kind.BACKGROUND, lambda params, _id: self.admit_extension(method, params))
        return None

    # -- control handlers --------------------------------------------------------------------
    def initialize(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        params = _params(params, "initialize")
        requested = _require(params, "protocolVersion", int, "initialize")
        capabilities = _optional(params, "clientCapabilities", dict, "initialize", {})
        client_info = _optional(params, "clientInfo", dict, "initialize")
        version = requested if requested == PROTOCOL_VERSION else PROTOCOL_VERSION
        self.context.initialized(version, capabilities, client_info)
        agent = self.agent
        info = {"name": agent.name, "version": agent.version}
        if agent.title:
            info["title"] = agent.title
        return {
            "protocolVersion": version,
            "agentCapabilities": self.agent_capabilities(),
            "authMethods": [m.to_wire() for m in agent.auth_methods],
            "agentInfo": info,
            "_meta": {"acpGreen": {"runtimeVersion": __version__}},
        }

    def agent_capabilities(self) -> dict[str, Any]:
        return {
            "loadSession": False,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"additionalDirectories": {}},
        }

    def authenticate(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        params = _params(params, "authenticate")
        method_id = _require(params, "methodId", str, "authenticate")
        if not any(m.id == method_id for m in self.agent.auth_methods):
            raise InvalidParams(f"authenticate: unknown methodId {method_id!r}", data={"field": "methodId"})
        self.agent.authenticate(method_id, self.context.snapshot)
        self.context.authenticated(method_id)
        return {}

    def _require_auth(self) -> None:
        if self.agent.auth_methods and not self.context.snapshot.authenticated:
            raise AuthRequired("Authentication required: call authenticate with one of the advertised authMethods")

    def session_new(self, params: Any, _id: wire.RequestId) -> Reply:
        method = "session/new"
        params = _params(params, method)
        cwd = _absolute_path(params, "cwd", method)
        servers = _mcp_servers(params, method, required=True)
        directories = _string_list(params, "additionalDirectories", method)
        self._require_auth()
        session = self.sessions.create(cwd, directories, servers)
        record = session.record
        if self.agent.modes:
            record.mode_id = self.agent.modes[0].id
        for option in self.agent.config_options:
            record.config[option.id] = option.default
        self.agent.session_started(SessionView.of(session), self.context.snapshot)
        self.sessions.save(session)
        result = {"sessionId": session.session_id, **self.session_state(session)}
        return Reply(result, then=lambda: self.after_session_opened(session))

    def session_state(self, session: Session) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self.agent.modes:
            state["modes"] = {
                "currentModeId": session.record.mode_id or self.agent.modes[0].id,
                "availableModes": [m.to_wire() for m in self.agent.modes],
            }
        if self.agent.config_options:
            state["configOptions"] = self.config_options(session)
        return state

    def config_options(self, session: Session) -> list[dict[str, Any]]:
        return [o.to_wire(session.record.config.get(o.id, o.default)) for o in self.agent.config_options]

    def after_session_opened(self, session: Session) -> None:
        """Queued right after the response, so nothing for a session precedes it (S5)."""
        if self.agent.commands:
            self.send_update(session.session_id, {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [c.to_wire() for c in self.agent.commands],
            })

    def session_set_mode(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        method = "session/set_mode"
        params = _params(params, method)
        session = self.sessions.get(_require(params, "sessionId", str, method))
        mode_id = _require(params, "modeId", str, method)
        if not any(m.id == mode_id for m in self.agent.modes):
            raise InvalidParams(f"{method}: unknown modeId {mode_id!r}", data={"field": "modeId"})
        session.record.mode_id = mode_id
        self.sessions.save(session)
        return {}

    def session_set_config_option(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        method = "session/set_config_option"
        params = _params(params, method)
        session = self.sessions.get(_require(params, "sessionId", str, method))
        config_id = _require(params, "configId", str, method)
        option = next((o for o in self.agent.config_options if o.id == config_id), None)
        if option is None:
            raise InvalidParams(f"{method}: unknown configId {config_id!r}", data={"field": "configId"})
        if "value" not in params:
            raise InvalidParams(f"{method}: missing required field 'value'", data={"field": "value"})
        value = params["value"]
        if not option.accepts(value):
            raise InvalidParams(f"{method}: {value!r} is not a value of {config_id!r}", data={"field": "value"})
        session.record.config[config_id] = value
        self.sessions.save(session)
        return {"configOptions": self.config_options(session)}

    # -- notifications -----------------------------------------------------------------------
    def on_session_cancel(self, params: Any) -> None:
        params = _params(params, "session/cancel")
        session_id = _require(params, "sessionId", str, "session/cancel")
        if not self.sessions.is_live(session_id):
            log.debug("session/cancel for a session that is not live: %s", session_id)
            return
        self.sessions.get(session_id).cancel()

    def cancel_prompt(self, job: PromptJob) -> None:
        """Cancel one prompt; if its token is the session's current one, install a fresh one (S12)."""
        if job.session.token is job.token:
            job.session.cancel()
        else:
            job.token.set()

    # -- session/prompt ----------------------------------------------------------------------
    def admit_prompt(self, params: Any, request_id: wire.RequestId) -> PromptJob:
        """In the receive loop: validate, reserve the session, bind its current token (S8, S11)."""
        method = "session/prompt"
        params = _params(params, method)
        session_id = _require(params, "sessionId", str, method)
        prompt = _require(params, "prompt", list, method)
        if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in prompt):
            raise InvalidParams(f"{method}: every prompt block must be an object with a 'type'", data={"field": "prompt"})
        session = self.sessions.get(session_id)
        if session.busy:
            raise SessionBusy(session_id)
        endpoint = self.endpoint
        outbound = endpoint.outbound
        job: PromptJob  # bound below; the turn needs the token first
        token = session.token
        turn = Turn(
            session=session,
            prompt=prompt,
            token=token,
            snapshot=self.context.snapshot,
            send=outbound.put,
            encode_update=encode_update,
            call_client=endpoint.client.call,
            wait_writable=lambda t: outbound.wait_below_high_water(t.event),
            over_high_water=lambda: outbound.over_high_water,
        )
        job = PromptJob(self, session, request_id, turn)
        session.reserve(job)
        self.prompts[session_id] = job
        return job

    def finish_turn(self, job: PromptJob, stop_reason: str) -> None:
        """Record history and exactly one usage record for the prompt (S16); never blocks."""
        if self.prompts.get(job.session.session_id) is job:
            del self.prompts[job.session.session_id]
        turn = job.turn
        session_id = job.session.session_id
        entries = [{"sessionUpdate": "user_message_chunk", "content": block} for block in turn.prompt]
        entries.extend(turn.updates)
        try:
            self.store.append_turn(session_id, entries)
        except Exception:
            log.exception("storing the history of a turn of %s failed", session_id)
        usage = turn.usage
        record = UsageRecord(
            session_id=session_id,
            request_id=repr(job.request_id),
            stop_reason=stop_reason,
            started_at=job.started,
            duration=time.monotonic() - job.started_mono,
            input_bytes=usage.input_bytes,
            output_bytes=usage.output_bytes,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        try:
            self.store.record_usage(record)
        except Exception:
            log.exception("recording usage for %s failed", session_id)

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        self.endpoint.outbound.put(encode_update(session_id, update))

    # -- extensions --------------------------------------------------------------------------
    def _stats(self, call: ExtensionCall) -> dict[str, Any]:
        outbound = self.endpoint.outbound
        return runtime_stats(self.endpoint.active, len(self.sessions), outbound.queued_bytes)

    def admit_extension(self, method: str, params: Any) -> ExtensionJob:
        handler = self._extensions.get(method)
        if handler is None:
            raise MethodNotFound(method)
        return ExtensionJob(handler, ExtensionCall(method, params, self.context.snapshot, CancelToken()))


def encode_update(session_id: str, update: dict[str, Any]) -> bytes:
    return wire.encode_notification("session/update", {"sessionId": session_id, "update": update})


__all__ = ["AcpAgentProtocol", "PromptJob", "encode_update", "one_line", "UnknownSession"]
