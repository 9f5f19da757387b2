"""Our JSON-RPC link to a stdio MCP server (ids, error replies, cancellation, requests from the
server, the server exiting, long lines, its stderr), the process behind it (how it is closed) and
the bridge that relays a client's MCP-over-ACP messages to it. The stdio servers here are a few
lines of Python written for the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap

import gevent
import pytest

from acp_green.rpc.cancel import CancelToken
from acp_green.errors import ClientError, McpError, McpServerExited, RequestCancelled, TurnCancelled
from acp_green.mcp.bridge import ProvidedServer, StdioBridge
from acp_green.mcp.jsonrpc import JsonRpcLink
from acp_green.mcp.process import StdioProcess
from tests.helpers import wait_gone, wait_until

# Answers "echo" with its params, "fail" with an error, never answers "hang"; "ask" makes it
# send us a ping and a roots/list, and it reports every message it gets as a "seen" notification.
SERVER = textwrap.dedent('''
    import json, sys
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") != "seen-ack":
            send({"jsonrpc": "2.0", "method": "seen", "params": message})
        method = message.get("method")
        if method == "echo":
            send({"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")})
        elif method == "fail":
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32001, "message": "failed here"}})
        elif method == "ask":
            send({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
            send({"jsonrpc": "2.0", "id": "s2", "method": "roots/list"})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif method == "reply-to-nobody":
            send({"jsonrpc": "2.0", "id": 999, "result": {}})
            send({"jsonrpc": "2.0", "id": True, "result": {}})
            send({"jsonrpc": "2.0", "id": message["id"], "result": "after"})
        elif method == "big":
            send({"jsonrpc": "2.0", "id": message["id"], "result": "x" * 100000})
        elif method == "stderr":
            sys.stderr.write("A" * 3000 + "END"); sys.stderr.flush()
            send({"jsonrpc": "2.0", "id": message["id"], "result": "written"})
        elif method == "exit":
            sys.exit(3)
''')


@pytest.fixture
def link(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    notes: list[dict] = []
    exits: list[JsonRpcLink] = []
    made = JsonRpcLink([sys.executable, str(script)], name="t", on_notification=notes.append, on_exit=exits.append)
    made.notes = notes  # type: ignore[attr-defined]
    made.exits = exits  # type: ignore[attr-defined]
    yield made
    made.close()


def _seen(link: JsonRpcLink, predicate, timeout: float = 10.0) -> dict:
    """What the server reported getting, the first message that matches `predicate`."""
    notes = link.notes  # type: ignore[attr-defined]
    return wait_until(lambda: next((n.params for n in notes if n.method == "seen" and predicate(n.params)), None),
                      timeout, "the server to report the message")


def test_requests_get_increasing_ids_and_their_own_answers(link):
    first = link.start_request("echo", {"n": 1})
    second = link.start_request("echo", None)
    assert (first.id, second.id) == (1, 2)
    assert link.wait(second) is None and link.wait(first) == {"n": 1}
    assert "params" not in _seen(link, lambda m: m.get("id") == 2)
    with pytest.raises(McpError) as info:
        link.request("fail", {})
    assert (info.value.code, info.value.message) == (-32001, "failed here")


def test_a_reply_nobody_waits_for_is_dropped(link):
    assert link.request("reply-to-nobody", {}, timeout=10) == "after"


def test_a_cancelled_wait_tells_the_server_with_our_id_and_releases_at_once(link):
    token = CancelToken()
    call = link.start_request("hang", {})
    gevent.spawn_later(0.05, token.set)
    with pytest.raises(TurnCancelled):
        link.wait(call, token, timeout=10)
    cancelled = _seen(link, lambda m: m.get("method") == "notifications/cancelled")
    assert cancelled["params"] == {"requestId": call.id, "reason": "cancelled by the caller"}
    timed = link.start_request("hang", {})
    with pytest.raises(gevent.Timeout):
        link.wait(timed, CancelToken(), timeout=0.05)
    assert _seen(link, lambda m: m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == timed.id)["params"]["reason"] == "timed out"
    link.cancel(timed, "again")  # already forgotten: nothing more is sent
    plain = link.start_request("hang", {})
    link.cancel(plain, "stop")
    with pytest.raises(RequestCancelled):
        link.wait(plain)


def test_the_servers_ping_is_answered_and_other_requests_refused(link):
    link.request("ask", {}, timeout=10)
    ping = _seen(link, lambda m: m.get("id") == "s1" and "method" not in m)
    roots = _seen(link, lambda m: m.get("id") == "s2" and "method" not in m)
    assert ping == {"jsonrpc": "2.0", "id": "s1", "result": {}}
    assert roots["error"] == {"code": -32601, "message": "Method not found: roots/list"}


def test_a_server_that_exits_fails_pending_and_later_calls(link):
    pending = link.start_request("hang", {})
    link.notify("exit")
    with pytest.raises(McpServerExited):
        link.wait(pending, timeout=10)
    assert not link.alive and link.exits == [link]  # type: ignore[attr-defined]
    with pytest.raises(McpServerExited):
        link.start_request("echo", {})


def test_a_long_reply_line_from_the_server_arrives_whole(link):
    assert link.request("big", {}, timeout=10) == "x" * 100000


def test_the_servers_stderr_is_kept_as_a_tail(link):
    assert link.request("stderr", {}, timeout=10) == "written"
    wait_until(lambda: link.process.stderr_tail().endswith("END"), 10, "the server's stderr to drain")
    assert link.process.stderr_tail() == "A" * 3000 + "END"


def _stdio_process(tmp_path, source: str) -> tuple[StdioProcess, list[dict]]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(source))
    messages: list[dict] = []
    process = StdioProcess([sys.executable, str(script)], lambda line: messages.append(json.loads(line)), name="child")
    wait_until(lambda: messages, timeout=30, what="the child's first line")
    return process, messages


def test_close_asks_a_server_that_ignores_eof_to_terminate_before_killing_it(tmp_path):
    """close(): EOF, then SIGTERM (a server may clean up and exit), SIGKILL only after that."""
    process, _ = _stdio_process(tmp_path, '''
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))
        print('{"ready": true}', flush=True)
        sys.stdin.read()
        while True:
            time.sleep(1)
    ''')
    process.close(grace=1.0)
    assert process.exited.is_set() and process.returncode == 7


def test_close_stops_the_stderr_drain_when_a_detached_grandchild_holds_stderr(tmp_path):
    """The drain greenlet never outlives close(), even if something else keeps the pipe open; the
    detached grandchild itself is killed by its environment mark (mcp/escapees.py)."""
    process, messages = _stdio_process(tmp_path, '''
        import json, subprocess, sys
        keeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        print(json.dumps({"keeper": keeper.pid}), flush=True)
        sys.stdin.read()
    ''')
    keeper = messages[0]["keeper"]
    try:
        process.close(grace=5.0)
        assert process.exited.is_set() and process.returncode == 0
        wait_until(lambda: process._drain.dead, timeout=10, what="the stderr drain to stop")
        assert wait_gone(keeper, timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(keeper, signal.SIGKILL)


BRIDGED = textwrap.dedent('''
    import json, sys
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        send({"jsonrpc": "2.0", "method": "seen", "params": message})
        if message.get("method") == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif message.get("method") == "go":
            send({"jsonrpc": "2.0", "id": "q", "method": "sampling/x", "params": {}})
''')


def _open_stdio_bridge(tmp_path, call_client) -> tuple[StdioBridge, list[dict]]:
    script = tmp_path / "bridged.py"
    script.write_text(BRIDGED)
    seen: list[dict] = []

    def notify_client(method: str, params: dict) -> None:
        if params.get("method") == "seen":
            seen.append(params["params"])

    bridge = StdioBridge("c1", ProvidedServer("fs", "acp-green:fs", argv=(sys.executable, str(script))),
                         call_client, notify_client, lambda bridge: None)
    bridge.open(timeout=30)
    return bridge, seen


def _seen_by_bridged(seen: list[dict], predicate) -> dict:
    return wait_until(lambda: next((m for m in seen if predicate(m)), None), timeout=30, what="the server's report")


def test_a_client_error_without_an_integer_code_reaches_the_server_as_internal_error(tmp_path):
    """A server's request relayed to the client and refused with a malformed code: -32603, the message kept."""
    def call_client(method, params, token=None):
        raise ClientError(method, {"code": "bad", "message": "refused"})

    bridge, seen = _open_stdio_bridge(tmp_path, call_client)
    try:
        bridge.admit_notification("go", {})
        answer = _seen_by_bridged(seen, lambda m: m.get("id") == "q")
        assert answer["error"] == {"code": -32603, "message": "refused"}
    finally:
        bridge.close()


def test_shutting_down_a_relayed_request_tells_the_server(tmp_path):
    """S7: at agent shutdown, a request still waiting on the server is cancelled with our id."""
    bridge, seen = _open_stdio_bridge(tmp_path, None)
    try:
        job = bridge.admit_request(5, "hang", {})
        job.shutdown()
        cancelled = _seen_by_bridged(seen, lambda m: m.get("method") == "notifications/cancelled")
        assert cancelled["params"] == {"requestId": job.call.id, "reason": "the agent is shutting down"}
    finally:
        bridge.close()
