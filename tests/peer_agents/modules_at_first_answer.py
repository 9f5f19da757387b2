"""`acp-green ARGS`, recording which modules were imported when the first answer left.

usage: python modules_at_first_answer.py OUT_PATH serve [OPTIONS]

The first write to the wire that carries a JSON-RPC result (the `initialize` answer) also
writes the sorted names in `sys.modules` at that moment to OUT_PATH, one per line. The test
harness wraps `os.write` for that: the package itself never patches anything.
"""

from __future__ import annotations

import os
import sys

out_path = sys.argv.pop(1)
real_write = os.write
recorded = False


def write(fd: int, data: bytes) -> int:
    global recorded
    if not recorded and b'"result"' in bytes(data):
        recorded = True
        with open(out_path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(sorted(sys.modules)) + "\n")
    return real_write(fd, data)


os.write = write
sys.argv[0] = "acp-green"

from acp_green.__main__ import main  # noqa: E402  (after the wrapper is in place)

main()
