"""Interop over the network: the official ACP Python SDK (agent-client-protocol 0.12.1 with its
`http` extra) drives a real `acp-green serve --listen 127.0.0.1:0` through its own remote clients,
`acp.http.create_http_stream` (Streamable HTTP: POST, event streams, DELETE) and
`acp.ws.create_websocket_stream` (one message a text frame), over real sockets.

Each transport carries a whole conversation (a streamed prompt, a cancel, a permission answered by
the client), then a second connection loads the session and gets its whole history; `--token`
refuses a client without it on every request and upgrade; and one session is held by one
connection at a time (session_in_use) until that connection ends.

Every wait is bounded (30 s) and nothing is asserted on timing. Each connection's messages (and
for HTTP, each request's status) are printed when it closes, so a failing test shows its wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from acp import RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.http.client import AcpHttpStatusError, create_http_stream
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.ws.client import create_websocket_stream
from websockets.exceptions import InvalidStatus

from tests.remote_serve import BOUND, RemoteServer, remote_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow  # a third-party peer: the official Python SDK's remote clients

KINDS = ("http", "ws")
#: The updates a session's history is made of (what session/load replays).
HISTORY = ("user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update")
TOKEN = "s3cret"

T = TypeVar("T")


async def bounded(awaitable: Awaitable[T], what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, BOUND)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {BOUND:g} s waiting for {what}") from None


async def until(predicate: Callable[[], Any], changed: asyncio.Event, what: str) -> Any:
    """Wait (bounded) until predicate() is truthy; `changed` is set whenever what it reads changes."""

    async def check() -> Any:
        while True:
            changed.clear()
            value = predicate()
            if value:
                return value
            await changed.wait()

    return await bounded(check(), what)


class Wire:
    """The SDK connection's Transport, in front of the SDK's HTTP or WebSocket client: it keeps every
    message each way (and the HTTP log) for the failure output and for waits."""

    def __init__(self, kind: str, inner: Any, http_log: list[tuple[str, int]] | None = None,
                 http: httpx.AsyncClient | None = None) -> None:
        self.kind = kind
        self.inner = inner
        self.http_log = http_log if http_log is not None else []
        self._http = http
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        await self.inner.send(message)
        self.sent.append(message)
        self.changed.set()

    async def receive(self) -> dict[str, Any] | None:
        message = await self.inner.receive()
        if message is not None:
            self.received.append(message)
            self.changed.set()
        return message

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            if self._http is not None:
                await self._http.aclose()

    def sent_count(self, method: str) -> int:
        return sum(1 for m in self.sent if m.get("method") == method)

    def dump(self) -> str:
        def short(message: dict[str, Any]) -> str:
            text = json.dumps(message)
            return text if len(text) <= 300 else text[:300] + "…"
        lines = [f"--- {self.kind} connection: sent {len(self.sent)}, received {len(self.received)}"]
        lines += [f"  HTTP {method} -> {status}" for method, status in self.http_log]
        lines += [f"  > {short(m)}" for m in self.sent] + [f"  < {short(m)}" for m in self.received]
        return "\n".join(lines)


class Recorder:
    """The client side the SDK calls back: records updates, allows every permission, takes writes."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.permissions: list[str] = []
        self.writes: dict[str, str] = {}
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True)))
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append(tool_call.title or tool_call.tool_call_id)
        allow = next(o for o in options if o.kind.startswith("allow"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes[path] = content
        return WriteTextFileResponse()

    def history(self, session_id: str) -> list[dict[str, Any]]:
        return [u for sid, u in self.updates if sid == session_id and u["sessionUpdate"] in HISTORY]

    def chunks(self, session_id: str, start: int = 0) -> list[str]:
        return [u["content"]["text"] for sid, u in self.updates[start:]
                if sid == session_id and u["sessionUpdate"] == "agent_message_chunk"]


async def open_connection(kind: str, server: RemoteServer, client: Recorder,
                          headers: dict[str, str] | None = None) -> tuple[ClientSideConnection, Wire]:
    """The SDK's ClientSideConnection over its own remote client for `kind`. For HTTP the SDK's
    client is given the httpx client it would make itself (HTTP/2 allowed, no read timeout), plus
    a hook that logs each request's status."""
    assert server.url is not None
    if kind == "http":
        log: list[tuple[str, int]] = []

        async def record(response: httpx.Response) -> None:
            log.append((response.request.method, response.status_code))

        http = httpx.AsyncClient(http2=True, timeout=httpx.Timeout(None), event_hooks={"response": [record]})
        wire = Wire(kind, create_http_stream(server.url, client=http, headers=headers), log, http)
    else:
        wire = Wire(kind, await bounded(create_websocket_stream(server.ws_url, headers=headers), "the WebSocket upgrade"))
    return connect_to_agent(client, wire), wire


async def initialize(conn: ClientSideConnection) -> Any:
    return await bounded(conn.initialize(
        protocol_version=1,
        client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=True)),
        client_info=Implementation(name="acp-green-remote-interop", version="1"),
    ), "initialize")


