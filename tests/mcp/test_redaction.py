"""Secrets in how an MCP server is reached (URL userinfo, `?api_key=`-like parameters, declared
credential headers, `--token=`-like arguments) never reach stderr, the client or the state
database: acp_green/redact.py hides them wherever a server is named."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from acp_green.redact import HIDDEN, redact_argv, redact_headers, redact_url, scrub, secrets_of
from tests.mcp.hostile_http_helpers import tool_text, tool_update
from tests.mcp.test_http_hostile import scripted  # noqa: F401 - the fixture

SECRETS = ["s3cretUserPw", "ApiKeyValue123", "AccessTok456", "HeaderBearer789", "CookieVal321",
           "ArgToken111", "ArgApiKey222", "ArgPassword333"]


def refused_port() -> int:
    """A local port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_secrets_of_a_declared_server_appear_nowhere_the_agent_writes(launch, tmp_path):
    """A session declares an HTTP server (password in the URL, api_key and access_token in the
    query, Authorization and Cookie headers) that refuses connections, and a stdio server started
    with `--token=`, `--api-key X`, `password=` arguments; with logging at INFO, a turn calls the
    HTTP server's tool (it fails naming the URL). No secret is in the agent's stderr, in anything
    it wrote to the client, or in the bytes of the state directory's files."""
    state = tmp_path / "state"
    agent = launch("--state-dir", str(state), "--log-level", "INFO")
    agent.initialize()
    url = (f"http://alice:{SECRETS[0]}@127.0.0.1:{refused_port()}/mcp"
           f"?api_key={SECRETS[1]}&region=eu&access_token={SECRETS[2]}")
    http = {"type": "http", "name": "web", "url": url,
            "headers": [{"name": "Authorization", "value": f"Bearer {SECRETS[3]}"}, {"name": "Cookie", "value": f"sid={SECRETS[4]}"}]}
    stdio = {"name": "local", "command": sys.executable, "env": [],
             "args": ["-c", "import time; time.sleep(60)", f"--token={SECRETS[5]}", "--api-key", SECRETS[6], f"password={SECRETS[7]}"]}
    session_id = agent.new_session(mcp_servers=[http, stdio])
    assert agent.prompt(session_id, "/mcp web echo").result(timeout=60) == {"stopReason": "end_turn"}
    assert tool_update(agent, session_id)["status"] == "failed"
    text = tool_text(agent, session_id)
    assert f"http://{HIDDEN}@127.0.0.1:" in text and "region=eu" in text, text  # the URL is still named
    agent.wait_for(lambda: "started MCP server local" in agent.stderr_text(0.1), what="the stdio server's start logged")
    agent.wait_for(lambda: "cannot connect to MCP server 'web'" in agent.stderr_text(0.1), what="the WARNING naming the URL")
    assert agent.call("session/list", {})["sessions"]  # a read: everything before it is committed
    agent.close_input()
    assert agent.wait_exit() == 0
    stderr = agent.stderr_text()
    written = b"".join(record.raw for record in agent.records if record.direction == "in")
    stored = b"".join(path.read_bytes() for path in Path(state).rglob("*") if path.is_file())
    assert b"cannot connect" in stored, "the failed tool call was not stored (the check below would prove nothing)"
    for secret in SECRETS:
        assert secret not in stderr, f"{secret} in stderr"
        assert secret.encode() not in written, f"{secret} written to the client"
        assert secret.encode() not in stored, f"{secret} in the state directory"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://u:pw@h.example/mcp?api_key=K1&x=1", "https://***@h.example/mcp?api_key=***&x=1"),
    ("http://h/?token=a&key=b&secret=c&password=d&auth=e&access_token=f&sig=g&page=2",
     "http://h/?token=***&key=***&secret=***&password=***&auth=***&access_token=***&sig=***&page=2"),
    ("http://h:8080/plain", "http://h:8080/plain"),
    ("http://[::1", HIDDEN),  # unparseable: nothing of it is shown
])
def test_redact_url_hides_userinfo_and_secret_parameters(url, shown):
    assert redact_url(url) == shown


def test_redact_argv_hides_attached_and_following_option_values():
    argv = ["srv", "--token=T", "--api-key", "K", "password=P", "-v", "--name", "n", "http://u:p@h/?sig=S"]
    assert redact_argv(argv) == ["srv", "--token=***", "--api-key", "***", "password=***", "-v", "--name", "n", "http://***@h/?sig=***"]


def test_redact_headers_and_scrub():
    assert redact_headers({"Authorization": "Bearer x", "Accept": "a", "X-Api-Key": "k", "Cookie": "c"}) == \
        {"Authorization": HIDDEN, "Accept": "a", "X-Api-Key": HIDDEN, "Cookie": HIDDEN}
    secrets = secrets_of("http://bob:hunter22@h/?token=abcd1234", {"Authorization": "Bearer zzzz"})
    assert scrub("denied for hunter22 with abcd1234 and Bearer zzzz", secrets) == f"denied for {HIDDEN} with {HIDDEN} and {HIDDEN}"


def test_an_error_page_that_echoes_the_credentials_is_scrubbed_from_the_calls_error(scripted):
    """A server refuses with 401 and a body that repeats the URL's password, its api_key and the
    Authorization header: the call's error quotes the page without any of them."""
    from acp_green.errors import McpConnectFailed
    from acp_green.mcp.httplink import HttpLink
    from tests.mcp.test_http_hostile import reply

    def script(sock: socket.socket, _body: object) -> None:
        page = f"denied: user bob:{SECRETS[0]} key {SECRETS[1]} header Bearer {SECRETS[3]}".encode()
        reply(sock, "401 Unauthorized", {"Content-Type": "text/plain"}, page)

    server = scripted(script)
    url = server.url.replace("http://", f"http://bob:{SECRETS[0]}@") + f"?api_key={SECRETS[1]}"
    link = HttpLink(url, name="web", headers={"Authorization": f"Bearer {SECRETS[3]}"}, connect_timeout=5)
    try:
        with pytest.raises(McpConnectFailed, match="401") as refused:
            link.request("tools/list", {}, timeout=30)
        message = refused.value.message
        assert "denied: user" in message, message
        for secret in SECRETS[:4]:
            assert secret not in message, message
    finally:
        link.close()
