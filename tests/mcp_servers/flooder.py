"""A hostile stdio MCP server (stdlib only): answers `initialize`, `ping` and `tools/call` (`pid`; `hang`
is never answered),
and once initialized writes without pause for SECONDS (default 20), as MODE says:

- `notify`: valid `notifications/message` lines (nothing a link may refuse);
- `unknown`: valid replies to an id nobody asked for;
- `deaf`: writes nothing more, and never reads its stdin again (sleeps SECONDS).

Usage: flooder.py MODE [SECONDS]
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time

MODE = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
_out = threading.Lock()
F_SETPIPE_SZ = 1031
LINES = {
    "notify": {"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "info", "data": [{"n": i, "s": "x"} for i in range(20)]}},
    "unknown": {"jsonrpc": "2.0", "id": 987654321, "result": {"content": []}},
}


def send(message: dict) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def flood() -> None:
    try:  # a pipe the size of a few reads: the reader finds it full, never empty, while we write
        fcntl.fcntl(1, F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass
    block = (json.dumps(LINES[MODE]) + "\n") * 2000
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        with _out:
            sys.stdout.write(block)
            sys.stdout.flush()


def answer(message: dict) -> None:
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "flooder", "version": "1"}}})
    elif method == "tools/call" and message["params"].get("name") == "hang":
        return
    elif method == "tools/call":
        text = str(os.getpid())
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}], "isError": False}})
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if MODE == "deaf" and message.get("method") == "ping":
            answer(message)
            time.sleep(SECONDS)  # never reads again
            return
        answer(message)
        if message.get("method") == "notifications/initialized" and MODE in LINES:
            threading.Thread(target=flood, daemon=True).start()


if __name__ == "__main__":
    main()
