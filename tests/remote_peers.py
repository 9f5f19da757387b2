"""Clients of a listening agent for the tests: a WebSocket peer, raw HTTP exchanges, an SSE reader.

Blocking clients in threads (the test process is not patched); every message a WebSocket peer
exchanges is recorded and checked against ACP's schemas when the listening agent is stopped.
"""

from __future__ import annotations

import http.client
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from websockets.sync.client import ClientConnection, connect

from acp_green.tools.rig.schema import StreamChecker
from tests.remote_serve import RemoteServer

BOUND = 30.0  # seconds any single wait may take before a test fails instead of hanging


class ListeningAgent:
    """A listening agent (`remote_serve.RemoteServer`) and the WebSocket peers a test opened on it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = RemoteServer(None, *args, env=env)
        assert self.process.url is not None
        self.url = self.process.url
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.ws_url = self.process.ws_url
        self.peers: list[WsPeer] = []
        #: What stopping found beside the exit code (a process of its group left behind).
        self.stop_problems: list[str] = []

    def ws(self, headers: dict[str, str] | None = None) -> WsPeer:
        socket = connect(self.ws_url, additional_headers=headers, open_timeout=BOUND, max_size=None)
        peer = WsPeer(socket.__enter__())  # closed by WsPeer.close
        self.peers.append(peer)
        return peer

    def http(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=BOUND)

    def stop(self) -> int:
        """SIGTERM, and the exit code once it has ended (bounded)."""
        for peer in self.peers:
            peer.close()
        self.stop_problems = self.process.stop()
        code = self.process.proc.returncode
        assert code is not None, self.stop_problems
        return code

    def schema_problems(self) -> list[str]:
        return [problem for peer in self.peers for problem in peer.schema_problems()]


@dataclass
class WsPeer:
    """One WebSocket connection: requests with ids, every message kept in order."""

    socket: ClientConnection
    received: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    next_id: int = 0
    closed: bool = False

    @property
    def connection_id(self) -> str | None:
        response = self.socket.response
        return response.headers.get("Acp-Connection-Id") if response is not None else None

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.log.append(("out", message))
        self.socket.send(json.dumps(message))

    def request(self, method: str, params: Any) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def read(self, timeout: float = BOUND) -> dict[str, Any]:
        message = json.loads(self.socket.recv(timeout=timeout))
        self.received.append(message)
        self.log.append(("in", message))
        return message

    def until(self, done: Callable[[dict[str, Any]], bool], timeout: float = BOUND) -> dict[str, Any]:
        """Read until a message satisfies `done`; answers the agent's permission requests with the first option."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.read(max(0.01, deadline - time.monotonic()))
            if done(message):
                return message
            if message.get("method") == "session/request_permission":
                option = message["params"]["options"][0]["optionId"]
                self.send({"jsonrpc": "2.0", "id": message["id"],
                           "result": {"outcome": {"outcome": "selected", "optionId": option}}})

    def answer_to(self, request_id: int, timeout: float = BOUND) -> dict[str, Any]:
        return self.until(lambda m: m.get("id") == request_id and "method" not in m, timeout)

    def call(self, method: str, params: Any) -> dict[str, Any]:
        return self.answer_to(self.request(method, params))

    def initialize(self) -> dict[str, Any]:
        return self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self, cwd: str = "/tmp") -> str:
        answer = self.call("session/new", {"cwd": cwd, "mcpServers": []})
        return answer["result"]["sessionId"]

    def prompt(self, session_id: str, text: str) -> int:
        return self.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.received
                if m.get("method") == "session/update" and m["params"].get("sessionId") == session_id]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.socket.close()

    def schema_problems(self) -> list[str]:
        checker = StreamChecker("agent")
        problems: list[str] = []
        for direction, message in self.log:
            problems.extend(checker.observe(message, from_sender=direction == "in"))
        return problems


def exchange(agent: ListeningAgent, method: str, body: bytes | str = b"", headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP exchange with /acp: status, headers (lower-cased names), body."""
    conn = agent.http()
    try:
        conn.request(method, "/acp", body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": 1, "clientCapabilities": {}}})
JSON = {"Content-Type": "application/json"}


def http_initialize(agent: ListeningAgent, headers: dict[str, str] | None = None) -> str:
    status, found, body = exchange(agent, "POST", INITIALIZE, {**JSON, **(headers or {})})
    assert status == 200, (status, body)
    assert json.loads(body)["result"]["protocolVersion"] == 1
    return found["acp-connection-id"]


class EventStreamReader:
    """Reads one event stream (GET /acp) in a thread; its messages and comments in a queue."""

    def __init__(self, agent: ListeningAgent, headers: dict[str, str]) -> None:
        self._conn = agent.http()
        self._conn.request("GET", "/acp", headers={"Accept": "text/event-stream", **headers})
        self.response = self._conn.getresponse()
        self.status = self.response.status
        self.items: queue.Queue[dict[str, Any] | str | None] = queue.Queue()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data: "):
                    self.items.put(json.loads(line[len("data: "):]))
                elif line.startswith(":"):
                    self.items.put(line)
        except (OSError, ValueError, AttributeError, http.client.HTTPException):  # AttributeError: closed under us
            pass
        finally:
            self.items.put(None)

    def messages(self, timeout: float = BOUND) -> Iterator[dict[str, Any]]:
        """Messages as they come (comments skipped); ends at the stream's end."""
        while True:
            item = self.items.get(timeout=timeout)
            if item is None:
                return
            if isinstance(item, dict):
                yield item

    def until(self, done: Callable[[dict[str, Any]], bool], timeout: float = BOUND) -> dict[str, Any]:
        for message in self.messages(timeout):
            if done(message):
                return message
        raise AssertionError("the event stream ended first")

    def close(self) -> None:
        self._conn.close()
