"""Secrets in an MCP server URL's path, fragment, query or host (item 4) reach neither stderr, nor the
client, nor the state database, nor a `sessions export` file.

redact.py's rule (its docstring): userinfo and fragment are hidden whole; a path segment, query
name or value, or host label that looks like a token (a known credential prefix such as sk-,
ghp_, xoxb-, or a long random-looking run of letters and digits) is hidden, and so is what follows
a credential-named segment (`/key/<secret>/`) or parameter (`?api_key=`). `secrets_of` lists the
same texts, so an error page or a certificate's complaint that repeats them is scrubbed too.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from gevent.server import StreamServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.redact import HIDDEN, looks_like_token, redact_argv, redact_url, scrub, secrets_of
from tests.mcp.hostile_http_helpers import tool_text, tool_update
from tests.mcp.test_redaction import refused_port

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PREFIXES = ["sk-", "sk-proj-", "sk_live_", "ghp_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "AKIA", "AIza", "hf_", "npm_", "eyJ"]


def _mixed(text: str) -> bool:
    return any(c.isupper() for c in text) and any(c.islower() for c in text) and any(c.isdigit() for c in text)


def _hexy(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return 0 < digits < len(text) and 3 * digits >= len(text)


#: Secrets as they come: a known prefix and a random tail, a random base62 key, a hex key.
SECRETS = st.one_of(
    st.builds(lambda prefix, tail: prefix + tail, st.sampled_from(PREFIXES), st.text(ALNUM, min_size=12, max_size=30)),
    st.text(ALNUM, min_size=20, max_size=40).filter(_mixed),
    st.text("0123456789abcdef", min_size=32, max_size=32).filter(_hexy),
)
#: Where in a URL a secret is put: (the URL around it, with {s} for the secret as written).
PLACES = [
    "http://{s}@{host}/mcp",                      # userinfo: user
    "http://me:{s}@{host}/mcp",                   # userinfo: password
    "http://{host}/key/{s}/mcp",                  # a path segment (the reported case)
    "http://{host}/{s}",                          # the last path segment
    "http://{host}/v1/servers/{s}/mcp",           # a path segment among words
    "http://{host}/token/{s}",                    # after a credential-named segment
    "http://{host}/x;apikey={s}/mcp",             # a matrix parameter
    "http://{host}/mcp?region=eu&k={s}",          # a query value under a plain name
    "http://{host}/mcp?access_token={s}&page=2",  # a query value under a credential name
    "http://{host}/mcp?{s}",                      # a query name alone
    "http://{host}/mcp#{s}",                      # the fragment
    "http://{host}/mcp#token={s}&x=1",            # a fragment parameter
    "http://{host}/mcp/{quoted}/",                # a path segment, partly percent-encoded
]


def _url(place: str, secret: str, host: str = "127.0.0.1:1") -> str:
    quoted = "".join(f"%{ord(c):02X}" if i % 3 == 0 else c for i, c in enumerate(secret))
    return place.format(s=secret, host=host, quoted=quoted)


# -- the rule ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("https://host/key/sk-abc123/mcp", "https://host/key/***/mcp"),
    ("https://host/mcp#token=abc", "https://host/mcp#***"),
    ("https://host/mcp#section-2", "https://host/mcp#***"),
    ("https://h/api/v1/servers/21d68c13-58e2-4396-8c56-b2f83ab97a2c/mcp", "https://h/api/v1/servers/***/mcp"),
    ("https://mcp.zapier.com/api/mcp/s/EAciL0WIv2vvA34Gucc0Lg/mcp", "https://mcp.zapier.com/api/mcp/s/***/mcp"),
    ("https://h/mcp?team=T01&x=xoxb-1234-abcd", "https://h/mcp?team=T01&x=***"),
    ("https://sk-abcdef12.example.com:8443/mcp", "https://***.example.com:8443/mcp"),
    ("https://h/token/short1/mcp", "https://h/token/***/mcp"),
    # words stay: the URL still says where the server is
    ("https://h/model-context-protocol/v1/mcp", "https://h/model-context-protocol/v1/mcp"),
    ("https://api.githubcopilot.com/mcp/", "https://api.githubcopilot.com/mcp/"),
    ("https://h/oauth/mcp?page=2", "https://h/oauth/mcp?page=2"),
])
def test_redact_url_hides_token_like_path_segments_fragments_and_labels(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("word", ["mcp", "v1", "authentication-service-v2", "ModelContextProtocol", "servers", "127.0.0.1", "deadbeef"])
def test_words_do_not_look_like_tokens(word: str) -> None:
    assert not looks_like_token(word)


@settings(max_examples=300, deadline=None)
@given(secret=SECRETS, place=st.sampled_from([*PLACES, "http://{s}.example.com/mcp", "http://a.{s}.example.com:8080/mcp"]))
def test_a_secret_anywhere_in_a_url_survives_neither_redact_url_nor_scrub(secret: str, place: str) -> None:
    """Property: wherever a token-like secret stands in a URL (a host label too), the URL as shown
    does not hold it, and text that repeats the URL (or the secret) is scrubbed of it; a command
    line naming the URL shows it redacted as well."""
    url = _url(place, secret)
    assert secret not in redact_url(url), (url, redact_url(url))
    assert secret not in scrub(f"GET {url} said {secret}", secrets_of(url)), url
    assert all(secret not in shown for shown in redact_argv(["server", url, f"--url={url}"])), url


# -- end to end: stderr, what the client read, the database, an export ------------------------------

class _EchoingServer:
    """Answers every request 404 with a page that repeats the request's head (its path, query and
    Host), as many web servers' error pages do."""

    def __init__(self) -> None:
        self.server = StreamServer(("127.0.0.1", 0), self._handle)
        self.server.start()
        self.host = f"127.0.0.1:{self.server.server_port}"

    def _handle(self, sock: socket.socket, _address: Any) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                block = sock.recv(65536)
                if not block:
                    return
                head += block
            page = b"Not found: " + head.split(b"\r\n\r\n")[0]
            sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(page), page))
        except OSError:
            pass
        finally:
            sock.close()


