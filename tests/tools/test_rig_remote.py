"""The rig against a remote agent given as a URL: `acp-green probe URL`, `chat URL`, `record URL` and
the pytest plugin (`acp_connect(URL)`, `--acp-agent-url`), each against a real
`acp-green serve --listen 127.0.0.1:0 --ephemeral`, over WebSocket (ws://) and Streamable HTTP
(http://), with and without a bearer token. Every wait is bounded generously; nothing is timed."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gevent import subprocess

from acp_green.tools.rig.remote_link import RemoteRefused, RemoteTarget, remote_target, shown_command
from tests.helpers import REPO
from tests.remote_serve import RemoteServer

pytest_plugins = ["pytester"]

ACP_GREEN = [sys.executable, "-m", "acp_green"]
BOUND = 120.0  # only decides when a broken run stops being waited for
TOKEN = "s3cret-token-for-tests"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without a token (the link would send it) and with this checkout importable."""
    env = {k: v for k, v in os.environ.items() if k != "ACP_GREEN_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def listening(*args: str, env: dict[str, str] | None = None) -> RemoteServer:
    """`acp-green serve --listen 127.0.0.1:0 --ephemeral ARGS...`, started with this checkout importable."""
    return RemoteServer(None, "--ephemeral", *args, env=env or clean_env())


def url_of(server: RemoteServer, scheme: str) -> str:
    assert server.url is not None
    return server.ws_url if scheme == "ws" else server.url


@pytest.fixture(scope="module")
def server() -> Iterator[RemoteServer]:
    started = listening()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def token_server() -> Iterator[RemoteServer]:
    """A server that wants `Authorization: Bearer TOKEN` (given by the environment, as --token advises)."""
    started = listening(env=clean_env(ACP_GREEN_TOKEN=TOKEN))
    yield started
    started.stop()


def run(*args: str, stdin: str = "", cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*ACP_GREEN, *args], input=stdin, capture_output=True, text=True, timeout=BOUND,
                          env=env or clean_env(), cwd=cwd)


def free_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the target's words ------------------------------------------------------------------------
def test_a_url_and_its_options_make_a_target_and_are_shown_without_secrets():
    command = ["wss://user:pw@agents.example:8443/acp?x=1", "--token", "tok", "--header", "X-Trace: 7",
               "--header=Cookie: c=1"]
    target = remote_target(command, env={})
    assert target == RemoteTarget(command[0], (("Authorization", "Bearer tok"), ("X-Trace", "7"), ("Cookie", "c=1")))
    assert target.websocket
    assert shown_command(command) == ["wss://***@agents.example:8443/acp?x=1", "--token", "***", "--header", "X-Trace: 7",
                                      "--header=Cookie: ***"]
    assert remote_target(["http://h/acp"], env={"ACP_GREEN_TOKEN": "from-env"}).headers == (("Authorization", "Bearer from-env"),)
    assert remote_target(["http://h/acp", "--header", "Authorization: Basic x"], env={"ACP_GREEN_TOKEN": "e"}).headers == (
        ("Authorization", "Basic x"),)
    assert remote_target(["python", "agent.py"]) is None
    assert shown_command(["python", "agent.py", "--token", "t"]) == ["python", "agent.py", "--token", "t"]  # a command is its own
    for bad in (["ws://h/acp", "--verbose"], ["ws://h/acp", "--header"], ["ws://h/acp", "--header", "no colon"]):
        with pytest.raises(ValueError):
            remote_target(bad, env={})


