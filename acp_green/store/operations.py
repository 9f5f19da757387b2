"""The work the SQLite store queues for its thread: one type per operation, each knowing what it is.

Whether an operation writes, and whether a write is handed to the store thread the moment it is
made, is part of its type (`Write.at_once`), never read from a name: a new write must say it
(a `Write` subclass without `at_once` is refused when it is defined). Each operation runs the
same way on the database (`on_disk`, a `Database` the store thread owns: SQLite or PostgreSQL) and on the memory
store the thread falls back to (`in_memory`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InternalError, one_line
from .base import MemoryStore
from .session_record import SessionRecord
from .turns import HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

if TYPE_CHECKING:
    from .database import Database

PURGE_ROWS = 32  # history rows the store thread deletes per step (a deleted session's, between batches)


class StoreUnavailable(InternalError):
    """A read the store could not answer: its thread did not answer in time, the disk or the
    server cannot be read, or the store is closed. A request that meets it is answered -32603
    with `data.reason` "store_unavailable" and this message, without a traceback: the store has
    said what failed (at WARNING, once an outage starts)."""

    reason = "store_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class Operation:
    """One unit of work for the store thread, made with its fields in the order of `__slots__` (base class first).

    Plain slotted classes rather than dataclasses: the store's modules are imported on the hub
    while it opens, and fifteen frozen dataclasses cost ~18 ms there (the generated methods are
    compiled at import), long enough to hold back every control request behind them.
    """

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()  # the slots of every class of the operation, base first

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(name for klass in reversed(cls.__mro__) for name in klass.__dict__.get("__slots__", ()))

    def __init__(self, *fields: Any) -> None:
        names = self._fields
        if len(fields) != len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields ({', '.join(names) or 'none'}), not {len(fields)}")
        for name, value in zip(names, fields):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is not changed once made")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is not changed once made")

    def __reduce__(self) -> tuple[type[Operation], tuple[Any, ...]]:
        # Made again through __init__: the default copy would set each slot and be refused.
        return type(self), tuple(getattr(self, name) for name in self._fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self._fields)})"

    def on_disk(self, db: Database) -> Any:
        """Run on the store thread's database, inside the batch's transaction."""
        raise NotImplementedError

    def in_memory(self, memory: MemoryStore) -> Any:
        """Run on the memory store that replaced an unusable disk."""
        raise NotImplementedError

    def held_bytes(self) -> int:
        """History bytes this operation holds until it is committed (the store's backlog bound)."""
        return 0


class Write(Operation):
    """A change to the stored state: queued, never answered, counted in `failed_writes` if dropped.

    `at_once`: handed to the store thread as soon as it is made (with every write waiting before
    it), because the store thread can only commit what it has been given. False: it may wait on
    the hub for up to `hub_wait` seconds, so a burst of such writes costs one hand-off.
    """

    __slots__ = ()
    at_once: ClassVar[bool]
    label: ClassVar[str]  # what the log calls it: the Store method that made it
    hub_wait: ClassVar[float] = 0.005  # for a write that is not at_once

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(getattr(cls, "at_once", None), bool) or not isinstance(getattr(cls, "label", None), str):
            raise TypeError(f"{cls.__name__} must say whether it is handed over at once (at_once) and name itself (label)")

    def for_session(self) -> str:
        """The session the write is for (for its error message)."""
        raise NotImplementedError


class Read(Operation):
    """A question whose answer the store thread sends back; it sees every write queued before it."""

    __slots__ = ()


class SaveSession(Write):
    """Insert or replace a session's record; settings changes come in bursts, so it may wait."""

    __slots__ = ("record",)

    at_once: ClassVar[bool] = False
    label: ClassVar[str] = "save_session"
    record: SessionRecord

    def for_session(self) -> str:
        return self.record.session_id

    def on_disk(self, db: Database) -> None:
        db.save_session(self.record)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.save_session(self.record)


class DeleteSession(Write):
    """Forget a session and its history (session/delete); history rows a fork still shares stay."""

    __slots__ = ("session_id",)

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "delete_session"
    session_id: str

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> bool:
        """True when history rows are left for the store thread to purge in steps."""
        return db.delete_session(self.session_id, max_history_rows=PURGE_ROWS)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.delete_session(self.session_id)


class BeginTurn(Write):
    """A turn starts, with its prompt as stored updates; handed over at once, like its usage record."""

    __slots__ = ("session_id", "turn_id", "started_at", "prompt")

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "begin_turn"
    session_id: str
    turn_id: str
    started_at: float
    prompt: list[bytes]

    def for_session(self) -> str:
        return self.session_id

    def held_bytes(self) -> int:
        return sum(map(len, self.prompt))

    def on_disk(self, db: Database) -> None:
        db.begin_turn(self.session_id, self.turn_id, self.started_at, self.prompt)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.begin_turn(self.session_id, self.turn_id, self.started_at, self.prompt)


class AppendHistory(Write):
    """A piece of a running turn's history. A stream makes many: they wait on the hub for up to
    `hub_wait` (or until `sqlite.HANDOFF_BYTES` wait), so a stream of any pace is handed over,
    and committed, at most about 20 times a second. Losing that much of a turn to a crash
    costs nothing a crash does not already cost: the turn has no outcome either way."""

    __slots__ = ("session_id", "turn_id", "updates")

    at_once: ClassVar[bool] = False
    label: ClassVar[str] = "append_history"
    hub_wait: ClassVar[float] = 0.05
    session_id: str
    turn_id: str
    updates: list[bytes]

    def for_session(self) -> str:
        return self.session_id

    def held_bytes(self) -> int:
        return sum(map(len, self.updates))

    def on_disk(self, db: Database) -> None:
        db.append_history(self.session_id, self.turn_id, self.updates)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.append_history(self.session_id, self.turn_id, self.updates)


class EndTurn(Write):
    """A turn's outcome; handed over at once, like its usage record (S16)."""

    __slots__ = ("session_id", "turn_id", "outcome", "ended_at")

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "end_turn"
    session_id: str
    turn_id: str
    outcome: TurnOutcome
    ended_at: float

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> None:
        db.end_turn(self.session_id, self.turn_id, self.outcome, self.ended_at)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.end_turn(self.session_id, self.turn_id, self.outcome)


class MarkIncomplete(Write):
    """Some of a turn's history never reached the store thread (the backlog was over its bound)."""

    __slots__ = ("session_id", "turn_id")

    at_once: ClassVar[bool] = False
    label: ClassVar[str] = "mark_incomplete"
    session_id: str
    turn_id: str

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> None:
        db.mark_incomplete(self.session_id, self.turn_id)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.mark_incomplete(self.session_id, self.turn_id)


class RecordUsage(Write):
    """A usage record, the "running" one of admission or the settled one replacing it (S16)."""

    __slots__ = ("record",)

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "record_usage"
    record: UsageRecord

    def for_session(self) -> str:
        return self.record.session_id

    def on_disk(self, db: Database) -> None:
        db.record_usage(self.record)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.record_usage(self.record)


class SaveState(Write):
    """Replace a session's agent state (JSON); a turn's end or a close makes it, at once (S16)."""

    __slots__ = ("session_id", "state")

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "save_state"
    session_id: str
    state: bytes

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> None:
        db.save_state(self.session_id, self.state)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.save_state(self.session_id, self.state)


class ForkHistory(Write):
    """Give a fork its source's ended turns (session/fork), at once: the fork's own turns follow it.
    The turns are copied, their history rows shared (statedb.fork_history): cheap whatever the history's size."""

    __slots__ = ("source_id", "fork_id")

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "fork_history"
    source_id: str
    fork_id: str

    def for_session(self) -> str:
        return self.fork_id

    def on_disk(self, db: Database) -> None:
        db.fork_history(self.source_id, self.fork_id)

    def in_memory(self, memory: MemoryStore) -> None:
        memory.fork_history(self.source_id, self.fork_id)


class LoadState(Read):
    __slots__ = ("session_id",)

    session_id: str

    def on_disk(self, db: Database) -> bytes | None:
        return db.load_state(self.session_id)

    def in_memory(self, memory: MemoryStore) -> bytes | None:
        return memory.load_state(self.session_id)


class ReadTurnPage(Read):
    __slots__ = ("session_id", "start", "limit", "newest_first")

    session_id: str
    start: int
    limit: int
    newest_first: bool

    def on_disk(self, db: Database) -> list[StoredTurn]:
        return db.turn_page(self.session_id, self.start, self.limit, self.newest_first)

    def in_memory(self, memory: MemoryStore) -> list[StoredTurn]:
        return memory.turn_page(self.session_id, self.start, self.limit, self.newest_first)


class LoadSession(Read):
    __slots__ = ("session_id",)

    session_id: str

    def on_disk(self, db: Database) -> SessionRecord | None:
        return db.load_session(self.session_id)

    def in_memory(self, memory: MemoryStore) -> SessionRecord | None:
        return memory.load_session(self.session_id)


class ListSessions(Read):
    __slots__ = ("cwd", "after", "limit", "archived")

    cwd: str | None
    after: tuple[float, str] | None
    limit: int | None
    archived: bool | None

    def on_disk(self, db: Database) -> list[SessionRecord]:
        return db.list_sessions(self.cwd, self.after, self.limit, self.archived)

    def in_memory(self, memory: MemoryStore) -> list[SessionRecord]:
        return memory.list_sessions(self.cwd, self.after, self.limit, self.archived)


class History(Read):
    __slots__ = ("session_id",)

    session_id: str

    def on_disk(self, db: Database) -> list[bytes]:
        return db.history(self.session_id)

    def in_memory(self, memory: MemoryStore) -> list[bytes]:
        return memory.history(self.session_id)


class ReadHistoryPage(Read):
    __slots__ = ("session_id", "after", "max_entries", "max_bytes", "turn_id")

    session_id: str
    after: HistoryPosition | None
    max_entries: int
    max_bytes: int
    turn_id: str | None

    def on_disk(self, db: Database) -> HistoryPage:
        return db.history_page(self.session_id, self.after, self.max_entries, self.max_bytes, self.turn_id)

    def in_memory(self, memory: MemoryStore) -> HistoryPage:
        return memory.history_page(self.session_id, self.after, self.max_entries, self.max_bytes, self.turn_id)


class ListTurns(Read):
    __slots__ = ("session_id",)

    session_id: str

    def on_disk(self, db: Database) -> list[StoredTurn]:
        return db.turns(self.session_id)

    def in_memory(self, memory: MemoryStore) -> list[StoredTurn]:
        return memory.turns(self.session_id)


class Usage(Read):
    __slots__ = ("session_id",)

    session_id: str | None

    def on_disk(self, db: Database) -> list[UsageRecord]:
        return db.usage(self.session_id)

    def in_memory(self, memory: MemoryStore) -> list[UsageRecord]:
        return memory.usage(self.session_id)


class Sync(Read):
    """Nothing to read: its answer means every write queued before it is committed."""

    __slots__ = ()

    def on_disk(self, db: Database) -> None:
        return None

    def in_memory(self, memory: MemoryStore) -> None:
        return None


class Committed(Read):
    """True once every write queued before it is committed; while the disk refuses writes it is
    answered at once from what the disk holds (False): unlike `Sync`, never held by an outage."""

    __slots__ = ()

    def on_disk(self, db: Database) -> bool:
        return not db.in_transaction

    def in_memory(self, memory: MemoryStore) -> bool:
        return True


class ClaimSession(Read):
    """Take a stored session for this process (database.py): None once ours, else who holds it.

    On memory (a database given up) the lock is still the database's: the lock files of a SQLite
    state directory outlive its database file, and a process that lost its server cannot own
    anything there; so a degraded store answers None (this process holds all it serves)."""

    __slots__ = ("session_id",)

    session_id: str

    def on_disk(self, db: Database) -> str | None:
        return db.lock_session(self.session_id)

    def in_memory(self, memory: MemoryStore) -> None:
        return None


class OwnNewSession(Write):
    """Take a session this process just made, queued before its first save: nobody else can
    have its fresh id, so this never waits for an answer."""

    __slots__ = ("session_id",)

    at_once: ClassVar[bool] = False
    label: ClassVar[str] = "own_new_session"
    session_id: str

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> None:
        holder = db.lock_session(self.session_id)
        if holder is not None:  # a fresh id held elsewhere: impossible short of a copied id
            raise SessionHeldElsewhere(f"new session {self.session_id!r} is held by {holder}")

    def in_memory(self, memory: MemoryStore) -> None:
        return None


class ReleaseSession(Write):
    """Let a session go once every write before it is committed (the database defers the
    unlock to the commit: the next owner reads everything this process wrote)."""

    __slots__ = ("session_id",)

    at_once: ClassVar[bool] = True
    label: ClassVar[str] = "release_session"
    session_id: str

    def for_session(self) -> str:
        return self.session_id

    def on_disk(self, db: Database) -> None:
        db.unlock_session(self.session_id)

    def in_memory(self, memory: MemoryStore) -> None:
        return None


class SessionHeldElsewhere(ValueError):
    """A session this process made is locked by another (a record error: said at ERROR, counted)."""


class Close:
    """Commit what is queued before it, close the connection and end the thread."""

    __slots__ = ()

    def held_bytes(self) -> int:
        return 0
