"""JSON-RPC plumbing once: one request-id key, one table of requests we sent, one
line framer — each used by both the ACP endpoint and the MCP client.

The ACP side is driven through `ClientRequests` with an in-memory outbound; the MCP side
through a real child process (a few lines of Python) behind `JsonRpcLink` / `StdioProcess`.
"""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from typing import Any

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.rpc import wire
from acp_green.rpc.client_requests import ClientRequests
from acp_green.errors import ClientError, McpError, RequestCancelled, TurnCancelled
from acp_green.mcp.jsonrpc import JsonRpcLink
from acp_green.mcp.process import StdioProcess
from acp_green.rpc import outgoing
from acp_green.rpc.outgoing import OutgoingRequests
from acp_green.rpc.cancel import CancelToken
from tests.helpers import wait_until

# Every kind of JSON scalar an id field could hold, with the values Python confuses (1, 1.0,
# True; 0, 0.0, False; "1") likely to come up.
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(), st.sampled_from([0.0, 1.0, -1.0, 2.5]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["", "0", "1", "a"]), st.text(max_size=8),
)
json_ids = st.one_of(json_scalars, st.lists(json_scalars, max_size=2), st.dictionaries(st.text(max_size=2), json_scalars, max_size=2))


def _same_id(a: Any, b: Any) -> bool:
    """The oracle: two valid ids are the same id when their JSON texts are equal."""
    return json.dumps(a) == json.dumps(b)


# -- the request-id key -----------------------------------------------------------------------
@settings(deadline=None, max_examples=400)
@given(a=json_ids, b=json_ids)
def test_id_key_matches_exactly_the_same_json_rpc_id_S4(a, b):
    """S4: integers (not bools), strings and null have a key; equal keys exactly for the same id
    (1 vs "1" apart); 1.0, True, arrays and objects have none, so they match nothing."""
    valid_a = a is None or isinstance(a, str) or (type(a) is int)
    assert (wire.id_key(a) is not None) == valid_a == wire.is_valid_id(a)
    if valid_a and wire.is_valid_id(b):
        assert (wire.id_key(a) == wire.id_key(b)) == _same_id(a, b)
        if wire.id_key(a) == wire.id_key(b):
            assert hash(wire.id_key(a)) == hash(wire.id_key(b))
        # What a peer echoes back (through JSON) finds the same key.
        assert wire.id_key(json.loads(json.dumps(a))) == wire.id_key(a)


def test_id_key_keeps_apart_what_python_equality_merges_S4():
    assert wire.id_key(1) != wire.id_key("1")
    assert wire.id_key(None) is not None and wire.id_key(None) != wire.id_key(0) and wire.id_key(None) != wire.id_key("")
    for not_an_id in (True, False, 1.0, 0.0, [1], {"id": 1}):
        assert wire.id_key(not_an_id) is None
    assert wire.id_key(10**40) == wire.id_key(10**40) != wire.id_key(10**40 + 1)


# -- the table of requests we sent ------------------------------------------------------------
def _outcome(function: Any, *args: Any) -> Any:
    """Run a call in a greenlet of its own; its result or the exception it raised."""
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - the test inspects what was raised
        return exc


class _Recorder:
    """The two write callbacks of an OutgoingRequests, recorded."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, str, Any]] = []
        self.cancels: list[tuple[int, str]] = []

    def table(self, first_id: int = 0) -> OutgoingRequests:
        return OutgoingRequests(lambda *a: self.requests.append(a), lambda *a: self.cancels.append(a),
                                lambda method, error: ClientError(method, error), first_id=first_id)


@settings(deadline=None, max_examples=200)
@given(reply_id=json_ids, first_id=st.integers(0, 3))
def test_a_reply_wakes_the_waiter_only_for_exactly_its_id(reply_id, first_id):
    """Plumbing once: whatever id a reply carries, it answers our request only if it
    is that request's id as JSON-RPC sees it (1.0 or True never answer request 1)."""
    table = _Recorder().table(first_id)
    pending = table.start("m", None)
    matched = table.resolve(reply_id, "ok") is not None
    assert matched == (wire.is_valid_id(reply_id) and _same_id(reply_id, pending.id))
    assert pending.result.ready() == matched and len(table) == (0 if matched else 1)


