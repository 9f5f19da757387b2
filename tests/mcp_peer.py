"""Official `mcp` SDK peers for the tests, run on asyncio in a thread beside the gevent test.

The SDK is asyncio; the tests are gevent. Each peer runs its own event loop in a thread and
exchanges plain JSON-RPC dicts with the gevent side: gevent -> asyncio with
`loop.call_soon_threadsafe`, asyncio -> gevent with the hub's `run_callback_threadsafe` into a
gevent queue. Nothing is monkey-patched.

- `SdkClientOverAcp`: the SDK's `ClientSession` whose transport carries every message in
  `mcp/message` on an inbound bridge (the peer side of S7).
- `SdkServerOverAcp`: an SDK `MCPServer` hosted by the test client, answering the agent's
  `mcp/connect` / `mcp/message` / `mcp/disconnect` (outbound bridges).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import gevent
import mcp_types as types
from gevent.event import AsyncResult, Event
from gevent.queue import Queue
from mcp.shared.message import SessionMessage

from acp_green.tools.rig.client import AcpClient


class _AsyncioThread:
    """An asyncio loop in a thread, fed dicts from gevent; what it emits lands in a gevent queue."""

    def __init__(self) -> None:
        self.hub = gevent.get_hub()
        self.from_peer: Queue = Queue()
        self.done = AsyncResult()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue | None = None
        self._ready = Event()  # set from the asyncio thread through the hub's threadsafe callback

    def start(self, main: Callable[[], Awaitable[Any]]) -> None:
        def run() -> None:
            async def wrapper() -> Any:
                self.loop = asyncio.get_running_loop()
                self._inbox = asyncio.Queue()
                self.hub.loop.run_callback_threadsafe(self._ready.set)
                return await main()

            try:
                value = asyncio.run(wrapper())
            except BaseException as exc:  # hand any failure to the gevent side
                self.hub.loop.run_callback_threadsafe(self.done.set_exception, exc)
            else:
                self.hub.loop.run_callback_threadsafe(self.done.set, value)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        if not self._ready.wait(timeout=30):
            raise AssertionError("the asyncio thread did not start")

    def to_peer(self, message: dict[str, Any] | None) -> None:
        """Hand a JSON-RPC dict (or None: end of input) to the asyncio side."""
        assert self.loop is not None and self._inbox is not None
        self.loop.call_soon_threadsafe(self._inbox.put_nowait, message)

    def emit(self, message: dict[str, Any]) -> None:
        """Called in the asyncio thread: hand a dict to the gevent side."""
        self.hub.loop.run_callback_threadsafe(self.from_peer.put, message)

    async def pump_in(self, writer: Any) -> None:
        """asyncio side: feed dicts from gevent into the SDK's read stream."""
        assert self._inbox is not None
        while True:
            message = await self._inbox.get()
            if message is None:
                await writer.aclose()
                return
            await writer.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False)))

    async def pump_out(self, reader: Any) -> None:
        """asyncio side: every message the SDK writes goes to gevent as a dict."""
        async for session_message in reader:
            self.emit(session_message.message.model_dump(by_alias=True, mode="json", exclude_unset=True))


class SdkClientOverAcp:
    """Runs `scenario(session)` with an SDK ClientSession whose messages travel in `mcp/message`."""

    def __init__(self, agent: AcpClient, connection_id: str) -> None:
        self.agent = agent
        self.connection_id = connection_id
        self.peer = _AsyncioThread()
        self.sent: list[dict[str, Any]] = []

    def run(self, scenario: Callable[[Any], Awaitable[Any]], timeout: float = 60) -> Any:
        import anyio
        from mcp.client.session import ClientSession

        async def main() -> Any:
            read_writer, read_stream = anyio.create_memory_object_stream(100)
            write_stream, write_reader = anyio.create_memory_object_stream(100)
            async with anyio.create_task_group() as group:
                group.start_soon(self.peer.pump_in, read_writer)
                group.start_soon(self.peer.pump_out, write_reader)
                async with ClientSession(read_stream, write_stream) as session:
                    value = await scenario(session)
                group.cancel_scope.cancel()
            return value

        self.peer.start(main)
        relay = gevent.spawn(self._relay)
        try:
            return self.peer.done.get(timeout=timeout)
        finally:
            relay.kill()

    def _relay(self) -> None:
        while True:
            message = self.peer.from_peer.get()
            self.sent.append(message)
            params: dict[str, Any] = {"connectionId": self.connection_id, "method": message.get("method")}
            if message.get("params") is not None:
                params["params"] = message["params"]
            if "method" in message and "id" in message:
                gevent.spawn(self._request, message["id"], params)
            elif "method" in message:
                if message["method"] == "notifications/cancelled":  # the SDK's id is our outer ACP id
                    inner = dict(params.get("params") or {})
                    inner["requestId"] = f"sdk-{inner.get('requestId')}"
                    params["params"] = inner
                self.agent.notify("mcp/message", params)

    def _request(self, inner_id: Any, params: dict[str, Any]) -> None:
        response = self.agent.request("mcp/message", params, request_id=f"sdk-{inner_id}").response(timeout=60)
        reply = {"jsonrpc": "2.0", "id": inner_id}
        if "error" in response:
            reply["error"] = response["error"]
        else:
            reply["result"] = response["result"]
        self.peer.to_peer(reply)


