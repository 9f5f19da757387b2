"""What `--listen`, `--token` and their companions accept and refuse, at the call site and on the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_green.remote import bearer_token, parse_address


@given(st.sampled_from(["127.0.0.1", "0.0.0.0", "localhost", "[::1]", "example.org"]), st.integers(0, 65535))
def test_host_and_port_parse_back(host, port):
    assert parse_address(f"{host}:{port}") == (host.strip("[]"), port)


@given(st.text(max_size=30))
def test_anything_else_is_refused_with_a_value_error_naming_it(text):
    try:
        host, port = parse_address(text)
    except ValueError as exc:
        assert "HOST:PORT" in str(exc) or "65535" in str(exc)
    else:
        assert host and 0 <= port <= 65535


def test_the_token_must_match_exactly():
    allow = bearer_token("s3cret")
    assert allow({"authorization": "Bearer s3cret"})
    for given_header in ("Bearer s3cret ", "bearer s3cret", "Bearer s3cre", "s3cret", ""):
        assert not allow({"authorization": given_header}), given_header
    assert not allow({})


@given(st.text(max_size=40))
def test_a_token_is_refused_at_the_call_site_when_it_could_never_match(token):
    try:
        allow = bearer_token(token)
    except ValueError as exc:
        assert "token" in str(exc)
        assert not token or token != token.strip() or "\n" in token or "\r" in token
    else:
        assert allow({"authorization": f"Bearer {token}"})


@pytest.mark.parametrize("args, says", [
    (["--listen", "nowhere"], "HOST:PORT"),
    (["--listen", "127.0.0.1:70000"], "65535"),
    (["--token", "x"], "--token is for --listen"),
    (["--listen", "127.0.0.1:0", "--trace", "t.jsonl"], "--trace"),
])
def test_the_command_line_refuses_a_bad_combination_naming_the_option(args, says, tmp_path):
    done = subprocess.run([sys.executable, "-m", "acp_green", "serve", *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and says in done.stderr, done.stderr


def test_the_options_import_nothing_patching_must_come_before():
    """The command line reads --listen before gevent patches the process: importing the options
    must not import ssl or gevent's server (the listener is imported once asked for)."""
    code = ("import sys; import acp_green.remote, acp_green.remote.options, acp_green.remote.auth; "
            "print(sorted(m for m in ('ssl', 'gevent.server', 'acp_green.remote.listener') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
