"""Bad input through the real CLI: each kind of bad input gets its exact error, and nothing is lost.

After every bad input the same connection still serves a prompt ("Bad input gets a
clear error and nothing is lost"). "No reply" is proven without timing: a marker request is
written after the input, and the marker's response must be the only new response (control
messages are handled in receive order, S2, and errors for bad lines are queued as the line is
read, so anything the agent meant to say about the input is out before the marker's answer).
"""

from __future__ import annotations

import json

import pytest
import time

from acp_green.tools.rig.client import AgentProcess, Record
from acp_green.tools.rig.schema import StreamChecker
from tests.helpers import chunk_texts, process_gone

SERVE = ("--ephemeral",)


# -- helpers ----------------------------------------------------------------------------------
def start(launch, *args: str, **kwargs) -> AgentProcess:
    agent = launch(*SERVE, *args, **kwargs)
    agent.initialize()
    return agent


def responses_since(agent: AgentProcess, since: int) -> list[dict]:
    """Responses (id, no method) the agent wrote after record index `since`, in arrival order."""
    return [
        r.message for r in agent.records[since:]
        if r.direction == "in" and isinstance(r.message, dict) and "method" not in r.message
    ]


def notifications_since(agent: AgentProcess, since: int) -> list[dict]:
    return [
        r.message for r in agent.records[since:]
        if r.direction == "in" and isinstance(r.message, dict) and "method" in r.message
    ]


def unparsed_since(agent: AgentProcess, since: int) -> list[bytes]:
    return [r.raw for r in agent.records[since:] if r.direction == "in" and r.message is None]


def replies_to(agent: AgentProcess, send) -> list[dict]:
    """Run `send()`, then a marker request; return every response that came before the marker's."""
    since = len(agent.records)
    send()
    marker = agent.request("initialize", agent.initialize_params())
    assert marker.result()["protocolVersion"] == 1
    got = responses_since(agent, since)
    assert got and got[-1]["id"] == marker.id, got
    assert not unparsed_since(agent, since), "the agent wrote a line that is not JSON"
    return got[:-1]


def raw_replies(agent: AgentProcess, data: bytes) -> list[dict]:
    return replies_to(agent, lambda: agent.send_raw(data))


def one_error(replies: list[dict], code: int, request_id=None) -> dict:
    """The single error reply expected for one bad input; checks its id and code."""
    assert len(replies) == 1, replies
    reply = replies[0]
    assert "error" in reply and "result" not in reply, reply
    assert reply["id"] == request_id and type(reply["id"]) is type(request_id), reply
    error = reply["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"] and "\n" not in error["message"]
    return error


def assert_serves_a_prompt(agent: AgentProcess) -> None:
    """The same connection still works: initialize, session/new, and "/stream 3" ending end_turn."""
    assert agent.initialize()["protocolVersion"] == 1
    session_id = agent.new_session()
    assert agent.prompt(session_id, "/stream 3").result() == {"stopReason": "end_turn"}
    chunks = chunk_texts(agent.updates(session_id))
    assert [c.split(":")[0] for c in chunks] == ["0", "1", "2"]


def request_line(request_id, method="session/new", params=None) -> bytes:
    params = {"cwd": "/tmp", "mcpServers": []} if params is None else params
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def send_recorded(agent: AgentProcess, message: dict, data: bytes) -> None:
    """Write `data` as the wire form of `message`, recorded as sent so the schema check knows the request."""
    agent.records.append(Record(time.monotonic(), "out", data, message))
    agent.send_raw(data)


def vm_hwm_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


# -- -32700 -----------------------------------------------------------------------------------
def test_line_that_is_not_json_is_a_parse_error_errors(launch):
    """Errors: an unparseable line answers -32700 with id null; the connection goes on."""
    agent = start(launch)
    for data in (b"this is not json\n", b'{"jsonrpc":"2.0","id":5,"method":"initialize"\n', b"{'a': 1}\n",
                 b'{"jsonrpc":"2.0","id":6,"method":"initialize"} extra\n', b"\x00\x01\x02\n"):
        one_error(raw_replies(agent, data), -32700, None)
        assert_serves_a_prompt(agent)


