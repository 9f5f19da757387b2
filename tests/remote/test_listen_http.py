"""`serve --listen` over Streamable HTTP: what each request to /acp is answered, through the real
command line and real sockets."""

from __future__ import annotations

import json

from tests.remote_peers import JSON, EventStreamReader, exchange, http_initialize


def _post(agent, cid: str, message: dict, session: str | None = None) -> int:
    headers = {**JSON, "Acp-Connection-Id": cid}
    if session is not None:
        headers["Acp-Session-Id"] = session
    status, _headers, _body = exchange(agent, "POST", json.dumps(message), headers)
    return status


def test_initialize_answers_200_with_a_connection_id_and_the_rest_travels_on_event_streams(listening):
    agent = listening()
    cid = http_initialize(agent)
    stream = EventStreamReader(agent, {"Acp-Connection-Id": cid})
    assert stream.status == 200 and stream.response.getheader("Content-Type") == "text/event-stream"
    assert _post(agent, cid, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}) == 202
    session_id = stream.until(lambda m: m.get("id") == 1)["result"]["sessionId"]
    # The session's first updates waited on its own stream until the client opened it.
    session_stream = EventStreamReader(agent, {"Acp-Connection-Id": cid, "Acp-Session-Id": session_id})
    assert session_stream.status == 200
    commands = session_stream.until(lambda m: m.get("method") == "session/update")
    assert commands["params"]["update"]["sessionUpdate"] == "available_commands_update"
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "/stream 3 8"}]}}
    assert _post(agent, cid, prompt, session_id) == 202
    chunks = []
    answer = session_stream.until(lambda m: chunks.append(m) or m.get("id") == 2)
    assert answer["result"]["stopReason"] == "end_turn"
    texts = [m["params"]["update"]["content"]["text"] for m in chunks
             if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert len(texts) == 3, chunks  # S5: the prompt's updates, in order, before its answer
    assert exchange(agent, "DELETE", b"", {"Acp-Connection-Id": cid})[0] == 202
    assert list(stream.messages()) == []  # the connection's end ends its streams
    assert list(session_stream.messages()) == []


def test_every_refusal_has_its_status_before_any_message_is_read(listening):
    agent = listening()
    cid = http_initialize(agent)
    new = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    cases = [
        ("PUT", new, {**JSON, "Acp-Connection-Id": cid}, 405),
        ("POST", new, {"Content-Type": "text/plain", "Acp-Connection-Id": cid}, 415),
        ("POST", new, JSON, 400),  # no connection id
        ("POST", new, {**JSON, "Acp-Connection-Id": "nope"}, 404),
        ("POST", "[" + new + "]", {**JSON, "Acp-Connection-Id": cid}, 501),  # a batch
        ("POST", json.dumps({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}}),
         {**JSON, "Acp-Connection-Id": cid}, 400),  # initialize on an existing connection
        ("POST", json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"prompt": []}}),
         {**JSON, "Acp-Connection-Id": cid}, 400),  # session-scoped without any session id
        ("POST", json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/cancel", "params": {"sessionId": "a"}}),
         {**JSON, "Acp-Connection-Id": cid, "Acp-Session-Id": "b"}, 400),  # ids that disagree
        ("GET", b"", {"Acp-Connection-Id": cid}, 406),  # not an event stream
        ("GET", b"", {"Accept": "text/event-stream"}, 400),
        ("GET", b"", {"Accept": "text/event-stream", "Acp-Connection-Id": "nope"}, 404),
        ("DELETE", b"", {}, 400),
        ("DELETE", b"", {"Acp-Connection-Id": "nope"}, 404),
    ]
    got = [(method, expected, exchange(agent, method, body, headers)[0]) for method, body, headers, expected in cases]
    assert [(m, e) for m, e, status in got if status != e] == [], got
    conn = agent.http()
    conn.request("POST", "/elsewhere", body=new, headers=JSON)
    assert conn.getresponse().status == 404
    conn.close()


def test_a_body_over_the_line_limit_is_refused_413_and_the_agent_serves_on(listening):
    agent = listening("--max-line-bytes", "4096")
    cid = http_initialize(agent)
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/" + "x" * 8000, "mcpServers": []}})
    assert exchange(agent, "POST", huge, {**JSON, "Acp-Connection-Id": cid})[0] == 413
    assert http_initialize(agent)  # still serving


def test_a_second_reader_of_one_stream_is_refused_409(listening):
    agent = listening()
    cid = http_initialize(agent)
    first = EventStreamReader(agent, {"Acp-Connection-Id": cid})
    assert first.status == 200
    second = EventStreamReader(agent, {"Acp-Connection-Id": cid})
    assert second.status == 409
    first.close()


def test_unreadable_messages_are_answered_on_the_stream_as_on_stdio(listening):
    """What the connection cannot read is answered -32700 on the connection's stream (S16: nothing
    the client sends ends the connection)."""
    agent = listening()
    cid = http_initialize(agent)
    stream = EventStreamReader(agent, {"Acp-Connection-Id": cid})
    assert exchange(agent, "POST", b"{not json", {**JSON, "Acp-Connection-Id": cid})[0] == 202
    error = stream.until(lambda m: "error" in m)
    assert error["error"]["code"] == -32700 and error["id"] is None
    assert _post(agent, cid, {"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}}) == 202
    assert "sessions" in stream.until(lambda m: m.get("id") == 5)["result"]
