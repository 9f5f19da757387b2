"""A line the framer cannot assemble in memory is dropped and reported; the next line is read."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.rpc import transport
from acp_green.rpc.transport import Line, LineFramer, request_id_of


def _framer(chunks: list[bytes]) -> LineFramer:
    source = iter(chunks)
    return LineFramer(lambda: next(source, b""), 1 << 20)


@pytest.mark.parametrize("final_newline", [True, False])
def test_a_line_that_does_not_fit_in_memory_is_reported_and_the_next_one_read(monkeypatch: Any, final_newline: bool) -> None:
    """Item 11: MemoryError while joining a line's pieces yields an out_of_memory marker carrying
    the request's id (read from the line's head) and framing goes on with the following line."""
    failing = {"once": True}
    real = transport._assemble

    def assemble(parts: list[bytes]) -> bytes:
        if failing["once"]:
            failing["once"] = False
            raise MemoryError
        return real(parts)

    monkeypatch.setattr(transport, "_assemble", assemble)
    head = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"text":"'
    chunks = [head, b"x" * 1000, b'"}}\n' if final_newline else b'"}}']
    if final_newline:
        chunks.append(b'{"jsonrpc":"2.0","id":8,"method":"session/list"}\n')
    lines = list(_framer(chunks).lines())
    assert lines[0] == Line(b"", out_of_memory=True, request_id=7)
    if final_newline:
        assert lines[1:] == [Line(b'{"jsonrpc":"2.0","id":8,"method":"session/list"}\n')]
    else:
        assert lines[1:] == []


@pytest.mark.parametrize(("head", "expected"), [
    (b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":', 3),
    (b' { "jsonrpc" : "2.0" , "id" : "abc" , "method":"x"', "abc"),
    (b'{"id":-12,"method":"x"', -12),
    (b'{"jsonrpc":"2.0","method":"x","id":3', None),  # id after method: not read, answered with null
    (b'{"jsonrpc":"2.0","id":3,"result":', None),  # a response: never answered with its id
    (b'{"params":{"id":3,"method":"x"}}', None),  # a nested id is not the message's
    (b'{"jsonrpc":"2.0","id":"a\\"b","method":"x"', None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"x"', None),
])
def test_the_request_id_is_read_from_the_head_only_when_certain(head: bytes, expected: Any) -> None:
    assert request_id_of(head) == expected


def test_a_line_that_does_not_fit_in_memory_while_decoding_is_answered_with_its_id(unit: Any, monkeypatch: Any) -> None:
    """The same when the decoder runs out of memory: -32603 `out_of_memory` with the request's id."""
    from acp_green.rpc import wire

    conn = unit()
    conn.initialize()
    real = wire.decode

    def decode(line: bytes) -> Any:
        if b'"id":9' in line:
            raise MemoryError
        return real(line)

    monkeypatch.setattr(wire, "decode", decode)
    conn.records.append(conn.records[-1].__class__(0.0, "out", b"", {"jsonrpc": "2.0", "id": 9, "method": "session/list"}))
    conn.endpoint.handle_line(b'{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}')
    error = conn.error(9)
    assert error["code"] == -32603 and error["data"] == {"reason": "out_of_memory"}, error


def test_a_backlog_too_big_to_join_is_written_piece_by_piece_in_order(monkeypatch: Any) -> None:
    """The writer joins its backlog into one write; when that copy does not fit in memory it
    writes the pieces one at a time, in order, and stays alive (it used to die, losing every
    later answer)."""
    from tests.transport.test_outbound import Pipe, finish, make

    monkeypatch.setattr(transport, "_assemble", lambda parts: (_ for _ in ()).throw(MemoryError()))
    pipe = Pipe()
    try:
        outbound, failures = make(pipe)
        outbound.put(b"a" * 1000)
        outbound.put(b"b" * 3000)
        outbound.put(b"c\n")
        pipe.read_all_until(lambda: len(pipe.received) == 4002, "every piece to be written")
        assert bytes(pipe.received) == b"a" * 1000 + b"b" * 3000 + b"c\n"
        outbound.put(b"d\n")
        finish(outbound, pipe)
        assert bytes(pipe.received).endswith(b"c\nd\n") and failures == []
    finally:
        pipe.close()


def test_lines_read_but_not_handed_out_that_do_not_fit_in_memory_at_shutdown_are_one_marker(monkeypatch: Any) -> None:
    """At shutdown the unread lines are joined once; when that fails they are reported as one
    out_of_memory marker (answered by the server) instead of ending the shutdown with a MemoryError."""
    framer = _framer([b'{"jsonrpc":"2.0","id":5,"method":"a"}\n{"jsonrpc":"2.0","id":6,"method":"b"}\n'])
    lines = framer.lines()
    assert next(lines).data.startswith(b'{"jsonrpc":"2.0","id":5')
    monkeypatch.setattr(transport, "_assemble", lambda parts: (_ for _ in ()).throw(MemoryError()))
    assert framer.unread_lines() == [Line(b"", out_of_memory=True, request_id=6)]
    assert framer.unread_lines() == []