def test_invalid_utf8_is_a_parse_error_errors(launch):
    """Errors: invalid UTF-8 answers -32700 (id null even though the id was readable), never replaced."""
    agent = start(launch)
    for data in (b'{"jsonrpc":"2.0","id":"u","method":"session/new","params":{"cwd":"/tmp\xff","mcpServers":[]}}\n',
                 b'{"jsonrpc":"2.0","id":"v","method":"initialize","params":{"protocolVersion":1,"\xc0\xaf":1}}\n',
                 b"\xfe\xff\n"):
        one_error(raw_replies(agent, data), -32700, None)
        assert_serves_a_prompt(agent)


# -- -32600 -----------------------------------------------------------------------------------
def test_json_that_is_not_an_object_is_an_invalid_request_errors(launch):
    """Errors: a JSON value that is no request/notification/response object is -32600, id null."""
    agent = start(launch)
    for data in (b"42\n", b'"initialize"\n', b"null\n", b"true\n", b"{}\n", b'{"jsonrpc":"2.0"}\n'):
        one_error(raw_replies(agent, data), -32600, None)
        assert_serves_a_prompt(agent)


def test_batch_array_is_an_invalid_request_errors(launch):
    """Errors: a batch array answers one -32600 with id null, and none of its members runs."""
    agent = start(launch)
    batch = [json.loads(request_line("b1")), json.loads(request_line("b2"))]
    for data in (json.dumps(batch).encode() + b"\n", b"[]\n"):
        one_error(raw_replies(agent, data), -32600, None)
        assert_serves_a_prompt(agent)


def test_bad_id_type_is_an_invalid_request_S4(launch):
    """S4, errors: a boolean, non-integer or structured id is -32600 (answered with id null), nothing runs."""
    agent = start(launch)
    for raw_id in (b"true", b"false", b"1.5", b"1.0", b"{}", b"[1]"):
        data = b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
        since = len(agent.records)
        one_error(raw_replies(agent, data), -32600, None)
        # Nothing ran: the refused session/new opened no session (no update for any session came).
        assert not [m for m in notifications_since(agent, since) if m["method"] == "session/update"]
        assert_serves_a_prompt(agent)


@pytest.mark.breaks_invariants("schema", "one_response_per_request",
                                reason="the client reuses an in-flight id on purpose: that id is answered twice (the "
                                       "refusal and the prompt), which also confuses the schema checker's id pairing")
def test_duplicate_inflight_id_is_refused_S4(launch):
    """S4, errors: a request reusing the id of one still in flight is refused with -32600.

    Two `/wait` prompts on different sessions with the same id: the second is refused, the first
    is unaffected and ends `cancelled` on session/cancel; the refused one never ran (its session
    is free). A control request with the in-flight id is refused too. The same value with another
    type ("7" vs 7) is a different id, and an id is free again once its request has finished.
    """
    agent = start(launch)
    s1, s2, s3 = agent.new_session(), agent.new_session(), agent.new_session()
    dup = "dup-id"
    first = agent.make_request("session/prompt", agent.prompt_params(s1, "/wait"), dup)
    second = agent.make_request("session/prompt", agent.prompt_params(s2, "/wait"), dup)
    since = len(agent.records)
    agent.send(first)
    agent.send(second)
    refused = agent.wait_for(lambda: [m for m in responses_since(agent, since) if m["id"] == dup], what="the refusal")
    assert refused[0]["error"]["code"] == -32600, refused
    # A control request with the same in-flight id is refused as well.
    agent.send(agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []}, dup))
    refused = agent.wait_for(lambda: [m for m in responses_since(agent, since) if m["id"] == dup][1:], what="the second refusal")
    assert refused[0]["error"]["code"] == -32600, refused
    # The first prompt is still running and is the one session/cancel ends.
    agent.cancel(s1)
    answers = agent.wait_for(lambda: (lambda a: a if len(a) >= 3 else None)([m for m in responses_since(agent, since) if m["id"] == dup]),
                             what="the first prompt's answer")
    assert [a.get("error", {}).get("code") for a in answers[:2]] == [-32600, -32600]
    assert answers[2] == {"jsonrpc": "2.0", "id": dup, "result": {"stopReason": "cancelled"}}
    # The refused prompt never reserved s2.
    assert agent.prompt(s2, "/stream 3").result() == {"stopReason": "end_turn"}

    # Same value, other type: 7 and "7" are different ids (S4: True == 1 and 1 vs "1" must not mix).
    int_id, str_id = 10**6 + 7, str(10**6 + 7)
    held = agent.request("session/prompt", agent.prompt_params(s1, "/wait"), int_id)
    assert agent.request("session/prompt", agent.prompt_params(s2, "/stream 3"), str_id).result() == {"stopReason": "end_turn"}
    agent.cancel(s1)
    assert held.result() == {"stopReason": "cancelled"}
    # Finished: the id may be used again.
    assert agent.request("session/prompt", agent.prompt_params(s3, "/stream 3"), int_id).result() == {"stopReason": "end_turn"}
    assert_serves_a_prompt(agent)

    # The stream is schema-valid except for what a duplicate id makes unavoidable: the late answer
    # of the first prompt answers an id the checker already saw answered.
    checker = StreamChecker("agent")
    problems = []
    for record in agent.records:
        if record.message is None:
            assert record.direction == "out", record.raw
            continue
        problems.extend(checker.observe(record.message, from_sender=record.direction == "in"))
    assert problems and all(json.dumps(dup) in p and "already answered" in p for p in problems), problems