async def close(conn: ClientSideConnection, wire: Wire) -> None:
    """Close the SDK connection (HTTP: DELETE; WebSocket: the close handshake) and show its wire."""
    try:
        await bounded(conn.close(), f"the {wire.kind} transport to close")
    finally:
        print(wire.dump())


def check_http_log(wire: Wire) -> None:
    """Over HTTP: no request of the conversation was refused, and the close's DELETE was accepted."""
    if wire.kind == "http":
        assert [(m, s) for m, s in wire.http_log if s >= 400] == [], wire.http_log
        assert [s for m, s in wire.http_log if m == "DELETE"] == [202], wire.http_log


def session_in_use(exc: RequestError) -> bool:
    return exc.code == -32000 and isinstance(exc.data, dict) and exc.data.get("reason") == "session_in_use"


async def load_once_released(conn: ClientSideConnection, session_id: str, cwd: str) -> int:
    """session/load, sent again while the server still counts the session as held: a disconnect
    reaches the server after the client's close returns (a DELETE is answered 202, Accepted; a
    socket's end is read later), so the release follows it. How many loads were refused."""
    refused = 0
    deadline = asyncio.get_running_loop().time() + BOUND
    while True:
        try:
            await bounded(conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=[]), "session/load")
            return refused
        except RequestError as exc:
            if not session_in_use(exc) or asyncio.get_running_loop().time() > deadline:
                raise
            refused += 1
            await asyncio.sleep(0.1)


# -- a whole conversation, then the session loaded on a new connection ------------------------------
async def _converse(kind: str, server: RemoteServer, workdir: Path) -> tuple[str, list[str], list[dict[str, Any]]]:
    """The first connection: the session's id, the prompts sent and the history it streamed."""
    client = Recorder()
    conn, wire = await open_connection(kind, server, client)
    try:
        init = await initialize(conn)
        assert init.protocol_version == 1
        assert init.agent_info is not None and init.agent_info.name == "acp-green-demo"
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        session = await bounded(conn.new_session(cwd=str(workdir), mcp_servers=[]), "session/new")
        sid = session.session_id
        prompts = []

        # A prompt whose reply streams: every chunk, in order, before its answer (S5).
        hello = f"hello over {kind}"
        prompts.append(hello)
        answer = await bounded(conn.prompt(session_id=sid, prompt=[text_block(hello)]), "the hello prompt")
        assert (answer.stop_reason, client.chunks(sid)) == ("end_turn", [hello])
        start = len(client.updates)
        prompts.append("/stream 20 16")
        answer = await bounded(conn.prompt(session_id=sid, prompt=[text_block("/stream 20 16")]), "the streamed prompt")
        assert answer.stop_reason == "end_turn"
        assert [c.split(":")[0] for c in client.chunks(sid, start)] == [str(i) for i in range(20)]

        # A running prompt is cancelled: session/cancel is read while it runs (S1) and the prompt
        # answers "cancelled" (S11, S14). The cancel is sent once the prompt has been sent
        # (HTTP: its POST answered 202), as a client does when the user presses stop.
        prompts.append("/wait")
        before = wire.sent_count("session/prompt")
        waiting = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("/wait")]))
        await until(lambda: wire.sent_count("session/prompt") > before, wire.changed, "the /wait prompt to be sent")
        await bounded(conn.cancel(session_id=sid), "session/cancel to be sent")
        assert (await bounded(waiting, "the cancelled prompt's answer")).stop_reason == "cancelled"

        # The agent asks permission mid-turn; the client's answer gets through while the turn waits (S1).
        path = f"{workdir}/from-{kind}.txt"
        prompts.append(f"/write {path} written over {kind}")
        answer = await bounded(conn.prompt(session_id=sid, prompt=[text_block(prompts[-1])]), "the prompt asking permission")
        assert answer.stop_reason == "end_turn"
        assert client.permissions == [f"Write {path}"]
        assert client.writes == {path: f"written over {kind}"}
        assert [u["status"] for u in client.history(sid) if u["sessionUpdate"].startswith("tool_call")] == ["pending", "completed"]
    finally:
        await close(conn, wire)
    check_http_log(wire)
    return sid, prompts, client.history(sid)


