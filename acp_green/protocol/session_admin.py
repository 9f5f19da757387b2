"""ACP's unstable session methods: session/fork, archive, unarchive, set_title, status.

Registered only when the agent is not serving `--stable-only` (the methods then answer -32601
like any unknown one). All run in the receive loop, in receive order (S2), like the other
session methods; those that read stored sessions wait for the store thread there.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..agent import Agent, SessionView
from ..errors import UnknownSession
from ..rpc import wire
from ..rpc.endpoint import Job, Reply, control
from ..rpc.params import Params
from ..sessions import Session, SessionRegistry
from .session_methods import CloseJob, NothingToWaitFor, SessionMethods, declared_mcp_servers
from .updates import CONTROLS_AS_SPACES, TITLE_SCAN, cut_title

#: Characters a client-set title keeps at most (longer ones are cut, "…" last).
SET_TITLE_LIMIT = 256


def normalized_title(title: str) -> str:
    """A client's title as stored: control characters (newlines and tabs among them) become
    spaces, runs of whitespace one space, no whitespace at either end, at most SET_TITLE_LIMIT
    characters ("…" last when cut, on a character boundary: `updates.cut_title`). May be empty,
    which the caller refuses.

    Cut first, then cleaned: only the first TITLE_SCAN characters are read, so a title of 50
    million characters costs what a short one does (it took 13 s of the receive loop when the
    whole text was cleaned before the cut). A title longer than that is cut there ("…" last).
    """
    flat = " ".join(title[:TITLE_SCAN].translate(CONTROLS_AS_SPACES).split())
    if len(flat) > SET_TITLE_LIMIT or (flat and len(title) > TITLE_SCAN):
        return cut_title(flat, SET_TITLE_LIMIT)
    return flat


class SessionAdmin:
    """Forking, archiving, retitling and checking sessions, live or stored."""

    def __init__(self, agent: Agent, methods: SessionMethods) -> None:
        self.agent = agent
        self.methods = methods  # the session methods' access, store, MCP servers and settings
        self.sessions: SessionRegistry = methods.sessions

    @control("session/fork", unstable=True)
    def session_fork(self, params: Any, _id: wire.RequestId) -> Reply:
        """A new session holding the source's finished turns and a copy of its state; the source is
        untouched. A turn the source is running is not part of the fork (docs/SESSIONS.md)."""
        checked = Params(params, "session/fork")
        cwd = checked.absolute_path("cwd")
        servers = declared_mcp_servers(checked, required=False, limit=self.methods.max_mcp_servers)
        directories = checked.absolute_paths("additionalDirectories")
        source = self.methods.access.named_session(checked)
        fork = self.sessions.fork_of(source, cwd, directories, servers)
        self.agent.on_fork(SessionView.of(source), SessionView.of(fork), self.methods.access.context.snapshot)
        self.sessions.add_fork(source, fork)
        self.methods.session_mcp.start_declared(fork)
        result = {"sessionId": fork.session_id, **self.methods.session_state(fork)}
        return Reply(result, then=partial(self._after_fork, fork))

    def _after_fork(self, fork: Session) -> None:
        """After the fork's response, as for `session/new` (the client learns the id from it): the
        commands, and the title the fork took from its source."""
        for line in self.methods.reopened_updates(fork):
            self.methods.outbound.put(line)

    @control("session/archive", unstable=True)
    def session_archive(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Close the session if it is live (a running prompt is cancelled), then archive it; idempotent."""
        return self._set_archived(params, "session/archive", True)

    @control("session/unarchive", unstable=True)
    def session_unarchive(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Back in the default `session/list`; never loads or resumes it; idempotent."""
        return self._set_archived(params, "session/unarchive", False)

    def _set_archived(self, params: Any, method: str, archived: bool) -> dict[str, Any]:
        session_id = Params(params, method).identifier("sessionId")
        self.methods.access.require_auth()
        self.sessions.set_archived(session_id, archived)
        return {}

    @control("session/set_title", unstable=True)
    def session_set_title(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Store the normalized title (an empty one is refused, -32602) and answer it; the runtime
        never replaces a title once set (it names only untitled sessions after their first prompt)."""
        checked = Params(params, "session/set_title")
        session_id = checked.identifier("sessionId")
        title = normalized_title(checked.required("title", str))
        if not title:
            read = f" (of its first {TITLE_SCAN} characters, all that is read)" if len(params["title"]) > TITLE_SCAN else ""
            raise checked.refuse("title", f"field 'title' is empty once control characters and surrounding whitespace are removed{read}")
        self.methods.access.require_auth()
        self.sessions.set_title(session_id, title)
        return {"title": title}

    @control("session/status", unstable=True)
    def session_status(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """`open` when the session is in memory, `saved` when only stored; no side effect (it
        neither revives nor touches the session)."""
        session_id = Params(params, "session/status").identifier("sessionId")
        self.methods.access.require_auth()
        if self.sessions.live(session_id) is not None:
            return {"status": "open"}
        if self.methods.store.load_session(session_id) is not None:
            return {"status": "saved"}
        raise UnknownSession(session_id)


def admit_archive_v2(admin: SessionAdmin, params: Any, request_id: wire.RequestId) -> Job:
    """ACP v2's `session/archive`: archiving closes a live session as `session/close` does, so with
    a running turn it answers only after that turn's idle `state_update` (see CloseJob)."""
    session_id = Params(params, "session/archive").identifier("sessionId")
    live = admin.sessions.live(session_id)
    busy = live is not None and live.busy
    admin.session_archive(params, request_id)
    return CloseJob(live) if live is not None and busy else NothingToWaitFor()