# -- -32602 -----------------------------------------------------------------------------------
def test_missing_or_ill_typed_params_name_the_field_errors(launch):
    """Errors: missing or ill-typed params answer -32602 and the message names the field."""
    agent = start(launch)
    session_id = agent.new_session()
    cases = [
        ("session/prompt", {"sessionId": session_id}, "prompt"),
        ("session/prompt", {"sessionId": session_id, "prompt": "hello"}, "prompt"),
        ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}, "sessionId"),
        ("session/prompt", {"sessionId": session_id, "prompt": [{"text": "no type"}]}, "prompt"),
        ("session/new", {"cwd": "relative/dir", "mcpServers": []}, "cwd"),
        ("session/new", {"cwd": 5, "mcpServers": []}, "cwd"),
        ("session/new", {"cwd": "/tmp"}, "mcpServers"),
        ("session/new", {"cwd": "/tmp", "mcpServers": [], "additionalDirectories": ["rel"]}, "additionalDirectories"),
        ("session/new", ["/tmp", []], "params"),
        ("initialize", {"protocolVersion": "1"}, "protocolVersion"),
        ("initialize", {"protocolVersion": True}, "protocolVersion"),
        ("initialize", {}, "protocolVersion"),
        ("session/set_mode", {"sessionId": session_id}, "modeId"),
    ]
    for method, params, field in cases:
        error = agent.request(method, params).error()
        assert error["code"] == -32602, (method, params, error)
        assert field in error["message"], (method, params, error)
        assert "\n" not in error["message"]
        assert_serves_a_prompt(agent)
    # The session named in the refused prompts is not left reserved.
    assert agent.prompt(session_id, "/stream 3").result() == {"stopReason": "end_turn"}


def test_unknown_session_id_errors(launch):
    """Errors (DESIGN §6): an unknown session id answers -32002 (ACP's "Resource not found") with
    data.reason unknown_session and data.sessionId."""
    agent = start(launch)
    ghost = "sess-does-not-exist"
    for method, params in (
        ("session/prompt", agent.prompt_params(ghost, "/stream 3")),
        ("session/set_mode", {"sessionId": ghost, "modeId": "default"}),
        ("session/set_config_option", {"sessionId": ghost, "configId": "x", "value": "y"}),
    ):
        error = agent.request(method, params).error()
        assert error["code"] == -32002, (method, error)
        assert error["data"]["reason"] == "unknown_session", error
        assert error["data"]["sessionId"] == ghost, error
        assert "\n" not in error["message"]
        assert_serves_a_prompt(agent)


# -- -32601 -----------------------------------------------------------------------------------
def test_unknown_method_errors(launch):
    """Errors: an unknown method answers -32601 with the request's id."""
    agent = start(launch)
    for method in ("session/frobnicate", "no_such_method", "fs/read_text_file", "session/update"):
        error = agent.request(method, {}).error()
        assert error["code"] == -32601, (method, error)
        assert_serves_a_prompt(agent)


def test_unknown_extension_method_errors(launch):
    """Errors: an unknown `_`-extension request answers -32601; a known one still works."""
    agent = start(launch)
    for method in ("_acp_green/no_such_thing", "_vendor/anything", "_"):
        error = agent.request(method, {"x": 1}).error()
        assert error["code"] == -32601, (method, error)
        assert_serves_a_prompt(agent)
    assert agent.request("_acp_green/echo", {"x": 1}).result() == {"params": {"x": 1}}


