"""A trivial writer for the client-ceiling check: pre-built chunk lines to stdout, as fast as it can.

usage: python -m acp_green.tools.bench.blaster LINES SESSIONS SIZE [WRITE_BYTES]
WRITE_BYTES caps each write (0, the default: as much as the pipe takes); 8192 writes like a
buffered Python stdout, so the reader is woken for every 8 KiB. The lines look like acp_green's `agent_message_chunk` updates, round-robin over SESSIONS
session ids, and end with one prompt response (id 1). Nothing is built while writing.
"""

from __future__ import annotations

import os
import sys

LINE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}\n'


def build(lines: int, sessions: int, size: int) -> bytes:
    """All the output, built before the first write."""
    sids = [f"sess_{k:032x}" for k in range(sessions)]
    parts = []
    for n in range(lines):
        head = f"{n // sessions}:"
        parts.append(LINE % (sids[n % sessions], head + "." * (size - len(head))))
    parts.append('{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n')
    return "".join(parts).encode()


def main() -> None:
    lines, sessions, size = (int(a) for a in sys.argv[1:4])
    cap = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    data = memoryview(build(lines, sessions, size))
    sys.stdin.read(1)  # wait for the go signal, so building is not timed
    while data:
        data = data[os.write(1, data[:cap] if cap else data):]


if __name__ == "__main__":
    main()
