"""Where sessions, history and the usage ledger live; the in-memory store."""

from __future__ import annotations

import copy
from typing import Any, Protocol

from .sessions import SessionRecord
from .usage import UsageRecord


class Store(Protocol):
    """The persistence interface the runtime writes to; calls never block the hub for long."""

    def save_session(self, record: SessionRecord) -> None: ...
    def load_session(self, session_id: str) -> SessionRecord | None: ...
    def delete_session(self, session_id: str) -> None: ...
    def list_sessions(self, cwd: str | None = None) -> list[SessionRecord]: ...
    def append_turn(self, session_id: str, entries: list[bytes]) -> None: ...
    def history(self, session_id: str) -> list[bytes]: ...
    def record_usage(self, record: UsageRecord) -> None: ...
    def usage(self, session_id: str | None = None) -> list[UsageRecord]: ...
    def close(self) -> None: ...


class MemoryStore:
    """Everything in this process's memory (`--ephemeral`, and the fallback)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionRecord] = {}
        self._history: dict[str, list[bytes]] = {}  # each entry: one SessionUpdate's JSON
        self._usage: list[UsageRecord] = []

    def save_session(self, record: SessionRecord) -> None:
        self._sessions[record.session_id] = copy.deepcopy(record)

    def load_session(self, session_id: str) -> SessionRecord | None:
        record = self._sessions.get(session_id)
        return copy.deepcopy(record) if record is not None else None

    def delete_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._history.pop(session_id, None)

    def list_sessions(self, cwd: str | None = None) -> list[SessionRecord]:
        records = [r for r in self._sessions.values() if cwd is None or r.cwd == cwd]
        return sorted((copy.deepcopy(r) for r in records), key=lambda r: (-r.updated_at, r.session_id))

    def append_turn(self, session_id: str, entries: list[bytes]) -> None:
        self._history.setdefault(session_id, []).extend(entries)

    def history(self, session_id: str) -> list[bytes]:
        return list(self._history.get(session_id, ()))

    def record_usage(self, record: UsageRecord) -> None:
        self._usage.append(record)

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return [r for r in self._usage if session_id is None or r.session_id == session_id]

    def close(self) -> None:
        pass