# -- line too long ----------------------------------------------------------------------------
@pytest.mark.breaks_invariants("one_response_per_request", "no_response_to_notification",
                                reason="a line over --max-line-bytes is answered -32600 with id null without being read: "
                                       "the checker, which reads every line whole, expects its id echoed")
def test_line_over_max_line_bytes_is_skipped_errors(launch):
    """Errors: a line over --max-line-bytes answers -32600, id null, data.reason line_too_long.

    Nothing of it is processed, and the next line — even in the same write — is handled whole.
    """
    limit = 4096
    agent = start(launch, "--max-line-bytes", str(limit))
    big = request_line("big", "initialize", {"protocolVersion": 1, "pad": "x" * (1 << 20)}) + b"\n"
    error = one_error(raw_replies(agent, big), -32600, None)
    assert error["data"]["reason"] == "line_too_long", error
    assert_serves_a_prompt(agent)

    # Skipping stops exactly at the newline: a request right behind the long line is answered.
    follower = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []}, "follower")
    since = len(agent.records)
    send_recorded(agent, follower, big + json.dumps(follower).encode() + b"\n")
    got = agent.wait_for(lambda: [m for m in responses_since(agent, since) if m["id"] == "follower"], what="the follower's answer")
    assert "sessionId" in got[0]["result"], got
    errors = [m for m in responses_since(agent, since) if m["id"] is None]
    assert [e["error"]["data"]["reason"] for e in errors] == ["line_too_long"]
    assert not any(m["id"] == "big" for m in responses_since(agent, 0))

    # At the limit a line is read; one byte over, it is skipped.
    def padded(request_id: str, size: int) -> bytes:
        head = request_line(request_id, "initialize", {"protocolVersion": 1, "pad": ""})
        data = request_line(request_id, "initialize", {"protocolVersion": 1, "pad": "y" * (size - len(head))})
        assert len(data) == size
        return data

    at_limit = json.loads(padded("edge", limit))
    since = len(agent.records)
    send_recorded(agent, at_limit, padded("edge", limit) + b"\n")
    got = agent.wait_for(lambda: [m for m in responses_since(agent, since) if m["id"] == "edge"], what="the at-limit answer")
    assert got[0]["result"]["protocolVersion"] == 1
    error = one_error(raw_replies(agent, padded("over", limit + 1) + b"\n"), -32600, None)
    assert error["data"]["reason"] == "line_too_long"
    assert_serves_a_prompt(agent)


@pytest.mark.breaks_invariants("one_response_per_request", "no_response_to_notification",
                                reason="a line over --max-line-bytes is answered -32600 with id null without being read: "
                                       "the checker, which reads every line whole, expects its id echoed")
def test_huge_line_is_skipped_with_bounded_memory_errors(launch):
    """Errors: a 64 MiB line against a 1 MiB limit is skipped while the agent's memory stays bounded."""
    agent = start(launch, "--max-line-bytes", str(1 << 20))
    before = vm_hwm_bytes(agent.pid)
    line_size = 64 << 20
    huge = b'{"jsonrpc":"2.0","id":"huge","method":"initialize","params":{"protocolVersion":1,"pad":"' + b"z" * line_size + b'"}}\n'
    error = one_error(raw_replies(agent, huge), -32600, None)
    assert error["data"]["reason"] == "line_too_long"
    after = vm_hwm_bytes(agent.pid)
    # Holding the line would add at least its 64 MiB; skipping it holds about one limit's worth.
    assert after - before < 16 << 20, f"peak RSS grew by {(after - before) >> 20} MiB while skipping a 64 MiB line"
    assert after < line_size, f"peak RSS {after >> 20} MiB"
    assert_serves_a_prompt(agent)


# -- ignored input ----------------------------------------------------------------------------
def test_response_to_an_id_the_agent_never_sent_is_ignored_and_logged(launch):
    """Bad input: a response to an id the agent never sent is ignored (no reply) and logged on stderr."""
    agent = start(launch, "--log-level", "warning")
    for request_id, body in ((4242, {"result": {}}), ("never-sent", {"result": {"outcome": {"outcome": "cancelled"}}}),
                             (987654, {"error": {"code": -32603, "message": "client failed"}})):
        assert replies_to(agent, lambda: agent.send({"jsonrpc": "2.0", "id": request_id, **body})) == []
        agent.wait_for(lambda: str(request_id).encode() in agent.stderr, what=f"a warning naming {request_id!r}")
        assert_serves_a_prompt(agent)
    log = agent.stderr.decode(errors="replace").lower()
    assert "response" in log


