"""sessions.encode_state's bound: a state of exactly MAX_STATE_BYTES encoded is stored, one byte more refused."""

from __future__ import annotations

import pytest

from acp_green import StateNotStorable
from acp_green.sessions import MAX_STATE_BYTES, encode_state

_FRAME = len(b'{"k":""}')


def test_a_state_of_exactly_the_limit_is_stored_and_one_byte_more_refused():
    assert len(encode_state({"k": "x" * (MAX_STATE_BYTES - _FRAME)})) == MAX_STATE_BYTES
    with pytest.raises(StateNotStorable) as raised:
        encode_state({"k": "x" * (MAX_STATE_BYTES - _FRAME + 1)})
    assert raised.value.key == "k"
