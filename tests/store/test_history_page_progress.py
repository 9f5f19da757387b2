"""A history page always moves on: its first update is in it even when it alone is over
`max_bytes`, so paging never returns the position it was given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_green.store import statedb
from acp_green.store.base import MemoryStore
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import HistoryEntry


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_update_larger_than_a_page_still_makes_a_page_of_its_own(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SqliteStore(statedb.db_path(str(tmp_path / "state")))
    try:
        big, small = json.dumps({"x": "y" * 200}).encode(), b'{"x":1}'
        store.begin_turn("s", "t", 1.0, [])
        store.append_history("s", "t", [big, small])
        first = store.history_page("s", None, 10, 50)
        assert first.entries == [HistoryEntry("t", big)] and first.after is not None
        second = store.history_page("s", first.after, 10, 50)
        assert second.entries == [HistoryEntry("t", small)] and second.after is None
    finally:
        store.close()
