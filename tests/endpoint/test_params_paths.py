"""Params.optional_absolute_path: absent or absolute passes, relative is refused (-32602 naming the field)."""

from __future__ import annotations

import pytest

from acp_green.errors import InvalidParams
from acp_green.rpc.params import Params


def test_an_optional_absolute_path_accepts_absolute_and_absent_and_refuses_relative() -> None:
    assert Params({"cwd": "/tmp/work"}, "session/load").optional_absolute_path("cwd") == "/tmp/work"
    assert Params({}, "session/load").optional_absolute_path("cwd") is None
    with pytest.raises(InvalidParams) as refused:
        Params({"cwd": "relative/dir"}, "session/load").optional_absolute_path("cwd")
    assert refused.value.data == {"field": "cwd"}
