"""Where sessions, history and the usage ledger live; the in-memory store.

Writes (`save_session`, `delete_session`, `begin_turn`, `append_history`, `end_turn`,
`record_usage`) never block, never raise and may be called from hub callbacks; a write a store
cannot keep is logged at ERROR and counted in `failed_writes`, and a piece of history it cannot
keep marks its turn incomplete. Reads wait cooperatively and must be called from a greenlet;
they see every write this process made before them.

A turn's history is written while the turn runs: `begin_turn` (with the prompt as stored
updates), any number of `append_history` pieces, then `end_turn` with its outcome. Each update
is one SessionUpdate object's JSON. `history_page` reads it back in bounded pages, `turn_page`
the list of turns.

A session's agent state (`session.state`, encoded by sessions.encode_state) is one JSON object
per session (`save_state` replaces it, `load_state` reads it); deleting the session forgets it.
"""

from __future__ import annotations

import copy
import itertools
import logging
import marshal
import sys
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .interface import Store
from .session_record import SessionRecord
from .turns import HistoryEntry, HistoryPage, HistoryPosition, StoredTurn, TurnOutcome
from ..usage import UsageRecord

if TYPE_CHECKING:
    from ..rpc.cancel import CancelToken

log = logging.getLogger(__name__)

# The history a MemoryStore keeps, all sessions together (see MemoryStore). 256 MiB: hundreds
# of long conversations, yet a bound well inside what a desktop gives one process.
HISTORY_LIMIT_BYTES = 256 << 20

# Version 2 writes no back-references, which later versions add by reference count: equal
# records must give equal bytes to be shared.
_MARSHAL_VERSION = 2


