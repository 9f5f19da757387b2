"""A hostile "HTTP MCP server" in a process of its own: `hostile_http.py MODE [ARG]`.

Prints its port on the first line of stdout, then serves every connection (one thread each)
as MODE says, until killed:

- `continue`: answers each request with `HTTP/1.1 100 Continue` without end.
- `big-header N`: a 200 whose one header is N bytes long, sent as fast as it goes.
- `many-headers N`: a 200 with N small headers.
- `silent`: accepts and never sends a byte (an https:// URL on it never completes a handshake).
- `garbage`: sends bytes that are not TLS (nor HTTP) and keeps the connection open.
- `sse-junk`: answers initialize and notifications as an MCP server would, then any other
  request with a 200 event stream of events whose data is not JSON, without end.
- `tls-slow SECONDS CERT KEY`: a real TLS server that waits SECONDS before its handshake, then
  answers initialize and notifications, and the next request with the text "over tls".
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import time


def read_request(conn: socket.socket) -> bytes:
    """One request's head and body (by its Content-Length); b"" when the connection ends first."""
    data = b""
    while b"\r\n\r\n" not in data:
        block = conn.recv(65536)
        if not block:
            return b""
        data += block
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        block = conn.recv(65536)
        if not block:
            return b""
        body += block
    return head + b"\r\n\r\n" + body


def answer_like_a_server(conn: socket.socket, request: bytes) -> bool:
    """Answer initialize and notifications as an MCP server would; False for any other request."""
    body = request.partition(b"\r\n\r\n")[2]
    message = json.loads(body) if body else {}
    if message.get("method") == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}
        answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
        return True
    if "id" not in message:  # a notification, or an answer
        conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        return True
    return False


def serve(conn: socket.socket, mode: str, args: list[str]) -> None:
    try:
        if mode == "silent":
            time.sleep(3600)
        elif mode == "garbage":
            conn.sendall(b"this is not TLS, nor anything else\r\n" * 64)
            time.sleep(3600)
        elif mode == "tls-slow":
            time.sleep(float(args[0]))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(args[1], args[2])
            conn = context.wrap_socket(conn, server_side=True)
            request = read_request(conn)
            while answer_like_a_server(conn, request):
                request = read_request(conn)
            call_id = json.loads(request.partition(b"\r\n\r\n")[2])["id"]
            answer = json.dumps({"jsonrpc": "2.0", "id": call_id, "result": {"content": [{"type": "text", "text": "over tls"}]}}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
            time.sleep(3600)
        request = read_request(conn)
        if mode == "sse-junk":
            while answer_like_a_server(conn, request):
                request = read_request(conn)
        if mode == "continue":
            block = b"HTTP/1.1 100 Continue\r\n\r\n" * 512
            while True:
                conn.sendall(block)
        elif mode == "big-header":
            size = int(args[0])
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Big: ")
            piece = b"x" * 65536
            for _ in range(size // len(piece)):
                conn.sendall(piece)
            conn.sendall(b"\r\nContent-Length: 2\r\n\r\n{}")
            time.sleep(3600)
        elif mode == "many-headers":
            count = int(args[0])
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            block = b"X-A: b\r\n" * 8192
            for _ in range(count // 8192):
                conn.sendall(block)
            conn.sendall(b"Content-Length: 2\r\n\r\n{}")
            time.sleep(3600)
        elif mode == "sse-junk":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            block = b"data: not json at all\n\n" * 4096
            while True:
                conn.sendall(block)
    except OSError:
        pass
    finally:
        conn.close()


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, mode, args), daemon=True).start()


if __name__ == "__main__":
    main()