class SdkServerOverAcp:
    """An SDK MCPServer the test client hosts and offers to the agent as `type: "acp"` (outbound bridges)."""

    def __init__(self, server: Any, server_id: str = "client-tools-1") -> None:
        self.server = server
        self.server_id = server_id
        self.peer = _AsyncioThread()
        self.connections: list[str] = []
        self.disconnected: list[str] = []
        self.inner_methods: list[str] = []
        self.cancelled_acp_ids: list[Any] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[AcpClient, Any]] = {}
        self._by_acp: dict[Any, int] = {}
        self._relay: gevent.Greenlet | None = None

    def start(self) -> None:
        import anyio

        async def main() -> None:
            read_writer, read_stream = anyio.create_memory_object_stream(100)
            write_stream, write_reader = anyio.create_memory_object_stream(100)
            lowlevel = self.server._lowlevel_server
            async with anyio.create_task_group() as group:
                group.start_soon(self.peer.pump_in, read_writer)
                group.start_soon(self.peer.pump_out, write_reader)
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
                group.cancel_scope.cancel()

        self.peer.start(main)
        self._relay = gevent.spawn(self._from_server)

    def stop(self) -> None:
        self.peer.to_peer(None)
        try:
            self.peer.done.get(timeout=10)
        except Exception:
            pass
        if self._relay is not None:
            self._relay.kill()

    def handlers(self) -> dict[str, Callable[[AcpClient, dict[str, Any]], None]]:
        return {"mcp/connect": self._connect, "mcp/message": self._message, "mcp/disconnect": self._disconnect}

    def notification_handlers(self) -> dict[str, Callable[[AcpClient, dict[str, Any]], None]]:
        return {"mcp/message": self._notification, "$/cancel_request": self._cancel}

    def _connect(self, client: AcpClient, request: dict[str, Any]) -> None:
        if (request.get("params") or {}).get("serverId") != self.server_id:
            client.respond_error(request["id"], {"code": -32602, "message": "unknown serverId"})
            return
        connection_id = f"client-conn-{len(self.connections) + 1}"
        self.connections.append(connection_id)
        client.respond(request["id"], {"connectionId": connection_id})

    def _disconnect(self, client: AcpClient, request: dict[str, Any]) -> None:
        self.disconnected.append((request.get("params") or {}).get("connectionId"))
        client.respond(request["id"], {})

    def _message(self, client: AcpClient, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        inner_id = next(self._ids)
        self._waiting[inner_id] = (client, request["id"])
        self._by_acp[request["id"]] = inner_id
        self.inner_methods.append(params.get("method"))
        message = {"jsonrpc": "2.0", "id": inner_id, "method": params.get("method")}
        if params.get("params") is not None:
            message["params"] = params["params"]
        self.peer.to_peer(message)

    def _notification(self, client: AcpClient, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        self.inner_methods.append(params.get("method"))
        inner = {"jsonrpc": "2.0", "method": params.get("method")}
        if params.get("params") is not None:
            inner["params"] = params["params"]
        self.peer.to_peer(inner)

    def _cancel(self, client: AcpClient, message: dict[str, Any]) -> None:
        acp_id = (message.get("params") or {}).get("requestId")
        self.cancelled_acp_ids.append(acp_id)
        inner_id = self._by_acp.get(acp_id)
        if inner_id is not None and inner_id in self._waiting:
            self._waiting.pop(inner_id)
            self.peer.to_peer({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": inner_id}})
            client.respond_error(acp_id, {"code": -32800, "message": "Request cancelled"})

    def _from_server(self) -> None:
        while True:
            message = self.peer.from_peer.get()
            if "method" in message:
                continue  # server logs and notifications: not needed by these tests
            waiting = self._waiting.pop(message.get("id"), None)
            if waiting is None:
                continue
            client, acp_id = waiting
            if "error" in message:
                client.respond_error(acp_id, message["error"])
            else:
                client.respond(acp_id, message.get("result"))