# -- probe -------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_the_probe_grades_a_listening_agent_with_no_failed_row_and_skips_the_rows_of_a_process(server, scheme):
    done = run("probe", "--json", url_of(server, scheme))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    rows = report["checks"] + report["advisories"]
    assert report["ok"] and report["command"] == [url_of(server, scheme)]
    assert [r["check"] for r in rows if r["verdict"] == "fail"] == []
    verdicts = {r["check"]: r["verdict"] for r in rows}
    for name in ("version negotiation", "cancel during a long prompt", "many sessions at once", "-32700 for garbage",
                 "a prompt that uses a tool", "control during a streaming prompt", "one response per request"):
        assert verdicts[name] == "pass", (name, rows)
    skipped = {r["check"]: r["evidence"] for r in rows if r["verdict"] == "skip"}
    for name in ("exit on EOF", "SIGHUP handled like SIGTERM", "process exits after stdin closes", "no descendant survives"):
        assert "the agent is reached at a URL" in skipped[name], (name, skipped)


def test_the_probe_sends_the_token_given_and_a_refusal_is_one_start_row_with_the_agents_words(token_server):
    url = url_of(token_server, "ws")
    done = run("probe", "--json", "--check", "ids", url, "--token", TOKEN)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["command"] == [url, "--token", "***"] and TOKEN not in done.stdout + done.stderr
    assert [r["verdict"] for r in report["checks"] if r["check"] == "ids echoed"] == ["pass"]
    for scheme in ("ws", "http"):
        refused = run("probe", "--json", url_of(token_server, scheme), "--header", "Authorization: Bearer wrong")
        assert refused.returncode == 1
        [row] = json.loads(refused.stdout)["checks"]
        assert row["check"] == "start" and row["verdict"] == "fail"
        assert "HTTP 401" in row["evidence"] and "Unauthorized" in row["evidence"], row


def test_the_probe_says_an_unreachable_url_cannot_be_reached_and_refuses_unknown_words_after_it():
    done = run("probe", f"ws://127.0.0.1:{free_port()}/acp")
    assert done.returncode == 1
    assert re.search(r"start +FAIL +cannot reach 'ws://127\.0\.0\.1:\d+/acp'", done.stdout), done.stdout
    usage = run("probe", "ws://127.0.0.1:9/acp", "--verbose")
    assert usage.returncode == 2 and "only --header 'NAME: VALUE' and --token TOKEN may follow" in usage.stderr


