"""A raw stdio MCP server (stdlib only) that records every line it receives, for wire-level tests.

RECORD=path: each line read ("IN ...") and written ("OUT ...") is appended there. Tools: `echo`, `sleep`
(seconds; replies even when cancelled if `late` is true, to test that late replies are dropped),
`pid`, `garbage` (a non-JSON line on stdout, then the answer), `flood` (MB of stderr, then the
answer), `big` (a result of `size` bytes), `crash` (exits mid-request), `ask` (sends the client a
`roots/list` request and a notification, answers with what the client replied). `--ignore-eof`: keeps running after stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

RECORD = os.environ.get("RECORD")
_out = threading.Lock()
_cancelled: set = set()
_asks: dict = {}


def send(message: dict) -> None:
    line = json.dumps(message)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        record("OUT " + line)


def record(line: str) -> None:
    """Append one line to $RECORD: "IN <line>" for what was read, "OUT <line>" for what was written."""
    if RECORD:
        with open(RECORD, "a") as handle:
            handle.write(line.rstrip("\n")[:2000] + "\n")


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def call_tool(request_id, params: dict) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result(str(args.get("text", "")))})
    elif name == "sleep":
        deadline = time.monotonic() + float(args.get("seconds", 1))
        while time.monotonic() < deadline:
            if request_id in _cancelled and not args.get("late"):
                return  # MCP: a cancelled request gets no reply
            time.sleep(0.01)
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("slept")})
    elif name == "pid":
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result(str(os.getpid()))})
    elif name == "garbage":
        with _out:
            sys.stdout.write("this is not json {\n")
            sys.stdout.write("[1, 2, 3]\n")
            sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("after garbage")})
    elif name == "flood":
        block = ("e" * 1023 + "\n").encode()
        for _ in range(int(args.get("mb", 4)) * 1024):
            sys.stderr.buffer.write(block)
        sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("flooded")})
    elif name == "big":
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("y" * int(args.get("size", 1 << 20)))})
    elif name == "crash":
        os._exit(7)
    elif name == "ask":
        event = threading.Event()
        _asks["ask-1"] = event
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "asking"}})
        send({"jsonrpc": "2.0", "id": "ask-1", "method": "roots/list"})
        event.wait(30)
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result(json.dumps(_asks.get("answer")))})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def main() -> None:
    if "--exit-now" in sys.argv:
        sys.exit(4)
    for line in sys.stdin:
        record("IN " + line)
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        request_id = message.get("id")
        if method is None:  # a response to our `ask`
            if request_id in _asks:
                _asks["answer"] = message.get("result", message.get("error"))
                _asks[request_id].set()
            continue
        if request_id is None:
            if method == "notifications/cancelled":
                _cancelled.add((message.get("params") or {}).get("requestId"))
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": (message.get("params") or {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "recorder", "version": "1"}}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            threading.Thread(target=call_tool, args=(request_id, message.get("params") or {}), daemon=True).start()
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})
    if "--ignore-eof" in sys.argv:  # a server that outlives its stdin: only a signal ends it
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
