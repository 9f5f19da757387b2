"""Sessions: live handles, per-session reservations, their current cancellation token, idle eviction."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import gevent

from .cancel import CancelToken
from .errors import UnknownSession
from .store.interface import Store
from .store.session_record import SessionRecord

log = logging.getLogger(__name__)


class Session:
    """A live session handle: its record, its current token and its one prompt reservation."""

    def __init__(self, record: SessionRecord, mcp_servers: list[dict[str, Any]] | None = None) -> None:
        self.record = record
        self.mcp_servers = list(mcp_servers or [])
        self.token = CancelToken()
        self.active_prompt: object | None = None
        self.last_active = time.monotonic()
        self.state: dict[str, Any] = {}  # free for the agent's own per-session data
        self.resources: list[Callable[[], None]] = []  # closers run when the session ends
        self.closing = False  # session/close arrived while a prompt ran: drop it when that ends
        self.deleted = False  # session/delete: nothing more of it may reach the store

    @property
    def session_id(self) -> str:
        return self.record.session_id

    @property
    def busy(self) -> bool:
        return self.active_prompt is not None

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def reserve(self, owner: object) -> CancelToken:
        """Reserve the session for one prompt and bind the current token to it (S8, S11)."""
        self.active_prompt = owner
        self.touch()
        return self.token

    def release(self, owner: object) -> None:
        """Idempotent: only the owner's reservation is released (S14)."""
        if self.active_prompt is owner:
            self.active_prompt = None
            self.touch()

    def cancel(self) -> None:
        """Set the current token and install a fresh one for future turns (S12)."""
        token, self.token = self.token, CancelToken()
        token.set()

    def cancel_bound(self, token: CancelToken) -> None:
        """Cancel the job that was bound `token`; if it is still current, install a fresh one (S12)."""
        if self.token is token:
            self.cancel()
        else:
            token.set()

    def close_resources(self) -> None:
        closers, self.resources = self.resources, []
        for close in reversed(closers):
            try:
                close()
            except Exception:
                log.exception("closing a resource of session %s failed", self.session_id)


class SessionRegistry:
    """Live sessions by id; evicted ones come back from the store without replay (S15)."""

    def __init__(self, store: Store, idle_timeout: float) -> None:
        self._store = store
        self._live: dict[str, Session] = {}
        # MCP server declarations of evicted sessions (a few small dicts, never processes), so a
        # revived session gets them back; the store does not keep them (they may hold secrets).
        self._dormant_mcp: dict[str, list[dict[str, Any]]] = {}
        self.idle_timeout = idle_timeout

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._live.values()))

    def create(self, cwd: str, additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> Session:
        record = SessionRecord(session_id=f"sess_{uuid.uuid4().hex}", cwd=cwd, additional_directories=list(additional_directories))
        session = Session(record, mcp_servers)
        self._live[record.session_id] = session
        self._store.save_session(record)
        return session

    def get(self, session_id: Any) -> Session:
        """The live session, revived from the store if it was evicted; UnknownSession otherwise."""
        if not isinstance(session_id, str):
            raise UnknownSession(session_id)
        session = self._live.get(session_id)
        if session is None:
            record = self._store.load_session(session_id)
            if record is None:
                raise UnknownSession(session_id)
            session = Session(record, self._dormant_mcp.pop(session_id, None))
            self._live[session_id] = session
            log.debug("session %s revived from the store", session_id)
        session.touch()
        return session

    def reopen(self, session_id: Any, cwd: str, additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> Session:
        """session/load and session/resume: the session, now with the client's cwd and servers."""
        session = self.get(session_id)
        session.record.cwd = cwd
        session.record.additional_directories = list(additional_directories)
        session.mcp_servers = list(mcp_servers)
        self.save(session)
        return session

    def close(self, session_id: str) -> bool:
        """session/close: cancel as session/cancel would, then free; False if it was not live.

        A running prompt keeps its reservation until it answers (S8), so a closing session
        stays live until then and `prompt_ended` frees it.
        """
        self._dormant_mcp.pop(session_id, None)
        session = self._live.get(session_id)
        if session is None:
            return False
        if session.busy:
            session.cancel()
            session.closing = True
        else:
            self.drop(session_id)
        return True

    def delete(self, session_id: str) -> None:
        """session/delete: cancel a running prompt, forget the session here and in the store."""
        self._dormant_mcp.pop(session_id, None)
        session = self._live.pop(session_id, None)
        if session is not None:
            session.deleted = True
            if session.busy:
                session.cancel()  # its resources are freed when the prompt ends
            else:
                session.close_resources()
        self._store.delete_session(session_id)

    def prompt_ended(self, session: Session) -> None:
        """A prompt released `session`: finish a close or delete that waited for it."""
        if session.busy:
            return
        if session.deleted:
            _off_hub(session.close_resources)
        elif session.closing and self._live.get(session.session_id) is session:
            self._live.pop(session.session_id, None)
            _off_hub(session.close_resources)

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def live(self, session_id: str) -> Session | None:
        """The session if it is in memory now; never reads the store."""
        return self._live.get(session_id)

    def save(self, session: Session) -> None:
        session.record.updated_at = time.time()
        self._store.save_session(session.record)

    def drop(self, session_id: str) -> Session | None:
        """Forget a live session, freeing its resources; the store keeps its record."""
        session = self._live.pop(session_id, None)
        if session is not None:
            session.close_resources()
        return session

    def evict_idle(self, now: float | None = None) -> list[str]:
        """Evict sessions idle longer than the timeout; never one with an active prompt (S15)."""
        now = time.monotonic() if now is None else now
        evicted = [
            sid
            for sid, session in self._live.items()
            if not session.busy and now - session.last_active > self.idle_timeout
        ]
        for sid in evicted:
            session = self.drop(sid)
            if session is not None and session.mcp_servers:
                self._dormant_mcp[sid] = session.mcp_servers
        if evicted:
            log.debug("evicted %d idle sessions", len(evicted))
        return evicted


def _off_hub(fn: Callable[[], None]) -> None:
    """Run `fn` now, or in a new greenlet when called from the hub, where it must not block."""
    if gevent.getcurrent() is gevent.get_hub():
        gevent.spawn(fn)
    else:
        fn()

