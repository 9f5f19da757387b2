"""Fixtures the transport tests share."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def os_pipe() -> Iterator[tuple[int, int]]:
    """A plain pipe of the default size: (read end, write end), each closed at teardown."""
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        try:
            os.close(fd)
        except OSError:
            pass