@pytest.fixture
def echoing() -> Iterator[_EchoingServer]:
    server = _EchoingServer()
    yield server
    server.server.stop(timeout=5)


def test_a_secret_anywhere_in_an_mcp_servers_url_reaches_no_log_store_or_export(launch, tmp_path, echoing):
    """Property (item 4): a session declares an HTTP server whose URL holds a secret in one of its
    parts (userinfo, a path segment, the query, the fragment); the server either refuses the
    connection (the call's error names the URL) or answers 404 with a page repeating the request
    (path and query). With logging at INFO, the turn's failed tool call is stored. The secret is
    in none of: the agent's stderr, what it wrote to the client, the state directory's files, the
    file `acp-green sessions export -o` writes."""
    state = tmp_path / "state"
    agent = launch("--state-dir", str(state), "--log-level", "INFO")
    agent.initialize()
    placed: list[tuple[str, str]] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(secret=SECRETS, place=st.sampled_from(PLACES), refused=st.booleans())
    def declare_and_call(secret: str, place: str, refused: bool) -> None:
        url = _url(place, secret, f"127.0.0.1:{refused_port()}" if refused else echoing.host)
        session_id = agent.new_session(mcp_servers=[{"type": "http", "name": "web", "url": url, "headers": []}])
        assert agent.prompt(session_id, "/mcp web echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert tool_update(agent, session_id)["status"] == "failed"
        assert secret not in tool_text(agent, session_id), (url, tool_text(agent, session_id))
        placed.append((secret, url))

    declare_and_call()
    assert agent.call("session/list", {})["sessions"]  # a read: everything before it is committed
    agent.close_input()
    assert agent.wait_exit() == 0
    export = tmp_path / "export.json"
    subprocess.run([sys.executable, "-m", "acp_green", "sessions", "export", "--state-dir", str(state), "-o", str(export)],
                   check=True, capture_output=True, timeout=120)
    stderr = agent.stderr_text()
    written = b"".join(record.raw for record in agent.records if record.direction == "in")
    stored = b"".join(path.read_bytes() for path in Path(state).rglob("*") if path.is_file())
    exported = export.read_bytes()
    assert b"cannot connect" in stored and b"Not found" in stored, "no failed call was stored: the checks below would prove nothing"
    assert b"cannot connect" in exported and b"Not found" in exported
    for secret, url in placed:
        assert secret not in stderr, f"{secret} (in {url}) in stderr"
        assert secret.encode() not in written, f"{secret} (in {url}) written to the client"
        assert secret.encode() not in stored, f"{secret} (in {url}) in the state directory"
        assert secret.encode() not in exported, f"{secret} (in {url}) in the export"


def test_the_url_is_still_named_with_its_secrets_hidden(launch):
    """The control beside the property: the call's error names the URL, host, port and words, the
    secret path segment and fragment replaced by ***."""
    agent = launch("--ephemeral")
    agent.initialize()
    port = refused_port()
    url = f"http://127.0.0.1:{port}/key/sk-abc123def456/mcp#token=ghp_abcdefghijkl"
    session_id = agent.new_session(mcp_servers=[{"type": "http", "name": "web", "url": url, "headers": []}])
    assert agent.prompt(session_id, "/mcp web echo").result(timeout=60) == {"stopReason": "end_turn"}
    assert f"http://127.0.0.1:{port}/key/{HIDDEN}/mcp#{HIDDEN}" in tool_text(agent, session_id)
    assert quote("sk-abc123def456") not in agent.stderr_text(timeout=0.5)
