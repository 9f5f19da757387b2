"""A fake OpenAI-compatible chat-completions endpoint for tests: a gevent WSGI server on 127.0.0.1.

What it answers is picked by the request's conversation, so any client (the probe too) can
script it through the prompt text:

- the last message is a tool result: "tool said: RESULT";
- the last user message is `/slow` or `/wait`: "tick " every 20 ms until the client goes away
  (60 s at most) — the long response;
- `/silent`: "thinking", then nothing at all (60 s at most): a model call whose read blocks,
  which only an interrupt or a closed socket ends;
- `/think`: "thinking" then nothing but SSE keep-alive comments every 20 ms (60 s at most), as a
  model that thinks before it answers: only a client that closes the stream itself ends it;
- `/stream N [SIZE]`: N chunks, chunk i starts with `i:` and is padded to SIZE bytes (64);
- `/tool NAME JSON`: a call of function NAME with arguments JSON, its arguments split across
  chunks as real endpoints do;
- `/fail`: HTTP 500 with an OpenAI-style error body; `/malformed`: an event that is not JSON;
- anything else: "echo: TEXT" in word-sized chunks.

A test may instead queue exact bodies (`raw_replies`): the next request gets the first, byte for
byte, as a 200 event stream.

Usage is sent as a last chunk when the request asks for it (`stream_options.include_usage`),
unless the server was made with `honour_usage=False` (endpoints that ignore the option).
Every request is recorded with how its stream ended: "done", or "disconnected" when the client
closed it first.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.event import Event
from gevent.pywsgi import WSGIServer

from tests.helpers import wait_until

TICK = 0.02
SLOW_LIMIT = 60.0


@dataclass
class Exchange:
    """One request the fake server got, and how its answer went."""

    body: dict[str, Any]
    headers: dict[str, str]
    usage: dict[str, int] | None = None  # what was sent, if anything
    ended: str | None = None  # "done" or "disconnected"
    ended_event: Event = field(default_factory=Event)


class FakeOpenAI:
    """The server; `url` is its base URL (with /v1), `exchanges` every request in order."""

    def __init__(self, *, honour_usage: bool = True) -> None:
        self.honour_usage = honour_usage
        self.exchanges: list[Exchange] = []
        self.raw_replies: list[list[bytes]] = []
        self.arrived = Event()  # set at each request: what wait_for_request waits on
        self._ids = itertools.count(1)
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)
        self._server.start()
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1"

    def stop(self) -> None:
        self._server.stop(timeout=1)

    def wait_for_request(self, count: int, timeout: float = 30.0) -> Exchange:
        """The `count`-th request (from 1), once it has arrived."""
        wait_until(lambda: len(self.exchanges) >= count, timeout, f"request #{count}", self.arrived)
        return self.exchanges[count - 1]

    # -- the WSGI application ---------------------------------------------------------------
    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
        headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        exchange = Exchange(body, headers)
        self.exchanges.append(exchange)
        self.arrived.set()
        if environ.get("PATH_INFO") != "/v1/chat/completions":
            return self._error(exchange, start_response, "404 Not Found", "no such route")
        if self.raw_replies:
            return self._stream(exchange, start_response, iter([]), raw=self.raw_replies.pop(0))
        messages = body.get("messages") or []
        last_user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        if messages and messages[-1].get("role") == "tool":
            return self._stream(exchange, start_response, self._words(f"tool said: {messages[-1].get('content')}"))
        command, _, rest = last_user.partition(" ")
        if command in ("/slow", "/wait"):
            return self._stream(exchange, start_response, self._ticks())
        if command == "/think":
            return self._stream(exchange, start_response, self._thinking())
        if command == "/silent":
            return self._stream(exchange, start_response, self._silence())
        if command == "/stream":
            count, _, size = rest.partition(" ")
            return self._stream(exchange, start_response, self._numbered(int(count), int(size or 64)))
        if command == "/tool":
            name, _, arguments = rest.partition(" ")
            return self._stream(exchange, start_response, self._tool_call(name, arguments or "{}"))
        if command == "/fail":
            return self._error(exchange, start_response, "500 Internal Server Error", "the model crashed")
        if command == "/malformed":
            exchange.ended = "done"
            exchange.ended_event.set()
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return [b"data: {this is not json\n\n"]
        return self._stream(exchange, start_response, self._words(f"echo: {last_user}"))

    def _error(self, exchange: Exchange, start_response: Any, status: str, message: str) -> list[bytes]:
        exchange.ended = "done"
        exchange.ended_event.set()
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps({"error": {"message": message, "type": "server_error"}}).encode()]

    def _stream(self, exchange: Exchange, start_response: Any, deltas: Iterator[Any], raw: list[bytes] | None = None) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
        return self._events(exchange, deltas, raw)

    def _events(self, exchange: Exchange, deltas: Iterator[Any], raw: list[bytes] | None) -> Iterator[bytes]:
        completion_id = f"chatcmpl-{next(self._ids)}"
        sent = 0
        try:
            if raw is not None:
                yield from raw
                exchange.ended = "done"
                return
            for item in deltas:
                if item is None:
                    yield b": keep-alive\n\n"
                    continue
                delta, finish = item
                sent += 1
                yield _event({"id": completion_id, "object": "chat.completion.chunk",
                              "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            wants_usage = bool((exchange.body.get("stream_options") or {}).get("include_usage"))
            if wants_usage and self.honour_usage:
                exchange.usage = {"prompt_tokens": 10 * len(exchange.body.get("messages") or []), "completion_tokens": sent}
                exchange.usage["total_tokens"] = exchange.usage["prompt_tokens"] + sent
                yield _event({"id": completion_id, "object": "chat.completion.chunk", "choices": [], "usage": exchange.usage})
            yield b"data: [DONE]\n\n"
            exchange.ended = "done"
        finally:
            # A client that closed the stream makes a write fail: the server closes this generator.
            if exchange.ended is None:
                exchange.ended = "disconnected"
            exchange.ended_event.set()

    # -- scripted replies: (delta, finish_reason) pairs -------------------------------------
    @staticmethod
    def _words(text: str) -> Iterator[tuple[dict[str, Any], str | None]]:
        yield {"role": "assistant", "content": ""}, None
        for word in text.split(" ")[:-1]:
            yield {"content": word + " "}, None
        yield {"content": text.split(" ")[-1]}, None
        yield {}, "stop"

    @staticmethod
    def _ticks() -> Iterator[tuple[dict[str, Any], str | None]]:
        for _ in range(int(SLOW_LIMIT / TICK)):
            yield {"content": "tick "}, None
            gevent.sleep(TICK)
        yield {}, "length"

    @staticmethod
    def _thinking() -> Iterator[tuple[dict[str, Any], str | None] | None]:
        yield {"role": "assistant", "content": "thinking"}, None
        for _ in range(int(SLOW_LIMIT / TICK)):
            yield None
            gevent.sleep(TICK)
        yield {}, "stop"

    @staticmethod
    def _silence() -> Iterator[tuple[dict[str, Any], str | None] | None]:
        yield {"role": "assistant", "content": "thinking"}, None
        gevent.sleep(SLOW_LIMIT)
        yield {}, "stop"

    @staticmethod
    def _numbered(count: int, size: int) -> Iterator[tuple[dict[str, Any], str | None]]:
        for i in range(count):
            yield {"content": f"{i}:".ljust(size, ".")}, None
        yield {}, "stop"

    def _tool_call(self, name: str, arguments: str) -> Iterator[tuple[dict[str, Any], str | None]]:
        call_id = f"call_{next(self._ids)}"
        half = len(arguments) // 2
        yield {"role": "assistant", "content": None,
               "tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}, None
        yield {"tool_calls": [{"index": 0, "function": {"arguments": arguments[:half]}}]}, None
        yield {"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}, None
        yield {}, "tool_calls"


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"
