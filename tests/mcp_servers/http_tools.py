"""The sdk_tools MCP server over streamable HTTP (official `mcp` SDK, uvicorn), on 127.0.0.1.

A test peer, never used by the runtime. Usage: http_tools.py LOG_FILE [--json] [--idle SECONDS]

- Binds port 0 and writes `{"port": N}` as the first line of LOG_FILE, then one JSON line per
  HTTP exchange as the server sees it: the HTTP method, the `Mcp-Session-Id` and
  `MCP-Protocol-Version` headers, the JSON-RPC method (or `response`) of a POSTed body, the status
  answered, and a `disconnect` line when the client closes a stream before it ended.
- `--json` answers requests with one JSON body instead of an SSE stream.
- `--idle SECONDS` forgets a session idle that long (its id then answers 404).
- `POST /forget` makes the SDK's session manager forget every session now, as its idle expiry
  does (their ids then answer 404); it answers the forgotten ids as a JSON list.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading

import uvicorn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_tools import server  # noqa: E402 - the same tools as the stdio peer

_log_lock = threading.Lock()


def _log(path: str, record: dict) -> None:
    with _log_lock, open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")


async def _forget_sessions(send) -> None:
    manager = server._lowlevel_server.session_manager
    forgotten = list(manager._server_instances.items())
    for session_id, transport in forgotten:
        await manager._discard_session(session_id, transport)
    body = json.dumps([session_id for session_id, _ in forgotten]).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def recording(app, path: str):
    """An ASGI wrapper writing the server's view of each exchange to `path`."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] == "/forget":
            return await _forget_sessions(send)
        chunks = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        record = {"http": scope["method"], "session": headers.get("mcp-session-id"),
                  "version": headers.get("mcp-protocol-version"), "auth": headers.get("authorization"),
                  "client": list(scope.get("client") or ())}
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            record["rpc"] = decoded.get("method", "response")
            record["id"] = decoded.get("id")
            if decoded.get("method") == "notifications/cancelled":
                record["requestId"] = (decoded.get("params") or {}).get("requestId")
        replayed = False
        finished = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect" and not finished:
                _log(path, {**record, "disconnect": True})
            return message

        async def watch(message):
            nonlocal finished
            if message["type"] == "http.response.start":
                _log(path, {**record, "status": message["status"]})
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        await app(scope, replay, watch)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--idle", type=float, default=None)
    args = parser.parse_args()
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP (else each
    # answer's body waits 40 ms for the delayed ACK of its headers), as uvicorn's own bind does.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections made as soon as the port is known are queued, not refused
    app = server.streamable_http_app(json_response=args.json, session_idle_timeout=args.idle)
    with open(args.log, "w") as handle:
        handle.write(json.dumps({"port": sock.getsockname()[1], "pid": os.getpid()}) + "\n")
    config = uvicorn.Config(recording(app, args.log), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
