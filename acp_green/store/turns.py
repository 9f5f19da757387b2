"""What the store keeps of a turn and how a session's history is read back: outcomes, pages, positions.

A session's history is a sequence of entries, each one SessionUpdate object's JSON (the update
itself, never a slice of a wire line), in the order they were stored, each tagged with the turn
it belongs to. It is read in bounded pages (`HistoryPage`), so no reader ever holds a whole
history; a `HistoryPosition` is opaque and only means something to the store that returned it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

FAILED = "error"  # the stop reason of a turn that failed; its message is TurnOutcome.error


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended: an ACP stop reason, "error" (with the error's message) or "aborted"."""

    stop_reason: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryPosition:
    """Where a page ended: the stored piece, and the entry within it to read next."""

    piece: int
    index: int


class HistoryEntry(NamedTuple):
    """One stored update and the turn it belongs to."""

    turn_id: str
    update: bytes


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Entries in stored order; `after` is where the next page starts, None when there is no more."""

    entries: list[HistoryEntry]
    after: HistoryPosition | None


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """A turn as `acp-green sessions show` lists it.

    `stop_reason` is None while the turn runs, and for a turn whose process died before it
    ended. `complete` is False when some of its updates could not be stored (refused by the
    database, or dropped because the store fell too far behind): its history has gaps.
    """

    turn_id: str
    started_at: float
    stop_reason: str | None
    error: str | None
    complete: bool

    @property
    def outcome(self) -> str:
        """The stop reason, "failed: <message>" for a failed turn, or "no outcome" (running or interrupted)."""
        if self.stop_reason is None:
            return "no outcome (running, or its process ended first)"
        if self.stop_reason == FAILED:
            return f"failed: {self.error}" if self.error else "failed"
        return self.stop_reason
