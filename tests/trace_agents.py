"""Bare stdio programs (no acp_green) to put behind `acp-green record`: they deal in raw bytes, exit
statuses and signals, which a proxy must pass through unchanged. `python tests/trace_agents.py MODE ...`:

- `bytes RECEIVED PAYLOAD`: reads stdin to its end into the file RECEIVED, then writes the file
  PAYLOAD to stdout and two lines to stderr (one of them invalid UTF-8), and exits 7.
- `signals`: says "ready" on stdout, then "got SIGNAME" on stderr for each SIGHUP, SIGINT, SIGUSR1
  and SIGWINCH; exits 43 on SIGTERM.
- `sleeps`: says "ready" and sleeps; every signal has its default effect.
- `closes-stdout`: writes "bye" and closes stdout, then reads stdin to its end, says "stdin ended"
  on stderr and exits 0.
"""

from __future__ import annotations

import os
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
    if mode == "closes-stdout":
        write_all(1, b"bye\n")
        os.close(1)
        read_all(0)
        write_all(2, b"stdin ended\n")
        os._exit(0)


if __name__ == "__main__":
    main()
