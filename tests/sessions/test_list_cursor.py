"""session/list cursors: whatever its length, a cursor encode_cursor made decodes to its position."""

from __future__ import annotations

from acp_green.protocol.session_methods import decode_cursor, encode_cursor


def test_every_cursor_round_trips_whatever_its_unpadded_length() -> None:
    lengths = set()
    for n in range(12):
        position = (1700000000.25 + n, "s" * n)
        cursor = encode_cursor(*position)
        lengths.add(len(cursor) % 4)
        assert decode_cursor(cursor) == position
    assert lengths >= {0, 2, 3}, "the positions no longer cover every padding"