async def _load_elsewhere(kind: str, server: RemoteServer, workdir: Path, sid: str, prompts: list[str],
                          live: list[dict[str, Any]]) -> None:
    """A new connection loads the session: its whole history is replayed, in order, once; then it
    is this connection's to prompt."""
    client = Recorder()
    conn, wire = await open_connection(kind, server, client)
    try:
        await initialize(conn)
        await load_once_released(conn, sid, str(workdir))
        agent_side = [u for u in live if u["sessionUpdate"] != "user_message_chunk"]
        await until(lambda: len(client.history(sid)) >= len(prompts) + len(agent_side), client.changed,
                    f"the replay of {len(prompts)} prompts and {len(agent_side)} updates")
        replay = client.history(sid)
        assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"] == prompts
        assert [u for u in replay if u["sessionUpdate"] != "user_message_chunk"] == agent_side
        start = len(client.updates)
        answer = await bounded(conn.prompt(session_id=sid, prompt=[text_block("still here")]), "a prompt after the load")
        assert (answer.stop_reason, client.chunks(sid, start)) == ("end_turn", ["still here"])
    finally:
        await close(conn, wire)
    check_http_log(wire)


@pytest.mark.parametrize("kind", KINDS)
def test_python_sdk_remote_client_converses_then_loads_the_session_on_a_new_connection(kind, remote_server, tmp_path):
    """Over Streamable HTTP and over WebSocket, with the Python SDK's own clients: initialize,
    session/new, a prompt whose 20 chunks arrive in order before its answer (S5), a running
    prompt cancelled (S1, S11: it answers "cancelled", S14), a permission the client answers
    mid-turn (S1); the transport is closed, and a new transport's session/load replays the whole
    history (every prompt, every chunk and tool call, in order, nothing lost) and takes a prompt."""
    server = remote_server()
    sid, prompts, live = asyncio.run(_converse(kind, server, tmp_path))
    asyncio.run(_load_elsewhere(kind, server, tmp_path, sid, prompts, live))


# -- --token ------------------------------------------------------------------------------------------
async def _refused_without_token(server: RemoteServer, headers: dict[str, str] | None) -> None:
    conn, wire = await open_connection("http", server, Recorder(), headers=headers)
    try:
        with pytest.raises(AcpHttpStatusError) as refused:
            await initialize(conn)
        assert refused.value.status_code == 401
    finally:
        await bounded(conn.close(), "the refused HTTP transport to close")
    assert wire.http_log == [("POST", 401)]  # nothing else was tried: no connection id to DELETE
    with pytest.raises(InvalidStatus) as upgrade:
        await bounded(create_websocket_stream(server.ws_url, headers=headers), "the refused WebSocket upgrade")
    assert upgrade.value.response.status_code == 401


