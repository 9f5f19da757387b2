"""ACP's session methods: new, load, resume, list, delete, close, set_mode, set_config_option, cancel.

All run in the receive loop, in receive order (S2), and those that read stored sessions wait
for the store thread there. `session/load` does its control part there too (check, register,
reserve the session) and hands the replay to a background job (replay.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

import gevent

from ..rpc import wire
from ..agent import Agent, SessionView
from ..rpc.endpoint import Job, Reply, background, control, notification
from ..errors import InvalidParams, RpcError, SessionBusy, TooManyMcpServers, UnknownSession
from ..rpc.params import Params
from ..sessions import Session, SessionRegistry
from ..settings import MODE_OPTION_ID, SessionSettings, client_shows_booleans
from ..rpc.transport import Outbound
from . import dialect_v2
from .access import SessionAccess
from .dialect import OutgoingDialect
from .replay import ReplayJob
from .session_mcp import SessionMcpServers, declaration_fault
from .updates import iso_time, session_info

if TYPE_CHECKING:
    from ..context import ConnectionSnapshot
    from ..store.base import Store

log = logging.getLogger(__name__)

#: The `type`s of a v2 `session/set_config_option` value this agent supports (left out: a value id).
V2_VALUE_TYPES = frozenset({None, "id", "boolean"})

LIST_PAGE_SIZE = 50
# How long session/close waits for the session to be let go in the store (a commit: well under a
# millisecond; a slow disk or server still answers within this).
CLOSE_COMMIT_WAIT = 1.0
#: Encoded bytes of sessions one `session/list` page holds at most (at least one session is
#: always listed, so the cursor moves on); the cursor continues with the rest.
LIST_PAGE_BYTES = 1 << 20
#: session/list's `archived` filter (unstable ACP): which archive state each value keeps (None: both).
ARCHIVE_FILTERS: dict[str | None, bool | None] = {None: False, "exclude": False, "include": None, "only": True}


def declared_mcp_servers(params: Params, *, required: bool, limit: int) -> list[dict[str, Any]]:
    """The declared MCP servers; refused above `limit`, or for an entry not of ACP's shape (the
    field at fault named, `mcpServers[0].headers`), before anything is created or started."""
    if required:
        servers = params.required("mcpServers", list)
    else:
        servers = params.optional("mcpServers", list, [])
    if len(servers) > limit:
        raise TooManyMcpServers(params.method, len(servers), limit)
    if not all(isinstance(s, dict) for s in servers):
        raise params.refuse("mcpServers", "every entry of 'mcpServers' must be an object")
    for index, server in enumerate(servers):
        fault = declaration_fault(server)
        if fault is not None:
            where, problem = fault
            field = f"mcpServers[{index}]{where}"
            raise params.refuse(field, f"field '{field}' {problem}")
    return list(servers)


class SessionMethods:
    """Sessions over one connection: opening, reopening, listing, forgetting and tuning them."""

    def __init__(self, agent: Agent, access: SessionAccess, sessions: SessionRegistry, store: Store,
                 session_mcp: SessionMcpServers, outbound: Outbound, settings: SessionSettings,
                 max_mcp_servers: int = 64, stable_only: bool = False, dialect: OutgoingDialect | None = None) -> None:
        self.agent = agent
        self.dialect = dialect if dialect is not None else OutgoingDialect()  # the connection's: what it sends
        self.stable_only = stable_only  # no archive state: every session listed, no `archived` reported
        self.settings = settings
        self.access = access
        self.sessions = sessions
        self.store = store
        self.session_mcp = session_mcp
        self.outbound = outbound
        self.max_mcp_servers = max_mcp_servers
        self.list_page_size = LIST_PAGE_SIZE
        self.list_page_bytes = LIST_PAGE_BYTES

    @control("session/new")
    def session_new(self, params: Any, _id: wire.RequestId) -> Reply:
        checked = Params(params, "session/new")
        cwd = checked.absolute_path("cwd")
        servers = declared_mcp_servers(checked, required=True, limit=self.max_mcp_servers)
        directories = checked.absolute_paths("additionalDirectories")
        self.access.require_auth()
        session = self.sessions.create(cwd, directories, servers)
        self.settings.apply_defaults(session)
        try:
            self.agent.session_started(SessionView.of(session), self.access.context.snapshot)
        except BaseException:  # ok: re-raised; a session the client never learned of must not linger
            self.sessions.delete(session.session_id)
            raise
        self.sessions.save(session)
        self.session_mcp.start_declared(session)
        result = {"sessionId": session.session_id, **self.session_state(session)}
        return Reply(result, then=partial(self.after_session_opened, session))

    def session_state(self, session: Session) -> dict[str, Any]:
        """The modes and config options a session's new, load or resume answer carries."""
        return self.settings.state(session, self.access.context.snapshot)

    def after_session_opened(self, session: Session) -> None:
        """Queued right after the `session/new` response: a client drops updates for a session id
        it has not been given, so nothing for a session precedes that response (S5)."""
        for line in self.opened_updates(session):
            self.outbound.put(line)

    def opened_updates(self, session: Session) -> list[bytes]:
        """The session-level updates a new session gets: the agent's commands, when it has any."""
        if not self.agent.commands:
            return []
        line = self.dialect.shapes.line(session.session_id, {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [c.to_wire() for c in self.agent.commands],
        })
        return [] if line is None else [line]

    def reopened_updates(self, session: Session) -> list[bytes]:
        """What a load or resume sends before its response: the commands, and the title the client may lack.

        Before, not after: the client named the session, so it routes them, and the response
        ends the request's stream as a prompt's does (S5) — a conformance check counts anything
        after the load response as a late update. (`session/new` differs: see after_session_opened.)
        For a load they follow the replay; a resume has no replay, and these are no history, so
        ACP's "MUST NOT replay before responding" is not touched."""
        lines = self.opened_updates(session)
        if session.record.title is not None:
            line = self.dialect.shapes.line(session.session_id, session_info(session))
            if line is not None:
                lines.append(line)
        return lines

    # -- stored sessions (they wait for the store thread) -----------------------------------------
    def _reopen(self, params: Any, method: str, mcp_required: bool) -> Session:
        checked = Params(params, method)
        session_id = checked.identifier("sessionId")
        cwd = checked.absolute_path("cwd")
        servers = declared_mcp_servers(checked, required=mcp_required, limit=self.max_mcp_servers)
        directories = checked.absolute_paths("additionalDirectories")
        self.access.require_auth()
        live = self.sessions.live(session_id)
        if live is not None and live.busy:
            # Replaying or re-pointing a session under a running turn would interleave two
            # views of its history: finish (or cancel) the prompt first. (docs/SESSIONS.md)
            raise SessionBusy(session_id)
        session = self.sessions.reopen(session_id, cwd, directories, servers)
        self.session_mcp.redeclared(session)
        return session

    @background("session/load", versions=dialect_v2.V1_ONLY)
    def session_load(self, params: Any, _id: wire.RequestId) -> ReplayJob:
        """In the receive loop: check, register and reserve the session (S2); the job replays the
        stored conversation as session/update, then answers."""
        session = self._reopen(params, "session/load", mcp_required=True)
        job = ReplayJob(self.store, self.sessions, session, self.outbound,
                        closing=partial(self.reopened_updates, session), answer=partial(self.session_state, session),
                        shapes=self.dialect.shapes,
                        accepts=self.access.context.snapshot.accepts_update,
                        shows_booleans=client_shows_booleans(self.access.context.snapshot))
        session.reserve(job)  # nothing after the reopen can fail: the reservation is always released (S14)
        return job

    @control("session/resume")
    def session_resume(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Reattach without replaying anything; the session-level updates precede the response."""
        session = self._reopen(params, "session/resume", mcp_required=False)
        for line in self.reopened_updates(session):
            self.outbound.put(line)
        return self.session_state(session)

    @control("session/list")
    def session_list(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        checked = Params(params, "session/list")
        cwd = checked.optional_absolute_path("cwd")
        cursor = checked.optional("cursor", str)
        archived = None if self.stable_only else self._archive_filter(checked)
        self.access.require_auth()
        after = decode_cursor(cursor) if cursor is not None else None
        page = self.store.list_sessions(cwd, after, self.list_page_size + 1, archived)
        infos: list[dict[str, Any]] = []
        budget = self.list_page_bytes
        for record in page[: self.list_page_size]:
            info = session_info_wire(record, with_archived=not self.stable_only)
            budget -= len(wire.encode_json(info)) + 1
            if budget < 0 and infos:
                break  # over the byte budget: this one starts the next page
            infos.append(info)
        result: dict[str, Any] = {"sessions": infos}
        if len(page) > len(infos):
            last = page[len(infos) - 1]
            result["nextCursor"] = encode_cursor(last.updated_at, last.session_id)
        return result

    @staticmethod
    def _archive_filter(checked: Params) -> bool | None:
        """The archive state session/list keeps (None: both); -32602 for a filter it does not support."""
        value = checked.optional("archived", str)
        if value not in ARCHIVE_FILTERS:
            raise checked.refuse("archived", f"unsupported archive filter {wire.excerpt(value)!r}: 'exclude', 'include' or 'only'")
        return ARCHIVE_FILTERS[value]

    @control("session/delete")
    def session_delete(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Forget a session (unknown ids succeed silently); a running prompt is cancelled."""
        session_id = Params(params, "session/delete").identifier("sessionId")
        self.access.require_auth()
        self.sessions.delete(session_id)
        return {}

    @control("session/close")
    def session_close(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Cancel as session/cancel would, then free the session's resources; it stays stored."""
        session_id = Params(params, "session/close").identifier("sessionId")
        self.access.require_auth()
        if not self.sessions.close(session_id):
            if self.store.load_session(session_id) is None:
                raise UnknownSession(session_id)
            return {}
        # Answered once the session is let go in the store (its last writes committed), so another
        # agent on the store may load it as soon as the client has this answer.
        with gevent.Timeout(CLOSE_COMMIT_WAIT, False):
            self.store.wait_committed()
        return {}

    @control("session/set_mode", versions=dialect_v2.V1_ONLY)
    def session_set_mode(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """The agent's `mode_changed` hook sees the change first and may refuse it by raising."""
        checked = Params(params, "session/set_mode")
        session = self.access.named_session(checked)
        self._change_mode(checked, "modeId", session, checked.identifier("modeId"), self.access.context.snapshot)
        return {}

    def _change_mode(self, checked: Params, field: str, session: Session, mode_id: str, snapshot: ConnectionSnapshot) -> None:
        """v1's set_mode and v2's `mode` option alike: one of the agent's modes, its hook first, then stored."""
        if not self.settings.knows_mode(mode_id):
            raise checked.refuse(field, f"unknown {'modeId' if field == 'modeId' else 'mode'} {wire.excerpt(mode_id)!r}")
        self.agent.mode_changed(SessionView.of(session), mode_id, snapshot)
        self.settings.set_mode(session, mode_id)

    @control("session/set_config_option")
    def session_set_config_option(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """A select takes a value id; a boolean takes `type: "boolean"` with a bool, or the
        "true"/"false" of its select form. The agent's `config_changed` hook may refuse it."""
        checked = Params(params, "session/set_config_option")
        session = self.access.named_session(checked)
        config_id = checked.identifier("configId")
        snapshot = self.access.context.snapshot
        value_type = checked.optional("type", str)
        if not snapshot.v1 and value_type not in V2_VALUE_TYPES:
            # v1 reads an unknown type as a value id; v2 requires refusing a type the agent does not support
            raise checked.refuse("type", f"unsupported value type {wire.excerpt(value_type)!r}: 'id' or 'boolean'")
        if config_id == MODE_OPTION_ID and self.settings.modes_as_option(snapshot):
            return self._set_mode_option(checked, value_type, session, snapshot)
        option = self.settings.option(config_id)
        if option is None:
            raise checked.refuse("configId", f"unknown configId {wire.excerpt(config_id)!r}")
        value = checked.present("value")
        if value_type == "boolean" and not isinstance(value, bool):
            raise checked.refuse("value", f"a 'boolean' value must be true or false, not {wire.describe(value)}")
        try:
            value = option.coerce(value)
        except ValueError as exc:
            raise checked.refuse("value", str(exc)) from None
        self.agent.config_changed(SessionView.of(session), config_id, value, snapshot)
        self.settings.set_config(session, config_id, value)
        return {"configOptions": self.settings.config_options(session, snapshot)}

    def _set_mode_option(self, checked: Params, value_type: str | None, session: Session, snapshot: ConnectionSnapshot) -> dict[str, Any]:
        """A v2 client sets the `mode` option: the session/set_mode of v1."""
        mode_id = checked.present("value")
        if not isinstance(mode_id, str) or value_type == "boolean":
            raise checked.refuse("value", f"a mode is one of the option's values, not {wire.describe(mode_id)}")
        self._change_mode(checked, "value", session, mode_id, snapshot)
        return {"configOptions": self.settings.config_options(session, snapshot)}

    @notification("session/cancel")
    def on_session_cancel(self, params: Any) -> None:
        """Cancel the session's running prompt and install a fresh token (S11, S12)."""
        session_id = Params(params, "session/cancel").identifier("sessionId")
        if not self.sessions.is_live(session_id):
            log.debug("session/cancel for a session that is not live: %s", session_id)
            return
        self.sessions.get(session_id).cancel()


def replay_from(params: Params) -> bool:
    """ACP v2's `replayFrom`: True to replay everything (`{"type": "start"}`), False when absent
    or null; -32602 for any cursor this agent does not support (the schema forbids substituting one)."""
    cursor = params.optional("replayFrom", dict)
    if cursor is None:
        return False
    if cursor.get("type") != "start":
        raise params.refuse("replayFrom", f"unsupported replay cursor {wire.describe(cursor.get('type'))}: only {{\"type\": \"start\"}}")
    return True


def admit_resume_v2(methods: SessionMethods, params: Any, _id: wire.RequestId) -> ReplayJob:
    """ACP v2's `session/resume`, admitted like `session/load` (checked, registered, reserved in the
    receive loop): the job replays the stored conversation when `replayFrom` asks for it, then
    the session-level updates and the current `state_update` (idle: a busy session is refused),
    then answers (the schema: the state comes after any replay and before the response)."""
    replay = replay_from(Params(params, "session/resume"))
    session = methods._reopen(params, "session/resume", mcp_required=False)

    def closing() -> list[bytes]:
        return [*methods.reopened_updates(session), dialect_v2.encode(session.session_id, dialect_v2.state_update("idle"))]

    job = ReplayJob(methods.store, methods.sessions, session, methods.outbound, closing=closing,
                    answer=partial(methods.session_state, session), accepts=methods.access.context.snapshot.accepts_update,
                    shapes=methods.dialect.shapes,
                    replay=replay, shows_booleans=client_shows_booleans(methods.access.context.snapshot))
    session.reserve(job)  # nothing after the reopen can fail: the reservation is always released (S14)
    return job


class CloseJob(Job):
    """ACP v2's `session/close` of a session with a running turn: the turn is cancelled (as
    session/cancel would), and the close answers once the turn has ended, so its final updates
    and its idle `state_update` come before the close response (the schema requires it)."""

    POLL = 0.01  # seconds between looks at the session: a turn ends within a few of them once cancelled

    def __init__(self, session: Session) -> None:
        self.session = session
        self.stopping = False

    def run(self) -> Any:
        while self.session.busy and not self.stopping:
            gevent.sleep(self.POLL)
        return {}

    def shutdown(self) -> None:
        self.stopping = True


class NothingToWaitFor(Job):
    """A close with no running turn: answered as v1's (the session is freed at admission)."""

    def run(self) -> Any:
        return {}


def admit_close_v2(methods: SessionMethods, params: Any, request_id: wire.RequestId) -> Job:
    """ACP v2's `session/close`: v1's (cancel, then free; -32002 for a session never known), and
    with a running turn, answered only after that turn reported its end (see CloseJob)."""
    session_id = Params(params, "session/close").identifier("sessionId")
    live = methods.sessions.live(session_id)
    methods.session_close(params, request_id)
    return CloseJob(live) if live is not None and live.busy else NothingToWaitFor()


def session_info_wire(record: Any, *, with_archived: bool = False) -> dict[str, Any]:
    """A stored session as ACP's SessionInfo; `archived` on every one when the archive capability is advertised."""
    info: dict[str, Any] = {"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": iso_time(record.updated_at)}
    if record.additional_directories:
        info["additionalDirectories"] = list(record.additional_directories)
    if record.title is not None:
        info["title"] = record.title
    if with_archived:
        info["archived"] = record.archived
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