def test_the_probe_reaches_wss_and_https_trusting_the_certificate_ssl_cert_file_names(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                          capture_output=True, timeout=BOUND)
    assert made.returncode == 0, made.stderr
    tls = listening("--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert tls.url is not None and tls.url.startswith("https://") and tls.ws_url.startswith("wss://")
        for url in (tls.ws_url, tls.url):
            done = run("probe", "--json", "--check", "ids", url, env=clean_env(SSL_CERT_FILE=str(cert)))
            assert done.returncode == 0, done.stdout + done.stderr
            assert [r["verdict"] for r in json.loads(done.stdout)["checks"] if r["check"] == "ids echoed"] == ["pass"]
            untrusted = run("probe", "--json", url)  # the system's CAs do not know the certificate
            [row] = json.loads(untrusted.stdout)["checks"]
            assert row["check"] == "start" and "CERTIFICATE_VERIFY_FAILED" in row["evidence"], row
    finally:
        tls.stop()


# -- chat --------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_chat_talks_to_a_listening_agent_from_a_script_and_serves_it_files(server, scheme, tmp_path):
    note = tmp_path / "note.txt"
    note.write_text("from the client's disk")
    done = run("chat", "--yes", url_of(server, scheme), stdin=f"hello there\n/read {note}\n/sessions\n", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chatting with acp_green demo agent (session sess_" in done.stdout
    assert "hello there" in done.stdout and done.stdout.count("[end_turn]") == 2
    assert "from the client's disk" in done.stdout  # the agent read it through the client's fs/read_text_file
    assert "/load ID continues one (* marks this one)" in done.stdout


def test_chat_resumes_a_session_of_an_earlier_connection_with_its_history(server, tmp_path):
    first = run("chat", url_of(server, "ws"), stdin="remember the lighthouse\n", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    session = re.search(r"session (sess_[0-9a-f]+)", first.stdout).group(1)
    again = run("chat", "--resume", session, url_of(server, "http"), stdin="and now?\n", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"[history of {session}: 1 turns]" in again.stdout and "you: remember the lighthouse" in again.stdout


def test_chat_says_in_one_line_why_a_url_cannot_be_reached(token_server):
    done = run("chat", url_of(token_server, "http"), stdin="hi\n")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"chat: cannot reach '{url_of(token_server, 'http')}': {url_of(token_server, 'http')} refused: HTTP 401: Unauthorized: send "
        "the agent's token as 'Authorization: Bearer TOKEN'"]


# -- record ------------------------------------------------------------------------------------
def test_record_puts_the_link_in_front_of_a_listening_agent_and_traces_both_ways(token_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}},
             {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}]
    editor = subprocess.Popen([*ACP_GREEN, "record", "--out", str(trace), url_of(token_server, "ws"), "--token", TOKEN],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
    assert editor.stdin is not None and editor.stdout is not None
    editor.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
    editor.stdin.flush()
    answers = [json.loads(editor.stdout.readline()) for _ in range(2)]  # answers in order: one connection
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"]["sessionId"].startswith("sess_")
    editor.stdin.close()
    assert editor.wait(timeout=BOUND) == 0
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[0]["fields"]["command"] == [url_of(token_server, "ws"), "--token", "***"]
    assert TOKEN not in trace.read_text()
    assert [(e["from"], e["id"]) for e in events if e["type"] in ("request", "response")] == [
        ("client", 1), ("client", 2), ("agent", 1), ("agent", 2)]
    assert any("connected to" in e.get("message", "") for e in events if e["type"] == "trace")  # the link's note, as stderr


# -- the pytest plugin ---------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_acp_connect_reaches_an_agent_at_a_url_and_checks_what_passed(acp_connect, server, scheme):
    client = acp_connect(url_of(server, scheme))
    assert client.initialize_result["agentInfo"]["name"] == "acp-green-demo"
    session = client.new_session()
    assert client.prompt(session, "hello").stop_reason == "end_turn"
    running = client.start_prompt(session, "/longtool 600")
    running.wait_for_update("tool_call")  # it runs: on its session's own event stream over HTTP
    running.cancel()
    assert running.wait().stop_reason == "cancelled"
    assert client.prompt(session, "after").stop_reason == "end_turn"  # the session works on


def test_acp_connect_sends_headers_and_a_refusal_says_why(acp_connect, token_server):
    client = acp_connect(url_of(token_server, "http"), headers={"Authorization": f"Bearer {TOKEN}"})
    assert client.prompt(client.new_session(), "hi").stop_reason == "end_turn"
    with pytest.raises(RemoteRefused, match="HTTP 401"):
        acp_connect(url_of(token_server, "ws"))


def test_acp_agent_url_points_every_acp_connect_of_a_run_at_the_listening_agent(pytester, token_server, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", clean_env()["PYTHONPATH"])
    monkeypatch.delenv("ACP_GREEN_TOKEN", raising=False)
    pytester.makeconftest('pytest_plugins = ["acp_green.testing"]\n')
    pytester.makepyfile(test_authors='''
from acp_green import Agent, Turn


class MyAgent(Agent):
    name = "mine"

    def prompt(self, turn: Turn) -> str:
        turn.say("mine says hi")
        return "end_turn"


def test_reaches_the_url(acp_connect):
    client = acp_connect(MyAgent)
    assert client.initialize_result["agentInfo"]["name"] == "acp-green-demo"  # not MyAgent: the one at the URL
    assert client.prompt(client.new_session(), "hello").stop_reason == "end_turn"
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--acp-agent-url", url_of(token_server, "ws"),
                                           "--acp-agent-header", f"Authorization: Bearer {TOKEN}", timeout=BOUND)
    result.assert_outcomes(passed=1)
