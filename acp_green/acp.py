"""ACP v1 as an agent: the method table and what each method does.

The handlers here speak ACP on top of the generic endpoint; agent behaviour comes only
from the `Agent` they are given.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import time
import uuid
from datetime import datetime, timezone
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
    RpcError,
    SessionBusy,
    TooManyMcpServers,
    UnknownSession,
    one_line,
)
from .sessions import CancelToken, Session, SessionRegistry
from .mcp.registry import McpRegistry, provided_servers
from .mcp.session import SessionMcp
from .stats import STATS_METHOD, runtime_stats
from .store import Store
from .usage import RUNNING, UsageRecord

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


def _require_id(params: dict[str, Any], name: str, method: str) -> str:
    """An id field: a string that UTF-8 can carry. A lone surrogate (from a \\udXXX escape) is
    refused here only: ids are keys the store must bind, while paths, titles and prompt text
    keep theirs (a non-UTF-8 path byte arrives as one)."""
    value = _require(params, name, str, method)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParams(f"{method}: field {name!r} holds a lone surrogate, which no id may", data={"field": name}) from None
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


def _mcp_servers(params: dict[str, Any], method: str, required: bool, limit: int) -> list[dict[str, Any]]:
    """The declared MCP servers; refused above `limit` before anything is created or started."""
    if required:
        servers = _require(params, "mcpServers", list, method)
    else:
        servers = _optional(params, "mcpServers", list, method, [])
    if len(servers) > limit:
        raise TooManyMcpServers(method, len(servers), limit)
    if not all(isinstance(s, dict) for s in servers):
        raise InvalidParams(f"{method}: every entry of 'mcpServers' must be an object", data={"field": "mcpServers"})
    return list(servers)


def _prompt_blocks(params: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The prompt's content blocks, with the fields the runtime reads checked (DESIGN §6)."""
    prompt = _require(params, "prompt", list, method)
    for index, block in enumerate(prompt):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidParams(f"{method}: prompt[{index}] must be an object with a 'type'", data={"field": "prompt"})
        required = {"text": "text", "resource_link": "uri"}.get(block["type"])
        if required is not None and not isinstance(block.get(required), str):
            raise InvalidParams(f"{method}: prompt[{index}].{required} must be a string", data={"field": "prompt"})
    return prompt


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
        self.usage_id = uuid.uuid4().hex

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
        try:
            if usage.context_size is not None and not turn.closed:
                used = usage.context_used if usage.context_used is not None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
                turn.send_final({"sessionUpdate": "usage_update", "used": used, "size": usage.context_size})
        except Exception:  # counters the agent set that JSON cannot carry: the record still counts (S16)
            log.exception("the final usage_update of a turn of %s could not be sent", self.session.session_id)
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
        provided_commands: tuple[tuple[str, tuple[str, ...]], ...] = (),
        max_mcp_servers: int = 64,
    ) -> None:
        self.agent = agent
        self.max_mcp_servers = max_mcp_servers
        self.context = context
        self.sessions = sessions
        self.store = store
        self.mcp = McpRegistry(
            provided_servers(agent.provided_mcp_servers(), provided_commands),
            call_client=lambda *a, **k: self.endpoint.client.call(*a, **k),
            notify_client=lambda method, params: self.endpoint.client.notify(method, params),
        )
        self.session_mcp: dict[str, SessionMcp] = {}
        self.endpoint = endpoint_factory(
            routes=self.routes(),
            fallback=self._extension_route,
            notifications={"session/cancel": self.on_session_cancel, "mcp/message": self.mcp.on_message_notification},
        )
        # The runtime's own counters first, so the rig can sample any acp_green agent; an agent may override.
        self._extensions = {STATS_METHOD: self._stats, **agent.extension_methods()}
        self.prompts: dict[str, PromptJob] = {}
        self.list_page_size = LIST_PAGE_SIZE

    # -- the method table --------------------------------------------------------------------
    def routes(self) -> dict[str, Route]:
        control, background = Kind.CONTROL, Kind.BACKGROUND
        return {
            "initialize": Route(control, self.initialize),
            "authenticate": Route(control, self.authenticate),
            "session/new": Route(control, self.session_new),
            "session/load": Route(control, self.session_load),
            "session/resume": Route(control, self.session_resume),
            "session/list": Route(control, self.session_list),
            "session/delete": Route(control, self.session_delete),
            "session/close": Route(control, self.session_close),
            "session/set_mode": Route(control, self.session_set_mode),
            "session/set_config_option": Route(control, self.session_set_config_option),
            "session/prompt": Route(background, self.admit_prompt),
            # S7: MCP-over-ACP, all background (a bridge may start a process); they share the slots (S9).
            "mcp/connect": Route(background, self.mcp.admit_connect),
            "mcp/message": Route(background, self.mcp.admit_message),
            "mcp/disconnect": Route(background, self.mcp.admit_disconnect),
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
            "_meta": {"acpGreen": {"runtimeVersion": __version__, "providedMcpServers": self.mcp.announce()}},
        }

    def agent_capabilities(self) -> dict[str, Any]:
        return {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            "mcpCapabilities": {"http": False, "sse": False, "acp": True},
            "sessionCapabilities": {
                "additionalDirectories": {},
                "list": {},
                "delete": {},
                "resume": {},
                "close": {},
            },
        }

    def authenticate(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        params = _params(params, "authenticate")
        method_id = _require(params, "methodId", str, "authenticate")
        if not any(m.id == method_id for m in self.agent.auth_methods):
            raise InvalidParams(f"authenticate: unknown methodId {wire.excerpt(method_id)!r}", data={"field": "methodId"})
        self.agent.authenticate(method_id, self.context.snapshot)
        self.context.authenticated(method_id)
        return {}

    def _named_session(self, params: dict[str, Any], method: str) -> Session:
        """The session a request names, after the auth check (a stored session is no way around it)."""
        session_id = _require_id(params, "sessionId", method)
        self._require_auth()
        return self.sessions.get(session_id)

    def _require_auth(self) -> None:
        if self.agent.auth_methods and not self.context.snapshot.authenticated:
            raise AuthRequired("Authentication required: call authenticate with one of the advertised authMethods")

    def session_new(self, params: Any, _id: wire.RequestId) -> Reply:
        method = "session/new"
        params = _params(params, method)
        cwd = _absolute_path(params, "cwd", method)
        servers = _mcp_servers(params, method, required=True, limit=self.max_mcp_servers)
        directories = _string_list(params, "additionalDirectories", method)
        self._require_auth()
        session = self.sessions.create(cwd, directories, servers)
        record = session.record
        if self.agent.modes:
            record.mode_id = self.agent.modes[0].id
        for option in self.agent.config_options:
            record.config[option.id] = option.default
        try:
            self.agent.session_started(SessionView.of(session), self.context.snapshot)
        except BaseException:  # ok: re-raised; a session the client never learned of must not linger
            self.sessions.delete(session.session_id)
            raise
        self.sessions.save(session)
        self.start_declared_mcp(session)
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

    def after_session_reopened(self, session: Session) -> None:
        """After a load or resume response: the commands, and the title the client may lack."""
        self.after_session_opened(session)
        if session.record.title is not None:
            self.send_update(session.session_id, session_info(session))

    # -- stored sessions (all control: receive order, S2; they wait for the store thread) -----
    def _reopen(self, params: Any, method: str, mcp_required: bool) -> Session:
        params = _params(params, method)
        session_id = _require_id(params, "sessionId", method)
        cwd = _absolute_path(params, "cwd", method)
        servers = _mcp_servers(params, method, required=mcp_required, limit=self.max_mcp_servers)
        directories = _string_list(params, "additionalDirectories", method)
        self._require_auth()
        live = self.sessions.live(session_id)
        if live is not None and live.busy:
            # Replaying or re-pointing a session under a running turn would interleave two
            # views of its history: finish (or cancel) the prompt first. (docs/SESSIONS.md)
            raise SessionBusy(session_id)
        session = self.sessions.reopen(session_id, cwd, directories, servers)
        # The client declares the session's MCP servers anew: stop what the old declaration
        # started (in the background) and start the new stdio servers, as session/new does.
        previous = self.session_mcp.pop(session_id, None)
        if previous is not None:
            self.mcp.close_in_background(previous.close)
        self.start_declared_mcp(session)
        return session

    def session_load(self, params: Any, _id: wire.RequestId) -> Reply:
        """Replay the whole stored conversation as session/update, then answer."""
        session = self._reopen(params, "session/load", mcp_required=True)
        session_id = session.session_id
        encoder = SessionUpdateEncoder(session_id)
        put = self.endpoint.outbound.put
        for entry in self.store.history(session_id):
            put(encoder.wrap(entry))
        return Reply(self.session_state(session), then=lambda: self.after_session_reopened(session))

    def session_resume(self, params: Any, _id: wire.RequestId) -> Reply:
        """Reattach without replaying anything."""
        session = self._reopen(params, "session/resume", mcp_required=False)
        return Reply(self.session_state(session), then=lambda: self.after_session_reopened(session))

    def session_list(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        method = "session/list"
        params = _params(params, method)
        cwd = _optional(params, "cwd", str, method)
        if cwd is not None and not os.path.isabs(cwd):
            raise InvalidParams(f"{method}: field 'cwd' must be an absolute path", data={"field": "cwd"})
        cursor = _optional(params, "cursor", str, method)
        self._require_auth()
        after = decode_cursor(cursor) if cursor is not None else None
        page = self.store.list_sessions(cwd, after, self.list_page_size + 1)
        result: dict[str, Any] = {"sessions": [session_info_wire(r) for r in page[: self.list_page_size]]}
        if len(page) > self.list_page_size:
            last = page[self.list_page_size - 1]
            result["nextCursor"] = encode_cursor(last.updated_at, last.session_id)
        return result

    def session_delete(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Forget a session (unknown ids succeed silently); a running prompt is cancelled."""
        method = "session/delete"
        params = _params(params, method)
        session_id = _require_id(params, "sessionId", method)
        self._require_auth()
        self.sessions.delete(session_id)
        return {}

    def session_close(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Cancel as session/cancel would, then free the session's resources; it stays stored."""
        method = "session/close"
        params = _params(params, method)
        session_id = _require_id(params, "sessionId", method)
        self._require_auth()
        if not self.sessions.close(session_id) and self.store.load_session(session_id) is None:
            raise UnknownSession(session_id)
        return {}

    def session_set_mode(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        method = "session/set_mode"
        params = _params(params, method)
        session = self._named_session(params, method)
        mode_id = _require_id(params, "modeId", method)
        if not any(m.id == mode_id for m in self.agent.modes):
            raise InvalidParams(f"{method}: unknown modeId {wire.excerpt(mode_id)!r}", data={"field": "modeId"})
        session.record.mode_id = mode_id
        self.sessions.save(session)
        return {}

    def session_set_config_option(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        method = "session/set_config_option"
        params = _params(params, method)
        session = self._named_session(params, method)
        config_id = _require_id(params, "configId", method)
        option = next((o for o in self.agent.config_options if o.id == config_id), None)
        if option is None:
            raise InvalidParams(f"{method}: unknown configId {wire.excerpt(config_id)!r}", data={"field": "configId"})
        if "value" not in params:
            raise InvalidParams(f"{method}: missing required field 'value'", data={"field": "value"})
        value = params["value"]
        if not option.accepts(value):
            raise InvalidParams(f"{method}: {wire.describe(value)} is not a value of {wire.excerpt(config_id)!r}", data={"field": "value"})
        session.record.config[config_id] = value
        self.sessions.save(session)
        return {"configOptions": self.config_options(session)}

    # -- notifications -----------------------------------------------------------------------
    def on_session_cancel(self, params: Any) -> None:
        params = _params(params, "session/cancel")
        session_id = _require_id(params, "sessionId", "session/cancel")
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
        session_id = _require_id(params, "sessionId", method)
        prompt = _prompt_blocks(params, method)
        session = self._named_session(params, method)
        if session.busy:
            raise SessionBusy(session_id)
        endpoint = self.endpoint
        outbound = endpoint.outbound
        token = session.token
        self.start_declared_mcp(session)  # after an eviction, the servers start again
        turn = Turn(
            session=session,
            prompt=prompt,
            token=token,
            snapshot=self.context.snapshot,
            channel=outbound,
            encoder=SessionUpdateEncoder(session_id),
            call_client=endpoint.client.call,
            mcp=lambda name, token: self.session_mcp_for(session).get(name, token),
        )
        job = PromptJob(self, session, request_id, turn)
        title = title_from_prompt(turn.text) if session.record.title is None else None
        # Nothing below can fail: a reservation is only taken once admission is certain (S14).
        session.reserve(job)
        self.prompts[session_id] = job
        # Admitted: the ledger knows of it now; settle replaces this record (S16). Only a
        # process that dies without settling leaves it "running" (shown as interrupted).
        self.store.record_usage(self.usage_record(job, RUNNING))
        if title:
            session.record.title = title
            self.sessions.save(session)
            # Before the prompt's own updates and its response (S5).
            self.send_update(session_id, session_info(session))
        return job

    def finish_turn(self, job: PromptJob, stop_reason: str) -> None:
        """Record history and exactly one usage record for the prompt (S16); never blocks.

        Nothing that goes wrong with the history (a value JSON cannot carry, a store failure)
        may skip the usage record or leave the session marked as prompting.
        """
        session = job.session
        session_id = session.session_id
        try:
            if self.prompts.get(session_id) is job:
                del self.prompts[session_id]
            if not session.deleted:
                # One write for the whole turn: one row, one transaction, however many chunks.
                self.store.append_turn(session_id, self._history_entries(job.turn), stop_reason)
                self.sessions.save(session)  # its updated time, for session/list
        except Exception:
            log.exception("storing the history of a turn of %s failed", session_id)
        try:
            self.store.record_usage(self.usage_record(job, stop_reason))
        except Exception:
            log.exception("recording usage for %s failed", session_id)
        finally:
            self.sessions.prompt_ended(session)

    @staticmethod
    def _history_entries(turn: Turn) -> list[bytes]:
        """The turn as stored history: each prompt block, then every update sent (already JSON).

        A block the agent changed into something JSON cannot carry is left out (and logged):
        the rest of the turn is still worth keeping.
        """
        entries = []
        blocks = turn.prompt if isinstance(turn.prompt, list) else []
        if blocks is not turn.prompt:
            log.error("the prompt of a turn of %s is no longer a list of blocks; stored without it", turn.session_id)
        for index, block in enumerate(blocks):
            try:
                entries.append(wire.encode_json({"sessionUpdate": "user_message_chunk", "content": block}))
            except Exception as exc:
                log.error("prompt block %d of a turn of %s cannot be stored: %s", index, turn.session_id, one_line(str(exc)))
        entries.extend(turn.history())
        return entries

    def usage_record(self, job: PromptJob, stop_reason: str) -> UsageRecord:
        usage = job.turn.usage
        return UsageRecord(
            session_id=job.session.session_id,
            request_id=repr(job.request_id),
            stop_reason=stop_reason,
            started_at=job.started,
            duration=time.monotonic() - job.started_mono,
            input_bytes=usage.input_bytes,
            output_bytes=usage.output_bytes,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usage_id=job.usage_id,
        )

    # -- MCP -----------------------------------------------------------------------------------
    def start_declared_mcp(self, session: Session) -> None:
        """Start the servers `session` declares, in the background. A session that declares
        none gets its SessionMcp on first use: the many that never use MCP cost no closer."""
        if session.mcp_servers:
            self.session_mcp_for(session)

    def session_mcp_for(self, session: Session) -> SessionMcp:
        """The session's MCP servers, started on first use (session/new, load, resume, or the
        first prompt after an eviction); stopped through the session's closers when it ends."""
        found = self.session_mcp.get(session.session_id)
        if found is None:
            session_id = session.session_id
            found = SessionMcp(
                session_id, session.record.cwd, session.mcp_servers, self.mcp.by_name,
                call_client=self.endpoint.client.call, notify_client=self.endpoint.client.notify,
                on_outbound=self._outbound_changed,
            )
            self.session_mcp[session_id] = found

            def close(found: SessionMcp = found) -> None:
                if self.session_mcp.get(session_id) is found:
                    del self.session_mcp[session_id]
                # Reaping its processes can take a second: never in the receive loop (S10).
                self.mcp.close_in_background(found.close)

            session.resources.append(close)
            found.start()
        return found

    def _outbound_changed(self, connection_id: str, name: str | None) -> None:
        if name is None:
            self.mcp.remove_outbound(connection_id)
        else:
            self.mcp.add_outbound(connection_id, name)

    def close_mcp(self) -> None:
        """The connection is ending: close every inbound bridge and reap its process (S13)."""
        self.mcp.close_all()

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        self.endpoint.outbound.put(encode_update(session_id, update))

    # -- extensions --------------------------------------------------------------------------
    def _stats(self, call: ExtensionCall) -> dict[str, Any]:
        outbound = self.endpoint.outbound
        return runtime_stats(self.endpoint.active, len(self.sessions), outbound.queued_bytes, self.store.failed_writes)

    def admit_extension(self, method: str, params: Any) -> ExtensionJob:
        handler = self._extensions.get(method)
        if handler is None:
            raise MethodNotFound(method)
        return ExtensionJob(handler, ExtensionCall(method, params, self.context.snapshot, CancelToken()))


def encode_update(session_id: str, update: dict[str, Any]) -> bytes:
    return wire.encode_notification("session/update", {"sessionId": session_id, "update": update})


class SessionUpdateEncoder:
    """Encodes one session's updates; the envelope and sessionId are encoded once.

    `text_chunk` is the streaming hot path: only the text is encoded per chunk, and the bytes
    equal `update()` of the same chunk (tests/test_wire.py checks it).
    """

    __slots__ = ("update", "_chunk_heads", "_head_length", "_head")

    def __init__(self, session_id: str) -> None:
        self.update = wire.notification_encoder("session/update", {"sessionId": session_id}, "update")
        self._chunk_heads: dict[str, bytes] = {}
        self._head_length = len(self.update(None)) - len(b"null}}\n")
        self._head = self.update(None)[: self._head_length]

    def update_json(self, line: bytes) -> bytes:
        """The update's own JSON inside one of this encoder's lines."""
        return line[self._head_length : -3]

    def wrap(self, update_json: bytes) -> bytes:
        """The line for an update already encoded as JSON (a stored history entry)."""
        return self._head + update_json + b"}}\n"

    def text_chunk(self, kind: str, text: str) -> bytes:
        head = self._chunk_heads.get(kind)
        if head is None:
            sample = self.update({"sessionUpdate": kind, "content": {"type": "text", "text": ""}})
            head = self._chunk_heads[kind] = sample[: -len(b'""}}}}\n')]
        return head + wire.json_text(text) + b"}}}}\n"


LIST_PAGE_SIZE = 50
TITLE_LIMIT = 80


def title_from_prompt(text: str) -> str | None:
    """The first non-blank line of the first prompt, cut to TITLE_LIMIT characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1] + "…"
    return None


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_info(session: Session) -> dict[str, Any]:
    record = session.record
    return {"sessionUpdate": "session_info_update", "title": record.title, "updatedAt": iso_time(record.updated_at)}


def session_info_wire(record: Any) -> dict[str, Any]:
    """A stored session as ACP's SessionInfo."""
    info: dict[str, Any] = {"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": iso_time(record.updated_at)}
    if record.additional_directories:
        info["additionalDirectories"] = list(record.additional_directories)
    if record.title is not None:
        info["title"] = record.title
    return info


def encode_cursor(updated_at: float, session_id: str) -> str:
    """Opaque keyset cursor: the position after the last session of a page."""
    raw = json.dumps([updated_at, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The position a cursor from `encode_cursor` names; -32602 for anything else a client sends."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        # Strict and bounded: a forged cursor may hold deep nesting or a huge number.
        position = wire.decode_value(raw)
        if not isinstance(position, list) or len(position) != 2:
            raise ValueError("not a cursor")
        updated_at, session_id = position
        if isinstance(updated_at, bool) or not isinstance(updated_at, (int, float)) or not isinstance(session_id, str):
            raise ValueError("bad cursor fields")
        updated_at = float(updated_at)  # decode_value admits no non-finite float; a long int may overflow
    except (ValueError, TypeError, OverflowError, binascii.Error, RpcError):
        raise InvalidParams("session/list: field 'cursor' is not a cursor this agent returned", data={"field": "cursor"}) from None
    return updated_at, session_id


__all__ = ["AcpAgentProtocol", "PromptJob", "encode_update", "one_line", "UnknownSession"]
