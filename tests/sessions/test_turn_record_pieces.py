"""A running turn's history is handed to the store in pieces by one rule (`TurnRecord._keep`):
text chunks and every other update count together, a piece goes when it holds PIECE_UPDATES
updates or PIECE_BYTES bytes (reaching the bound is enough), and every piece handed over while
the turn runs -- never while it settles -- offers the store the chance to hold the turn back.

The bounds are set small on the record, so each boundary is exact.
"""

from __future__ import annotations

import json
from typing import Any

from acp_green.protocol.turn_record import TurnRecord
from acp_green.protocol.updates import SessionUpdateEncoder
from acp_green.sessions import CancelToken, Session
from acp_green.store.session_record import SessionRecord
from acp_green.store.turns import TurnOutcome


class PieceStore:
    """Records each piece handed over (its updates, decoded) and each offer to wait for room."""

    def __init__(self) -> None:
        self.pieces: list[list[dict[str, Any]]] = []
        self.stored: list[bytes] = []  # every update as the store was given it
        self.room_waits: list[Any] = []  # the token each wait was offered with

    def begin_turn(self, session_id: str, turn_id: str, started_at: float, prompt: list[bytes]) -> None:
        pass

    def append_history(self, session_id: str, turn_id: str, updates: list[bytes]) -> None:
        self.pieces.append([json.loads(u) for u in updates])
        self.stored.extend(updates)

    def end_turn(self, session_id: str, turn_id: str, outcome: TurnOutcome) -> None:
        pass

    def wait_for_history_room(self, cancelled: Any = None) -> None:
        self.room_waits.append(cancelled)


def record_on(store: PieceStore, *, piece_updates: int = 1 << 30, piece_bytes: int = 1 << 40,
              token: CancelToken | None = None) -> TurnRecord:
    session = Session(SessionRecord("sess_p", "/tmp", []))
    record = TurnRecord(store, session, SessionUpdateEncoder("sess_p"), turn_id="turn0001", token=token)
    record._piece_updates, record._piece_bytes = piece_updates, piece_bytes
    record.begin([{"type": "text", "text": "go"}])
    return record


def tool_update(n: int) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": f"call-{n}", "status": "completed"}


def test_text_chunks_and_other_updates_count_together_and_a_piece_goes_at_exactly_the_count():
    """Alternating chunks and tool-call updates: every piece holds exactly PIECE_UPDATES of them
    (4 here), whichever kind filled it; the rest goes at the end of the turn."""
    store = PieceStore()
    record = record_on(store, piece_updates=4)
    for n in range(5):
        record.text_chunk("agent_message_chunk", f"chunk {n}")
        record.update(tool_update(n))
    assert [len(piece) for piece in store.pieces] == [4, 4]
    record.end(TurnOutcome("end_turn"))
    assert [len(piece) for piece in store.pieces] == [4, 4, 2]
    kinds = [u["sessionUpdate"] for piece in store.pieces for u in piece]
    assert kinds == ["agent_message_chunk", "tool_call_update"] * 5


def test_a_piece_goes_when_its_bytes_reach_the_bound_not_only_when_they_pass_it():
    """Three updates whose stored JSON is exactly PIECE_BYTES make a piece, for text chunks and for
    other updates alike."""
    probe = PieceStore()
    sizer = record_on(probe)
    sizer.text_chunk("agent_message_chunk", "same size")
    sizer.update(tool_update(0))
    sizer.end(TurnOutcome("end_turn"))
    chunk_size, update_size = (len(stored) for stored in probe.stored)

    for send, size in ((lambda r, n: r.text_chunk("agent_message_chunk", "same size"), chunk_size),
                       (lambda r, n: r.update(tool_update(n % 10)), update_size)):
        # Exactly the bound, and one byte more than two updates: every piece (the first, and each
        # after a piece was handed over) counts its bytes from zero.
        for bound in (3 * size, 2 * size + 1):
            store = PieceStore()
            record = record_on(store, piece_bytes=bound)
            for n in range(7):
                send(record, n)
            assert [len(piece) for piece in store.pieces] == [3, 3], (size, bound, store.pieces)


def test_each_piece_handed_over_while_the_turn_runs_offers_a_wait_with_the_turns_token_and_settling_never_waits():
    """Back-pressure: a full piece is followed by the store's chance to hold the turn back (with
    the turn's token, so a cancel ends the wait); closing the open tool calls at settle time may
    fill pieces too, but never waits (it may run on the hub)."""
    token = CancelToken()
    store = PieceStore()
    record = record_on(store, piece_updates=2, token=token)
    for n in range(4):
        record.text_chunk("agent_message_chunk", f"chunk {n}")
    assert len(store.pieces) == 2 and store.room_waits == [token, token]
    for n in range(4):
        record.update({"sessionUpdate": "tool_call", "toolCallId": f"open-{n}", "title": "t", "status": "in_progress"})
    assert len(store.pieces) == 4 and len(store.room_waits) == 4
    closing = record.close_tool_calls("Cancelled")
    assert len(closing) == 4 and len(store.pieces) == 6, "settling still hands over full pieces"
    assert len(store.room_waits) == 4, "settling must not wait for the store"
