"""The unit layer: the endpoint and the ACP protocol driven directly, no transport.

`Sink` stands in for `transport.Outbound` and records every line the agent queues, decoded, in
order. `UnitConnection` attaches the ACP protocol to an endpoint on it with a `SessionRegistry` and a store,
and lets a test hand messages to the endpoint exactly as the receive loop would: one at a time,
in the calling greenlet, with no yield in between unless the test yields.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from gevent.event import Event

from acp_green.rpc import wire
from acp_green import protocol
from acp_green.agent import Agent
from acp_green.context import ConnectionContext
from acp_green.demo import DemoAgent
from acp_green.rpc.endpoint import Endpoint
from acp_green.tools.rig.client import Record
from acp_green.sessions import SessionRegistry
from acp_green.store import MemoryStore
from acp_green.rpc.transport import OutputLimits
from tests.helpers import invariant_problems, stream_schema_problems, tolerated_invariants, wait_until

__all__ = ["Sink", "UnitConnection", "same_id", "unit"]


class Sink:
    """An in-memory outbound queue: never full, never blocks; records and decodes every line."""

    def __init__(self, records: list[Record]) -> None:
        self.limits = OutputLimits()
        self.queued_bytes = 0
        self.over_high_water = False
        self.over_hard_limit = False
        self.over_input_limit = False
        self.messages: list[dict[str, Any]] = []
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._records = records
        self.changed = Event()  # set at every line: what `wait_until(..., changed=sink.changed)` waits on
        self.translate: Callable[[bytes], bytes | None] | None = None  # as Outbound's: the negotiated dialect's

    def put(self, data: bytes) -> None:
        """Called by the endpoint (maybe from the hub): must not block or yield.

        A batch's answer (a JSON array line) is one record, and each of its members a message."""
        if self.translate is not None:
            translated = self.translate(data)
            if translated is None:
                return
            data = translated
        for line in data.splitlines():
            decoded = json.loads(line)
            self._records.append(Record(time.monotonic(), "in", line, decoded))
            for message in decoded if isinstance(decoded, list) else [decoded]:
                self.messages.append(message)
                for listener in list(self.listeners):
                    listener(message)
        self.changed.set()

    def wait_below_high_water(self, cancelled: Any = None) -> None:
        return None

    def release_producers(self) -> None:
        return None

    # -- what was sent -------------------------------------------------------------------------
    def responses(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m]

    def response(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The one response to `request_id` (ids compared with their type, 1 != "1")."""
        def found() -> list[dict[str, Any]]:
            return [m for m in self.responses() if same_id(m.get("id"), request_id)]

        answers = wait_until(found, timeout, f"the response to {request_id!r}", self.changed)
        assert len(answers) == 1, answers
        return answers[0]

    def index_of_response(self, request_id: Any) -> int:
        return next(i for i, m in enumerate(self.messages) if "method" not in m and same_id(m.get("id"), request_id))

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages
                if m.get("method") == "session/update" and m["params"].get("sessionId") == session_id]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Requests the agent sent to the client."""
        return [m for m in self.messages if m.get("method") == method and "id" in m]


def same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


class UnitConnection:
    """One ACP connection without a transport: the test is the receive loop and the client."""

    def __init__(self, agent: Agent | None = None, store: Any = None, *, idle_timeout: float = 1800.0,
                 max_background: int = 32, provide_mcp: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
        self.records: list[Record] = []
        self.sink = Sink(self.records)
        self.store = store if store is not None else MemoryStore()
        self.sessions = SessionRegistry(self.store, idle_timeout)
        self.context = ConnectionContext()
        self.endpoint = Endpoint(self.sink, max_background=max_background)  # type: ignore[arg-type]
        self.protocol = protocol.attach(
            self.endpoint, agent or DemoAgent(), self.context, self.sessions, self.store, provided_commands=provide_mcp,
        )
        self._ids = itertools.count(1)
        self.closed = False

    # -- the client's side -------------------------------------------------------------------
    def _record(self, message: dict[str, Any]) -> None:
        self.records.append(Record(time.monotonic(), "out", b"", message))

    def request(self, method: str, params: Any = None, request_id: Any = None) -> Any:
        """Hand a request to the endpoint as the receive loop would; returns its id."""
        if request_id is None:
            request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._record(message)
        self.endpoint.handle(wire.Request(request_id, method, params))
        return request_id

    def batch(self, *messages: Any) -> None:
        """Hand a JSON-RPC batch line to the endpoint as the receive loop would."""
        self.records.append(Record(time.monotonic(), "out", b"", list(messages)))
        self.endpoint.handle_line(json.dumps(list(messages)).encode())

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._record(message)
        self.endpoint.handle(wire.Notification(method, params))

    def respond(self, request_id: Any, result: Any) -> None:
        """Answer a request the agent sent to the client."""
        self._record({"jsonrpc": "2.0", "id": request_id, "result": result})
        self.endpoint.handle(wire.Response(request_id, result))

    def result(self, request_id: Any, timeout: float = 10.0) -> Any:
        response = self.sink.response(request_id, timeout)
        assert "error" not in response, response
        return response["result"]

    def error(self, request_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        response = self.sink.response(request_id, timeout)
        assert "error" in response, response
        return response["error"]

    def call(self, method: str, params: Any = None) -> Any:
        return self.result(self.request(method, params))

    def initialize(self, client_info: dict[str, Any] | None = None, capabilities: dict[str, Any] | None = None) -> Any:
        params: dict[str, Any] = {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
        if client_info is not None:
            params["clientInfo"] = client_info
        return self.call("initialize", params)

    def new_session(self, cwd: str = "/tmp", mcp_servers: Sequence[dict[str, Any]] = ()) -> str:
        return self.call("session/new", {"cwd": cwd, "mcpServers": list(mcp_servers)})["sessionId"]

    @staticmethod
    def prompt_params(session_id: str, text: str) -> dict[str, Any]:
        return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}

    def prompt(self, session_id: str, text: str, request_id: Any = None) -> Any:
        return self.request("session/prompt", self.prompt_params(session_id, text), request_id)

    # -- ending --------------------------------------------------------------------------------
    def close(self, grace: float = 2.0) -> int:
        """The server's shutdown path without a transport; returns how many requests were killed."""
        if self.closed:
            return 0
        self.closed = True
        return self.protocol.shut_down(grace)

    def schema_problems(self) -> list[str]:
        return stream_schema_problems(self.records)  # against the negotiated version's schema


@pytest.fixture
def unit(request: pytest.FixtureRequest) -> Iterator[Callable[..., UnitConnection]]:
    """Build UnitConnections; each is shut down at teardown, schema- and invariant-checked, with no
    greenlet left (opt out of an invariant only with `@pytest.mark.breaks_invariants`)."""
    made: list[UnitConnection] = []
    tolerated = tolerated_invariants(request)

    def build(agent: Agent | None = None, **options: Any) -> UnitConnection:
        connection = UnitConnection(agent, **options)
        made.append(connection)
        return connection

    yield build
    problems: list[str] = []
    for connection in made:
        connection.close()
        if "schema" not in tolerated:
            problems.extend(connection.schema_problems())
        # Every request was handed to the endpoint: each is owed an answer.
        problems.extend(invariant_problems(connection.records, tolerated, complete=True))
        problems.extend(f"greenlet left behind: {g}" for g in connection.endpoint.greenlets() if not g.dead)
    assert not problems, problems
