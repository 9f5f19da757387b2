"""mcp/httpguard.GuardedSocket counts a response head's bytes across reads: a head of exactly the
bound is read, one byte more is refused; the body (after body_started) is not counted."""

from __future__ import annotations

import pytest

from acp_green.mcp import httpguard


class _Chunks:
    """A socket whose reads return the given chunks in order."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    def sendall(self, data: bytes) -> None:
        pass

    def recv(self, size: int) -> bytes:
        return self.chunks.pop(0)


def test_a_head_of_exactly_the_bound_is_read_and_one_byte_more_refused():
    guarded = httpguard.GuardedSocket(_Chunks(b"a" * 60, b"b" * 40, b"c"), max_head_bytes=100)
    guarded.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert guarded.recv(4096) == b"a" * 60
    assert guarded.recv(4096) == b"b" * 40
    with pytest.raises(httpguard.HeadRefused):
        guarded.recv(4096)


def test_the_body_is_not_counted_and_a_new_request_starts_a_new_head():
    guarded = httpguard.GuardedSocket(_Chunks(b"h" * 100, b"x" * 500, b"h" * 100), max_head_bytes=100)
    guarded.sendall(b"GET / HTTP/1.1\r\n\r\n")
    guarded.recv(4096)
    guarded.body_started()
    assert guarded.recv(4096) == b"x" * 500 and not guarded.in_head
    guarded.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert guarded.recv(4096) == b"h" * 100