def test_blank_and_crlf_lines_are_ignored(launch):
    """Bad input: a blank line, a "\\r\\n" line and whitespace-only lines get no reply."""
    agent = start(launch)
    for data in (b"\n", b"\r\n", b"   \t \n", b"\n\n\r\n\n"):
        assert raw_replies(agent, data) == []
        assert_serves_a_prompt(agent)
    # A CRLF-terminated request is read as the request itself.
    message = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []}, "crlf")
    since = len(agent.records)
    send_recorded(agent, message, json.dumps(message).encode() + b"\r\n")
    got = agent.wait_for(lambda: [m for m in responses_since(agent, since) if m["id"] == "crlf"], what="the CRLF request's answer")
    assert "sessionId" in got[0]["result"]


def test_final_line_without_newline_is_processed_before_exit(launch):
    """Bad input: a final line without a newline before EOF is processed; its response arrives, then exit 0."""
    agent = start(launch)
    assert_serves_a_prompt(agent)
    last = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []}, "last")
    send_recorded(agent, last, json.dumps(last).encode())
    agent.close_input()
    assert agent.wait_exit() == 0
    agent.wait_for(lambda: agent.eof.is_set(), what="the end of the agent's output")
    answers = [m for m in responses_since(agent, 0) if m["id"] == "last"]
    assert len(answers) == 1 and answers[0]["result"]["sessionId"], answers


def test_agent_exception_is_an_internal_error_and_the_session_goes_on_S14(launch):
    """S14, errors: `/fail` raises in agent code: -32603 with a one-line message; the session takes the next prompt."""
    agent = start(launch)
    session_id = agent.new_session()
    for _ in range(2):
        error = agent.prompt(session_id, "/fail").error()
        assert error["code"] == -32603, error
        assert error["message"] and "\n" not in error["message"] and len(error["message"]) <= 300
        assert "Traceback" not in error["message"]
        assert agent.prompt(session_id, "/stream 3").result() == {"stopReason": "end_turn"}
    assert_serves_a_prompt(agent)


def test_notifications_are_never_answered_even_bad_ones_S6(launch):
    """S6: notifications get no response, whatever they carry — unknown session, no params, unknown
    request id, unknown or request-only methods."""
    agent = start(launch, "--log-level", "warning")
    session_id = agent.new_session()
    notes = [
        ("session/cancel", {"sessionId": "sess-does-not-exist"}),
        ("session/cancel", None),
        ("session/cancel", {}),
        ("session/cancel", {"sessionId": 5}),
        ("session/cancel", ["not", "an", "object"]),
        ("session/cancel", {"sessionId": session_id}),  # a live session with nothing running
        ("$/cancel_request", {"requestId": "no-such-request"}),
        ("$/cancel_request", {"requestId": 123456}),
        ("$/cancel_request", None),
        ("$/cancel_request", {"requestId": True}),
        ("no/such_notification", {"x": 1}),
        ("_vendor/unknown", None),
        ("initialize", {"protocolVersion": 1}),
        ("session/new", {"cwd": "/tmp", "mcpServers": []}),
        ("session/prompt", agent.prompt_params(session_id, "/stream 3")),
    ]
    for method, params in notes:
        assert replies_to(agent, lambda: agent.notify(method, params)) == [], (method, params)
    # Nothing was started by the request-only methods sent as notifications: no updates at all for
    # the session but its available commands, and it still takes a prompt.
    assert [u["sessionUpdate"] for u in agent.updates(session_id)] == ["available_commands_update"]
    assert agent.prompt(session_id, "/stream 3").result() == {"stopReason": "end_turn"}
    # $/cancel_request naming a finished request is ignored as well.
    assert replies_to(agent, lambda: agent.notify("$/cancel_request", {"requestId": 1})) == []
    assert_serves_a_prompt(agent)
    assert not process_gone(agent.pid)  # still running: nothing here ended the connection
