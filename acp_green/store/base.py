"""Where sessions, history and the usage ledger live; the in-memory store.

Writes (`save_session`, `delete_session`, `append_turn`, `record_usage`) never block, never
raise and may be called from hub callbacks; a write a store cannot keep is logged at ERROR and
counted in `failed_writes`. Reads wait cooperatively and must be called from a greenlet; they
see every write this process made before them.
"""

from __future__ import annotations

import copy
import logging
import pickle
import sys
from typing import Protocol

from .session_record import SessionRecord
from ..usage import UsageRecord

log = logging.getLogger(__name__)


class Store(Protocol):
    """The persistence interface the runtime writes to; calls never block the hub."""

    failed_writes: int  # writes dropped (each logged at ERROR) since the store opened

    def save_session(self, record: SessionRecord) -> None: ...
    def load_session(self, session_id: str) -> SessionRecord | None: ...
    def delete_session(self, session_id: str) -> None: ...
    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None) -> list[SessionRecord]: ...
    def append_turn(self, session_id: str, entries: list[bytes], stop_reason: str | None = None) -> None: ...
    def history(self, session_id: str) -> list[bytes]: ...
    def record_usage(self, record: UsageRecord) -> None: ...
    def usage(self, session_id: str | None = None) -> list[UsageRecord]: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


class MemoryStore:
    """Everything in this process's memory (`--ephemeral`, and the fallback).

    A stored session is kept compact, because a long-running agent keeps every session it ever
    opened: (updated_at, cwd, the rest pickled), about 220 bytes with its key and dict slot.
    Sessions of one project share their cwd string, and sessions that keep the same settings
    (most keep the agent's defaults) share one pickled rest. Pickling also gives the copy
    semantics a store needs (a later change to the live record is not stored until it is
    saved), and it keeps every str exactly, lone surrogates included.
    """

    SHARED_RESTS = 64  # distinct pickled rests kept for sharing, the most recently used

    def __init__(self) -> None:
        self._sessions: dict[str, tuple[float, str, bytes]] = {}
        self._history: dict[str, list[bytes]] = {}  # each entry: one SessionUpdate's JSON
        self._usage: list[UsageRecord] = []
        self._usage_index: dict[str, int] = {}
        self._shared_rests: dict[bytes, bytes] = {}
        self.failed_writes = 0

    def save_session(self, record: SessionRecord) -> None:
        try:
            rest = pickle.dumps((record.additional_directories, record.title, record.mode_id, record.config), pickle.HIGHEST_PROTOCOL)
            # Sessions of one project share one cwd string.
            cwd = sys.intern(record.cwd) if type(record.cwd) is str else record.cwd
        except Exception as exc:  # whatever a record holds, a write never raises
            self.failed_writes += 1
            log.error("dropped a save_session of session %s: %s: %s", ascii(record.session_id), type(exc).__name__, exc)
            return
        self._sessions[record.session_id] = (record.updated_at, cwd, self._shared(rest))

    def _shared(self, rest: bytes) -> bytes:
        """An equal bytes object already stored, if one is among the recently used."""
        shared = self._shared_rests.pop(rest, rest)
        self._shared_rests[shared] = shared  # re-inserted: the most recently used is last
        if len(self._shared_rests) > self.SHARED_RESTS:
            del self._shared_rests[next(iter(self._shared_rests))]
        return shared

    def load_session(self, session_id: str) -> SessionRecord | None:
        stored = self._sessions.get(session_id)
        return _record(session_id, stored) if stored is not None else None

    def delete_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._history.pop(session_id, None)

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None) -> list[SessionRecord]:
        """Most recently updated first (the same order and cursor as the SQLite store)."""
        keys = [
            (stored[0], session_id)
            for session_id, stored in self._sessions.items()
            if (cwd is None or stored[1] == cwd) and (after is None or (stored[0], session_id) < tuple(after))
        ]
        keys.sort(reverse=True)
        if limit is not None:
            keys = keys[:limit]
        return [_record(session_id, self._sessions[session_id]) for _, session_id in keys]

    def append_turn(self, session_id: str, entries: list[bytes], stop_reason: str | None = None) -> None:
        self._history.setdefault(session_id, []).extend(entries)

    def history(self, session_id: str) -> list[bytes]:
        return list(self._history.get(session_id, ()))

    def record_usage(self, record: UsageRecord) -> None:
        """Append, or replace the record with the same usage_id (the "running" one)."""
        index = self._usage_index.get(record.usage_id)
        if index is not None:
            self._usage[index] = copy.copy(record)
            return
        self._usage_index[record.usage_id] = len(self._usage)
        self._usage.append(copy.copy(record))

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return [r for r in self._usage if session_id is None or r.session_id == session_id]

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


def _record(session_id: str, stored: tuple[float, str, bytes]) -> SessionRecord:
    updated_at, cwd, rest = stored
    directories, title, mode_id, config = pickle.loads(rest)
    return SessionRecord(session_id, cwd, directories, title, mode_id, config, updated_at)
