"""Where sessions, history and the usage ledger live; the in-memory store.

Writes (`save_session`, `delete_session`, `append_turn`, `record_usage`) never block and may be
called from hub callbacks. Reads wait cooperatively and must be called from a greenlet; they
see every write this process made before them.
"""

from __future__ import annotations

import copy
from typing import Protocol

from ..sessions import SessionRecord
from ..usage import UsageRecord


class Store(Protocol):
    """The persistence interface the runtime writes to; calls never block the hub."""

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


def _newest_first(record: SessionRecord) -> tuple[float, str]:
    return (record.updated_at, record.session_id)


class MemoryStore:
    """Everything in this process's memory (`--ephemeral`, and the fallback)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionRecord] = {}
        self._history: dict[str, list[bytes]] = {}  # each entry: one SessionUpdate's JSON
        self._usage: list[UsageRecord] = []
        self._usage_index: dict[str, int] = {}

    def save_session(self, record: SessionRecord) -> None:
        self._sessions[record.session_id] = copy.deepcopy(record)

    def load_session(self, session_id: str) -> SessionRecord | None:
        record = self._sessions.get(session_id)
        return copy.deepcopy(record) if record is not None else None

    def delete_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._history.pop(session_id, None)

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None) -> list[SessionRecord]:
        """Most recently updated first (the same order and cursor as the SQLite store)."""
        records = [
            r for r in self._sessions.values()
            if (cwd is None or r.cwd == cwd) and (after is None or _newest_first(r) < tuple(after))
        ]
        records.sort(key=_newest_first, reverse=True)
        if limit is not None:
            records = records[:limit]
        return [copy.deepcopy(r) for r in records]

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
