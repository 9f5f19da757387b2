"""The floor: a bare single-threaded Python ACP loop, no framework and no concurrency.

Benchmark peer for `acp-green bench`. It reads one line, handles it to the end, then reads the
next: a `/stream` prompt runs to completion before anything else is read, so control requests
and cancels wait behind it. `/wait` is only bookkeeping (the prompt stays unanswered until its
session is cancelled), which needs no concurrency.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, BinaryIO

# Chunk text is `i:` plus dots, which never needs JSON escaping, so the line is a template:
# this is the most a Python process can push through the pipe, not how a real agent encodes.
CHUNK = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}\n'
MODES = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}


def reply(out: BinaryIO, request_id: Any, result: Any) -> None:
    """Write one response line."""
    out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")


def stream(out: BinaryIO, session_id: str, count: int, size: int) -> None:
    """Write `count` numbered chunk updates into the buffered stdout (it writes when full)."""
    sid = json.dumps(session_id)
    write = out.write
    for i in range(count):
        head = f"{i}:"
        write((CHUNK % (sid, head + "." * (size - len(head)))).encode())


def main() -> None:
    """Read a line, handle it to the end, repeat until EOF."""
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    waiting: dict[Any, Any] = {}  # sessionId (as the client sent it) -> id of its unanswered /wait prompt
    for line in inp:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        params = message.get("params") or {}
        request_id = message.get("id")
        if method == "initialize":
            reply(out, request_id, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": [], "agentInfo": {"name": "bare-loop", "version": "0"}})
        elif method == "session/new":
            reply(out, request_id, {"sessionId": uuid.uuid4().hex, "modes": MODES})
        elif method == "session/set_mode":
            reply(out, request_id, {})
        elif method == "session/cancel":
            pending = waiting.pop(params.get("sessionId"), None)
            if pending is not None:
                reply(out, pending, {"stopReason": "cancelled"})
        elif method == "session/prompt":
            session_id = params["sessionId"]
            text = "".join(b.get("text", "") for b in params.get("prompt", [])).strip()
            parts = text.split()
            if text == "/wait":
                waiting[session_id] = request_id
                continue
            if len(parts) >= 2 and parts[0] == "/stream":
                stream(out, session_id, int(parts[1]), int(parts[2]) if len(parts) > 2 else 64)
            reply(out, request_id, {"stopReason": "end_turn"})
        elif request_id is not None and method is not None:
            out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}}).encode() + b"\n")
        # One flush per message handled: answers leave at once, and a stream still goes out in
        # buffer-sized writes.
        out.flush()


if __name__ == "__main__":
    main()
