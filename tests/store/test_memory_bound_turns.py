"""The memory store's bound drops the oldest turns whole: the turns left still read back exactly
their own updates, by turn, after the pieces before them are gone."""

from __future__ import annotations

from acp_green.store.base import MemoryStore


def _read_turn(store: MemoryStore, session_id: str, turn_id: str) -> list[bytes]:
    page = store.history_page(session_id, None, 1000, 1 << 20, turn_id=turn_id)
    return [entry.update for entry in page.entries]


def test_a_turn_reads_its_own_updates_after_an_older_turn_is_dropped():
    store = MemoryStore(history_limit_bytes=250)
    for number in range(1, 4):  # three turns of 100 bytes: the first goes when the third arrives
        turn = f"t{number}"
        store.begin_turn("s", turn, float(number), [bytes([48 + number]) * 50])
        store.append_history("s", turn, [bytes([48 + number]) * 50])
    assert store.dropped_turns == 1
    assert _read_turn(store, "s", "t2") == [b"2" * 50, b"2" * 50]
    assert _read_turn(store, "s", "t3") == [b"3" * 50, b"3" * 50]