class MemoryStore:
    """Everything in this process's memory (`--ephemeral`, and the fallback).

    A stored session is kept compact, because a long-running agent keeps every session it ever
    opened: (updated_at, cwd, the rest marshalled), about 250 bytes with its key and dict slot.
    Sessions of one project share their cwd string, and sessions that keep the same settings
    (most keep the agent's defaults) share one marshalled rest. Marshalling also gives the copy
    semantics a store needs (a later change to the live record is not stored until it is
    saved), and it keeps every str exactly, lone surrogates included. `marshal` rather than
    `pickle`: a record holds only JSON-like values, marshal is built in (importing pickle cost
    ~2 ms on the hub while the store opens) and is faster both ways.

    History is bounded: past `history_limit_bytes` of stored updates (all sessions together)
    the oldest turns, of any session, are dropped whole, counted in `dropped_turns` and said
    once at WARNING. The turn being written is never dropped; should it alone outgrow the bound,
    its further pieces are refused (counted in `failed_writes`, the turn marked incomplete). A
    replay reading a session while its oldest turn is dropped may skip entries: it reads
    positions in a list that just got shorter.
    """

    SHARED_RESTS = 64  # distinct marshalled rests kept for sharing, the most recently used

    def __init__(self, history_limit_bytes: int | None = None) -> None:
        self._sessions: dict[str, tuple[float, str, bytes]] = {}
        # Per session: its turns by id (in the order begun), and its pieces in stored order, each
        # (turn id, updates); consecutive pieces of one turn share one list.
        self._turns: dict[str, dict[str, _MemoryTurn]] = {}
        self._history: dict[str, list[tuple[str, list[bytes]]]] = {}
        self._state: dict[str, bytes] = {}  # the agent's session.state, as JSON
        self._ledger = UsageLedger()
        self._shared_rests: dict[bytes, bytes] = {}
        self.failed_writes = 0
        self.history_limit_bytes = HISTORY_LIMIT_BYTES if history_limit_bytes is None else history_limit_bytes
        self.history_bytes = 0  # stored updates, all sessions
        self._ages: dict[tuple[str, str], None] = {}  # (session, turn), oldest begun first
        self.dropped_turns = 0  # turns dropped whole to keep history under its bound

    # Memory is this process's own: every session in it is ours, nothing to claim or let go.
    def claim_session(self, session_id: str) -> str | None:
        return None

    def own_new_session(self, session_id: str) -> None:
        """Nothing to take (see claim_session)."""

    def release_session(self, session_id: str) -> None:
        """Nothing to let go (see claim_session)."""

    def save_session(self, record: SessionRecord) -> None:
        try:
            rest = marshal.dumps((record.additional_directories, record.title, record.mode_id, record.config,
                                  record.archived, record.forked_from), _MARSHAL_VERSION)
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
        for turn_id, turn in self._turns.pop(session_id, {}).items():
            self._ages.pop((session_id, turn_id), None)
            self.history_bytes -= turn.size
        self._history.pop(session_id, None)
        self._state.pop(session_id, None)

    def list_sessions(self, cwd: str | None = None, after: tuple[float, str] | None = None, limit: int | None = None,
                      archived: bool | None = None) -> list[SessionRecord]:
        """Most recently updated first (the SQLite store's order and cursor); `archived`: as statedb.list_sessions."""
        keys = [
            (stored[0], session_id)
            for session_id, stored in self._sessions.items()
            if (cwd is None or stored[1] == cwd) and (after is None or (stored[0], session_id) < tuple(after))
        ]
        keys.sort(reverse=True)
        records = (_record(session_id, self._sessions[session_id]) for _, session_id in keys)
        if archived is not None:
            records = (record for record in records if record.archived is archived)
        return list(itertools.islice(records, limit))

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: list[bytes]) -> None:
        turns = self._turns.setdefault(session_id, {})
        if turn_id in turns:
            self._refused("begin_turn", session_id, f"turn {turn_id!r} was already begun")
            return
        turns[turn_id] = _MemoryTurn(started_at, len(self._history.get(session_id, ())))
        self._ages[(session_id, turn_id)] = None
        self._add_pieces(session_id, turn_id, prompt)

    def append_history(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        turn = self._turns.get(session_id, {}).get(turn_id)
        if turn is None or turn.forked:
            why = "was copied by a fork: it takes no more history" if turn else "was not begun (or the session was deleted)"
            self._refused("append_history", session_id, f"turn {turn_id!r} {why}")
            return
        self._add_pieces(session_id, turn_id, updates)

    def _add_pieces(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        if not updates:
            return
        size = sum(map(len, updates))
        turn = self._turns[session_id][turn_id]
        if self.history_bytes + size > self.history_limit_bytes:
            self._make_room(size, (session_id, turn_id))
            if self.history_bytes + size > self.history_limit_bytes:
                # Only this turn is left to drop, and it is being written: refuse the piece.
                if turn.complete:
                    self._refused("append_history", session_id, f"turn {turn_id!r} alone is over the in-memory history "
                                  f"bound of {self.history_limit_bytes} bytes; the turn is marked incomplete")
                else:
                    self.failed_writes += 1
                turn.complete = False
                return
        turn.size += size
        self.history_bytes += size
        pieces = self._history.setdefault(session_id, [])
        if pieces and pieces[-1][0] == turn_id:
            pieces[-1][1].extend(updates)
        else:
            pieces.append((turn_id, list(updates)))

    def _make_room(self, size: int, writing: tuple[str, str]) -> None:
        """Drop the oldest turns whole, never `writing`, until `size` more bytes fit."""
        while self.history_bytes + size > self.history_limit_bytes:
            oldest = next((key for key in self._ages if key != writing), None)
            if oldest is None:
                return
            self._drop_turn(*oldest)

    def _drop_turn(self, session_id: str, turn_id: str) -> None:
        del self._ages[(session_id, turn_id)]
        turn = self._turns[session_id].pop(turn_id)
        self.history_bytes -= turn.size
        pieces = self._history.get(session_id, [])
        gone = [index for index, piece in enumerate(pieces) if piece[0] == turn_id]
        pieces[:] = [piece for piece in pieces if piece[0] != turn_id]
        for other in self._turns[session_id].values():  # where each later turn's pieces now start
            other.first_piece -= sum(1 for index in gone if index < other.first_piece)
        if self.dropped_turns == 0:
            log.warning(
                "in-memory history reached its bound of %d bytes: dropping the oldest turns whole from now on "
                "(said once; counted as dropped turns)", self.history_limit_bytes,
            )
        self.dropped_turns += 1

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome) -> None:
        turn = self._turns.get(session_id, {}).get(turn_id)
        if turn is None:
            self._refused("end_turn", session_id, f"no turn {turn_id!r} was begun (or the session was deleted)")
            return
        turn.stop_reason, turn.error = outcome.stop_reason, outcome.error
        turn.ended = True

    def fork_history(self, source_id: str, fork_id: str) -> None:
        _fork_in_memory(self, source_id, fork_id)

    def mark_incomplete(self, session_id: str, turn_id: str) -> None:
        """Some of the turn's history was not stored."""
        turn = self._turns.get(session_id, {}).get(turn_id)
        if turn is not None:
            turn.complete = False

    def _refused(self, label: str, session_id: str, why: str) -> None:
        self.failed_writes += 1
        log.error("dropped a %s of session %s: %s", label, ascii(session_id), why)

    def history_page(self, session_id: str, after: HistoryPosition | None, max_entries: int, max_bytes: int, turn_id: str | None = None) -> HistoryPage:
        """The same pages as the SQLite store (statedb.history_page), over this store's pieces."""
        pieces = self._history.get(session_id, ())
        piece, index = (after.piece, after.index) if after is not None else (0, 0)
        if after is None and turn_id is not None:  # a turn's pieces start no earlier than it began
            turn = self._turns.get(session_id, {}).get(turn_id)
            piece = turn.first_piece if turn is not None else len(pieces)
        entries: list[HistoryEntry] = []
        size = 0
        while piece < len(pieces):
            piece_turn, updates = pieces[piece]
            if turn_id is None or piece_turn == turn_id:
                while index < len(updates):
                    update = updates[index]
                    if entries and (len(entries) >= max_entries or size + len(update) > max_bytes):
                        return HistoryPage(entries, HistoryPosition(piece, index))
                    entries.append(HistoryEntry(piece_turn, update))
                    size += len(update)
                    index += 1
            piece, index = piece + 1, 0
        return HistoryPage(entries, None)

    def turns(self, session_id: str) -> list[StoredTurn]:
        return self.turn_page(session_id, 0, len(self._turns.get(session_id, ())))

    def turn_page(self, session_id: str, start: int, limit: int, newest_first: bool = False) -> list[StoredTurn]:
        """At most `limit` turns after the first `start`, oldest (or newest) first."""
        turns = self._turns.get(session_id, {})
        ids = reversed(turns) if newest_first else iter(turns)
        return [
            StoredTurn(turn_id, turn.started_at, turn.stop_reason, turn.error, turn.complete)
            for turn_id in itertools.islice(ids, start, start + limit)
            for turn in (turns[turn_id],)
        ]

    def save_state(self, session_id: str, state: bytes) -> None:
        self._state[session_id] = bytes(state)

    def load_state(self, session_id: str) -> bytes | None:
        return self._state.get(session_id)

    def append_turn(self, session_id: str, entries: list[bytes], stop_reason: str | None = None) -> None:
        """A whole turn at once (begin, one piece, end)."""
        turn_id = uuid.uuid4().hex
        self.begin_turn(session_id, turn_id, time.time(), list(entries))
        if stop_reason is not None:
            self.end_turn(session_id, turn_id, TurnOutcome(stop_reason))

    def history(self, session_id: str) -> list[bytes]:
        return [update for _turn, updates in self._history.get(session_id, ()) for update in updates]

    def record_usage(self, record: UsageRecord) -> None:
        self._ledger.record(record)

    def usage(self, session_id: str | None = None) -> list[UsageRecord]:
        return self._ledger.records(session_id)

    def wait_for_history_room(self, cancelled: CancelToken | None = None) -> None:
        """Never waits: memory takes a piece the moment it is handed over."""

    def health(self) -> dict[str, Any]:  # the counters of `_acp_green/stats` (docs/RELIABILITY.md)
        return {"storeInMemory": True, "storeDroppedTurns": self.dropped_turns}

    def sync(self) -> None:
        """Everything is stored the moment it is handed over."""

    def wait_committed(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to close: the memory goes with the process."""


class UsageLedger:
    """A MemoryStore's usage records, in order, each replaced by a later one with its usage_id."""

    def __init__(self) -> None:
        self._records: list[UsageRecord] = []
        self._index: dict[str, int] = {}

    def record(self, record: UsageRecord) -> None:
        """Append, or replace the record with the same usage_id (the "running" one)."""
        index = self._index.get(record.usage_id)
        if index is not None:
            self._records[index] = copy.copy(record)
            return
        self._index[record.usage_id] = len(self._records)
        self._records.append(copy.copy(record))

    def records(self, session_id: str | None = None) -> list[UsageRecord]:
        return [r for r in self._records if session_id is None or r.session_id == session_id]


def _fork_in_memory(memory: MemoryStore, source_id: str, fork_id: str) -> None:
    """Give `fork_id` every turn of `source_id` that has ended, with its history (as
    statedb.fork_history). The fork's pieces are its own lists of the source's update objects:
    the bytes are shared, never copied, and a later change to either session's lists (a turn
    dropped to keep the bound, a delete) leaves the other's alone. One pass over the source's
    pieces, then one over its turns, so a fork costs the length of the history, not turns x pieces.
    """
    source = memory._turns.get(source_id, {})
    ended = {turn_id for turn_id, turn in source.items() if turn.ended}
    pieces: dict[str, list[list[bytes]]] = {}
    for piece_turn, updates in memory._history.get(source_id, ()):
        if piece_turn in ended:
            pieces.setdefault(piece_turn, []).append(updates)
    for turn_id, turn in list(source.items()):
        if turn_id not in ended:
            continue
        memory.begin_turn(fork_id, turn_id, turn.started_at, [])
        for updates in pieces.get(turn_id, ()):
            memory._add_pieces(fork_id, turn_id, list(updates))
        copied = memory._turns[fork_id].get(turn_id)
        if copied is not None:
            copied.stop_reason, copied.error, copied.ended = turn.stop_reason, turn.error, True
            copied.complete = copied.complete and turn.complete
            copied.forked = True


@dataclass(slots=True)
class _MemoryTurn:
    started_at: float
    first_piece: int  # the session's piece count when the turn began: its pieces come no earlier
    stop_reason: str | None = None
    error: str | None = None
    complete: bool = True
    size: int = 0  # bytes of its stored updates
    ended: bool = False  # end_turn was called: a fork copies it
    forked: bool = False  # copied by a fork (ended): it takes no more history, as on disk


def _record(session_id: str, stored: tuple[float, str, bytes]) -> SessionRecord:
    updated_at, cwd, rest = stored
    directories, title, mode_id, config, archived, forked_from = marshal.loads(rest)
    return SessionRecord(session_id, cwd, directories, title, mode_id, config, updated_at, archived, forked_from)
