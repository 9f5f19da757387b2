"""Bare stdio programs (no acp_green) to put behind `acp-green record`: they deal in raw bytes, exit
statuses and signals, which a proxy must pass through unchanged. `python tests/trace_agents.py MODE ...`:

- `bytes RECEIVED PAYLOAD`: reads stdin to its end into the file RECEIVED, then writes the file
  PAYLOAD to stdout and two lines to stderr (one of them invalid UTF-8), and exits 7.
- `signals`: says "ready" on stdout, then "got SIGNAME" on stderr for each SIGHUP, SIGINT, SIGUSR1
  and SIGWINCH; exits 43 on SIGTERM.
- `sleeps`: says "ready" and sleeps; every signal has its default effect.
- `closes-stdout`: writes "bye" and closes stdout, then reads stdin to its end, says "stdin ended"
  on stderr and exits 0.
- `answers`: answers each line it reads whose first 200 bytes hold an id, with an empty result,
  as soon as it has read the line's newline (without decoding it: the answer races the recording
  of the request).
- `long-lines N`: says "ready", waits for a line "go", then writes one line of N bytes (a
  session/update whose text is mostly "a", an "é" every 4 KiB), never holding it whole; then reads one
  line, not holding it either, says "got COUNT" (the bytes before its newline), and reads stdin to
  its end and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time


def read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main() -> None:
    mode = sys.argv[1]
    if mode == "bytes":
        received, payload = sys.argv[2], sys.argv[3]
        with open(received, "wb") as out:
            out.write(read_all(0))
        with open(payload, "rb") as source:
            write_all(1, source.read())
        write_all(2, b"a line on stderr\n\xff\xfe not UTF-8\n")
        os._exit(7)
    if mode == "signals":
        def said(signum: int, _frame: object) -> None:
            write_all(2, f"got {signal.Signals(signum).name}\n".encode())

        for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR1, signal.SIGWINCH):
            signal.signal(signum, said)
        signal.signal(signal.SIGTERM, lambda *_: os._exit(43))
    if mode in ("signals", "sleeps"):
        write_all(1, b"ready\n")
        while True:
            time.sleep(1)
    if mode == "answers":
        answer_lines()
        os._exit(0)
    if mode == "long-lines":
        long_lines(int(sys.argv[2]))
        os._exit(0)
    if mode == "closes-stdout":
        write_all(1, b"bye\n")
        os.close(1)
        read_all(0)
        write_all(2, b"stdin ended\n")
        os._exit(0)


def answer_lines() -> None:
    head = b""  # the start of the line being read: where its id is
    while chunk := os.read(0, 1 << 16):
        for index, part in enumerate(chunk.split(b"\n")):
            if index:  # a newline: the line is whole; answered before any more is read
                found = re.search(rb'"id": ?(\d+)', head)
                if found is not None:
                    write_all(1, b'{"jsonrpc":"2.0","id":%s,"result":{}}\n' % found.group(1))
                head = b""
            head += part[:200 - len(head)]


def long_lines(size: int) -> None:
    write_all(1, b"ready\n")
    said = b""
    while not said.endswith(b"\n"):  # a byte at a time: no read ahead, the next line is counted below
        byte = os.read(0, 1)
        if not byte:
            os._exit(3)
        said += byte
    assert said == b"go\n", said
    head = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
    tail = b'"}}}}'
    piece = (b"a" * 4094 + "\u00e9".encode()) * 16  # 64 KiB
    left = size - len(head) - len(tail)
    write_all(1, head)
    while left >= len(piece):
        write_all(1, piece)
        left -= len(piece)
    write_all(1, b"a" * left)
    write_all(1, tail + b"\n")
    count = 0
    while True:
        chunk = os.read(0, 1 << 16)
        end = chunk.find(b"\n")
        count += len(chunk) if end < 0 else end
        if end >= 0 or not chunk:
            break
    write_all(1, f"got {count}\n".encode())
    read_all(0)


if __name__ == "__main__":
    main()