def test_a_cancelled_request_tells_the_peer_once_and_ignores_its_late_reply():
    recorder = _Recorder()
    table = recorder.table()
    token = CancelToken()
    pending = table.start("slow", {"x": 1})
    waiter = gevent.spawn(_outcome, table.wait, pending, token)
    gevent.sleep(0)
    token.set()
    assert isinstance(waiter.get(timeout=10), TurnCancelled)
    assert recorder.requests == [(0, "slow", {"x": 1})]
    assert recorder.cancels == [(0, "cancelled by the caller")]
    assert table.resolve(0, "late") is None and not table.cancel(pending, "again")
    assert recorder.cancels == [(0, "cancelled by the caller")] and len(table) == 0


def test_a_late_success_goes_to_on_late_result_once_and_a_late_error_or_a_timely_answer_does_not():
    """No leaked peer resources: a request whose waiter stopped waiting (cancelled, timed out)
    hands a success that arrives later to its `on_late_result`, once; a late error made nothing;
    a request answered in time never calls it; close forgets the abandoned ones."""
    recorder = _Recorder()
    table = recorder.table()
    late: list[Any] = []
    for how in ("cancelled", "timed out"):
        token = CancelToken()
        pending = table.start("make", None, late.append)
        if how == "cancelled":
            waiter = gevent.spawn(_outcome, table.wait, pending, token)
            gevent.sleep(0)
            token.set()
            assert isinstance(waiter.get(timeout=10), TurnCancelled)
        else:
            with pytest.raises(gevent.Timeout):
                table.wait(pending, token, 0.01)
        assert table.resolve(pending.id, {"made": how}) is pending  # not ignored: handed on
        assert table.resolve(pending.id, {"made": "twice"}) is None
    assert late == [{"made": "cancelled"}, {"made": "timed out"}]
    refused = table.start("make", None, late.append)
    assert table.cancel(refused, "stop")
    assert table.reject(refused.id, {"code": -32800, "message": "cancelled"}) is refused and len(late) == 2
    in_time = table.start("make", None, late.append)
    assert table.resolve(in_time.id, {"made": "in time"}) is in_time and in_time.result.get() == {"made": "in time"}
    assert len(late) == 2
    gone = table.start("make", None, late.append)
    table.cancel(gone, "stop")
    table.close(RequestCancelled("closed"))
    assert table.resolve(gone.id, {"made": "after close"}) is None and len(late) == 2


def test_abandoned_requests_are_bounded_and_a_failing_callback_does_not_escape(monkeypatch, caplog):
    """The table of abandoned requests keeps at most MAX_ABANDONED (the oldest forgotten, said
    once at WARNING each); an exception in on_late_result is logged, never raised into the reader."""
    monkeypatch.setattr(outgoing, "MAX_ABANDONED", 2)
    table = _Recorder().table()

    def broken(result: Any) -> None:
        raise RuntimeError("cannot release")

    abandoned = [table.start("make", None, broken) for _ in range(3)]
    for pending in abandoned:
        table.cancel(pending, "stop")
    with caplog.at_level(logging.INFO):
        assert table.resolve(abandoned[0].id, {}) is None  # forgotten: the oldest
        assert table.resolve(abandoned[2].id, {}) is abandoned[2]
    assert "forgot make #0" in caplog.text and "cannot release" in caplog.text


def test_close_fails_every_waiter_and_every_later_request_with_the_first_error():
    table = _Recorder().table()
    waiters = [gevent.spawn(_outcome, table.call, "m", None) for _ in range(3)]
    gevent.sleep(0)
    table.close(RequestCancelled("first"))
    table.close(RequestCancelled("second"))
    for waiter in waiters:
        raised = waiter.get(timeout=10)
        assert isinstance(raised, RequestCancelled) and raised.message == "first"
    with pytest.raises(RequestCancelled, match="first"):
        table.start("m", None)


class _Out:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.messages.extend(json.loads(line) for line in data.splitlines())


