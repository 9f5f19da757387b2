"""`serve --listen` over WebSocket: every rule per connection, sessions that outlive connections,
one connection per session, and the token check — through the real command line and sockets."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import InvalidStatus

from tests.remote_peers import JSON, exchange, http_initialize


def _text_of(updates: list[dict]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def test_a_session_outlives_its_connection_and_loads_on_another(listening):
    agent = listening()
    first = agent.ws()
    assert first.connection_id
    first.initialize()
    session_id = first.new_session()
    answer = first.answer_to(first.prompt(session_id, "remember the owl"))
    assert answer["result"]["stopReason"] == "end_turn"
    first.close()
    second = agent.ws()
    second.initialize()
    # Once the first connection has ended, its session is released: the load may have to wait
    # for that end (a disconnect takes the shutdown grace), so it is retried while refused.
    for _ in range(60):
        loaded = second.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        if "error" not in loaded:
            break
        assert loaded["error"]["data"]["reason"] == "session_in_use"
    assert "result" in loaded, loaded
    replayed = second.updates(session_id)
    assert any(u["sessionUpdate"] == "user_message_chunk" and "owl" in u["content"]["text"] for u in replayed), replayed


def test_a_session_held_by_one_connection_is_refused_to_another_naming_the_holder(listening):
    agent = listening()
    holder = agent.ws()
    holder.initialize()
    session_id = holder.new_session()
    other = agent.ws()
    other.initialize()
    for method, params in (("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}),
                           ("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}),
                           ("session/delete", {"sessionId": session_id})):
        refused = other.call(method, params)
        assert refused["error"]["code"] == -32000, refused
        assert refused["error"]["data"] == {"reason": "session_in_use", "sessionId": session_id,
                                            "owner": refused["error"]["data"]["owner"]}
        assert refused["error"]["data"]["owner"].startswith(f"websocket connection {holder.connection_id[:12]}")
    # The holder still has it, whole.
    assert holder.answer_to(holder.prompt(session_id, "still mine"))["result"]["stopReason"] == "end_turn"
    holder.call("session/close", {"sessionId": session_id})
    loaded = other.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
    assert "result" in loaded, loaded


def test_a_disconnect_cancels_the_connections_turns_and_records_their_usage_S13_S16(listening, tmp_path):
    agent = listening("--shutdown-grace", "2")
    first = agent.ws()
    first.initialize()
    session_id = first.new_session()
    first.prompt(session_id, "/wait")
    assert "result" in first.call("session/list", {})  # S2: answered after the prompt was admitted
    first.close()  # the socket's end is the connection's EOF
    second = agent.ws()
    second.initialize()
    for _ in range(120):
        loaded = second.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        if "error" not in loaded:
            break
    assert "result" in loaded, loaded
    listed = second.call("_acp_green/stats", {})
    assert "result" in listed, listed
    assert agent.stop() == 0
    agent.peers.clear()
    state = next(p for p in tmp_path.iterdir() if p.name.startswith("state"))
    import subprocess
    import sys
    usage = subprocess.run([sys.executable, "-m", "acp_green", "usage", "--state-dir", str(state), "--session", session_id, "--json"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0, usage.stderr
    records = json.loads(usage.stdout)
    assert "cancelled" in json.dumps(records), records  # the disconnected turn's record, stopped as cancelled


def test_each_connection_has_its_own_background_limit_S9(listening):
    agent = listening("--max-background", "2", "--ephemeral")
    busy = agent.ws()
    busy.initialize()
    sessions = [busy.new_session() for _ in range(3)]
    for session_id in sessions[:2]:
        busy.prompt(session_id, "/wait")
    third = busy.prompt(sessions[2], "/wait")
    refused = busy.answer_to(third)
    assert refused["error"]["data"]["reason"] == "connection_busy"
    assert "result" in busy.call("session/list", {})  # S10: control answered at the limit
    other = agent.ws()
    other.initialize()
    session_id = other.new_session()
    assert other.answer_to(other.prompt(session_id, "hello"))["result"]["stopReason"] == "end_turn"
    for session_id in sessions[:2]:
        busy.notify("session/cancel", {"sessionId": session_id})
    cancelled = [busy.until(lambda m: m.get("result", {}).get("stopReason") == "cancelled") for _ in range(2)]
    assert len(cancelled) == 2


def test_a_cancel_sent_right_after_its_prompt_cancels_it_S11(listening):
    agent = listening("--ephemeral")
    peer = agent.ws()
    peer.initialize()
    session_id = peer.new_session()
    prompt_id = peer.prompt(session_id, "/wait")
    peer.notify("session/cancel", {"sessionId": session_id})
    assert peer.answer_to(prompt_id)["result"]["stopReason"] == "cancelled"


def test_the_token_is_checked_on_every_request_and_the_upgrade(listening):
    agent = listening("--ephemeral", "--token", "s3cret")
    with pytest.raises(InvalidStatus) as refused:
        agent.ws()
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus):
        agent.ws({"Authorization": "Bearer wrong"})
    agent.peers.clear()
    assert exchange(agent, "POST", b"{}", JSON)[0] == 401
    assert exchange(agent, "GET", b"", {"Accept": "text/event-stream"})[0] == 401
    assert exchange(agent, "DELETE", b"", {"Acp-Connection-Id": "x"})[0] == 401
    cid = http_initialize(agent, {"Authorization": "Bearer s3cret"})
    # The connection id is no credential: without the token the connection is refused.
    assert exchange(agent, "DELETE", b"", {"Acp-Connection-Id": cid})[0] == 401
    assert exchange(agent, "DELETE", b"", {"Acp-Connection-Id": cid, "Authorization": "Bearer s3cret"})[0] == 202
    peer = agent.ws({"Authorization": "Bearer s3cret"})
    assert peer.initialize()["result"]["protocolVersion"] == 1


def test_a_frame_over_the_line_limit_is_answered_and_the_connection_lives_on(listening):
    agent = listening("--ephemeral", "--max-line-bytes", "4096")
    peer = agent.ws()
    peer.initialize()
    peer.socket.send(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/new",
                                 "params": {"cwd": "/" + "x" * 10000, "mcpServers": []}}))
    error = peer.until(lambda m: "error" in m)
    assert error["error"]["code"] == -32600 and error["error"]["data"]["reason"] == "line_too_long"
    assert peer.new_session()


def test_tls_serves_wss_and_https_with_the_given_certificate(listening, tmp_path):
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                          capture_output=True, timeout=60)
    assert made.returncode == 0, made.stderr
    agent = listening("--ephemeral", "--tls-cert", str(cert), "--tls-key", str(key))
    assert agent.url.startswith("https://")
    context = ssl.create_default_context(cafile=str(cert))
    from websockets.sync.client import connect

    from tests.remote_peers import WsPeer

    peer = WsPeer(connect("wss" + agent.url[len("https"):], ssl=context, open_timeout=30).__enter__())
    agent.peers.append(peer)
    assert peer.initialize()["result"]["protocolVersion"] == 1
    import http.client

    conn = http.client.HTTPSConnection(agent.host, agent.port, context=context, timeout=30)
    conn.request("DELETE", "/acp", headers={"Acp-Connection-Id": "nope"})
    assert conn.getresponse().status == 404
    conn.close()


def test_the_frame_limit_counts_bytes_not_characters(listening):
    """4,000 three-byte characters are 12,000 bytes: over a 4,096-byte limit as on stdio."""
    agent = listening("--ephemeral", "--max-line-bytes", "4096")
    peer = agent.ws()
    peer.initialize()
    peer.socket.send(json.dumps({"jsonrpc": "2.0", "id": 98, "method": "session/new",
                                 "params": {"cwd": "/" + "€" * 4000, "mcpServers": []}}, ensure_ascii=False))
    error = peer.until(lambda m: "error" in m)
    assert error["error"]["data"]["reason"] == "line_too_long"


def test_a_client_close_is_answered_with_a_close_frame(listening):
    agent = listening("--ephemeral")
    peer = agent.ws()
    peer.initialize()
    peer.close()
    received = peer.socket.protocol.close_rcvd
    assert received is not None, "the agent never answered the client's close frame"
    assert received.code == 1000


def test_a_client_that_closes_mid_turn_still_gets_the_cancelled_answer_before_the_close_S13(listening):
    """The socket's close is the connection's EOF: the running prompt is cancelled and answered,
    and only then is the client's close frame answered (a raw wsproto client, which keeps reading
    after it has sent its close)."""
    import socket

    from wsproto import WSConnection
    from wsproto.connection import ConnectionType
    from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

    agent = listening("--ephemeral")
    sock = socket.create_connection((agent.host, agent.port), timeout=30)
    ws = WSConnection(ConnectionType.CLIENT)
    sock.sendall(ws.send(Request(host=agent.host, target="/acp")))
    events: list = []

    def read_until(done):
        while True:
            for event in ws.events():
                events.append(event)
                if done(event):
                    return event
            data = sock.recv(65536)
            assert data, f"the socket ended first: {events[-5:]}"
            ws.receive_data(data)

    read_until(lambda e: isinstance(e, AcceptConnection))

    def call(request_id, method, params):
        sock.sendall(ws.send(TextMessage(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))))

    def answer(request_id):
        return json.loads(read_until(lambda e: isinstance(e, TextMessage) and json.loads(e.data).get("id") == request_id).data)

    call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    answer(1)
    call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id = answer(2)["result"]["sessionId"]
    call(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "/wait"}]})
    call(4, "session/list", {})
    answer(4)
    sock.sendall(ws.send(CloseConnection(code=1000)))
    assert answer(3)["result"]["stopReason"] == "cancelled"
    closed = read_until(lambda e: isinstance(e, CloseConnection))
    assert closed.code == 1000
    sock.close()
