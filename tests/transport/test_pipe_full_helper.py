"""tests/helpers.wait_pipe_full asks the kernel whether the pipe is full, not a byte count."""

from __future__ import annotations

import errno
import fcntl
import os
import sys

import pytest

from tests.helpers import pipe_is_full, unread_bytes, wait_pipe_full

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pipe semantics")


def _fill(write_fd: int, piece: int) -> None:
    os.set_blocking(write_fd, False)
    while True:
        try:
            os.write(write_fd, b"x" * piece)
        except OSError as exc:
            assert exc.errno == errno.EAGAIN
            return


@pytest.mark.parametrize("piece", [2049, 4096, 65536, 1])
def test_a_pipe_its_writer_cannot_write_to_is_full_whatever_it_holds(piece: int) -> None:
    """17d: writes of 2049 bytes leave every page half used, so the pipe is full (EAGAIN) at about
    half its capacity — where the old byte-count test waited forever; whole pages fill it."""
    read_fd, write_fd = os.pipe()
    try:
        capacity = fcntl.fcntl(read_fd, 1032)  # F_GETPIPE_SZ
        assert not pipe_is_full(read_fd)
        _fill(write_fd, piece)
        assert pipe_is_full(read_fd)
        wait_pipe_full(read_fd, timeout=5)
        if piece == 2049:
            assert unread_bytes(read_fd) <= capacity - 4096  # the case a byte count gets wrong
        os.read(read_fd, 65536)
        assert not pipe_is_full(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_half_full_pipe_is_not_full() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"x" * 30000)
        assert not pipe_is_full(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