def test_acp_client_requests_match_replies_by_id_key_and_cancel_with_cancel_request_S4():
    """ACP side of the one table: a reply whose id is "0" does not answer our request 0; a set
    token sends `$/cancel_request` for our id."""
    out = _Out()
    client = ClientRequests(out)  # type: ignore[arg-type]
    token = CancelToken()
    waiter = gevent.spawn(_outcome, client.call, "fs/read_text_file", {"path": "/x"}, token)
    gevent.sleep(0)
    client.resolve(wire.Response("0", {"content": "wrong id type"}))
    assert not waiter.ready() and len(client) == 1
    token.set()
    assert isinstance(waiter.get(timeout=10), TurnCancelled)
    assert out.messages == [
        {"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {"path": "/x"}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}},
    ]


def test_acp_client_requests_fail_a_waiting_call_and_later_ones_when_the_connection_closes_S13():
    """S13: closing the connection releases an agent->client call that waits without a token."""
    client = ClientRequests(_Out())  # type: ignore[arg-type]
    waiter = gevent.spawn(_outcome, client.call, "session/request_permission", {})
    gevent.sleep(0)
    client.close(RequestCancelled("The connection is closing"))
    assert isinstance(waiter.get(timeout=10), RequestCancelled)
    with pytest.raises(RequestCancelled):
        client.call("fs/read_text_file", {})
    assert len(client) == 0


# The MCP side: answers "echo" after first replying to the same id as a string and as 1.0 and
# true (none of which may answer it), reports every message it gets as a "seen" notification,
# and never answers "hang".
ECHO_SERVER = textwrap.dedent('''
    import json, sys
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        send({"jsonrpc": "2.0", "method": "seen", "params": message})
        if message.get("method") == "echo":
            for wrong in (str(message["id"]), float(message["id"]), True):
                send({"jsonrpc": "2.0", "id": wrong, "result": "wrong"})
            send({"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")})
''')


@pytest.fixture
def mcp_link(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(ECHO_SERVER)
    notes: list[dict] = []
    link = JsonRpcLink([sys.executable, str(script)], name="plumbing", on_notification=notes.append)
    link.notes = notes  # type: ignore[attr-defined]
    yield link
    link.close()


def test_mcp_link_matches_replies_by_id_key_and_cancels_with_notifications_cancelled(mcp_link):
    """MCP side of the one table: replies with id "1", 1.0 or true do not answer our request 1;
    a set token sends `notifications/cancelled` with our id."""
    assert mcp_link.request("echo", {"n": 1}, timeout=30) == {"n": 1}
    token = CancelToken()
    call = mcp_link.start_request("hang", {})
    gevent.spawn_later(0.05, token.set)
    with pytest.raises(TurnCancelled):
        mcp_link.wait(call, token, timeout=30)
    seen = wait_until(lambda: [n.params for n in mcp_link.notes if n.params.get("method") == "notifications/cancelled"],
                      what="the cancel notification")
    assert seen == [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call.id, "reason": "cancelled by the caller"}}]


def test_mcp_error_reply_is_an_mcp_error_with_the_servers_code(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(textwrap.dedent('''
        import json, sys
        for line in sys.stdin:
            m = json.loads(line)
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32001, "message": "no"}}) + "\\n")
            sys.stdout.flush()
    '''))
    link = JsonRpcLink([sys.executable, str(script)], name="fail")
    try:
        with pytest.raises(McpError) as info:
            link.request("anything", None, timeout=30)
        assert info.value.code == -32001
    finally:
        link.close()


# -- the one line framer, on an MCP child's stdout ---------------------------------------------
LIMIT = 64


def _message_of_length(length: int, n: int) -> bytes:
    """A JSON-RPC notification whose line is exactly `length` bytes, newline excluded."""
    bare = json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"n": n, "pad": ""}})
    return json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"n": n, "pad": "p" * (length - len(bare))}}).encode()


def test_mcp_child_lines_are_framed_by_the_one_line_reader(tmp_path, caplog):
    """Plumbing once: an MCP child's stdout goes through the transport's framer: a
    line of exactly the limit is kept, one byte more is skipped (a warning), a line far over the
    limit is skipped without stopping the reading, and a last line without a newline counts."""
    stream = b"".join([
        _message_of_length(LIMIT - 1, 1) + b"\n",
        _message_of_length(LIMIT, 2) + b"\n",
        _message_of_length(LIMIT + 1, 3) + b"\n",
        b"x" * (1 << 20) + b"\n",
        _message_of_length(40, 4) + b"\n",
        _message_of_length(40, 5),
    ])
    data = tmp_path / "stream.bin"
    data.write_bytes(stream)
    child = f"import sys; sys.stdout.buffer.write(open({str(data)!r}, 'rb').read())"  # then EOF
    messages: list[dict] = []
    caplog.set_level(logging.WARNING, logger="acp_green.mcp.process")
    process = StdioProcess([sys.executable, "-c", child], lambda line: messages.append(json.loads(line)), name="framed", max_line_bytes=LIMIT)
    try:
        wait_until(lambda: len(messages) >= 4, what="the child's lines")
        assert [m["params"]["n"] for m in messages] == [1, 2, 4, 5]
        skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
        assert len(skipped) == 2 and all(f"over {LIMIT} bytes" in r.getMessage() for r in skipped)
    finally:
        process.close()