async def _works_with_token(kind: str, server: RemoteServer, workdir: Path) -> None:
    client = Recorder()
    conn, wire = await open_connection(kind, server, client, headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        await initialize(conn)
        sid = (await bounded(conn.new_session(cwd=str(workdir), mcp_servers=[]), "session/new")).session_id
        answer = await bounded(conn.prompt(session_id=sid, prompt=[text_block("hello")]), "the prompt")
        assert (answer.stop_reason, client.chunks(sid)) == ("end_turn", ["hello"])
    finally:
        await close(conn, wire)
    check_http_log(wire)  # every request carried the token and was let through: POSTs, event streams, DELETE
    if kind == "http":
        assert {m for m, _ in wire.http_log} == {"POST", "GET", "DELETE"}


async def _every_request_needs_the_token(server: RemoteServer) -> None:
    """Raw HTTP: a connection opened with the token still needs it on each later request."""
    assert server.url is not None
    good = {"Authorization": f"Bearer {TOKEN}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    async with httpx.AsyncClient(timeout=BOUND) as http:
        opened = await http.post(server.url, json=init, headers=good)
        assert opened.status_code == 200, opened.text
        cid = {"Acp-Connection-Id": opened.headers["Acp-Connection-Id"]}
        new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
        assert (await http.post(server.url, json=new, headers=cid)).status_code == 401
        assert (await http.post(server.url, json=new, headers={**cid, "Authorization": "Bearer nope"})).status_code == 401
        async with http.stream("GET", server.url, headers={**cid, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 401
        assert (await http.delete(server.url, headers=cid)).status_code == 401
        assert (await http.delete(server.url, headers={**cid, **good})).status_code == 202


def test_token_refuses_requests_and_upgrades_without_it_and_admits_the_python_sdk_with_it(remote_server, tmp_path):
    """`--token`: the Python SDK's HTTP client without `Authorization: Bearer TOKEN` (or with another
    token) is refused 401 at initialize, its WebSocket client 401 at the upgrade; with the header
    passed to either client, a conversation works and each of its requests is let through; a
    connection opened with the token is refused 401 on any later request without it."""
    server = remote_server("--token", TOKEN)
    asyncio.run(_refused_without_token(server, None))
    asyncio.run(_refused_without_token(server, {"Authorization": "Bearer nope"}))
    for kind in KINDS:
        asyncio.run(_works_with_token(kind, server, tmp_path))
    asyncio.run(_every_request_needs_the_token(server))


# -- one session, one connection at a time --------------------------------------------------------------
async def _raw_session_requests_refused(server: RemoteServer, sid: str) -> None:
    """Raw HTTP, from a connection that does not hold the session: its session stream (GET) and a
    session-scoped POST naming it are refused 409."""
    assert server.url is not None
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    async with httpx.AsyncClient(timeout=BOUND) as http:
        opened = await http.post(server.url, json=init)
        assert opened.status_code == 200, opened.text
        headers = {"Acp-Connection-Id": opened.headers["Acp-Connection-Id"], "Acp-Session-Id": sid}
        async with http.stream("GET", server.url, headers={**headers, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 409
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "not yours"}]}}
        assert (await http.post(server.url, json=prompt, headers=headers)).status_code == 409
        assert (await http.delete(server.url, headers={"Acp-Connection-Id": headers["Acp-Connection-Id"]})).status_code == 202


async def _one_holder(holder: str, other: str, server: RemoteServer, workdir: Path) -> None:
    a_client, b_client = Recorder(), Recorder()
    a, a_wire = await open_connection(holder, server, a_client)
    b, b_wire = await open_connection(other, server, b_client)
    a_open = b_open = True
    try:
        await initialize(a)
        await initialize(b)
        sid = (await bounded(a.new_session(cwd=str(workdir), mcp_servers=[]), "session/new on A")).session_id
        answer = await bounded(a.prompt(session_id=sid, prompt=[text_block("from A")]), "A's prompt")
        assert answer.stop_reason == "end_turn"

        with pytest.raises(RequestError) as refused:
            await bounded(b.load_session(cwd=str(workdir), session_id=sid, mcp_servers=[]), "B's session/load")
        assert session_in_use(refused.value), (refused.value.code, str(refused.value), refused.value.data)
        await _raw_session_requests_refused(server, sid)
        # The refusals changed nothing: A still holds the session, and B was sent none of it.
        answer = await bounded(a.prompt(session_id=sid, prompt=[text_block("/stream 3 8")]), "A's second prompt")
        assert answer.stop_reason == "end_turn"
        assert b_client.history(sid) == []

        a_open = False
        await close(a, a_wire)
        await load_once_released(b, sid, str(workdir))
        expected = 2 + len(a_client.history(sid))  # the two prompts, and what A was sent of them
        await until(lambda: len(b_client.history(sid)) >= expected, b_client.changed, "the replay on B")
        replay = b_client.history(sid)
        assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"] == ["from A", "/stream 3 8"]
        assert [u for u in replay if u["sessionUpdate"] != "user_message_chunk"] == a_client.history(sid)
        start = len(b_client.updates)
        answer = await bounded(b.prompt(session_id=sid, prompt=[text_block("from B")]), "B's prompt")
        assert (answer.stop_reason, b_client.chunks(sid, start)) == ("end_turn", ["from B"])
        b_open = False
        await close(b, b_wire)
    finally:
        if a_open:
            await close(a, a_wire)
        if b_open:
            await close(b, b_wire)
    check_http_log(a_wire)
    check_http_log(b_wire)  # B's refused load was a JSON-RPC error: its POST was accepted (202)


@pytest.mark.parametrize(("holder", "other"), [("ws", "http"), ("http", "ws")])
def test_a_session_is_held_by_one_connection_until_it_ends(holder, other, remote_server, tmp_path):
    """Two connections of the Python SDK (one WebSocket, one Streamable HTTP): while A holds the
    session it made, B's session/load is refused -32000 with data.reason "session_in_use" (and a
    raw session stream or session POST naming it, 409), A keeps prompting it and B is sent none of
    it; once A has disconnected, B's load succeeds, replays A's history and B prompts it."""
    server = remote_server()
    asyncio.run(_one_holder(holder, other, server, tmp_path))
